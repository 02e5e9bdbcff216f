"""`group-qc plan-audits`: the audit share each mission needs for its live guard to see a rise of the
escape rate within the days the QC owner allows, and what it costs. Pure core (numpy, scipy).

    group-qc plan-audits --operating_point operating_point.json --groups_per_day 150 [MISSION=N …]
                         [--detect R] [--within_days 2] [--quantile 0.5] [--false_alarm_years 10]
                         [--seconds_per_decision 30]

Per mission it prints the groups passed without review a day, the audit share needed to withdraw the promise within
--within_days days after the escape rate of auto-passed groups rises to R (in half of the rises: the median; the 90th
percentile beside it; --quantile 0.9 plans for the 90th percentile instead), the expected false withdrawals per
year while the promise holds (at most 1 / --false_alarm_years: the detector's guarantee, stage_b.stats.detector), the
reviewer hours a day the audits cost at --seconds_per_decision, and how many days of clean audits the promise needs
to `hold` (stage_b.monitoring.monitor's confidence sequence).

How the days are found: by simulation (seeded) through the live guard's own code (stage_b.monitoring.simulate_days: the
judge's share for the day, the monitor's replay and drift test), 200 runs per share, on work shaped like the mission's
validation groups (the operating point's counts: defective groups, escapes and auto-passed groups, the groups the rule
auto-fails), with defects only a person sees added among the clean-looking groups until the escape rate is R. The
shares tried run from 1% to 100%; the smallest whose quantile of days is within the days is the plan.

`group-qc judge --audit_share plan` (judge.sh audit_share=plan) plans each mission's share for today's
volume with the defaults (R = DETECT_FACTOR x the promised escape rate, within DEFAULT_WITHIN_DAYS days).
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, replace

from qc_core.errors import UserError
from qc_core.exits import run_cli

from stage_b.stats.detector import DEFAULT_FALSE_ALARM_YEARS, check_false_alarm_years
from stage_b.rules.operating_point import MissionPoint, load_operating_point, point_keys
from stage_b.monitoring.live_promise import bounds_for, promise_of
from stage_b.monitoring.simulate_days import WorkMix, run_mission, validation_of
from stage_b.contract.bounds import in_range
from stage_b.labels.agreement import DEFAULT_MIN_GOLD_ACCURACY
from stage_b.labels.gold import DEFAULT_GOLD_SHARE
from stage_b.labels.reviewer_quality import bar_of, gold_to_decide
from stage_b.rules.withdrawals import recorded
from stage_b.stats.certify import DEFAULT_CONFIDENCE
from stage_b.stats.confidence_sequence import audits_needed

DEFAULT_WITHIN_DAYS = 2
DETECT_FACTOR = 6.0           # the default rise to see: six times the promised escape rate (2.5% -> 15%) ...
DETECT_AT_MOST = 0.5          # ... or, where that is past half of the auto-passed work, half of it (a rate that can
                              # happen), at least twice the promise


def default_detect(r: float) -> float:
    """The default rise to see (DETECT_FACTOR x the promised rate r, or DETECT_AT_MOST where that is more, but never
    less than 2 x r; under 0.99)."""
    return min(0.99, max(min(DETECT_FACTOR * r, DETECT_AT_MOST), 2 * r))
DEFAULT_SECONDS_PER_DECISION = 30.0   # a stated default pace of one reviewer decision on a blind audit
SHARES = (0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)
RUNS = 200
DEFAULT_QUANTILE = 0.5   # plan for the median rise: seen within the days in half of the runs (p90 printed beside)
SEED = 20261128


class PlanError(UserError):
    """A planner setting or operating point that cannot be planned for (names it and what to give instead)."""


def mix_of(entry: MissionPoint) -> WorkMix:
    """The mission's validation work as a WorkMix (module doc): from the entry's counts and its p_fail profile."""
    extra, escape, profile = entry.extra, entry.escape or {}, entry.profile or {}
    n, n_fail = extra.get("n"), entry.n_fail
    if not isinstance(n, int) or not n or not n_fail or n_fail >= n or not escape.get("auto_passed"):
        raise PlanError("the mission's entry holds no validation counts to plan from (n, n_fail, escape): "
                        "recompute the operating point with group-qc evaluate")
    n_pass = n - n_fail
    auto_failed = sum(entry.decide(p).automatic and entry.decide(p).verdict == "不通过"
                      for p in profile.get("p_fail") or [])
    over = entry.auto_overkills or 0
    defect_share = n_fail / n
    shown = (profile.get("defect_groups") or 0) / max(1, profile.get("groups") or n)
    seen_shows = min(1.0, shown / defect_share)
    clean_shows = max(0.0, shown - defect_share) / (1 - defect_share)
    return WorkMix(defect_share=defect_share,
                   defective_routes=(escape["escapes"] / n_fail, min(1 - escape["escapes"] / n_fail,
                                                                      max(0, auto_failed - over) / n_fail)),
                   clean_routes=((escape["auto_passed"] - escape["escapes"]) / n_pass, over / n_pass),
                   summary_shows_defect=(seen_shows, clean_shows))


def rise_to(mix: WorkMix, escape_rate: float) -> WorkMix:
    """The mix with defects only a person sees added among clean-looking groups until the escape rate is R."""
    seen_ap = mix.defect_share * mix.defective_routes[0]
    clean_ap = (1 - mix.defect_share) * mix.clean_routes[0]
    hidden = (escape_rate * (seen_ap + clean_ap) - seen_ap) / clean_ap if clean_ap else 0.0
    return replace(mix, hidden_share=min(1.0, max(0.0, hidden)))


@dataclass(frozen=True)
class Plan:
    mission: str
    groups_per_day: int
    auto_passed_per_day: float
    detect: float
    within_days: int
    share: float | None             # None: not even every group audited sees it in time
    median_days: float | None
    p90_days: float | None
    false_withdrawals_per_year: float
    reviewer_hours_per_day: float | None
    clean_days_to_hold: float | None
    why: str = ""
    promised: float | None = None   # the promised escape rate the rise starts from


def plan_mission(mission: str, entry: MissionPoint, groups: int, detect: float | None, within_days: int,
                 false_alarm_years: float, seconds_per_decision: float, delta: float,
                 drift_alpha: float = 0.001, quantile: float = DEFAULT_QUANTILE) -> Plan:
    """The plan of one mission (module doc)."""
    if not entry.certified:
        raise PlanError(f"{mission} is not certified: every group goes to review and nothing is audited")
    promise = promise_of(entry, false_alarm_years)
    r = promise.escape_rate
    if r is None:
        raise PlanError(f"{mission}: the operating point states no escape rate of auto-passed groups (the rule passed "
                        f"no validation group without review): there is nothing to audit")
    detect = default_detect(r) if detect is None else detect
    if detect <= r:
        raise PlanError(f"--detect {detect:g} is at or below {mission}'s promised escape rate {r:.3g}: nothing to "
                        f"detect (the promise allows it); give a rate above {r:.3g}, e.g. "
                        f"{default_detect(r):.3g}")
    promised = r
    mix = mix_of(entry)
    auto_passed = groups * mix.auto_pass_share
    auto_decided = groups * (mix.defect_share * sum(mix.defective_routes)
                             + (1 - mix.defect_share) * sum(mix.clean_routes))
    chosen, days = plan_for_mix(mix, promise, groups, detect, within_days, delta, drift_alpha, quantile)
    bounds = bounds_for(r, delta)
    needed = audits_needed(0, 0, r, bounds.prior, delta)
    if chosen is None or days is None:
        return Plan(mission, groups, auto_passed, detect, within_days, None, None, None, 1 / false_alarm_years, None,
                    None, f"not even every group audited withdraws within {within_days} days in {100 * quantile:.3g}% "
                          f"of runs: allow more days, or judge more groups a day", promised)
    floor = "" if chosen > SHARES[0] else (
        f"{100 * SHARES[0]:g}% is the smallest share planned and already enough: it audits "
        f"{chosen * auto_decided:,.0f} groups a day, more than this rise needs at {groups:,} groups a day (fewer "
        f"audits a day would do; the priced hours are the floor's)")
    return Plan(mission, groups, auto_passed, detect, within_days, chosen, at_quantile(days, 0.5),
                at_quantile(days, 0.9), 1 / false_alarm_years,
                chosen * auto_decided * seconds_per_decision / 3600,
                needed / (chosen * auto_passed) if needed is not None and auto_passed else None, floor, promised)


def plan_for_mix(mix: WorkMix, promise, groups: int, detect: float, within_days: int, delta: float,
                 drift_alpha: float = 0.001, quantile: float = DEFAULT_QUANTILE
                 ) -> tuple[float | None, list[int] | None]:
    """(the smallest share of SHARES whose simulated `quantile` of days to withdrawal, after the escape rate rises to
    `detect` on day 1, is within `within_days`; the sorted days of its runs, each followed up to horizon(within_days)
    days, horizon + 1 for a run that never withdrew). (None, None) if none is. A share is given up as soon as too many
    of its runs have missed the days."""
    import numpy as np
    risen = rise_to(mix, detect)
    rng = np.random.default_rng(SEED)
    reference = validation_of(mix)
    days = horizon(within_days)
    allowed_misses = RUNS - math.ceil(quantile * RUNS)
    for share in SHARES:
        runs = []
        for _ in range(RUNS):
            rows = run_mission([risen] * days, groups, share, promise, reference, delta, drift_alpha, rng)
            runs.append(next((int(x["day"]) for x in rows if x["withdrawn_here"]), days + 1))
            if sum(d > within_days for d in runs) > allowed_misses:
                break
        if len(runs) == RUNS:
            return share, sorted(runs)
    return None, None


def horizon(within_days: int) -> int:
    """How many days a planner's run is followed: enough for a 90th percentile a few times the days allowed."""
    return max(10, 3 * within_days)


