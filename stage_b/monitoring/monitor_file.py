"""monitor.json, read back: every mission's days replayed from their own counts (stage_b.monitoring.monitor_replay, the
same replay that built them) and compared with what the file says, so a file edited by hand, cut short or mixed with
another operating point's is refused; then the withdrawals it records, and the certified missions it leaves
unaccounted for (the judge sends their groups to review, saying why)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import cast

from qc_core.jsonl import read_json_file
from stage_b.monitoring.days import MonitorError
from stage_b.monitoring.monitor_format import MonitorFile
from stage_b.monitoring.inspection import WITHDRAWN, Promise
from stage_b.monitoring.live_promise import MAX_DRIFT_ALPHA, MONITOR_FORMAT, bounds_for, promise_of
from stage_b.monitoring.monitor_replay import UNVERIFIED, replay
from stage_b.rules.operating_point import OperatingPoint
from stage_b.stats.detector import alarm_level
from stage_b.rules.point_identity import PointKeys, same_point

# --------------------------------------------------------------------------------------------------------------
# Reading monitor.json back, and what the judge does with it
# --------------------------------------------------------------------------------------------------------------
_CHECKED = ("cum_escapes", "cum_audited", "state", "status", "next_audit_share", "clean_days", "withdrawn_here")
_CHECKED_NUMBERS = ("escape_lower", "escape_upper", "escape_detector", "miss_detector", "miss_rate_estimate",
                    "escape_null")


def check_monitor(monitor: dict, path) -> dict:
    """monitor.json with every day replayed from its own counts (stage_b.monitoring.monitor_replay, the same replay
    that wrote
    it); a file whose stored bounds, detectors, states, status or shares differ (edited by hand) is refused, naming
    the mission and day."""
    if not isinstance(monitor, dict) or monitor.get("format") != MONITOR_FORMAT:
        raise MonitorError(f"{path} is not a monitor.json of format {MONITOR_FORMAT}: write it with group-qc "
                           f"monitor")
    try:
        delta = 1 - float(monitor["confidence"])
        alpha = float(monitor["drift_alpha"])
        years = float(monitor["false_alarm_years"])
        clean_days = monitor["tightened_clean_days"]
        if not (0 < delta < 1 and 0 < alpha <= MAX_DRIFT_ALPHA and years > 0) or not isinstance(clean_days, int) \
                or clean_days < 1:
            raise MonitorError(f"{path}: confidence, drift_alpha, false_alarm_years or tightened_clean_days out of "
                               f"range")
        for mission, m in monitor["missions"].items():
            _check_mission(path, mission, m, delta, alpha, years, clean_days)
    except MonitorError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MonitorError(f"{path} is not a monitor.json group-qc monitor wrote ({type(exc).__name__}: "
                           f"{exc}); write "
                           f"it again with group-qc monitor") from None
    return monitor


def _check_mission(path, mission: str, m: dict, delta: float, alpha: float, years: float, clean_days: int) -> None:
    p = m["promise"]
    promise = Promise(miss_rate=p["miss_rate"], escape_rate=p["escape_rate"], alarm_level=alarm_level(years),
                      certified=bool(m["certified"]), caught_share=p["caught_share"],
                      auto_pass_share=p["auto_pass_share"], clean_days=clean_days)
    bounds = bounds_for(promise.escape_rate, delta)
    if list(bounds.prior) != [float(x) for x in p["prior"]] or p["alarm_level"] != promise.alarm_level:
        raise MonitorError(f"{path}: {mission}: the prior or the alarm level does not follow from the promise")
    stored = m["days"]
    for row in stored:
        if int(row.get("escapes_unconfirmed") or 0) != len(row.get("unconfirmed") or []):
            raise MonitorError(f"{path}: {mission}, day folder {row['day']!r}: escapes_unconfirmed is not the "
                               f"number of escapes it lists as waiting; the file was edited: write it again with "
                               f"group-qc monitor")
        if int(row.get("audits_disputed") or 0) != sum(u.get("why") in ("conflict", "unsure")
                                                       for u in row.get("unresolved") or []):
            raise MonitorError(f"{path}: {mission}, day folder {row['day']!r}: audits_disputed is not the number of "
                               f"audits it lists in dispute; the file was edited: write it again with "
                               f"group-qc monitor")
        d = row["drift"]
        fired = any(x is not None and x < alpha for x in (d.get("ks_p"), d.get("defect_p")))
        if fired != bool(d.get("fired")) or any(x is not None and not 0 <= x <= 1 for x in (d.get("ks_p"),
                                                                                              d.get("defect_p"))):
            raise MonitorError(f"{path}: {mission}, day folder {row['day']!r}: the drift verdict does not follow "
                               f"from its p-values; the file was edited: write it again with group-qc monitor")
    replayed = replay([{k: row.get(k, 0) if k in _ADDED_LATER else row[k] for k in COUNT_KEYS}
                       for row in stored], promise, bounds,
                      lambda i, ref: stored[i]["drift"])
    for row, again in zip(stored, replayed):
        for key in _CHECKED + _CHECKED_NUMBERS:
            a, b = row.get(key), again.get(key)
            same = a == b if key in _CHECKED else (a is None and b is None) or (
                isinstance(a, (int, float)) and b is not None and math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9))
            if not same:
                raise MonitorError(f"{path}: {mission}, day folder {row['day']!r}: {key} {a!r} does not follow "
                                   f"from the day's counts (they give {b!r}); the file was edited: write it again "
                                   f"with group-qc monitor")
    last = replayed[-1] if replayed else None
    for key, value in (("status", last["status"] if last else UNVERIFIED),
                       ("state", last["state"] if last else m.get("state")),
                       ("next_audit_share", last["next_audit_share"] if last else m.get("next_audit_share"))):
        if m.get(key) != value:
            raise MonitorError(f"{path}: {mission}: {key} {m.get(key)!r} is not its last day's ({value!r}); the file "
                               f"was edited: write it again with group-qc monitor")


COUNT_KEYS = ("day", "judged", "auto_passed", "audit_share", "audited_auto_passed", "escapes",
              "audited_auto_failed_defects", "reviewed_defects", "escapes_unconfirmed", "audits_disputed")
_ADDED_LATER = ("escapes_unconfirmed", "audits_disputed")   # a file written before them had none


def load_monitor(path) -> MonitorFile:
    """monitor.json read and checked (check_monitor): every day replayed from its own counts."""
    path = Path(path)
    monitor = read_json_file(path, "monitor file", ": write it with group-qc monitor, or leave --monitor out",
                             MonitorError)
    return cast(MonitorFile, check_monitor(monitor, path))


def withdrawals(monitor: MonitorFile, path, op: OperatingPoint, point: PointKeys | None) -> dict[str, str]:
    """{mission: why} for the missions whose promise stays withdrawn for a judge at operating point `op`: every
    mission the monitor withdrew, when it monitored this operating point; when it monitored another, those whose
    entry here was not certified on labels decided after the withdrawal (stage_a.evidence_through)."""
    out = {}
    same = same_point(point, monitor["operating_point"])
    if same:   # the guard fails closed: a certified promise the monitor does not account for is not held
        out.update(unaccounted(monitor, path, op))
    for mission, m in monitor["missions"].items():
        if m["status"] != WITHDRAWN:
            continue
        if same:
            out[mission] = f"{m['why']} (monitor {path})"
            continue
        entry = op.missions.get(mission)
        through = ((entry.stage_a if entry is not None else None) or {}).get("evidence_through")
        if entry is None or not entry.certified or through is None or through <= m.get("withdrawn_at", ""):
            out[mission] = (f"{m['why']} (monitor {path}, at another operating point); this operating point was not "
                            f"certified on labels decided after the withdrawal ({m.get('withdrawn_at')})")
    return out


def unaccounted(monitor: MonitorFile, path, op: OperatingPoint) -> dict[str, str]:
    """{mission: why} for each certified mission of `op` whose evidence in a monitor of this operating point cannot
    be read or does not add up: missing, not certified there, another promise than the operating point states, or
    fewer days than the monitor monitored (a file edited to look consistent). Such a mission goes to review."""
    out = {}
    for mission, entry in op.missions.items():
        if not entry.certified:
            continue
        m = monitor["missions"].get(mission)
        expected = promise_of(entry, float(monitor["false_alarm_years"]), int(monitor["tightened_clean_days"]))
        problem = None
        if m is None:
            problem = "does not hold this certified mission"
        elif not m["certified"]:
            problem = "calls this certified mission not certified"
        elif (m["promise"]["miss_rate"], m["promise"]["escape_rate"]) != (expected.miss_rate, expected.escape_rate):
            problem = (f"holds it to another promise (miss {m['promise']['miss_rate']}, escape "
                       f"{m['promise']['escape_rate']}) than the operating point states")
        elif len(m["days"]) != len(monitor["days"]) or len(monitor["days"]) != len(monitor["day_folders"]):
            problem = f"holds {len(m['days'])} of its {len(monitor['days'])} days for it"
        if problem:
            out[mission] = (f"the monitor {path} {problem}: its live evidence cannot be read, so the promise is not "
                            f"held (the guard fails closed); write the monitor again with group-qc monitor")
    return out
