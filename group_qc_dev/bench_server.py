"""The review app under load: N reviewers, each in a process of their own, decide their queues over loopback as the page
does (one request per key, an id per decision, resent until acknowledged), against a `group-qc serve` process on
SQLite and on PostgreSQL. Prints, per database, the key-to-acknowledgement latency (p50, p95, p99, max) and decisions
per second, then how long the labels took to hold every decision and a check that each is in the decisions log
exactly once.

    python -m group_qc_dev.bench_server [--reviewers 4] [--decisions 2500] [--postgres postgresql://…] [--json FILE]

Without --postgres, GROUP_QC_TEST_POSTGRES is used when set (.ci/run sets it), else only SQLite runs. A benchmark,
not a timed test: it prints what it measured on this machine.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

from group_qc_dev.review_load import (Reviewer, bulk_project, make_accounts, percentile, postgres_schema,
                                      start_server)

PASSWORD = "a long enough password"


def _reviewer(args) -> dict:
    base, name, seconds = args
    r = Reviewer(base, name, PASSWORD)
    r.sign_in()
    cards = r.cards()
    started = time.perf_counter()
    r.decide_all(cards, time.monotonic() + seconds)
    return {"name": name, "latencies": r.latencies, "acknowledged": list(r.acknowledged), "failures": r.failures,
            "seconds": time.perf_counter() - started}


def labels_done(base: str, expected: int, timeout: float = 600) -> float:
    """Seconds until the lead's /api/sync says every stored decision is in the labels."""
    import httpx
    lead = httpx.Client(base_url=base, timeout=30)
    lead.post("/api/login", json={"name": "lead", "password": PASSWORD}).raise_for_status()
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        state = lead.get("/api/sync").json()
        if state["stored"] >= expected and state["waiting"] == 0:
            return time.perf_counter() - started
        time.sleep(0.25)
    raise SystemExit(f"the labels did not take every decision within {timeout} s: {state}")


def run(db_kind: str, db_url: str | None, reviewers: int, per_reviewer: int) -> dict:
    from qc_core.jsonl import iter_jsonl
    from review_app.store import Store, database_url
    folder = Path(tempfile.mkdtemp(prefix=f"bench-server-{db_kind}-"))
    project = folder / "project"
    project.mkdir()
    names = [f"reviewer{k + 1}" for k in range(reviewers)]
    bulk_project(project, names, per_reviewer)
    url = database_url(db_url, project)
    store = Store(url)
    store.migrate()
    make_accounts(store, [(n, "reviewer") for n in names] + [("lead", "lead"), ("owner", "owner")], PASSWORD)
    store.close()
    proc, base = start_server(project, db_url)
    try:
        started = time.perf_counter()
        with multiprocessing.get_context("spawn").Pool(reviewers) as pool:
            results = pool.map(_reviewer, [(base, n, 3600) for n in names])
        wall = time.perf_counter() - started
        total = sum(len(r["acknowledged"]) for r in results)
        to_labels = labels_done(base, total)
    finally:
        proc.terminate()
        proc.wait(60)
    latencies = [x for r in results for x in r["latencies"]]
    ids = [d.get("id") for _, d in iter_jsonl(project / "labels" / "decisions.jsonl")]
    acknowledged = {i for r in results for i in r["acknowledged"]}
    return {"database": db_kind, "reviewers": reviewers, "decisions": total, "seconds": round(wall, 2),
            "decisions_per_second": round(total / wall, 1),
            "p50_ms": round(1000 * percentile(latencies, 0.5), 1),
            "p95_ms": round(1000 * percentile(latencies, 0.95), 1),
            "p99_ms": round(1000 * percentile(latencies, 0.99), 1), "max_ms": round(1000 * max(latencies), 1),
            "labels_after_last_ack_s": round(to_labels, 2), "in_log_once": len(ids) == len(set(ids)) and
            set(ids) == acknowledged, "failures": sum(r["failures"] for r in results)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reviewers", type=int, default=4)
    p.add_argument("--decisions", type=int, default=2500, help="decisions per reviewer (one per card)")
    p.add_argument("--postgres", default=os.environ.get("GROUP_QC_TEST_POSTGRES"))
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = [run("SQLite", None, args.reviewers, args.decisions)]
    if args.postgres:
        with postgres_schema(args.postgres) as url:   # a schema of its own, dropped after
            rows.append(run("PostgreSQL", url, args.reviewers, args.decisions))
    print(f"{args.reviewers} reviewers x {args.decisions} decisions over loopback, each reviewer a process, "
          f"{os.cpu_count()} cores")
    print("| database | decisions | decisions/s | p50 ms | p95 ms | p99 ms | max ms | labels after the last "
          "acknowledgement | each in the log once |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['database']} | {r['decisions']} | {r['decisions_per_second']} | {r['p50_ms']} | {r['p95_ms']} | "
              f"{r['p99_ms']} | {r['max_ms']} | {r['labels_after_last_ack_s']} s | {r['in_log_once']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return 0 if all(r["in_log_once"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
