"""`python -m group_qc_dev.demo_steps <step> …`: what scripts/demo.sh asks between its commands (the launchers hold
no Python), each step a function a test can call:

    first-record FILE              a Stage-A file's first record, indented (cut at 900 characters)
    grpo-run RUN_DIR               the label reward per step, greedy validation per step, the best checkpoint
    accounts FILE                  "<name> <password>" lines on stdin, as `group-qc users add` printed them -> FILE
    free-port                      a free loopback port
    wait-for URL                   until the review app answers (401 for a request without a session), 30 s at most
    candidates OPERATING_POINT     certified missions that pass groups without review, most auto-passed first
    shift MONITOR CANDIDATES       the first candidate the monitor did not tighten (else the first)
    status-lines MONITOR           the QC owner's status line per mission (stage_b.monitoring.owner_status)
    day-routes DAY_DIR MISSION     the mission's groups sent to review, and how many because its promise was withdrawn
"""
from __future__ import annotations

import json
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, Iterable

from stage_b.monitoring.monitor_file import load_monitor
from stage_b.monitoring.owner_status import owner_status


def _json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def first_record(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return json.dumps(json.loads(f.readline()), ensure_ascii=False, indent=2)[:900]


def grpo_run(run_dir: str) -> str:
    run = Path(run_dir)
    rows = [json.loads(line) for line in (run / "logging.jsonl").read_text(encoding="utf-8").splitlines()]
    label = [r["rewards/qc_label/mean"] for r in rows if "rewards/qc_label/mean" in r]
    k = max(1, len(label) // 5)
    validation = _json(run / "group_qc_run.json")["validation"]
    return "\n".join([
        "  label reward per step: " + " ".join(f"{x:.2f}" for x in label),
        f"  first {k} steps {sum(label[:k]) / k:.2f} -> last {k} steps {sum(label[-k:]) / k:.2f}",
        "  greedy validation (balanced accuracy) by step: "
        + " ".join(f"{h['step']}:{h['qc_val/balanced_accuracy']:.2f}" for h in validation["history"]),
        f"  best step: {validation['best_step']} -> {validation['best_checkpoint']}"])


def accounts(path: str, lines: Iterable[str]) -> str:
    Path(path).write_text(json.dumps(dict(line.split() for line in lines if line.strip())), encoding="utf-8")
    return ""


def free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def wait_for(url: str, seconds: float = 30.0) -> str:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/api/me")
        except urllib.error.HTTPError:
            return ""   # 401: it answers
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the review app did not start: see the serve log")


def candidates(operating_point: str) -> str:
    missions = _json(operating_point)["missions"]
    passing = sorted(((e["escape"]["auto_passed"], k) for k, e in missions.items()
                      if e["certified"] and (e.get("escape") or {}).get("auto_passed")), reverse=True)
    return " ".join(k for _, k in passing)


def shift(monitor: str, candidate_words: str) -> str:
    missions = _json(monitor)["missions"]
    names = candidate_words.split()
    return next((k for k in names if missions.get(k, {}).get("state") != "tightened"), names[0])


def status_lines(monitor: str) -> str:
    checked = load_monitor(monitor)
    return "\n".join(f"    {mission}: {owner_status(m, checked.get('restore'))}"
                     for mission, m in checked["missions"].items())


def day_routes(day_dir: str, mission: str) -> str:
    path = Path(day_dir) / f"{mission}_verdicts.jsonl"
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    withdrawn = sum(any(w.startswith("promise withdrawn") for w in v["review_why"]) for v in lines)
    reviewed = sum(v["route"] == "review" for v in lines)
    return (f"  {Path(day_dir).name}, {mission}: {reviewed} of {len(lines)} groups sent to review, {withdrawn} of them "
            "because the promise was withdrawn")


STEPS: dict[str, Callable[..., str]] = {
    "first-record": first_record, "grpo-run": grpo_run, "accounts": lambda path: accounts(path, sys.stdin),
    "free-port": free_port, "wait-for": wait_for, "candidates": candidates, "shift": shift,
    "status-lines": status_lines, "day-routes": day_routes,
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in STEPS:
        print(__doc__, file=sys.stderr)
        return 2
    out = STEPS[args[0]](*args[1:])
    if out:
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
