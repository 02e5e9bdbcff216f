"""A day's workload and what it costs, per mission, from its verdict lines: what the judge's summary, the review
page's index and the monitor's page show a QC owner. Pure (stdlib).

Per mission and day (`day_workload`):

    decided without a person   route auto (the rule decided it, no audit drew it)
    to people                  route review (the whole mission, or the group's own p_fail or reply), route audit
                               (a blind audit of a group the rule decided), gold (a known-answer check,
                               stage_b.labels.gold)
    decisions                  each group to people once per reviewer assigned to it (an overlap group is decided
                               twice), at least once
    person-hours               decisions x the pace / 3600; `audit_hours` is the blind audits' part
    why to review              how many groups went to review for each reason class (REASONS, the first reason of
                               each group: the mission's own reason comes first), so a day whose automation falls
                               short of validation's says why (a withdrawn promise, a rule that automates nothing, a
                               busy review band)

The pace: the median on-screen seconds per decision that the review pages measured and the import kept (each
decision's `history`, `on_screen_ms`, in the labels folder's decisions.jsonl) once at least MIN_MEASURED decisions
carry it; else DEFAULT_SECONDS_PER_DECISION (30 s, the audit planner's stated default). Every figure says which.
A decision shown for less than PACE_FLOOR_SECONDS (2 s: a card of photos cannot be looked at faster) is left out of
the measured pace and said so (a reviewer pressing a key every 0.3 s would otherwise price the next day at nothing);
the reviewer table names whoever decides at a median below it (reviewer_paces).
"""
from __future__ import annotations

import statistics
from typing import NamedTuple

from stage_b.contract.numbers import pct1

# as stage_b.monitoring.plan_audits: a stated default pace of one reviewer decision
DEFAULT_SECONDS_PER_DECISION = 30.0
MIN_MEASURED = 20                      # decisions with an on-screen time before the measured median is used
PACE_FLOOR_SECONDS = 2.0               # faster than this, a card with photos was not looked at
# (class, how a review_why entry starts): the first that matches names the reason; the rest is "other"
REASONS = (("promise withdrawn", "promise withdrawn"), ("promise not monitored", "promise not monitored"),
           ("weaker promise not accepted", "weaker promise not accepted"), ("mission not certified", "not certified"),
           ("no threshold", "no threshold"),
           ("p_fail in the review band", "p_fail"), ("reply not the two-line contract", "the reply"),
           ("reason not grounded", "the reason"))


class Pace(NamedTuple):
    seconds: float   # per decision
    source: str      # where it comes from, in words


def stated_pace(seconds: float | None = None) -> Pace:
    if seconds is None:
        return Pace(DEFAULT_SECONDS_PER_DECISION, f"{DEFAULT_SECONDS_PER_DECISION:g} s a decision (a stated default: "
                                                  f"no measured pace yet)")
    return Pace(seconds, f"{seconds:g} s a decision (given)")


def on_screen_seconds(decision: dict) -> float | None:
    """The seconds a decision's card was on screen, summed over its history (the review page's measure), or None."""
    shown = [c.get("on_screen_ms") for c in decision.get("history") or [] if isinstance(c, dict)]
    times = [t for t in shown if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0]
    return sum(times) / 1000 if times else None


def measured_pace(log: list[dict], floor: float = PACE_FLOOR_SECONDS) -> Pace:
    """The median on-screen seconds per decision in a decisions log (stage_b.labels.decisions_log.read_log), over the
    decisions on screen at least `floor` seconds, or the stated default when fewer than MIN_MEASURED are."""
    timed = [s for s in map(on_screen_seconds, log) if s is not None]
    seconds = [s for s in timed if s >= floor]
    left_out = len(timed) - len(seconds)
    under = (f"; {left_out} decision(s) under {floor:g} s on screen left out: not looked at" if left_out else "")
    if len(seconds) < MIN_MEASURED:
        default = stated_pace()
        return Pace(default.seconds, default.source[:-1] + under + ")") if under else default
    median = statistics.median(seconds)
    return Pace(median, f"{median:.3g} s a decision (the median on-screen time of {len(seconds)} decisions the review "
                        f"pages measured{under})")


