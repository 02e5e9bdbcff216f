"""Builders for the review app's tests: a project folder with judged days over synthetic photos (verdict lines as
the judge writes them: assigned reviewers and an overlap, blind audits, gold checks, a day without named reviewers),
accounts signed in over the API, a schema of its own on PostgreSQL, and a real server process on a free port."""
from __future__ import annotations

import uuid
from pathlib import Path

from group_qc_dev.review_load import free_port, postgres_schema, start_server  # noqa: F401  (shared)
from qc_core.jsonl import write_jsonl_atomic
from stage_b.judging import verdict_file
from stage_b.rules.operating_point import MissionPoint

MISSIONS = ("BBU接地线检查", "挡风板安装检查")
POINT = MissionPoint(threshold=0.5, threshold_fail=0.5, review_margin=0.0, certified=True, promise="a test's")
PASSWORD = "a long enough password"


def judged_days(project: Path, synthetic, per_label: int = 2, reviewers=("王工", "李工"), overlap_share: float = 0.5,
                gold: int = 1, audit_share: float = 1.0) -> dict[str, list[dict]]:
    """`project/days/day1` judged with named reviewers (an overlap, blind audits, `gold` gold checks per mission) and
    `project/today` judged without names (one open queue), over synthetic photos in `project/photos`. p_fail alternates
    so that half the groups are auto-passed (audited at `audit_share`) and half go to review. Returns {day: lines}."""
    photos = project / "photos"
    groups = synthetic.groups_of(synthetic.generate(photos / "field", seed=5, groups_per_label=per_label,
                                                    missions=",".join(MISSIONS), unlabeled=True))
    out = {}
    for day, names in (("days/day1", list(reviewers)), ("today", [])):
        folder = project / day
        folder.mkdir(parents=True)
        provenance = {"audit_share": audit_share, "audit_seed": 1, "reviewers": names or None,
                      "overlap_share": overlap_share if names else None}
        lines = []
        for k, g in enumerate(groups):
            record = {"group_id": f"{day.split('/')[-1]}-{g['group_id']}", "mission": g["mission"], "label": None,
                      "images": g["images"], "input_dir": str(photos / "field"), "model": "/models/stage-a",
                      "per_image": {f"图片_{i}": s for i, s in enumerate(g["summaries"], start=1)}}
            p = 0.9 if k % 2 else 0.1
            verdict = "不通过" if p >= 0.5 else "通过"
            reply = f"不通过\n理由: 图片_1 依据（第{k}组）" if verdict == "不通过" else \
                f"通过\n理由: 各项符合要求（第{k}组）"
            lines.append(verdict_file.verdict_record(record, p, POINT, reply, provenance))
        for m in MISSIONS:
            mine = [v for v in lines if v["mission"] == m]
            extra = []
            for j in range(gold):   # a known-answer check: judged like the day's groups, its answer out of sight
                src = next(g for g in groups if g["mission"] == m)
                record = {"group_id": f"day0-{src['group_id']}-{j}", "mission": m, "label": None,
                          "images": src["images"],
                          "input_dir": str(photos / "field"), "model": "/models/stage-a", "gold_label": "fail",
                          "gold_from": "labels/earlier.jsonl",
                          "per_image": {f"图片_{i}": s for i, s in enumerate(src["summaries"], start=1)}}
                extra.append(verdict_file.verdict_record(record, 0.1, POINT, "通过\n理由: 各项符合要求", provenance))
            write_jsonl_atomic(verdict_file.verdicts_path(folder, m), mine + extra)
            out.setdefault(day, []).extend(mine + extra)
    return out


def add_account(store, name: str, role: str, password: str = PASSWORD):
    """An account whose password is already its own (the one-time one replaced)."""
    from review_app.accounts import add_account as add, hash_password
    account, _ = add(store, name, role)
    store.set_password(account.id, hash_password(password), must_change=False)
    return account


def sign_in(client, name: str, password: str = PASSWORD) -> dict:
    """Signs `client` in; returns the login answer and sets its CSRF header for later requests."""
    r = client.post("/api/login", json={"name": name, "password": password})
    assert r.status_code == 200, r.text
    client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
    return r.json()


ACCOUNTS = (("王工", "reviewer"), ("李工", "reviewer"), ("张工", "reviewer"), ("组长", "lead"), ("老板", "owner"))


def build_app(db_url: str, tmp_path: Path, synthetic, settings=None, **days):
    """(the app, its store, the project folder, {day: verdict lines}) over judged_days, with ACCOUNTS, the labels
    writer not started (a test runs it: app.state.ctx.writer.run_once())."""
    from review_app.app import create_app
    from review_app.project import Project
    from review_app.store import Store
    project = tmp_path / "project"
    project.mkdir()
    lines = judged_days(project, synthetic, **days)
    store = Store(db_url)
    store.migrate()
    for name, role in ACCOUNTS:
        add_account(store, name, role)
    return create_app(store, Project(project), settings, start_writer=False), store, project, lines


def client_of(app, name: str | None = None):
    """A browser of its own (its own cookies) on the app, signed in as `name` when given."""
    from fastapi.testclient import TestClient
    client = TestClient(app)
    if name:
        sign_in(client, name)
    return client


def decide(client, day: str, card: str, decision: str = "不通过", base: int = 0, note: str = "", event_id=None):
    return client.post("/api/decisions", json={"id": event_id or uuid.uuid4().hex, "day": day, "card": card,
                                               "decision": decision, "note": note, "base": base})


def queue_of(client, day: str, **params) -> list[dict]:
    r = client.get("/api/queue", params={"day": day, **params})
    assert r.status_code == 200, r.text
    return r.json()["cards"]


class TcpProxy:
    """A TCP relay from a local port to `target` (host, port) that a test can cut and restore: a database server
    unreachable mid-day without stopping the one every other test uses."""

    def __init__(self, target: tuple[str, int]):
        import socket
        import threading
        self.target, self.port, self._threading, self._socket = target, free_port(), threading, socket
        self._conns: list = []
        self._server = None
        self.start()

    def start(self) -> None:
        s = self._socket.socket()
        s.setsockopt(self._socket.SOL_SOCKET, self._socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self._server = s
        self._threading.Thread(target=self._accept, args=(s,), daemon=True).start()

    def _accept(self, server) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = self._socket.create_connection(self.target)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                self._threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a, b) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self) -> None:
        """The server is unreachable: the listener and every connection closed."""
        try:
            self._server.shutdown(self._socket.SHUT_RDWR)   # wakes the accept() blocked on it
        except OSError:
            pass
        self._server.close()
        for c in self._conns:
            try:
                c.shutdown(self._socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass
        self._conns.clear()
