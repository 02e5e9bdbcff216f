"""`group-qc serve` as a process, and the faults a served app meets, each a test: no owner, the address it binds,
two servers on one SQLite file, kill -9 during a burst of decisions from 4 clients (every acknowledged decision in
the labels exactly once), the database read-only, its disk full, locked by another process, and PostgreSQL
unreachable at start and mid-day. Nothing is acknowledged that was not stored."""
from __future__ import annotations

import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from group_qc_dev.review_load import DAY, Reviewer, bulk_project, make_accounts
from qc_core.jsonl import iter_jsonl
from review_app import decision_store, store as store_module
from review_app.app import create_app
from review_app.project import Project
from review_app.store import Store
from tests.served import PASSWORD, TcpProxy, client_of, decide, free_port, queue_of, start_server

pytestmark = [pytest.mark.slow, pytest.mark.file_seconds(60), pytest.mark.usefixtures("fast_passwords")]
REVIEWERS = ["r1", "r2", "r3", "r4"]


def load_project(tmp_path: Path, db_url: str, per_reviewer: int = 25) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    bulk_project(project, REVIEWERS, per_reviewer)
    store = Store(db_url)
    store.migrate()
    make_accounts(store, [(n, "reviewer") for n in REVIEWERS] + [("lead", "lead"), ("owner", "owner")], PASSWORD)
    store.close()
    return project


def serve(project: Path, db_url: str, *extra, **kw):
    return start_server(project, db_url, *extra, **kw)


def stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGINT)   # Ctrl-C: the server writes every stored decision into the labels first
    out, _ = proc.communicate(timeout=60)
    return out


def logged_ids(project: Path) -> list[str]:
    path = project / "labels" / "decisions.jsonl"
    return [d.get("id") for _, d in iter_jsonl(path)] if path.exists() else []


