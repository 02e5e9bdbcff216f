"""Every stored decision reaches the labels folder the monitor and re-certification read, through the same code as an
offline export's import, with no export or import step.

A decision the app acknowledged is in its database (the system of record). This writer takes the events not yet in
the labels folder's decisions log, in the order they were stored, makes each the line a review page exports for it
(its history: the account's earlier decisions on the card), checks it with the import's own line check
(stage_b.labels.decision_lines.check_line: the group's line in its verdict file unchanged since it was decided, the
names, the times) and hands them to the import (stage_b.labels.decisions.import_checked: the chained log, the labels,
the reviewer table, agreement, gold, escapes waiting for a second person). Each log line carries its decision's `id`,
so an event is in the log exactly once whatever happens between the append and the database's mark (a crash, a kill
-9): the next run finds its id in the log and adds nothing. An adjudication is logged as one (`adjudication`:
{"reason"}). An event the check refuses (its group was judged again since) stays in the database, named with why, and
the others go on.

It runs in a process of its own beside the server, woken by each stored decision and coalescing a burst
(COALESCE_SECONDS), at startup (whatever a killed server left) and every RETRY_SECONDS, and once more in the server
when it stops; a failure of the labels folder (the log damaged, held by an import, a full disk) is kept, shown to the
lead, and retried.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any

from qc_core.errors import UserError
from qc_core.jsonl import LockedError
from review_app import decision_store
from review_app.project import Project
from review_app.store import Store, StoreError
from stage_b.labels.decision_lines import check_line
from stage_b.labels.source_files import SourceFiles
from stage_b.labels.decisions import import_checked

COALESCE_SECONDS = 1.0
RETRY_SECONDS = 5.0


def _change(previous, ev) -> dict:
    return {"from": previous, "to": ev.decision, "at": ev.decided_at, "by": ev.name,
            "on_screen_ms": int(ev.on_screen_ms) if ev.on_screen_ms is not None else None}


def export_line(ev, history: list) -> dict:
    """The line a review page would export for a stored event (stage_b.labels.decision_lines.decision_line's form);
    `history`: the account's decision events on the card, in version order."""
    changes, previous = [], None
    if ev.kind == decision_store.DECISION:
        for earlier in history:
            if int(earlier.version) > int(ev.version):
                break
            changes.append(_change(previous, earlier))
            previous = earlier.decision
    # the file's own digest is the check's to take: the group's line digest is what the reviewer saw
    return {"group_id": ev.group_id, "mission": ev.mission, "decision": ev.decision, "note": ev.note,
            "reviewer": ev.name, "decided_at": ev.decided_at, "verdict": None, "p_fail": None, "route": None,
            "source": {"file": ev.source_file, "sha256": "", "line_sha256": ev.line_sha256},
            "history": changes[-100:]}


def sync_once(store: Store, project: Project) -> dict:
    """One pass (module doc): {"added", "refused", "pending"}; raises UserError/LockedError when the labels folder
    cannot take them (nothing is marked)."""
    events = decision_store.unsynced(store)
    if not events:
        return {"added": 0, "refused": 0, "pending": 0}
    sources = SourceFiles(project.registry, [project.root])
    histories = decision_store.histories(store, {ev.day for ev in events})
    checked, ids, refused = [], [], 0
    for ev in events:
        line = export_line(ev, histories.get((ev.day, ev.card, int(ev.account_id)), []))
        decided, problem = check_line(line, f"decision {ev.id} of {ev.name}", project.registry, sources)
        if problem or decided is None:
            refused += 1
            if ev.sync_problem != problem:
                decision_store.mark_problem(store, ev.id, problem or "not a decision")
            continue
        decided["id"] = ev.id
        if ev.kind == decision_store.ADJUDICATION:
            decided["adjudication"] = {"reason": ev.reason or ""}
        checked.append(decided)
        ids.append(ev.id)
    added = 0
    if checked:
        result = import_checked(checked, project.labels_dir, project.registry)
        added = result["added"]
        decision_store.mark_synced(store, ids)
    return {"added": added, "refused": refused, "pending": refused}


class LabelsWriter:
    """The writer (module doc). `start()` runs it in a process of its own: a pass reads and checks the whole log, and
    in the server's process it would hold the interpreter's lock while reviewers' keys wait (measured: p95 121 ms
    against 36 ms at 10,000 decisions, group_qc_dev.bench_server). `run_once()` runs one pass here (the tests, and
    the last pass when the server stops)."""

    def __init__(self, store: Store, project: Project):
        self.store, self.project = store, project
        self._state: dict = {"last_run": None, "added": 0, "error": None}
        self._process: Any = None
        self._lock = threading.Lock()

    @property
    def state(self) -> dict:
        if self._process is not None:
            while not self._updates.empty():
                try:
                    self._state = self._updates.get_nowait()
                except Exception:   # noqa: BLE001 - an empty queue raced us: keep the last state
                    break
        return dict(self._state)

    def poke(self) -> None:
        if self._process is not None:
            self._wake.set()

    def run_once(self) -> dict:
        with self._lock:
            result = _pass(self.store, self.project)
            self._state = {"last_run": time.time(), "added": self._state["added"] + result.get("added", 0),
                           "error": result.get("error")}
            return result

    def start(self) -> None:
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        self._wake, self._stop, self._updates = ctx.Event(), ctx.Event(), ctx.Queue()
        self._process = ctx.Process(target=_writer_process, name="group-qc labels writer", daemon=True,
                                    args=(self.store.url, str(self.project.root), str(self.project.labels_dir),
                                          [str(d) for d in self.project.photo_roots[1:]], self._wake, self._stop,
                                          self._updates, os.getpid()))
        self._process.start()

    def stop(self) -> None:
        if self._process is not None:
            self._stop.set()
            self._wake.set()
            self._process.join(timeout=60)
            if self._process.is_alive():
                self._process.kill()
            self._process = None
        self.run_once()   # whatever came in at the very end


def _pass(store: Store, project: Project) -> dict:
    try:
        return sync_once(store, project)
    except (UserError, LockedError, StoreError, OSError) as exc:
        return {"added": 0, "refused": 0, "pending": -1, "error": str(exc)}


def _writer_process(url: str, root: str, labels: str, photos: list[str], wake, stop, updates, parent: int) -> None:
    """The writer's own process: a pass at start (what a stopped or killed server left), then one per burst of
    decisions (woken, then COALESCE_SECONDS), or every RETRY_SECONDS; it ends with the server (a killed server's
    writer sees its parent gone and stops)."""
    store, project = Store(url), Project(root, labels, photos)
    added = 0
    try:
        while True:
            result = _pass(store, project)
            added += result.get("added", 0)
            updates.put({"last_run": time.time(), "added": added, "error": result.get("error")})
            if stop.is_set() or os.getppid() != parent:
                return
            woken = wake.wait(RETRY_SECONDS)
            if woken and not stop.is_set():
                time.sleep(COALESCE_SECONDS)   # a burst of keys becomes one append
            wake.clear()
            if os.getppid() != parent:
                return
    except KeyboardInterrupt:
        return
    finally:
        store.close()
