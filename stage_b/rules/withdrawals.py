"""Withdrawals recorded beside the operating point they break, so that every judge at that operating point finds them.

A monitor.json lives in one day folder's parent; a judge run under another parent, or with `monitor=none`, would not
read it and would decide a withdrawn mission's work again. So when stage_b.monitoring.monitor finds a promise withdrawn
it also
appends one line to `<operating point stem>.withdrawals.jsonl` beside the operating point file (the one file every
judge at that operating point is given), and stage_b.judging.judge reads that file on every run, with or without a
monitor:
a mission recorded there for this operating point's digest sends all its groups to review. A withdrawal is never
lifted in the file: the promise comes back only through a new operating point, certified again on labels decided
after the withdrawal (docs/judging_and_review.md). The file is append-only; one that cannot be read stops the judge
(the guard fails closed). Pure (stdlib and the project's pure core).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from qc_core.errors import UserError
from qc_core.jsonl import JsonlAppender, JsonlError, iter_jsonl, output_lock
from qc_core.records import utc_now

FIELDS = ("operating_point_sha256", "mission", "why", "withdrawn_day", "withdrawn_at", "monitor", "recorded_at")


class WithdrawalsError(UserError):
    """A withdrawals file that cannot be read or written (names it and what to do)."""


def withdrawals_path(operating_point) -> Path:
    op = Path(operating_point)
    return op.with_name(f"{op.stem}.withdrawals.jsonl")


def recorded(operating_point, op_digest: str) -> dict[str, dict]:
    """{mission: its withdrawal line} recorded for the operating point of digest `op_digest` (lines of other digests
    belong to other versions of the file and are skipped)."""
    path = withdrawals_path(operating_point)
    if not path.exists():
        return {}
    out: dict[str, dict] = {}
    try:
        for line_no, rec in iter_jsonl(path, allow_torn_tail=False,
                                       remedy="Restore it from a backup, or run python -m stage_b.monitor again."):
            missing = [k for k in FIELDS if not isinstance(rec.get(k), str) and k != "withdrawn_day"]
            if missing:
                raise WithdrawalsError(f"{path}:{line_no}: a withdrawal without {', '.join(missing)}: restore the file "
                                       f"from a backup or run python -m stage_b.monitor again; until then no group "
                                       f"of this operating point is decided without review")
            if rec["operating_point_sha256"] == op_digest:
                out.setdefault(rec["mission"], rec)
    except JsonlError as exc:
        raise WithdrawalsError(f"{exc} (withdrawals of the operating point: until it reads, no group is decided "
                               f"without review)") from None
    return out


def record(operating_point, op_digest: str, monitor: Mapping[str, Any], monitor_path) -> list[str]:
    """Appends a line for each mission `monitor` finds withdrawn that the file does not hold yet; returns them."""
    path = withdrawals_path(operating_point)
    try:
        with output_lock(path):
            known = recorded(operating_point, op_digest)
            new = [{"operating_point_sha256": op_digest, "mission": mission, "why": m["why"],
                    "withdrawn_day": m.get("withdrawn_day"), "withdrawn_at": m.get("withdrawn_at") or utc_now(),
                    "monitor": str(Path(monitor_path).resolve()), "recorded_at": utc_now()}
                   for mission, m in monitor["missions"].items() if m["status"] == "withdrawn" and mission not in known]
            if new:
                with JsonlAppender(path) as out:
                    for line in new:
                        out.write(line)
    except OSError as exc:
        raise WithdrawalsError(f"cannot record the withdrawal beside the operating point in {path} ({exc}): a judge "
                               f"elsewhere would not see it; make the folder writable and run the monitor again") \
            from None
    return [line["mission"] for line in new]