def test_serve_refuses_to_start_without_an_owner_and_makes_no_account(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    run = subprocess.run([sys.executable, "-m", "review_app.serve", "--project", str(project), "--port",
                          str(free_port())], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2 and "no owner account" in run.stderr and "users add NAME --role owner" in run.stderr
    s = Store(f"sqlite:///{project / 'group-qc.db'}")
    assert s.accounts() == []
    s.close()
    missing = subprocess.run([sys.executable, "-m", "review_app.serve", "--project", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 2 and "is not a folder" in missing.stderr


def _listening(port: int) -> set[str]:
    """The addresses a local TCP port listens on (/proc/net/tcp, state 0A)."""
    out = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":
            out.add(".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)))
    return out


def test_serve_binds_to_loopback_and_a_second_server_on_one_sqlite_file_is_refused(tmp_path):
    url = f"sqlite:///{tmp_path / 'project' / 'group-qc.db'}"
    project = load_project(tmp_path, url)
    port = free_port()
    proc, base = serve(project, url, port=port)
    try:
        assert _listening(port) == {"127.0.0.1"}
        second = subprocess.run([sys.executable, "-m", "review_app.serve", "--project", str(project), "--port",
                                 str(free_port())], capture_output=True, text=True, timeout=120)
        assert second.returncode == 3 and f"another group-qc serve (pid {proc.pid})" in second.stderr
    finally:
        stop(proc)


def test_kill_9_during_a_burst_loses_no_acknowledged_decision(tmp_path, db_url):
    """4 clients send 1,000 decisions; the server is killed with SIGKILL mid-burst and started again; the clients
    resend what was not acknowledged, with the same ids, as the page does. Every acknowledged decision is stored
    once and in the labels exactly once."""
    project = load_project(tmp_path, db_url, per_reviewer=250)
    port = free_port()
    proc, base = serve(project, db_url, port=port)
    clients = [Reviewer(base, n, PASSWORD) for n in REVIEWERS]
    for c in clients:
        c.sign_in()
    queues = [c.cards() for c in clients]
    deadline = time.monotonic() + 400
    threads = [threading.Thread(target=c.decide_all, args=(q, deadline)) for c, q in zip(clients, queues)]
    for t in threads:
        t.start()
    while sum(len(c.acknowledged) for c in clients) < 300:
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    killed_at = sum(len(c.acknowledged) for c in clients)
    proc, _ = serve(project, db_url, port=port)
    for t in threads:
        t.join()
    acknowledged = {i for c in clients for i in c.acknowledged}
    assert len(acknowledged) == 1000 and 300 <= killed_at < 1000
    assert sum(c.failures for c in clients) > 0   # the kill was felt
    stop(proc)
    ids = logged_ids(project)
    assert len(ids) == len(set(ids)) and set(ids) == acknowledged
    s = Store(db_url)
    assert decision_store.sync_state(s) == {"stored": 1000, "waiting": 0, "problems": []}
    s.close()


def _app(db_url: str, project: Path):
    return create_app(Store(db_url), Project(project), start_writer=False)


def test_a_read_only_database_acknowledges_nothing(tmp_path):
    path = tmp_path / "project" / "group-qc.db"
    project = load_project(tmp_path, f"sqlite:///{path}")
    writer_app = _app(f"sqlite:///{path}", project)
    client = client_of(writer_app, "r1")   # signed in while the file could be written
    card = queue_of(client, DAY)[0]["card"]
    read_only = client_of(_app(f"sqlite:///file:{path}?mode=ro&uri=true", project))
    read_only.cookies, read_only.headers["X-CSRF-Token"] = client.cookies, client.headers["X-CSRF-Token"]
    assert queue_of(read_only, DAY)[0]["card"] == card    # reading still works
    r = decide(read_only, DAY, card, event_id="evt-readonly-1")
    assert r.status_code == 503 and "read-only" in r.json()["error"] and "nothing was saved" in r.json()["error"]
    s = Store(f"sqlite:///{path}")
    assert decision_store.sync_state(s)["stored"] == 0
    s.close()
    assert decide(client, DAY, card, event_id="evt-readonly-1").status_code == 201   # the page's resend, later


def test_a_full_disk_acknowledges_only_what_was_stored(tmp_path):
    """The server's files may not grow past a limit (RLIMIT_FSIZE, as a full disk): the decisions that no longer fit
    are answered 503, saying the disk is full; every decision answered 201 is there after a restart, and no other."""
    url = f"sqlite:///{tmp_path / 'project' / 'group-qc.db'}"
    project = load_project(tmp_path, url, per_reviewer=250)
    size = (project / "group-qc.db").stat().st_size

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size + 256 * 1024, size + 256 * 1024))
    proc, base = serve(project, url, preexec_fn=limit)
    import httpx
    client = httpx.Client(base_url=base, timeout=30)
    login = client.post("/api/login", json={"name": "r1", "password": PASSWORD}).json()
    client.headers["X-CSRF-Token"] = login["csrf_token"]
    cards = client.get("/api/queue", params={"day": DAY}).json()["cards"]
    stored, refused = set(), []
    for c in cards:
        event_id = uuid.uuid4().hex
        r = client.post("/api/decisions", json={"id": event_id, "day": DAY, "card": c["card"], "decision": "通过",
                                                "note": "满" * 1000, "base": 0})
        if r.status_code == 201:
            stored.add(event_id)
        else:
            refused.append((event_id, r.status_code, r.json()["error"]))
    proc.kill()
    proc.wait()
    assert stored and refused, "the limit was never reached, or reached at once"
    assert all(status == 503 and "full" in error for _, status, error in refused), refused[:3]
    s = Store(url)
    with s.read() as conn:
        ids = {row.id for row in s.execute(conn, "SELECT id FROM decision_events")}
    s.close()
    assert ids == stored


def test_a_database_locked_by_another_process_is_said_and_the_resend_is_stored(tmp_path, monkeypatch):
    path = tmp_path / "project" / "group-qc.db"
    project = load_project(tmp_path, f"sqlite:///{path}")
    monkeypatch.setattr(store_module, "SQLITE_BUSY_SECONDS", 1)
    app = _app(f"sqlite:///{path}", project)
    client = client_of(app, "r1")
    card = queue_of(client, DAY)[0]["card"]
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(4)"), str(path)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    r = decide(client, DAY, card, event_id="evt-locked-01")
    assert r.status_code == 503 and "locked by another process" in r.json()["error"]
    holder.wait()
    assert decide(client, DAY, card, event_id="evt-locked-01").status_code == 201
    assert sqlite3.connect(path).execute("SELECT count(*) FROM decision_events").fetchone()[0] == 1


def test_postgresql_unreachable_at_start_and_mid_day(tmp_path, postgres_url):
    db_url = postgres_url
    down = subprocess.run([sys.executable, "-m", "review_app.serve", "--project", str(tmp_path), "--db",
                           f"postgresql://gq:gq@127.0.0.1:{free_port()}/gq"], capture_output=True, text=True,
                          timeout=120)
    assert down.returncode == 2 and "cannot reach the database" in down.stderr and ":***@" in down.stderr
    project = load_project(tmp_path, db_url)
    from urllib.parse import urlsplit
    target = urlsplit(db_url.replace("postgresql+psycopg", "postgresql"))
    proxy = TcpProxy((target.hostname, target.port or 5432))
    via_proxy = db_url.replace(f"{target.hostname}:{target.port}" if target.port else target.hostname,
                               f"127.0.0.1:{proxy.port}", 1)
    app = _app(via_proxy, project)
    client = client_of(app, "r1")
    cards = queue_of(client, DAY)
    assert decide(client, DAY, cards[0]["card"]).status_code == 201
    proxy.cut()
    r = decide(client, DAY, cards[1]["card"], event_id="evt-pg-down-1")
    assert r.status_code == 503 and "cannot reach the database" in r.json()["error"]
    proxy.start()
    assert decide(client, DAY, cards[1]["card"], event_id="evt-pg-down-1").status_code == 201