def at_quantile(sorted_days: list[int], quantile: float) -> int:
    """The day by which `quantile` of the runs had withdrawn."""
    return sorted_days[max(0, math.ceil(quantile * len(sorted_days)) - 1)]


def parse_groups(values: list[str], missions: list[str]) -> dict[str, int]:
    """--groups_per_day 150 BBU接地线检查=300: a default and per-mission numbers, each a whole number >= 1."""
    default: int | None = None
    out: dict[str, int] = {}
    for value in values:
        mission, _, number = value.rpartition("=")
        try:
            n = int(number)
        except ValueError:
            raise PlanError(f"--groups_per_day {value!r} is not a whole number of groups a day; use e.g. 150 or "
                            f"{missions[0] if missions else 'MISSION'}=150") from None
        if n < 1:
            raise PlanError(f"--groups_per_day {value!r}: a day must hold at least 1 group; use e.g. 150")
        if mission:
            if mission not in missions:
                raise PlanError(f"--groups_per_day {value!r}: the operating point has no mission {mission!r} (it has "
                                f"{', '.join(missions)})")
            if mission in out:   # the last of two numbers would win without a word
                raise PlanError(f"--groups_per_day names {mission} twice ({out[mission]} and {n}): give it once")
            out[mission] = n
        else:
            default = n
    return {m: got for m in missions if (got := out.get(m, default)) is not None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc plan-audits", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--operating_point", required=True)
    p.add_argument("--groups_per_day", nargs="+", required=True,
                   help="groups judged a day: one number for every mission, and/or MISSION=N")
    p.add_argument("--detect", default=None, help=f"the escape rate of auto-passed groups to see (default "
                                                  f"{DETECT_FACTOR:g} x each mission's promised rate)")
    p.add_argument("--within_days", default=str(DEFAULT_WITHIN_DAYS), help="days allowed (default %(default)s)")
    p.add_argument("--quantile", default=str(DEFAULT_QUANTILE),
                   help="the share of rises to see within the days: 0.5 plans for the median, 0.9 for the 90th "
                        "percentile (default %(default)s)")
    p.add_argument("--false_alarm_years", default=str(DEFAULT_FALSE_ALARM_YEARS))
    p.add_argument("--seconds_per_decision", default=str(DEFAULT_SECONDS_PER_DECISION),
                   help="a reviewer's time per blind audit (default %(default)s s)")
    args = p.parse_args(argv)
    return run_cli(lambda: _plan(args))


