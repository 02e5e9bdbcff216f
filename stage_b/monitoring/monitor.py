"""`python -m stage_b.monitor`: do the promises hold on the work they decide? Day by day, per mission, from the
judge's verdict files and the reviewers' imported labels. Pure core (scipy for the two drift tests); the page is
rendered by stage_b.monitoring.monitor_page.

    python -m stage_b.monitor --operating_point operating_point.json (--verdicts DAY_DIR [DAY_DIR …] |
                              --days_under PARENT) --labels LABELS_DIR --output_dir DIR [--drift_alpha 0.001]

Days are verdict folders (`<mission>_verdicts.jsonl`, python -m stage_b.judge), in the order given (`--days_under`:
every subfolder of PARENT judged at this operating point, by name; folders judged at another are named and skipped).
Listed days judged at another operating point are refused: live evidence is never mixed across two rules. A group
judged on two days counts on the first. Labels are the folder stage_b.labels.decisions writes (its decisions.jsonl log).

What a promise is checked against: the escape rate of auto-passed groups, the share of the groups the rule passes
without review that a person would fail. The operating point states it on validation (stage_b.rules.operating_point
escape_rate: its upper bound at the promise's confidence C is the promised rate r). Live, the blind audits
(stage_b.rules.routes: each automatically decided group drawn with probability a) are a simple random sample of the
auto-passed work, so the audited auto-passed groups a reviewer labelled are Bernoulli draws of the live escape rate.

The live bound is a confidence sequence (stage_b.stats.confidence_sequence, which cites and states it), and drift
is tested per mission and day (stage_b.stats.drift).

Status per mission, after each day:
- `withdrawn`: the live lower bound is above the promised rate r (at confidence C, the escape rate is worse than
  promised), or drift fired. A withdrawal stands for the rest of the days monitored at this operating point; the judge
  (--monitor) then sends every group of the mission to review until an operating point certified on labels decided
  after the withdrawal replaces it (withdrawals);
- `holds`: the live upper bound is at most r;
- `unverified`: neither yet; it says how many more audited auto-passed groups without an escape would make it hold;
- `not certified`: the mission decides nothing without review (every group is reviewed), so there is nothing to audit.
With --audit_share 0 no audit is drawn, and every certified mission stays unverified, saying so.

monitor.json holds, per mission under `missions`, the promise, each day's counts, bounds, drift and status; it is read
back with every status recomputed from its own counts (load_monitor), so a file edited by hand is refused.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import run_cli
from qc_core.jsonl import JsonlError, file_sha256, iter_jsonl
from qc_core.records import utc_now
from stage_a.discovery import printable_path, undecodable

from stage_b.labels.agreement import DEFAULT_MIN_GOLD_ACCURACY, check_min_gold_accuracy
from stage_b.stats.detector import DEFAULT_FALSE_ALARM_YEARS, alarm_level, check_false_alarm_years
from stage_b.contract.grounding import defect_photos
from stage_b.monitoring.inspection import NORMAL, NOT_CERTIFIED, TIGHTENED_CLEAN_DAYS, WITHDRAWN, Promise
from stage_b.monitoring.monitor_replay import HOLDS, UNVERIFIED, Bounds, replay
from stage_b.contract.numbers import pct
from stage_b.rules.operating_point import MissionPoint, OperatingPoint, family_text, load_operating_point
from stage_b.rules.routes import AUDIT, REVIEW, route_of_record
from stage_b.contract.verdict import FAIL, PASS
from stage_b.stats.confidence_sequence import audits_needed, cs_bounds, prior_for
from stage_b.stats.drift import drift

MONITOR_FORMAT = 1
DEFAULT_DRIFT_ALPHA = 0.001
MAX_DRIFT_ALPHA = 0.1   # a drift test that fires on one honest day in ten tightens too often to mean anything
VERDICTS_SUFFIX = "_verdicts.jsonl"


class MonitorError(UserError):
    """Days, labels or a monitor.json that cannot be used (names the file, day or mission and what to do)."""


# --------------------------------------------------------------------------------------------------------------
# Reading days and labels
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Day:
    name: str
    folder: Path
    verdicts: dict[str, list[dict]] = field(default_factory=dict)   # mission -> verdict lines


def verdict_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(f"*{VERDICTS_SUFFIX}"))


def operating_points_of(folder: Path) -> set:
    """The operating point digests a day folder's verdict lines name."""
    digests = set()
    for path in verdict_files(folder):
        try:
            for _, rec in iter_jsonl(path):
                digests.add(rec.get("operating_point"))
        except JsonlError as exc:
            raise MonitorError(f"{exc}: a verdict file the judge did not finish or that was edited; rerun the judge "
                               f"on that day (it resumes and repairs a torn last line)") from None
    return digests


