"""The one line a QC owner repeats per mission, first on every page and report that shows a promise (the monitor's
page and output, the judge's summary, the served app's owner page, the audit planner): from the mission's entry of
monitor.json, in words a person can act on. Pure (the stats it counts with).

    holding                 the live escape bound is within the promise
    not yet verified        N more clean audits (about D days at today's volume): the confidence sequence's count
                            (stage_b.stats.confidence_sequence.audits_needed) over the audits today's volume and share
                            draw; or what is open (an audit in dispute, an escape waiting for a second person)
    tightened since dayX    audits at S% until the tightened days come back clean
    withdrawn on dayX       because …: to restore, run … (the re-certification command, monitor.json's `restore`)
    not certified           people decide every group
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from stage_b.contract.numbers import pct
from stage_b.monitoring.inspection import NOT_CERTIFIED, TIGHTENED, WITHDRAWN
from stage_b.stats.confidence_sequence import audits_needed

HOLDING, NOT_YET, TIGHTENED_SINCE, WITHDRAWN_ON = "holding", "not yet verified", "tightened since", "withdrawn on"


def tightened_since(days: list[dict]) -> str | None:
    """The first day of the tightened run the mission is in now, or None."""
    since = None
    for d in days:
        since = (since or d["day"]) if d.get("state") == TIGHTENED else None
    return since


def days_to_verify(more: int, last: dict | None) -> str:
    """"about D days at today's volume": the audits the last day's auto-passed groups draw at the next share."""
    share = (last or {}).get("next_audit_share") or 0.0
    per_day = int((last or {}).get("auto_passed") or 0) * share
    if per_day <= 0:
        return "no audit is drawn at today's volume"
    days = math.ceil(more / per_day)
    return f"about {days} day{'s' if days != 1 else ''} at today's volume"


def owner_status(m: Mapping[str, Any], restore: str | None = None) -> str:
    """The mission's status line (module doc); `m` a mission of monitor.json, `restore` the command that re-certifies
    its operating point (monitor.json's `restore`)."""
    days = m.get("days") or []
    worked = [d for d in days if int(d.get("judged") or 0)]   # "today's volume": the last day the mission had work
    last = worked[-1] if worked else (days[-1] if days else None)
    if m.get("status") == NOT_CERTIFIED or m.get("state") == NOT_CERTIFIED:
        return "not certified: people decide every group"
    if m.get("status") == WITHDRAWN:
        why = next((d.get("state_why") for d in days if d.get("withdrawn_here")), None) or m.get("why") or ""
        return (f"{WITHDRAWN_ON} {m.get('withdrawn_day')} because {why}: every group goes to people; to restore, run "
                + (restore or "group-qc evaluate … --split held_out --replaces <this operating point>"))
    if m.get("state") == TIGHTENED:
        return (f"{TIGHTENED_SINCE} {tightened_since(days)}: audits at {pct(m.get('next_audit_share'))} of the groups "
                f"passed without a person until the tightened days come back clean"
                + ("; the promise holds so far" if m.get("status") == "holds" else ""))
    if m.get("status") == "holds":
        return f"{HOLDING}: {m.get('why')}"
    if last is None:
        return f"{NOT_YET}: no day judged yet"
    open_now = (sum(int(d.get("audits_disputed") or 0) for d in days),
                sum(int(d.get("escapes_unconfirmed") or 0) for d in days))
    if any(open_now):
        return (f"{NOT_YET}: " + "; ".join(
            s for s in (f"{open_now[0]} audit(s) in dispute for the lead to settle" if open_now[0] else "",
                        f"{open_now[1]} escape(s) waiting for a second person" if open_now[1] else "") if s))
    p = m.get("promise") or {}
    rate = p.get("escape_rate")
    if rate is None:
        return (f"{NOT_YET}: nothing to check on live work: its promise states no escape rate of the groups passed "
                f"without a person (none was on validation); certify it again on more groups to get one")
    more = audits_needed(int(last["cum_escapes"]), int(last["cum_audited"]), rate, tuple(p["prior"]),
                         1 - float(p["confidence"]))
    if more is None:
        return f"{NOT_YET}: no number of clean audits confirms <= {pct(rate)} on the escapes found so far"
    return f"{NOT_YET}: {more} more clean audits ({days_to_verify(more, last)})"