def check_settings(args) -> tuple[float | None, int, float, float, float]:
    detect = None if args.detect is None else in_range(args.detect, "--detect", 1e-6, 0.99,
                                                       "an escape rate to see, e.g. 0.15", PlanError)
    try:
        days = int(args.within_days)
    except ValueError:
        raise PlanError(f"--within_days {args.within_days!r} is not a whole number of days; use e.g. 2") from None
    if not 1 <= days <= 365:
        raise PlanError(f"--within_days {args.within_days!r} is out of range: use 1 to 365 days, e.g. 2")
    seconds = in_range(args.seconds_per_decision, "--seconds_per_decision", 1, 3600, "seconds, e.g. 30", PlanError)
    quantile = in_range(args.quantile, "--quantile", 0.5, 0.99, "0.5 (the median) to 0.99, e.g. 0.9", PlanError)
    return detect, days, check_false_alarm_years(args.false_alarm_years), seconds, quantile


def _plan(args) -> int:
    detect, days, years, seconds, quantile = check_settings(args)
    op = load_operating_point(args.operating_point)
    confidence = (op.family or {}).get("per_claim_confidence") or op.confidence
    assert confidence is not None   # load_operating_point checks it
    delta = 1 - confidence
    groups = parse_groups(args.groups_per_day, sorted(op.missions))
    withdrawn = recorded(args.operating_point, point_keys(args.operating_point, op))   # beside the point
    plans = []
    for mission, n in groups.items():
        if mission in withdrawn:   # its groups all go to people: nothing to audit until it is certified again
            print(f"{mission}: WITHDRAWN ({withdrawn[mission].get('why')}): every group goes to people, no audit to "
                  f"plan until an operating point certified on later labels replaces this one")
            continue
        try:
            plans.append(plan_mission(mission, op.missions[mission], n, detect, days, years, seconds, delta,
                                      quantile=quantile))
        except PlanError as exc:
            print(f"{mission}: {exc}")
    print(table(plans))
    for p in plans:
        if p.share is not None and p.why:
            print(f"{p.mission}: {p.why}")
    print(gold_days(sum(groups.values())))
    return 0