def read_days(folders: list[Path], op_digest: str, registry) -> list[Day]:
    """The days, each checked: the folder exists, holds verdict files, and every line names this operating point."""
    days: list[Day] = []
    seen: dict = {}
    given: dict = {}
    for folder in map(Path, folders):
        if not folder.is_dir():
            raise MonitorError(f"day folder {printable_path(str(folder))} does not exist: give the folders the judge "
                               f"wrote (--output_dir of python -m stage_b.judge), or --days_under their parent")
        if undecodable(folder.name):   # the day's name goes into monitor.json, its page and every message
            raise MonitorError(f"day folder {printable_path(str(folder))} is not named in UTF-8 (a name made on a GBK "
                               f"or other system): rename it, e.g. to its date (2026-11-27), and run again")
        real = folder.resolve()   # a symlink or a second spelling of a folder is the same day
        if real in given:
            raise MonitorError(f"day folder {folder} is {given[real]} given again (the same folder): a day counts "
                               f"once; give each day folder once")
        given[real] = str(folder)
        files = verdict_files(folder)
        if not files:
            raise MonitorError(f"day folder {folder} holds no *{VERDICTS_SUFFIX}: is it a judge's output folder?")
        other = operating_points_of(folder) - {op_digest}
        if other:
            raise MonitorError(f"day folder {folder} was judged at another operating point (sha256 "
                               f"{', '.join(str(d)[:12] for d in sorted(other, key=str))}…, "
                               f"this one {op_digest[:12]}…):"
                               f" live evidence of two rules is never mixed; monitor each operating point's days "
                               f"separately, or use --days_under to take only this one's")
        day = Day(folder.name, folder)
        for path in files:
            for line_no, rec in iter_jsonl(path):
                if rec.get("gold"):   # a known-answer check (stage_b.labels.gold), not the day's work
                    continue
                problem = verdict_line_problem(rec)
                if problem:   # fails closed: a line the guard cannot read stops it, named
                    raise MonitorError(f"{path}:{line_no}: {problem}: not a line the judge wrote; rerun the judge on "
                                       f"that day with --overwrite, or restore the file")
                key = (rec.get("mission"), rec.get("group_id"))
                if key in seen:   # a work order judged again on a later day counts on the first
                    continue
                seen[key] = day.name
                try:
                    mission = registry.resolve(rec["mission"]).name
                except Exception:   # noqa: BLE001 - a mission the registry no longer knows: named, not counted
                    print(f"note: {path}: mission {rec.get('mission')!r} is not in the registry; not monitored",
                          file=sys.stderr)
                    continue
                day.verdicts.setdefault(mission, []).append(rec)
        days.append(day)
    check_order(days)
    return days


def first_judged(day: Day) -> str | None:
    """When the day's first verdict line was written (created_at, UTC ISO text), if its lines say."""
    times = [v["created_at"] for lines in day.verdicts.values() for v in lines if isinstance(v.get("created_at"), str)]
    return min(times) if times else None


