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

It runs in the server's own thread, woken by each stored decision and coalescing a burst (COALESCE_SECONDS), at
startup (whatever a killed server left), and when the server stops; a failure of the labels folder (the log damaged,
held by an import, a full disk) is kept and shown to the lead, and retried.
"""
from __future__ import annotations

import threading
import time

from qc_core.errors import UserError
from qc_core.jsonl import LockedError
from review_app import decision_store
from review_app.project import Project
from review_app.store import Store, StoreError
from stage_b.labels.decision_lines import SourceFiles, check_line
from stage_b.labels.decisions import import_checked

COALESCE_SECONDS = 0.5
RETRY_SECONDS = 5.0


def _change(previous, ev) -> dict:
    return {"from": previous, "to": ev.decision, "at": ev.decided_at, "by": ev.name,
            "on_screen_ms": int(ev.on_screen_ms) if ev.on_screen_ms is not None else None}


def export_line(store: Store, ev) -> dict:
    """The line a review page would export for a stored event (stage_b.labels.decision_lines.decision_line's form)."""
    changes, previous = [], None
    if ev.kind == decision_store.DECISION:
        for earlier in decision_store.history(store, ev.day, ev.card, int(ev.account_id), int(ev.version)):
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
    sources = SourceFiles(project.registry)
    checked, ids, refused = [], [], 0
    for ev in events:
        decided, problem = check_line(export_line(store, ev), f"decision {ev.id} of {ev.name}", project.registry,
                                      sources)
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
    """The writer's thread (module doc)."""

    def __init__(self, store: Store, project: Project):
        self.store, self.project = store, project
        self.state: dict = {"last_run": None, "added": 0, "error": None}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poke(self) -> None:
        self._wake.set()

    def run_once(self) -> dict:
        with self._lock:
            try:
                result = sync_once(self.store, self.project)
                self.state = {"last_run": time.time(), "added": self.state["added"] + result["added"], "error": None}
                return result
            except (UserError, LockedError, StoreError, OSError) as exc:
                self.state = {**self.state, "last_run": time.time(), "error": str(exc)}
                return {"added": 0, "refused": 0, "pending": -1, "error": str(exc)}

    def _loop(self) -> None:
        while not self._stop.is_set():
            woken = self._wake.wait(RETRY_SECONDS)
            if self._stop.is_set():
                break
            if woken:
                time.sleep(COALESCE_SECONDS)   # a burst of keys becomes one append
            self._wake.clear()
            result = self.run_once()
            if result.get("error") or result.get("pending"):
                self._stop.wait(RETRY_SECONDS)

    def start(self) -> None:
        self.run_once()   # what a stopped or killed server left
        self._thread = threading.Thread(target=self._loop, name="labels-writer", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.run_once()