def gold_days(groups_per_day: int, gold_share: float | None = None) -> str:
    """How soon gold measures a reviewer at the day's volume: the known-answer checks a day at the judge's default
    gold share (stage_b.labels.gold), and the right answers in a row that show a reviewer meets the bar
    (stage_b.labels.reviewer_quality.gold_to_decide, at the reviewer table's confidence)."""
    share = DEFAULT_GOLD_SHARE if gold_share is None else gold_share
    per_day = math.ceil(share * groups_per_day) if share > 0 else 0
    needed = gold_to_decide(0, 0, bar_of(DEFAULT_MIN_GOLD_ACCURACY), DEFAULT_CONFIDENCE, DEFAULT_CONFIDENCE)
    if not per_day or needed is None:
        return "reviewers: no gold a day at this share: no reviewer is measured on known answers"
    days = math.ceil(needed / per_day)
    return (f"reviewers: gold at {100 * share:g}% of {groups_per_day:,} groups a day is {per_day} known-answer "
            f"check(s) a day; a reviewer right on {needed} in a row meets the bar at {100 * DEFAULT_CONFIDENCE:g}% "
            f"confidence: about {days} day{'s' if days != 1 else ''} for a reviewer who decides every gold card "
            f"({days} x k days when k reviewers share them)")


def table(plans: list[Plan]) -> str:
    head = ("mission", "groups/day", "auto-passed/day", "escape rate rise to see", "share", "days (median, p90)",
            "false withdrawals/year", "reviewer h/day", "clean days to hold")
    rows = [head] + [(p.mission, str(p.groups_per_day), f"{p.auto_passed_per_day:.0f}", _rise(p),
                      f"{100 * p.share:.3g}%" if p.share is not None else "none",
                      f"{_days(p.median_days, p.within_days)}, {_days(p.p90_days, p.within_days)}"
                      if p.share is not None else p.why,
                      f"<= {p.false_withdrawals_per_year:.3g}",
                      f"{p.reviewer_hours_per_day:.2f}" if p.reviewer_hours_per_day is not None else "-",
                      f"{p.clean_days_to_hold:.1f}" if p.clean_days_to_hold is not None else "-") for p in plans]
    return "\n".join("| " + " | ".join(r) + " |" for r in rows[:1] + [tuple("---" for _ in head)] + rows[1:])


def _rise(p: Plan) -> str:
    """The rise in words: "from 2.5% to 15% (6x)", the rate of auto-passed groups that are defective."""
    if p.promised:
        return f"from {100 * p.promised:.3g}% to {100 * p.detect:.3g}% ({p.detect / p.promised:.2g}x)"
    return f"to {100 * p.detect:.3g}%"


def _days(day: float | None, within_days: int) -> str:
    return f"> {horizon(within_days)}" if day is not None and day > horizon(within_days) else str(day)


if __name__ == "__main__":
    sys.exit(main())