def check_order(days: list[Day]) -> None:
    """Days in the order they were judged: the detectors and the tightened share read them in order, so a day given
    before one judged earlier is refused, naming both (a resumed day may run late; only its first line counts)."""
    previous = None
    for day in days:
        first = first_judged(day)
        if first is None:
            continue
        if previous is not None and first < previous[1]:
            raise MonitorError(f"days out of order: {day.folder} was first judged at {first}, before {previous[0]} "
                               f"({previous[1]}), which is given before it; give the day folders in the order they "
                               f"were judged (--days_under takes them by name: name them by date)")
        previous = (day.folder, first)


def days_workload(days: list[Day], labels_dir: Path) -> dict:
    """{day: stage_b.rules.workload.day_workload} over each day folder's verdict lines as the judge wrote them (gold
    included: it is work for people), priced at the pace the labels' decisions log measured (or the stated default).
    What the page shows; nothing the guard decides reads it."""
    from stage_b.labels.decisions_log import LOG, read_log
    from stage_b.rules.workload import day_workload, measured_pace
    log, _ = read_log(labels_dir / LOG) if (labels_dir / LOG).is_file() else ([], "")
    pace = measured_pace(log)
    return {day.name: day_workload([rec for path in verdict_files(day.folder) for _, rec in iter_jsonl(path)], pace)
            for day in days}


def verdict_line_problem(rec: dict) -> str | None:
    """What a verdict line lacks that the guard reads (its group, verdict, p_fail, route, audit share), or None."""
    if not isinstance(rec.get("group_id"), str) or not isinstance(rec.get("mission"), str):
        return "no group_id or mission"
    if rec.get("verdict") not in (PASS, FAIL):
        return f"verdict {rec.get('verdict')!r} is neither {PASS} nor {FAIL}"
    p = rec.get("p_fail")
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        return f"p_fail {p!r} is not a probability"
    if "route" in rec and rec["route"] not in ("auto", "review", "audit"):
        return f"route {rec['route']!r} is not auto, review or audit"
    return None


def days_under(parent: Path, op_digest: str) -> list[Path]:
    """Every subfolder of `parent` judged at this operating point, by name; the others are named and skipped."""
    if not Path(parent).is_dir():
        raise MonitorError(f"--days_under {parent} does not exist")
    chosen = []
    for folder in sorted(p for p in Path(parent).iterdir() if p.is_dir() and verdict_files(p)):
        digests = operating_points_of(folder)
        if digests == {op_digest}:
            chosen.append(folder)
        elif op_digest in digests:   # fails closed: skipping it would drop this operating point's evidence too
            raise MonitorError(f"day folder {folder} holds verdicts of this operating point and of another "
                               f"({', '.join(str(d)[:12] for d in sorted(digests - {op_digest}, key=str))}…): a day "
                               f"is judged at one operating point; judge the other's groups into their own folder")
        else:
            print(f"note: {folder} was judged at another operating point: not monitored with this one",
                  file=sys.stderr)
    if not chosen:
        raise MonitorError(f"no day under {parent} was judged at this operating point")
    return chosen


class Labels(dict):
    """{(mission, group id): "pass" | "fail"}, and beside it `decided_at`: {key: the latest decision time behind the
    label} (when the evidence a label gives existed) and `unconfirmed`: {key: reviewer} for each "fail" that one
    reviewer alone gave and nobody confirmed (stage_b.labels.reviewer_quality.unconfirmed_fails)."""

    def __init__(self, statuses=(), decided_at: dict | None = None, unconfirmed: dict | None = None):
        super().__init__(statuses)
        self.decided_at = dict(decided_at or {})
        self.unconfirmed = dict(unconfirmed or {})


