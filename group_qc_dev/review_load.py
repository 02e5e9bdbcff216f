"""Load for the review app: a project with one judged day of many cards split among named reviewers (verdict lines as
the judge writes them, one small photo per group), accounts, and reviewers who decide their queues over HTTP as the
page does (an id made per decision, resent until acknowledged). Used by `python -m group_qc_dev.bench_server` and by
the server's fault tests (tests/test_review_server.py)."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from qc_core.jsonl import write_jsonl_atomic

MISSIONS = ("BBU接地线检查", "挡风板安装检查")
DAY = "days/day1"


def bulk_project(project: Path, reviewers: list[str], cards_per_reviewer: int) -> Path:
    """`project/days/day1` with len(reviewers) x cards_per_reviewer cards to review, each assigned to one reviewer
    (in turn), over one small photo in project/photos."""
    from PIL import Image

    from stage_b.judging import verdict_file
    from stage_b.rules.operating_point import MissionPoint
    photos = project / "photos"
    photos.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (64, 48), (120, 130, 140)).save(photos / "p.jpg")
    point = MissionPoint(threshold=0.5, threshold_fail=0.5, review_margin=0.2, certified=True, promise="a load test")
    lines: dict[str, list[dict]] = {m: [] for m in MISSIONS}
    for k in range(len(reviewers) * cards_per_reviewer):
        mission = MISSIONS[k % len(MISSIONS)]
        record = {"group_id": f"g{k:06d}", "mission": mission, "label": None, "images": ["p.jpg"],
                  "per_image": {"图片_1": "接地线×1/已捆扎"}, "input_dir": str(photos), "model": "/models/stage-a"}
        line = verdict_file.verdict_record(record, 0.45, point, "通过\n理由: 图片_1 接地线已捆扎",
                                           {"audit_share": 0.0, "audit_seed": 1, "reviewers": list(reviewers)})
        line["assigned_to"] = [reviewers[k % len(reviewers)]]   # an even split, whatever the draw gives
        lines[mission].append(line)
    day = project / DAY
    day.mkdir(parents=True, exist_ok=True)
    for mission, rows in lines.items():
        write_jsonl_atomic(verdict_file.verdicts_path(day, mission), rows)
    return day


def make_accounts(store, names_roles, password: str) -> None:
    from review_app.accounts import add_account, hash_password
    for name, role in names_roles:
        account, _ = add_account(store, name, role)
        store.set_password(account.id, hash_password(password), must_change=False)


@dataclass
class Reviewer:
    """One reviewer deciding their queue over HTTP, as the page does: each decision keeps its id until acknowledged."""
    base: str
    name: str
    password: str
    acknowledged: dict = field(default_factory=dict)    # id -> the stored answer
    latencies: list = field(default_factory=list)       # seconds from send to acknowledgement, first tries only
    failures: int = 0
    client: object = None

    def sign_in(self) -> None:
        import httpx
        self.client = httpx.Client(base_url=self.base, timeout=10)
        r = self.client.post("/api/login", json={"name": self.name, "password": self.password})
        r.raise_for_status()
        self.client.headers["X-CSRF-Token"] = r.json()["csrf_token"]

    def cards(self) -> list[dict]:
        r = self.client.get("/api/queue", params={"day": DAY})
        r.raise_for_status()
        return r.json()["cards"]

    def send(self, body: dict, deadline: float) -> dict | None:
        """Sends one decision until acknowledged (a network error or 503: again, with the same id) or `deadline`."""
        import httpx
        first = True
        while time.monotonic() < deadline:
            started = time.perf_counter()
            try:
                r = self.client.post("/api/decisions", json=body)
            except httpx.HTTPError:
                self.failures += 1
                first = False
                time.sleep(0.2)
                continue
            if r.status_code in (200, 201):
                if first:
                    self.latencies.append(time.perf_counter() - started)
                self.acknowledged[body["id"]] = r.json()
                return r.json()
            if r.status_code == 401:   # the server came back with this session (sessions live in the database)
                self.sign_in()
                continue
            if r.status_code >= 500:
                self.failures += 1
                first = False
                time.sleep(0.2)
                continue
            raise AssertionError(f"{self.name}: {r.status_code} {r.text}")
        return None

    def decide_all(self, cards: list[dict], deadline: float, per_card: int = 1) -> None:
        """Decides every card `per_card` times (each a change on the version it knows)."""
        for c in cards:
            version = c["version"]
            for k in range(per_card):
                body = {"id": uuid.uuid4().hex, "day": DAY, "card": c["card"], "decision": ("不通过", "通过")[k % 2],
                        "note": "", "base": version, "on_screen_ms": 1500}
                stored = self.send(body, deadline)
                if stored is None:
                    return
                version = stored["version"]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(project: Path, db: str | None = None, *extra: str, port: int | None = None,
                 env: dict | None = None, timeout: float = 60, preexec_fn=None) -> tuple[subprocess.Popen, str]:
    """`group-qc serve` in a process of its own; returns it and its base URL once it answers."""
    import httpx
    port = port or free_port()
    argv = [sys.executable, "-m", "review_app.serve", "--project", str(project), "--port", str(port), *extra]
    if db:
        argv += ["--db", db]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited {proc.returncode}: {proc.stdout.read()}")
        try:
            if httpx.get(base + "/api/me", timeout=2).status_code == 401:
                return proc, base
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the server did not answer within {timeout} s: {proc.stdout.read()}")


@contextlib.contextmanager
def postgres_schema(base: str):
    """A new schema on the server `base` names, as a SQLAlchemy URL whose connections use it; dropped after."""
    import psycopg
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    sep = "&" if "?" in base else "?"
    try:
        yield "postgresql+psycopg://" + base.split("://", 1)[1] + f"{sep}options=-csearch_path%3D{name}"
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE")
