"""The labels folder's append-only decisions log (`decisions.jsonl`), tamper-evident: each line carries `chain`, the
SHA-256 of the previous line's chain and this line's content (a hash chain, as in a transparency log: Haber &
Stornetta 1991; Crosby & Wallach 2009). Every read recomputes the chain, so a line changed, removed, reordered or
inserted by hand after it was written is refused, naming the line, before a label, a bound or a withdrawal is made
from it: a flipped decision must not move a promise without a word. Pure (stdlib and the project's pure core).

A log written before the chain existed has no `chain` on its first lines; they are read as they are (nothing can
check them), and the first chained line appended after them seals them: its chain covers every line before it, so an
edit of an old line from then on is refused too. After the first chained line, a line without one is refused.

The chain stops edits made by hand or by a tool that does not know it; it is not a signature, and someone who
rewrites every chain after an edit is not stopped by it (keep the folder's backups, or its history in git).
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import JsonlAppender, JsonlError, iter_jsonl, record_digest

LOG = "decisions.jsonl"
CHAIN = "chain"
# What every reader needs of a logged decision (its group, its answer, whose it is, what was seen)
NEEDED = ("mission", "group_id", "decision", "reviewer", "decided_at", "source", "record")
LOG_REMEDY = ("The decisions log is append-only: restore it from a backup (a torn last line: remove it), then import "
              "the review pages' exports again (lines already there add nothing).")


class DecisionsLogError(UserError):
    """The decisions log cannot be read as the import wrote it (names the file and line)."""


def next_chain(previous: str, record: dict) -> str:
    """The chain of a line holding `record` (without its own chain) after a line whose chain is `previous`."""
    body = {k: v for k, v in record.items() if k != CHAIN}
    return hashlib.sha256(f"{previous}:{record_digest(body)}".encode("ascii")).hexdigest()


def read_log(path: Path) -> tuple[list[dict], str]:
    """(the log's records, in order; the chain of its last line: what the next line chains to). A missing file is an
    empty log. Raises DecisionsLogError on a line that breaks the chain (module doc) or lacks what a reader needs
    (NEEDED), JsonlError on one that is not JSON."""
    path = Path(path)
    if not path.exists():
        return [], ""
    records, chain, first_chained = [], "", None
    for line_no, rec in iter_jsonl(path, remedy=LOG_REMEDY):
        missing = [k for k in NEEDED if k not in rec]
        if missing or not isinstance(rec.get("record"), dict) or not isinstance(rec.get("source"), dict):
            what = ", ".join(missing) or "its record or source"
            raise DecisionsLogError(f"{path}:{line_no}: a decision without {what}: the decisions log is damaged. "
                                    f"{LOG_REMEDY}")
        expected = next_chain(chain, rec)
        if CHAIN in rec:
            if rec[CHAIN] != expected:
                raise DecisionsLogError(
                    f"{path}:{line_no}: this line, or one before it, was changed, removed or reordered after the "
                    f"import wrote it (its chain digest does not match): labels, bounds and withdrawals are not made "
                    f"from an edited log. {LOG_REMEDY}")
            first_chained = first_chained or line_no
        elif first_chained is not None:
            raise DecisionsLogError(
                f"{path}:{line_no}: a line without its chain digest after line {first_chained}, which has one: it was "
                f"added or edited by hand, not by python -m stage_b.decisions. {LOG_REMEDY}")
        records.append(rec)
        chain = expected
    return records, chain


def append_log(path: Path, records: list[dict], chain: str) -> str:
    """Appends `records` to the log whose last line's chain is `chain` (read_log's), each chained to the line before
    it. Returns the new last chain. The caller holds the log's lock between read_log and this."""
    with JsonlAppender(path) as out:
        for rec in records:
            chain = next_chain(chain, rec)
            out.write({**rec, CHAIN: chain})
    return chain


__all__ = ["LOG", "CHAIN", "LOG_REMEDY", "DecisionsLogError", "JsonlError", "next_chain", "read_log", "append_log"]