def read_labels(labels_dir: Path, registry, min_gold_accuracy: float = DEFAULT_MIN_GOLD_ACCURACY) -> Labels:
    """{(mission, group id): "pass" | "fail"} from the decisions log stage_b.labels.decisions keeps (reviewers' latest
    decisions; conflicts and unsure label nothing), with each label's decision time and the fails nobody confirmed:
    neither a second reviewer nor the one who gave it, measured on the whole log against the bar 1 -
    `min_gold_accuracy` (Labels; stage_b.labels.reviewer_quality)."""
    from stage_b.labels.decisions import resolve
    from stage_b.labels.decisions_log import LOG, DecisionsLogError, read_log
    from stage_b.labels.reviewer_quality import bar_of, confirmers, reviewer_table, unconfirmed_fails
    log_path = Path(labels_dir) / LOG
    if not Path(labels_dir).is_dir():
        raise MonitorError(f"labels folder {labels_dir} does not exist: give the --output_dir of python -m "
                           f"stage_b.labels.decisions (an empty folder if nothing is decided yet)")
    try:
        log, _ = read_log(log_path)   # the chain is checked: an edited decision moves no bound
    except (JsonlError, DecisionsLogError) as exc:
        raise MonitorError(f"{exc} (the decisions log is damaged: the monitor cannot vouch for any promise)") from None
    groups = {key: g for key, g in resolve(log).items() if g["status"] in ("pass", "fail")}
    trusted = confirmers(reviewer_table(resolve(log, gold=True), log, bar_of(min_gold_accuracy)))
    return Labels({key: g["status"] for key, g in groups.items()},
                  {key: max(d["decided_at"] for d in g["decisions"]) for key, g in groups.items()},
                  unconfirmed_fails(groups, trusted))


# --------------------------------------------------------------------------------------------------------------
# Building monitor.json
# --------------------------------------------------------------------------------------------------------------
def day_counts(name: str, verdicts: list[dict], labels: dict, mission: str) -> dict:
    """One mission's day as counts: judged, automation, audits, escapes, the defects the miss rate's evidence counts,
    reviewer agreement (module doc; stage_b.monitoring.inspection reads them)."""
    routes = [route_of_record(v) for v in verdicts]
    unconfirmed = getattr(labels, "unconfirmed", {})
    label = [labels.get((mission, v["group_id"])) for v in verdicts]
    audited = [(v, lab) for v, r, lab in zip(verdicts, routes, label) if r == AUDIT]
    # an escape one reviewer alone found waits for a second person (or a measured one): it moves no bound yet
    waiting = [{"group_id": v["group_id"], "reviewer": unconfirmed[(mission, v["group_id"])]} for v, lab in audited
               if v["verdict"] == PASS and lab == "fail" and (mission, v["group_id"]) in unconfirmed]
    pending = {w["group_id"] for w in waiting}
    audited_passed = [lab for v, lab in audited if v["verdict"] == PASS and lab is not None
                      and v["group_id"] not in pending]
    reviewed = [(v, lab) for v, r, lab in zip(verdicts, routes, label) if r == REVIEW and lab is not None]
    agreed = sum((lab == "fail") == (v["verdict"] == FAIL) for v, lab in reviewed)
    auto = sum(r != REVIEW for r in routes)
    drawn_at = [share_of(v) for v, r in zip(verdicts, routes) if r != REVIEW]
    shares = [s for s in drawn_at if s is not None]
    return {"day": name, "judged": len(verdicts), "auto_decided": auto,
            "automation_share": auto / len(verdicts) if verdicts else None, "audited": len(audited),
            "auto_passed": sum(r != REVIEW and v["verdict"] == PASS for v, r in zip(verdicts, routes)),
            "audits_labelled": sum(lab is not None for _, lab in audited),
            "audited_auto_passed": len(audited_passed), "escapes": sum(lab == "fail" for lab in audited_passed),
            "escapes_unconfirmed": len(waiting), "unconfirmed": waiting,
            "audited_auto_failed": sum(v["verdict"] == FAIL for v, _ in audited),
            "audited_auto_failed_defects": sum(v["verdict"] == FAIL and lab == "fail" for v, lab in audited),
            "reviewed_labelled": len(reviewed), "reviewed_defects": sum(lab == "fail" for _, lab in reviewed),
            "agreed": agreed, "agreement": agreed / len(reviewed) if reviewed else None,
            "audit_share": min(shares) if shares else None}


