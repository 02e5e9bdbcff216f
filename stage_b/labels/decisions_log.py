"""The labels folder's append-only decisions log (`decisions.jsonl`), tamper-evident: each line carries `chain`, the
SHA-256 of the previous line's chain and this line's content (a hash chain, as in a transparency log: Haber &
Stornetta 1991; Crosby & Wallach 2009). Every read recomputes the chain, so a line changed, removed, reordered or
inserted by hand after it was written is refused, naming the line, before a label, a bound or a withdrawal is made
from it: a flipped decision must not move a promise without a word. Pure (stdlib and the project's pure core).

A chain guards lines, not the log's end: lines cut off the end leave a log that still chains. So every append also
writes the log's head beside it (`decisions.head.json`: its line count, its last chain, and how many lines at its
start predate the chain), and every reader checks the log against it and against any head it was given (the one each
monitor.json and withdrawal record carries, `head()`): a log shorter than a head, whose line at the head's count
does not chain to the head's chain, empty or missing where a head or labels exist, or with more unchained lines at
its start than the head allows (chains stripped) is refused, naming what is missing (Crosby & Wallach's
consistency check between two views of one log).

A log written before the chain existed has no `chain` on its first lines; they are read as they are (nothing can
check them) while no head was ever written, and the first chained line appended after them seals them: its chain
covers every line before it, so an edit of an old line from then on is refused too. After the first chained line, a
line without one is refused.

The chain stops edits made by hand or by a tool that does not know it; it is not a signature, and someone who
rewrites every chain and every head after an edit is not stopped by it (keep the folder's backups, or its history in
git; the review app's database keeps every decision it acknowledged).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import JsonlAppender, JsonlError, iter_jsonl, record_digest, write_text_atomic

LOG = "decisions.jsonl"
HEAD = "decisions.head.json"
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


def head_path(log: Path) -> Path:
    return Path(log).with_name(HEAD)


def head(records: list[dict], chain: str) -> dict:
    """What a reader records of a log it read: its line count and last chain (and the unchained lines it started
    with)."""
    return {"lines": len(records), "chain": chain, "unchained": _unchained(records)}


def _unchained(records: list[dict]) -> int:
    return next((k for k, r in enumerate(records) if CHAIN in r), len(records))


def read_head(log: Path) -> dict | None:
    """The head written beside the log (module doc), or None where none was ever written."""
    path = head_path(log)
    if not path.exists():
        return None
    try:
        h = json.loads(path.read_text(encoding="utf-8"))
        if not (isinstance(h, dict) and isinstance(h.get("lines"), int) and isinstance(h.get("chain"), str)
                and isinstance(h.get("unchained"), int)):
            raise ValueError("not a head")
    except (OSError, ValueError) as exc:
        raise DecisionsLogError(f"{path} cannot be read ({exc}): the decisions log's head says how long the log was; "
                                f"restore the labels folder from a backup") from None
    return h


def _labels_beside(log: Path) -> list[str]:
    folder = Path(log).parent
    return sorted(p.name for p in folder.glob("*_stage_a.jsonl")) if folder.is_dir() else []


def read_log(path: Path, seen: list[dict] | tuple = ()) -> tuple[list[dict], str]:
    """(the log's records, in order; the chain of its last line: what the next line chains to). A missing file is an
    empty log where no head was written and no label exists beside it. Raises DecisionsLogError on a line that breaks
    the chain, lacks what a reader needs (NEEDED), or a log that does not hold a head it was checked against (the one
    beside it, and `seen`: heads a monitor or a withdrawal recorded); JsonlError on a line that is not JSON."""
    path = Path(path)
    written = read_head(path)
    if not path.exists() or not path.stat().st_size:
        gone = "empty" if path.exists() else "missing"
        if written and written["lines"]:
            raise DecisionsLogError(f"{path} is {gone}, and its head ({head_path(path).name}) says it held "
                                    f"{written['lines']} decisions: labels, bounds and withdrawals are not made from a "
                                    f"log that lost its lines. {LOG_REMEDY}")
        if _labels_beside(path):
            raise DecisionsLogError(f"{path} is {gone}, and the labels folder holds "
                                    f"{', '.join(_labels_beside(path)[:3])}: labels without the log they come from "
                                    f"are not read. {LOG_REMEDY}")
        for h in seen:
            if h.get("lines"):
                raise DecisionsLogError(f"{path} is {gone}, and a monitor read {h['lines']} decisions from it. "
                                        f"{LOG_REMEDY}")
        return [], ""
    records, chains, chain, first_chained = [], [], "", None
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
                f"added or edited by hand, not by group-qc decisions. {LOG_REMEDY}")
        records.append(rec)
        chain = expected
        chains.append(chain)
    for h, where in [*([(written, head_path(path).name)] if written else []), *((h, "a monitor's") for h in seen)]:
        _check_against(path, records, chains, h, where)
    return records, chain


def _check_against(path: Path, records: list[dict], chains: list[str], h: dict, where: str) -> None:
    """A log that does not hold the head `h` (module doc) is refused, naming what is missing."""
    lines = h.get("lines")
    if not isinstance(lines, int) or lines <= 0:
        return
    if len(records) < lines:
        raise DecisionsLogError(f"{path} holds {len(records)} decisions, and {where} head says it held {lines}: its "
                                f"last {lines - len(records)} line(s) were cut off. {LOG_REMEDY}")
    if chains[lines - 1] != h.get("chain"):
        raise DecisionsLogError(f"{path}: its line {lines} does not chain to what {where} head recorded there: the "
                                f"log was rewritten since. {LOG_REMEDY}")
    allowed = h.get("unchained")
    if isinstance(allowed, int) and _unchained(records) > allowed:
        raise DecisionsLogError(f"{path} starts with {_unchained(records)} lines without their chain digest, and "
                                f"{where} head allows {allowed}: chains were stripped. {LOG_REMEDY}")


def append_log(path: Path, records: list[dict], chain: str, before: list[dict] | None = None) -> str:
    """Appends `records` to the log whose last line's chain is `chain` and whose records are `before` (read_log's;
    None: read again here), each chained to the line before it, then writes the log's head. Returns the new last
    chain. The caller holds the log's lock between read_log and this."""
    if before is None:
        before = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()] \
            if Path(path).exists() else []
    written = []
    with JsonlAppender(path) as out:
        for rec in records:
            chain = next_chain(chain, rec)
            out.write({**rec, CHAIN: chain})
            written.append({**rec, CHAIN: chain})
    if records or not head_path(path).exists():
        write_text_atomic(head_path(path), json.dumps(head(before + written, chain)) + "\n")
    return chain


__all__ = ["LOG", "HEAD", "CHAIN", "LOG_REMEDY", "DecisionsLogError", "JsonlError", "next_chain", "read_log",
           "append_log", "head", "read_head"]
