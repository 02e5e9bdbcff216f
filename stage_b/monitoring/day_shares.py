"""The audit share each mission is judged at today, and the inspection state that chose it (stage_b.judging.judge). Pure
core (scipy through the drift test).

A mission's share starts from the judge's --audit_share, or, with `--audit_share plan`, from the audit planner
(stage_b.monitoring.plan_audits) at today's volume. The monitor's state then raises it
(stage_b.monitoring.inspection.share_for_day):
`tightened` asks for its tightened share, and a normal day whose Stage-A summaries already drift from the reference
(Fisher's exact test of the share of groups with a summary showing a defect, known before the model runs) is
tightened the same day. A share is never lowered. A tightened state found in a monitor of another operating point is
applied all the same (more audits, never fewer), saying so.
"""
from __future__ import annotations

from typing import TypedDict

from qc_core.records import summaries_of

from stage_b.contract.grounding import defect_photos
from stage_b.monitoring.inspection import NORMAL, TIGHTENED, share_for_day
from stage_b.monitoring.live_promise import DEFAULT_DRIFT_ALPHA, promise_of
from stage_b.monitoring.monitor_format import MonitorFile
from stage_b.monitoring.plan_audits import DEFAULT_SECONDS_PER_DECISION, DEFAULT_WITHIN_DAYS, PlanError, plan_mission
from stage_b.rules.point_identity import same_point
from stage_b.rules.routes import DEFAULT_AUDIT_SHARE, check_audit_share
from stage_b.stats.detector import DEFAULT_FALSE_ALARM_YEARS
from stage_b.stats.drift import drift   # scipy only inside drift(), when a day is judged

PLAN = "plan"
UNMONITORED = "unmonitored"


def check_share_setting(value, what: str = "--audit_share"):
    """A share from 0 to 1, or `plan` (stage_b.monitoring.plan_audits decides it per mission)."""
    if isinstance(value, str) and value.strip().lower() == PLAN:
        return PLAN
    return check_audit_share(value, what)


class DayShare(TypedDict):
    """A mission's audit share for today's run: the share, the inspection state it follows and why."""
    share: float
    state: str
    why: str


def day_shares(setting, op, point, monitor: MonitorFile | None, monitor_path, by_mission: dict,
               missions: list[str]) -> dict[str, DayShare]:
    """{mission: DayShare} for today's run (module doc)."""
    years = float((monitor.get("false_alarm_years") if monitor else None) or DEFAULT_FALSE_ALARM_YEARS)
    alpha = float((monitor.get("drift_alpha") if monitor else None) or DEFAULT_DRIFT_ALPHA)
    same = monitor is not None and same_point(point, monitor["operating_point"])
    out: dict[str, DayShare] = {}
    for mission in missions:
        entry = op.missions.get(mission) if op is not None else None
        today = [r for r in by_mission[mission] if "gold_label" not in r]
        base, base_why = _base_share(setting, mission, entry, len(today), op, DEFAULT_AUDIT_SHARE, years)
        m = monitor.get("missions", {}).get(mission) if monitor is not None else None
        state = m.get("state") if m else None
        asked = m.get("next_audit_share") if m else None
        note = ""
        if m and not same and state == TIGHTENED:
            note = f" (from the monitor {monitor_path} of another operating point: applied all the same)"
        elif m and not same:
            state, asked = None, None
        promise = promise_of(entry, years) if entry is not None else None
        reference = (m.get("drift_against") if m else None) or (entry.profile if entry is not None else None)
        defect = sum(bool(defect_photos(summaries_of(r), mission)) for r in today)
        fired = drift(None, defect, reference, alpha, groups=len(today))["fired"] if today else False
        share, why = share_for_day(base, state, asked, fired, promise if promise and promise.certified else None,
                                   len(today))
        out[mission] = {"share": share, "state": _state_name(state, fired, share, base, monitor),
                        "why": f"{why}{note}; {base_why}"}
    return out


def _base_share(setting, mission: str, entry, groups: int, op, default: float, years: float) -> tuple[float, str]:
    if setting != PLAN:
        return float(setting), f"normal share {setting:g} (--audit_share)"
    if entry is None or not groups:
        return default, f"normal share {default:g} (nothing to plan for)"
    delta = 1 - ((op.family or {}).get("per_claim_confidence") or op.confidence)
    try:
        plan = plan_mission(mission, entry, groups, None, DEFAULT_WITHIN_DAYS, years, DEFAULT_SECONDS_PER_DECISION,
                            delta)
    except PlanError as exc:
        return default, f"normal share {default:g} (not planned: {exc})"
    if plan.share is None:
        return 1.0, f"normal share 1 (planned: {plan.why})"
    return plan.share, (f"normal share {plan.share:g} planned (stage_b.monitoring.plan_audits) to withdraw within "
                        f"{plan.within_days} days after the escape rate rises to {100 * plan.detect:.3g}%")


def _state_name(state, fired: bool, share: float, base: float, monitor) -> str:
    if state == TIGHTENED or (fired and share > base):
        return TIGHTENED
    if monitor is None:
        return UNMONITORED
    return state or NORMAL