def share_of(verdict: dict) -> float | None:
    """The audit share a decided-without-review verdict was drawn at (its audit_probability; older lines: the run's
    audit_share)."""
    for key in ("audit_probability", "audit_share"):
        value = verdict.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0.0 <= value <= 1.0:
            return float(value)
    return None


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


def pooled(day_verdicts: list[list[dict]], mission: str) -> dict:
    """A drift reference made of judged days (after a clean tightened run): their p_fails and defect summaries."""
    lines = [v for day in day_verdicts for v in day]
    return {"p_fail": sorted(v["p_fail"] for v in lines),
            "defect_groups": sum(bool(defect_photos(v.get("summaries") or [], mission)) for v in lines),
            "groups": len(lines)}


def mission_monitor(mission: str, entry: MissionPoint | None, days: list[Day], labels: dict, delta: float,
                    alpha: float, false_alarm_years: float, clean_days: int = TIGHTENED_CLEAN_DAYS) -> dict:
    """One mission's entry of monitor.json: the promise, each day with its counts, bounds, detectors, inspection
    state, status and next audit share (stage_b.monitoring.monitor_replay)."""
    promise = promise_of(entry, false_alarm_years, clean_days)
    bounds = bounds_for(promise.escape_rate, delta)
    profile = entry.profile if entry is not None else None
    verdicts = [day.verdicts.get(mission, []) for day in days]
    rows = [day_counts(day.name, v, labels, mission) for day, v in zip(days, verdicts)]

    def drift_for(i: int, reference: tuple | None) -> dict:
        against = profile if reference is None else pooled(verdicts[reference[0]:reference[1] + 1], mission)
        defect = sum(bool(defect_photos(v.get("summaries") or [], mission)) for v in verdicts[i])
        return drift([v["p_fail"] for v in verdicts[i]], defect, against, alpha, against="validation"
                     if reference is None else f"days {rows[reference[0]]['day']}-{rows[reference[1]]['day']}")
    rows = replay(rows, promise, bounds, drift_for)
    last = rows[-1] if rows else None
    ref = last["drift_reference"] if last else None
    against = None
    if ref:   # what the judge tests today's Stage-A summaries against (stage_b.monitoring.day_shares)
        pool = pooled(verdicts[ref[0]:ref[1] + 1], mission)
        against = {"groups": pool["groups"], "defect_groups": pool["defect_groups"],
                   "days": [rows[ref[0]]["day"], rows[ref[1]]["day"]]}
    return {"certified": promise.certified,
            "promise": {"escape_rate": promise.escape_rate, "miss_rate": promise.miss_rate,
                        "caught_share": promise.caught_share, "auto_pass_share": promise.auto_pass_share,
                        "confidence": 1 - delta, "prior": list(bounds.prior), "alarm_level": promise.alarm_level,
                        "text": entry.promise if entry is not None else None},
            "days": rows, "status": last["status"] if last else UNVERIFIED,
            "why": last["why"] if last else "no day yet",
            "state": last["state"] if last else (NORMAL if promise.certified else NOT_CERTIFIED),
            "state_why": last["state_why"] if last else "no day yet",
            "next_audit_share": last["next_audit_share"] if last else None,
            "withdrawn_day": next((r["day"] for r in rows if r["withdrawn_here"]), None), "drift_against": against}


