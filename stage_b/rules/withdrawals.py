"""Withdrawals recorded where every judge at that operating point finds them, whatever file or folder it is given.

A monitor.json lives in one day folder's parent; a judge run under another parent, or with `monitor=none`, would not
read it and would decide a withdrawn mission's work again. So when stage_b.monitoring.monitor finds a promise withdrawn
it also appends one line to `<operating point stem>.withdrawals.jsonl` beside the operating point file (the file a
symlink points at, not the link) and to `withdrawals.jsonl` in the labels folder the monitor reads (so a copy or a
renamed copy of the point, judged with the same labels, still finds it), and stage_b.judging.judge reads both on every
run, with or without a monitor. A line names the point by its identity (what the promise is: stage_b.rules.
point_identity), so an editor's newline, a line-ending conversion, a copy or a rename is the same point with the same
withdrawal; lines written before identities name the file's sha256, and still count for it. A withdrawal is never
lifted in the file: the promise comes back only through a new operating point, certified again on labels decided
after the withdrawal (docs/judging_and_review.md). The files are append-only. A torn last line (a monitor killed while
recording) stops a judge, saying to run the monitor again, whose writer sets the torn piece aside into `<file>.torn`
and records the withdrawal whole: never a dead end; any other line that cannot be read stops the judge (the guard
fails closed). Pure (stdlib and the project's pure core).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from qc_core.errors import UserError
from qc_core.jsonl import JsonlAppender, JsonlError, iter_jsonl, output_lock
from qc_core.records import utc_now
from stage_b.rules.point_identity import PointKeys

FIELDS = ("operating_point_sha256", "mission", "why", "withdrawn_day", "withdrawn_at", "monitor", "recorded_at")
LABELS_FILE = "withdrawals.jsonl"   # in the labels folder


class WithdrawalsError(UserError):
    """A withdrawals file that cannot be read or written (names it and what to do)."""


def withdrawals_path(operating_point) -> Path:
    op = Path(operating_point).resolve()   # a symlinked point's withdrawals are the file's
    return op.with_name(f"{op.stem}.withdrawals.jsonl")


def _torn(path: Path) -> bool:
    import json
    raw = path.read_bytes()
    try:
        json.loads(raw[raw.rfind(b"\n") + 1:].decode("utf-8"))
        return False
    except (ValueError, UnicodeDecodeError):
        return True


def set_aside_torn_tail(path: Path) -> str | None:
    """A last line a killed writer left unfinished, moved out of `path` into `<path>.torn` (so the file reads again,
    and nothing is lost); returns a sentence naming it, or None when the file ends whole."""
    raw = path.read_bytes()
    if not raw or raw.endswith(b"\n"):
        return None
    cut = raw.rfind(b"\n") + 1
    import json
    try:
        json.loads(raw[cut:].decode("utf-8"))
        return None   # whole, only its newline missing
    except (ValueError, UnicodeDecodeError):
        pass
    torn = path.with_name(path.name + ".torn")
    with torn.open("ab") as f:
        f.write(raw[cut:] + b"\n")
    with path.open("r+b") as f:
        f.truncate(cut)
    return f"{path}: a torn last line (a writer was killed) set aside into {torn}"


def _read(path: Path, keys: PointKeys, repair: bool = False) -> dict[str, dict]:
    """The file's lines for the point `keys` names. A torn last line stops a reader (it may be a withdrawal being
    recorded: the guard fails closed) and names the remedy, the monitor run again, whose writer (`repair`) sets the
    torn piece aside into `<file>.torn` and records the withdrawal whole."""
    out: dict[str, dict] = {}
    if not path.exists():
        return out
    if repair:
        set_aside_torn_tail(path)
    elif path.stat().st_size and not path.read_bytes().endswith(b"\n") and _torn(path):
        raise WithdrawalsError(f"{path}: its last line is torn (a monitor was killed while recording a withdrawal); "
                               f"run group-qc monitor again (judge.sh labels= runs it): it sets the torn "
                               f"piece aside into {path.name}.torn and records the withdrawal whole. Until then no "
                               f"group of this operating point is decided without review")
    try:
        for line_no, rec in iter_jsonl(path, allow_torn_tail=False,
                                       remedy="Restore it from a backup, or run group-qc monitor again."):
            missing = [k for k in FIELDS if not isinstance(rec.get(k), str) and k != "withdrawn_day"]
            if missing:
                raise WithdrawalsError(f"{path}:{line_no}: a withdrawal without {', '.join(missing)}: restore the file "
                                       f"from a backup or run group-qc monitor again; until then no group "
                                       f"of this operating point is decided without review")
            if keys.names(rec.get("operating_point")) or keys.names(rec["operating_point_sha256"]):
                out.setdefault(rec["mission"], {**rec, "file": str(path)})
    except JsonlError as exc:
        raise WithdrawalsError(f"{exc} (withdrawals of the operating point: until it reads, no group is decided "
                               f"without review)") from None
    return out


def lines_of(operating_point, keys: PointKeys, labels_dir=None) -> list[dict]:
    """Every withdrawal line recorded for the point (both files), as written; the monitor's reader, which sets a torn
    last line aside (it records the withdrawal whole next)."""
    paths = [withdrawals_path(operating_point), *([Path(labels_dir) / LABELS_FILE] if labels_dir else [])]
    return [line for path in paths for line in _read(path, keys, repair=True).values()]


def recorded(operating_point, keys: PointKeys, labels_dir=None) -> dict[str, dict]:
    """{mission: its withdrawal line} recorded for the point `keys` names, beside the operating point and in the
    labels folder (when given); lines of other points are skipped."""
    out = _read(withdrawals_path(operating_point), keys)
    if labels_dir is not None:
        for mission, line in _read(Path(labels_dir) / LABELS_FILE, keys).items():
            out.setdefault(mission, line)
    return out


def record(operating_point, keys: PointKeys, monitor: Mapping[str, Any], monitor_path, labels_dir=None) -> list[str]:
    """Appends a line for each mission `monitor` finds withdrawn that a file does not hold yet, beside the operating
    point and in the labels folder; returns the missions new beside the point."""
    written: list[str] = []
    for path in [withdrawals_path(operating_point), *([Path(labels_dir) / LABELS_FILE] if labels_dir else [])]:
        try:
            with output_lock(path):
                known = _read(path, keys, repair=True)
                new = [{"operating_point_sha256": keys.file_sha256, "operating_point": keys.identity,
                        "mission": mission, "why": m["why"], "withdrawn_day": m.get("withdrawn_day"),
                        "withdrawn_at": m.get("withdrawn_at") or utc_now(),
                        "monitor": str(Path(monitor_path).resolve()), "recorded_at": utc_now(),
                        "labels": monitor.get("labels"), "labels_head": monitor.get("labels_head")}
                       for mission, m in monitor["missions"].items()
                       if m["status"] == "withdrawn" and mission not in known]
                if new:
                    with JsonlAppender(path) as out:
                        for line in new:
                            out.write(line)
        except OSError as exc:
            raise WithdrawalsError(f"cannot record the withdrawal in {path} ({exc}): a judge elsewhere would not see "
                                   f"it; make the folder writable and run the monitor again") from None
        if not written:
            written = [line["mission"] for line in new]
    return written