def reviewer_paces(log: list[dict], person=lambda name: name, floor: float = PACE_FLOOR_SECONDS) -> dict[str, dict]:
    """{reviewer: {"timed", "median_seconds", "under_floor", "note"}} over each reviewer's decisions with an
    on-screen time (`person` folds a spelling to its reviewer); `note` names a reviewer whose median is below the
    floor ("decided 64 groups at a median 0.3 s: not looked at"), else None."""
    by: dict[str, list[float]] = {}
    for d in log:
        s = on_screen_seconds(d)
        if s is not None:
            by.setdefault(person(d.get("reviewer") or "anonymous"), []).append(s)
    out = {}
    for who, times in by.items():
        median = statistics.median(times)
        out[who] = {"timed": len(times), "median_seconds": median, "under_floor": sum(t < floor for t in times),
                    "note": (f"decided {len(times)} groups at a median {median:.2g} s: not looked at (the floor is "
                             f"{floor:g} s a card)" if median < floor else None)}
    return out


def reason_class(why: str) -> str:
    for name, start in REASONS:
        if why.startswith(start):
            return name
    return "other"


def day_workload(verdicts: list[dict], pace: Pace) -> dict:
    """{"per_mission": {mission: counts}, "overall": counts, "pace": seconds, "pace_source": words} (module doc)."""
    missions = list(dict.fromkeys(v["mission"] for v in verdicts))
    return {"per_mission": {m: _counts([v for v in verdicts if v["mission"] == m], pace) for m in missions},
            "overall": _counts(verdicts, pace), "pace": pace.seconds, "pace_source": pace.source}


def _counts(lines: list[dict], pace: Pace) -> dict:
    gold = [v for v in lines if v.get("gold")]
    work = [v for v in lines if not v.get("gold")]
    review = [v for v in work if v.get("route") == "review"]
    audit = [v for v in work if v.get("route") == "audit"]
    people = review + audit + gold

    def decisions(rows):
        return sum(max(1, len(v.get("assigned_to") or [])) for v in rows)
    why: dict[str, int] = {}
    for v in review:
        first = (v.get("review_why") or ["other"])[0]
        why[reason_class(str(first))] = why.get(reason_class(str(first)), 0) + 1
    return {"groups": len(work), "without_person": len(work) - len(review) - len(audit), "to_people": len(people),
            "review": len(review), "audits": len(audit), "gold": len(gold), "decisions": decisions(people),
            "person_hours": decisions(people) * pace.seconds / 3600,
            "audit_hours": decisions(audit) * pace.seconds / 3600,
            "gold_hours": decisions(gold) * pace.seconds / 3600,
            "automation_share": (len(work) - len(review)) / len(work) if work else None,
            "why_review": dict(sorted(why.items(), key=lambda kv: -kv[1]))}


def sentence(mission: str, c: dict, pace_source: str, promised: float | None = None) -> str:
    """One mission's day in one line (the judge's summary)."""
    why = ", ".join(f"{name} {n}" for name, n in c["why_review"].items())
    promised_text = "" if promised is None else (
        f"; decided without review {pct1(c['automation_share'])} today, {pct1(promised)} on validation")
    return (f"{mission}: {c['groups']} groups: {c['without_person']} decided without a person, {c['to_people']} to "
            f"people ({c['review']} review, {c['audits']} blind audits, {c['gold']} gold) = {c['decisions']} "
            f"decisions, {c['person_hours']:.2f} person-hours at {pace_source}; the audits' part "
            f"{c['audit_hours']:.2f} h{promised_text}" + (f"; to review because: {why}" if why else ""))


def table(workload: dict, gold_apart: bool = True) -> tuple[list[str], list[list]]:
    """(columns, rows): one row per mission, then the day. A page reviewers read counts gold among the blind audits
    (`gold_apart` False): a gold column would tell them how many of their audits are checks of themselves."""
    columns = ["mission", "groups", "decided without a person", "to people", "review",
               "blind audits" if gold_apart else "blind audits (known-answer checks among them)",
               *(["gold"] if gold_apart else []), "decisions", "person-hours", "of them audits", "to review because"]
    rows = []
    for name, c in [*workload["per_mission"].items(), ("the day", workload["overall"])]:
        rows.append([name, c["groups"] if gold_apart else c["groups"] + c["gold"], c["without_person"],
                     c["to_people"], c["review"], c["audits"] if gold_apart else c["audits"] + c["gold"],
                     *([c["gold"]] if gold_apart else []), c["decisions"], f"{c['person_hours']:.2f}",
                     f"{c['audit_hours']:.2f}" if gold_apart else f"{c['audit_hours'] + c['gold_hours']:.2f}",
                     "; ".join(f"{k} {n}" for k, n in c["why_review"].items()) or "-"])
    return columns, rows