def withdrawal_time(mission: str, withdrawn_day: str | None, days: list[Day], labels) -> str | None:
    """When the evidence that withdrew a promise was complete: the latest decision time among the mission's labels on
    the days up to the one that broke it. A label decided after it is new evidence (a re-certification may rest on
    it), however late the monitor runs or how often it is run again; None without label times."""
    times = getattr(labels, "decided_at", {})
    names = [d.name for d in days]
    upto = days[:names.index(withdrawn_day) + 1] if withdrawn_day in names else days
    seen: list[str] = [times[(mission, v["group_id"])] for d in upto for v in d.verdicts.get(mission, [])
                       if (mission, v["group_id"]) in times]
    return max(seen, default=None)


def build_monitor(op: OperatingPoint, op_path, op_digest: str, days: list[Day], labels: dict, alpha: float,
                  labels_dir=None, false_alarm_years: float = DEFAULT_FALSE_ALARM_YEARS,
                  clean_days: int = TIGHTENED_CLEAN_DAYS) -> dict:
    """monitor.json's content (module doc)."""
    confidence = (op.family or {}).get("per_claim_confidence") or op.confidence
    assert confidence is not None   # load_operating_point checks it
    delta = 1 - confidence
    missions = sorted(set(op.missions) | {m for d in days for m in d.verdicts})
    out: dict = {"format": MONITOR_FORMAT, "operating_point": {"file": str(op_path), "sha256": op_digest},
           "confidence": 1 - delta, "drift_alpha": alpha, "false_alarm_years": false_alarm_years,
           "tightened_clean_days": clean_days,
           "days": [d.name for d in days], "day_folders": [str(d.folder) for d in days],
           "labels": str(labels_dir) if labels_dir else None, "created_at": utc_now(), "missions": {}}
    for mission in missions:
        m = mission_monitor(mission, op.missions.get(mission), days, labels, delta, alpha, false_alarm_years,
                            clean_days)
        if m["status"] == WITHDRAWN:   # dated by its evidence, not by when this monitor ran
            m["withdrawn_at"] = withdrawal_time(mission, m["withdrawn_day"], days, labels) or out["created_at"]
        out["missions"][mission] = m
    promised = [m for m, e in out["missions"].items() if e["certified"]]
    family = dict(op.family or {})
    targets = [e.target_miss_rate for e in op.missions.values() if e.target_miss_rate]
    out["family"] = {**family, "text": family_text(family, min(targets, default=None)) if family else None,
                     "holding": [m for m in promised if out["missions"][m]["status"] == HOLDS],
                     "withdrawn": [m for m in promised if out["missions"][m]["status"] == WITHDRAWN]}
    return out


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
        raise MonitorError(f"{path} is not a monitor.json of format {MONITOR_FORMAT}: write it with python -m "
                           f"stage_b.monitoring.monitor")
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
        raise MonitorError(f"{path} is not a monitor.json stage_b.monitoring.monitor wrote ({type(exc).__name__}: "
                           f"{exc}); write "
                           f"it again with python -m stage_b.monitor") from None
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
                               f"python -m stage_b.monitor")
        d = row["drift"]
        fired = any(x is not None and x < alpha for x in (d.get("ks_p"), d.get("defect_p")))
        if fired != bool(d.get("fired")) or any(x is not None and not 0 <= x <= 1 for x in (d.get("ks_p"),
                                                                                              d.get("defect_p"))):
            raise MonitorError(f"{path}: {mission}, day folder {row['day']!r}: the drift verdict does not follow "
                               f"from its p-values; the file was edited: write it again with python -m stage_b.monitor")
    # escapes_unconfirmed: a file written before confirmation counted had none waiting
    replayed = replay([{k: row.get(k, 0) if k == "escapes_unconfirmed" else row[k] for k in COUNT_KEYS}
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
                                   f"with python -m stage_b.monitor")
    last = replayed[-1] if replayed else None
    for key, value in (("status", last["status"] if last else UNVERIFIED),
                       ("state", last["state"] if last else m.get("state")),
                       ("next_audit_share", last["next_audit_share"] if last else m.get("next_audit_share"))):
        if m.get(key) != value:
            raise MonitorError(f"{path}: {mission}: {key} {m.get(key)!r} is not its last day's ({value!r}); the file "
                               f"was edited: write it again with python -m stage_b.monitor")


COUNT_KEYS = ("day", "judged", "auto_passed", "audit_share", "audited_auto_passed", "escapes",
              "audited_auto_failed_defects", "reviewed_defects", "escapes_unconfirmed")


def load_monitor(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise MonitorError(f"monitor file {path} does not exist: write it with python -m stage_b.monitor, or leave "
                           f"--monitor out")
    try:
        monitor = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise MonitorError(f"cannot read monitor file {path}: {exc}") from None
    return check_monitor(monitor, path)


def withdrawals(monitor: dict, path, op: OperatingPoint, op_digest: str | None) -> dict[str, str]:
    """{mission: why} for the missions whose promise stays withdrawn for a judge at operating point `op`: every
    mission the monitor withdrew, when it monitored this operating point; when it monitored another, those whose
    entry here was not certified on labels decided after the withdrawal (stage_a.evidence_through)."""
    out = {}
    same = monitor["operating_point"]["sha256"] == op_digest
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


def unaccounted(monitor: dict, path, op: OperatingPoint) -> dict[str, str]:
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
                            f"held (the guard fails closed); write the monitor again with python -m stage_b.monitor")
    return out


# --------------------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------------------
def check_alpha(value) -> float:
    try:
        alpha = float(value)
    except (TypeError, ValueError):
        raise MonitorError(f"--drift_alpha {value!r} is not a number; use a level above 0 and at most "
                           f"{MAX_DRIFT_ALPHA}, e.g. 0.001") \
            from None
    if math.isnan(alpha) or not 0.0 < alpha <= MAX_DRIFT_ALPHA:
        raise MonitorError(f"--drift_alpha {value!r} is out of range: use a level above 0 and at most "
                           f"{MAX_DRIFT_ALPHA} (the false alarm rate of each drift test per mission and day; a drift "
                           f"alarm tightens inspection), e.g. 0.001")
    return alpha


def check_clean_days(value) -> int:
    try:
        days = int(str(value).strip())
    except ValueError:
        raise MonitorError(f"--tightened_clean_days {value!r} is not a whole number of days; use e.g. "
                           f"{TIGHTENED_CLEAN_DAYS}") from None
    if not 1 <= days <= 60:
        raise MonitorError(f"--tightened_clean_days {value!r} is out of range: use 1 to 60 days, e.g. "
                           f"{TIGHTENED_CLEAN_DAYS}")
    return days


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m stage_b.monitor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--operating_point", required=True, help="the operating_point.json the days were judged at")
    days = p.add_mutually_exclusive_group(required=True)
    days.add_argument("--verdicts", nargs="+", help="day folders of verdict files (python -m stage_b.judge), in order")
    days.add_argument("--days_under", help="a folder of day folders: those judged at this operating point, by name")
    p.add_argument("--labels", required=True, help="the labels folder python -m stage_b.decisions writes")
    p.add_argument("--output_dir", required=True, help="where monitor.json, monitor.png and index.html go")
    p.add_argument("--drift_alpha", default=str(DEFAULT_DRIFT_ALPHA),
                   help="level of each drift test per mission and day (default %(default)s); drift only tightens "
                        "inspection")
    p.add_argument("--tightened_clean_days", default=str(TIGHTENED_CLEAN_DAYS),
                   help="tightened days in a row whose audits bring no evidence against the promise that return a "
                        "mission to normal inspection (ISO 2859-1: 5; default %(default)s)")
    p.add_argument("--false_alarm_years", default=str(DEFAULT_FALSE_ALARM_YEARS),
                   help="the miss-rate detector's average years between false withdrawals of one mission while its "
                        "promise holds (stage_b.stats.detector; default %(default)s)")
    p.add_argument("--min_gold_accuracy", default=str(DEFAULT_MIN_GOLD_ACCURACY),
                   help="the bar of stage_b.labels.decisions (default %(default)s): an escape one reviewer alone "
                        "found moves "
                        "a bound once a second reviewer confirms it, or when that reviewer's measured error rate is "
                        "below 1 - this at the reviewer table's confidence")
    args = p.parse_args(argv)
    return run_cli(lambda: _monitor(args))


def _monitor(args) -> int:
    from qc_core.missions import load_registry
    alpha = check_alpha(args.drift_alpha)
    years = check_false_alarm_years(args.false_alarm_years)
    clean_days = check_clean_days(args.tightened_clean_days)
    op = load_operating_point(args.operating_point)
    digest = file_sha256(args.operating_point)
    registry = load_registry()
    folders = [Path(f) for f in args.verdicts] if args.verdicts else days_under(Path(args.days_under), digest)
    days = read_days(folders, digest, registry)
    labels = read_labels(Path(args.labels), registry, check_min_gold_accuracy(args.min_gold_accuracy))
    monitor = build_monitor(op, args.operating_point, digest, days, labels, alpha, args.labels, years, clean_days)
    monitor["workload"] = days_workload(days, Path(args.labels))
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    from stage_b.monitoring.monitor_page import write_outputs
    page = write_outputs(monitor, json.dumps(monitor, ensure_ascii=False, indent=2), out)
    from stage_b.rules.withdrawals import record, withdrawals_path
    newly = record(args.operating_point, digest, monitor, out / "monitor.json")
    print_days(monitor)
    if newly:   # where every judge at this operating point finds it, whatever monitor it is given
        print(f"withdrawal of {', '.join(newly)} recorded beside the operating point: "
              f"{withdrawals_path(args.operating_point)}")
    print(f"monitor: {out / 'monitor.json'}; page {page}")
    return 0


def print_days(monitor: dict) -> None:
    """Per mission and day: inspection state and audit share, audits, escapes, the detectors, the live escape bound,
    status."""
    from stage_b.labels.decisions import printable
    for mission, m in monitor["missions"].items():
        p = m["promise"]
        print(f"{mission}: signed miss rate <= {pct(p['miss_rate'])} (its detector withdraws at {p['alarm_level']:g});"
              f" escape rate of auto-passed groups <= {pct(p['escape_rate'])} (tightens)"
              f"{'' if m['certified'] else ' (not certified)'}")
        for d in m["days"]:
            print(f"  {d['day']}: {d['judged']} judged, automation {pct(d['automation_share'])}, audit share "
                  f"{pct(d['audit_share'])}, {d['audited']} audited ({d['audited_auto_passed']} auto-passed labelled, "
                  f"{d['escapes']} escapes), miss detector {d['miss_detector']:.3g}, escape detector "
                  f"{d['escape_detector']:.3g}, live escape bound [{pct(d['escape_lower'])}, "
                  f"{pct(d['escape_upper'])}], drift {'FIRED' if d['drift']['fired'] else 'no'} -> {d['state']}, "
                  f"{d['status']}; next audit share {pct(d['next_audit_share'])}")
            if d.get("share_note"):
                print(f"    note: {d['share_note']}")
            for w in d.get("unconfirmed") or []:
                print(f"    escape waiting for a second person: group {printable(w['group_id'])} was decided 不通过 "
                      f"by {printable(w['reviewer'])} alone; it moves no bound until another reviewer decides it too "
                      f"(or {printable(w['reviewer'])}'s measured error rate meets the bar: stage_b.labels.decisions)")
        print(f"  state: {m['state']}: {m['state_why']}")
        print(f"  status: {m['status']}: {m['why']}")
    if monitor["family"].get("text"):
        print(f"all together: {monitor['family']['text']}; holding: {', '.join(monitor['family']['holding']) or 'none'}"
              f"; withdrawn: {', '.join(monitor['family']['withdrawn']) or 'none'}")


if __name__ == "__main__":
    sys.exit(main())
