"""What a mission's live work is held to, for the monitor command and the modules below it (the file reader, the
day's audit shares, simulated days, the planner): the promise (the signed miss rate, the escape rate, the detector's
alarm level, the validation mix), the escape rate's confidence sequence, and the file format and drift-test levels.
Pure (the stats it counts with)."""
from __future__ import annotations

from stage_b.monitoring.inspection import TIGHTENED_CLEAN_DAYS, Promise
from stage_b.monitoring.monitor_replay import Bounds
from stage_b.rules.operating_point import MissionPoint
from stage_b.stats.confidence_sequence import audits_needed, cs_bounds, prior_for
from stage_b.stats.detector import alarm_level

MONITOR_FORMAT = 1
DEFAULT_DRIFT_ALPHA = 0.001
MAX_DRIFT_ALPHA = 0.1   # a drift test that fires on one honest day in ten tightens too often to mean anything


def promised_escape(entry: MissionPoint | None) -> float | None:
    """The promised escape rate: the validation bound of the escape rate of auto-passed groups, when the rule passed
    any validation group without review (otherwise there is no rate to hold live work to)."""
    escape = (entry.escape if entry is not None else None) or {}
    return escape.get("upper") if escape.get("auto_passed") else None


def promise_of(entry: MissionPoint | None, false_alarm_years: float,
               clean_days: int = TIGHTENED_CLEAN_DAYS) -> Promise:
    """What a mission's live work is held to: the signed miss rate (its detector withdraws) and the escape rate
    (its signals tighten), at the detector's alarm level."""
    certified = entry is not None and entry.certified
    escape = (entry.escape if entry is not None else None) or {}
    n = (entry.extra.get("n") if entry is not None else None)
    shares = {}
    if entry is not None and isinstance(n, int) and n > 0 and entry.n_fail is not None and escape.get("auto_passed"):
        shares = {"caught_share": (entry.n_fail - escape["escapes"]) / n, "auto_pass_share": escape["auto_passed"] / n}
    return Promise(miss_rate=entry.target_miss_rate if entry is not None and certified else None,
                   escape_rate=promised_escape(entry),
                   alarm_level=alarm_level(false_alarm_years), certified=certified, clean_days=clean_days, **shares)


def bounds_for(escape_rate: float | None, delta: float) -> Bounds:
    return Bounds(prior_for(escape_rate if escape_rate is not None else 0.05), delta, cs_bounds, audits_needed)
