"""Each reviewer's error rate, pooled over every mission and every day in a labels folder, with exact bounds, and a
verdict on each person: the reviewer table `group-qc decisions` prints and writes to
`<labels>/reviewers.jsonl` (issue 45 item 4). Pure (math; scipy through stage_b.stats.certify).

Evidence, per reviewer, over the whole decisions log:
- gold answers (stage_b.labels.gold): each reviewer's latest decision on a known-answer group, against its answer. Each
is one
  Bernoulli trial of "wrong" with the reviewer's error rate e; an unsure is counted apart, not a trial.
- overlaps: groups of the day (not gold) that the reviewer and at least one other decided definitely (通过 or 不通过),
  each reviewer's FIRST logged decision on the group (the one made blind: a decision changed after a conflict was
  printed is no longer blind). A disagreement means exactly one of the two decisions is wrong; it does not say which.

The bounds are exact one-sided Clopper-Pearson bounds (Clopper and Pearson 1934, "The use of confidence or fiducial
limits illustrated in the case of the binomial", Biometrika 26:404-413): stage_b.stats.certify.upper_bound, and the
lower
bound by the identity lower(k, n, C) = 1 - upper(n - k, n, C). At confidence C (stage_b.stats.certify's default, 0.9):

- lower bound, from gold answers only. It names a reviewer. Assumption-free: gold answers are independent trials of
  the reviewer's error. Overlaps cannot give a lower bound on their own: a disagreement rate d between reviewers i and
  j obeys |e_i - e_j| <= d <= e_i + e_j (a disagreement needs one of the two wrong; Dawid and Skene 1979, "Maximum
  likelihood estimation of observer error-rates using the EM algorithm", Applied Statistics 28:20-28, for the model),
  so e_i >= d - e_j needs an upper bound on the partner's e_j, and at the tens of overlaps a pair has in weeks that
  bound is too wide to add anything (measured while building this, in the setting below: an exact test of gold and
  disagreements together, the partners' rates bounded by their own gold and overlaps, named the careless reviewer in
  46% of pools with two accurate partners and 26% with partners wrong on 10%, gold alone in 46% and 46%).
  No reviewer is named without gold answers.
- upper bound, the smaller of two bounds each at 1 - (1 - C) / 2 (Bonferroni: together they hold at C): gold only,
  and gold with every overlap counted as a trial that failed when the reviewer disagreed with someone ("a disagreement
  counts as an error for both"). That second one is conservative when two reviewers' errors are independent given the
  group and neither is worse than a coin (e_i <= 1/2): P(disagree) = e_i + e_j - 2 e_i e_j >= e_i, and a sum of
  independent trials each failing with probability at least e is at least as large as a binomial(n, e) (a coupling), so
  its Clopper-Pearson bound covers e_i. Errors that two reviewers share (both fooled by the same group) are invisible to
  overlaps; gold catches them. With only one kind of evidence its bound is taken at C, with none the bound is 1.

The bar is an error rate of 1 - --min_gold_accuracy (default 0.2). A reviewer is `below the bar` when their lower
bound is above it (at confidence C the evidence says they are worse than the bar; a reviewer exactly at the bar is
named at most 1 - C of the time), `meets the bar` when their upper bound is below it, else `not enough evidence yet`,
with how many more gold answers at their rate so far would decide it. A named reviewer's labels train but certify
nothing, in every mission, until a second reviewer confirms them (stage_b.labels.resolve.review_of).

How often the bound names a reviewer is a property of the evidence, measured (tests/test_reviewer_quality.py, seeded):
a reviewer wrong on 30% of decisions, with 4-5 gold answers per mission and day over 4 missions and 2 days (32-40
answers), is named in about half of such pools (70% at 4 days, 91% at 8: about 140 gold answers); a reviewer wrong
on 5% never, one exactly at the bar in 7-9%. Until then the table shows their rate above the bar and how many more
gold answers would decide it.
"""
from __future__ import annotations

from collections.abc import Mapping

from stage_b.contract.numbers import pct1
from stage_b.contract.verdict import FAIL, PASS, label_from_file
from stage_b.labels.persons import ANONYMOUS, canonical_names
from stage_b.labels.resolve import DecisionGroup, is_adjudication
from stage_b.rules.workload import reviewer_paces
from stage_b.stats.certify import DEFAULT_CONFIDENCE, groups_needed, upper_bound

FILE = "reviewers.jsonl"
BELOW, MEETS, UNDECIDED = "below the bar", "meets the bar", "not enough evidence yet"
MAX_PROJECTED = 100_000   # more gold answers than any review team gives: said as "more than"


def lower_bound(wrong: int, n: int, confidence: float) -> float:
    """Exact one-sided Clopper-Pearson lower bound at `confidence` of a rate with `wrong` out of `n` (0 when nothing
    was measured or nothing was wrong)."""
    if n == 0 or wrong == 0:
        return 0.0
    return 1.0 - upper_bound(n - wrong, n, confidence)


def bar_of(min_gold_accuracy: float) -> float:
    """The error-rate bar: 1 - the accuracy bar (rounded so that 1 - 0.8 is 0.2, not 0.19999999999999996)."""
    return round(1.0 - float(min_gold_accuracy), 12)


def pool(gold_groups: Mapping[tuple, DecisionGroup], log: list[dict]) -> dict[str, dict]:
    """{reviewer: counts} over every mission and day (module doc): `gold_groups` is
    stage_b.labels.resolve.resolve(log,
    gold=True) (each reviewer's latest decision on each known-answer group), `log` the decisions log in order."""
    out: dict[str, dict] = {}
    person = canonical_names(log)   # look-alike spellings are one reviewer (stage_b.labels.persons)

    def row(name: str) -> dict:
        reviewer = person.get(name, name)
        return out.setdefault(reviewer, {"decided": set(), "gold_answered": 0, "gold_wrong": 0, "gold_unsure": 0,
                                         "overlaps": 0, "disagreed": 0, "partners": {}})
    for (mission, gid), g in gold_groups.items():
        answer = label_from_file((g["record"].get("gold") or {}).get("label"))
        if answer is None:
            continue
        for d in g["decisions"]:
            r = row(d.get("reviewer") or "anonymous")
            r["decided"].add(("gold", mission, gid))
            if d["decision"] not in (PASS, FAIL):
                r["gold_unsure"] += 1
                continue
            r["gold_answered"] += 1
            r["gold_wrong"] += d["decision"] != answer
    first: dict[tuple, dict[str, str]] = {}
    for d in log:
        if (d.get("record") or {}).get("gold") or is_adjudication(d):   # a lead's adjudication is no review
            continue
        first.setdefault((d["mission"], d["group_id"]), {}).setdefault(person[d.get("reviewer") or ANONYMOUS],
                                                                        d["decision"])
    for (mission, gid), by_reviewer in first.items():
        definite = {who: x for who, x in by_reviewer.items() if x in (PASS, FAIL)}
        for who in by_reviewer:
            row(who)["decided"].add(("day", mission, gid))
        for who, mine in definite.items():
            others = {o: x for o, x in definite.items() if o != who}
            if not others:
                continue
            r = row(who)
            r["overlaps"] += 1
            r["disagreed"] += any(x != mine for x in others.values())
            for o, x in others.items():
                p = r["partners"].setdefault(o, {"overlaps": 0, "disagreed": 0})
                p["overlaps"] += 1
                p["disagreed"] += x != mine
    for r in out.values():
        r["decided"] = len(r["decided"])
    return out


def bounds(gold_wrong: int, gold_answered: int, disagreed: int, overlaps: int,
           confidence: float = DEFAULT_CONFIDENCE) -> dict:
    """{"error_rate" (gold's; None without gold), "lower", "upper", "upper_from"} (module doc)."""
    both = gold_answered > 0 and overlaps > 0
    c_up = 1.0 - (1.0 - confidence) / 2 if both else confidence
    candidates = []
    if gold_answered:
        candidates.append((upper_bound(gold_wrong, gold_answered, c_up), "gold"))
    if overlaps:
        candidates.append((upper_bound(gold_wrong + disagreed, gold_answered + overlaps, c_up),
                           "gold and overlaps" if gold_answered else "overlaps"))
    upper, upper_from = min(candidates) if candidates else (1.0, "nothing measured")
    return {"error_rate": gold_wrong / gold_answered if gold_answered else None,
            "lower": lower_bound(gold_wrong, gold_answered, confidence), "upper": upper, "upper_from": upper_from,
            "upper_confidence": c_up}


def gold_to_decide(wrong: int, answered: int, bar: float, confidence: float, upper_confidence: float) -> int | None:
    """How many more gold answers, wrong as often as so far, would decide the verdict (name the reviewer, or show they
    meet the bar); without gold, how many right answers in a row would show they meet it. None when no number would:
    a rate so far exactly at the bar, or a bar of 0 or 1 that the rate cannot cross."""
    if answered == 0:
        return groups_needed(bar, upper_confidence) if bar < 1.0 else None
    rate = wrong / answered
    if rate == bar or (rate > bar and bar >= 1.0) or (rate < bar and bar <= 0.0):
        return None

    def decides(more: int) -> bool:
        n = answered + more
        k = min(n, max(0, round(rate * n)))
        return lower_bound(k, n, confidence) > bar if rate > bar else upper_bound(k, n, upper_confidence) < bar
    hi = 1
    while not decides(hi):
        if hi > MAX_PROJECTED:
            return None
        hi *= 2
    lo = hi // 2   # decides(lo) is False (or lo is 0): the smallest deciding number is in (lo, hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decides(mid) else (mid, hi)
    return hi


def verdict(counts: dict, bar: float, confidence: float = DEFAULT_CONFIDENCE) -> dict:
    """One reviewer's row: their counts (pool), bounds, the verdict and why, in words a reviewer lead reads."""
    b = bounds(counts["gold_wrong"], counts["gold_answered"], counts["disagreed"], counts["overlaps"], confidence)
    k, n = counts["gold_wrong"], counts["gold_answered"]
    more = None
    if b["lower"] > bar:
        status = BELOW
        why = (f"wrong on {k} of {n} gold answers ({pct1(k / n)}): at {confidence:.0%} confidence their error rate is "
               f"at least {pct1(b['lower'])}, above the bar of {pct1(bar)}")
    elif b["upper"] < bar:
        status = MEETS
        why = (f"at {confidence:.0%} confidence their error rate is at most {pct1(b['upper'])} (from "
               f"{b['upper_from']}), below the bar of {pct1(bar)}")
    else:
        status = UNDECIDED
        more = gold_to_decide(k, n, bar, confidence, b["upper_confidence"])
        then = ("no number of gold answers at this rate decides it" if more is None
                else f"about {more} more gold answers at this rate would decide it")
        if n:
            side = "above" if k / n > bar else "below" if k / n < bar else "at"
            why = f"wrong on {k} of {n} gold answers ({pct1(k / n)}), {side} the bar of {pct1(bar)} so far; {then}"
        else:
            why = ("no gold answer yet, and a disagreement never says which of two reviewers was wrong: "
                   + (f"{more} right gold answers in a row would show they meet the bar" if more is not None
                      else "no number of right answers shows they meet a bar of 0"))
    return {**counts, **{key: b[key] for key in ("error_rate", "lower", "upper", "upper_from")},
            "confidence": confidence, "bar": bar, "verdict": status, "more_gold_to_decide": more, "why": why}


ORDER = {BELOW: 0, UNDECIDED: 1, MEETS: 2}


def reviewer_table(gold_groups: Mapping[tuple, DecisionGroup], log: list[dict], bar: float,
                   confidence: float = DEFAULT_CONFIDENCE) -> list[dict]:
    """One row per reviewer who decided anything in the log, the reviewers below the bar first, then by name; each
    with the median seconds their cards were on screen and a note when it is below the pace floor
    (stage_b.rules.workload.reviewer_paces: decided faster than a card can be looked at)."""
    person = canonical_names(log)
    paces = reviewer_paces(log, lambda name: person.get(name, name))
    rows = [{"reviewer": who, **verdict(c, bar, confidence),
             "median_seconds": (paces.get(who) or {}).get("median_seconds"),
             "pace_note": (paces.get(who) or {}).get("note")} for who, c in pool(gold_groups, log).items()]
    return sorted(rows, key=lambda r: (ORDER[r["verdict"]], r["reviewer"]))


def named(rows: list[dict]) -> dict[str, str]:
    """{reviewer: why} for each reviewer below the bar."""
    return {r["reviewer"]: r["why"] for r in rows if r["verdict"] == BELOW}


def confirmers(rows: list[dict]) -> list[str]:
    """The reviewers whose measured error rate is below the bar at the table's confidence (upper bound under it): the
    ones whose decision can confirm another's (e.g. a second person confirming an escape before it moves a bound)."""
    return sorted(r["reviewer"] for r in rows if r["verdict"] == MEETS)


def unconfirmed_fails(groups: Mapping[tuple, DecisionGroup], trusted) -> dict[tuple, str]:
    """{(mission, group id): the one reviewer behind it} for each 不通过 label that nobody confirms (issue 45 item 4):
    a label confirms itself when two reviewers decided 不通过 on the group, or one of them is `trusted`
    (confirmers: their measured error rate meets the bar). `groups`: stage_b.labels.resolve.resolve(log). The monitor
    counts an escape only when it is confirmed: one careless reviewer's slip must not move a live bound."""
    out = {}
    for key, g in groups.items():
        if g["status"] != FAIL:
            continue
        settled = g.get("adjudication")   # a lead who settled it 不通过 is a second person behind it
        by = sorted({d["reviewer"] for d in g["decisions"] if d["decision"] == FAIL}
                    | ({settled["by"]} if settled and settled["decision"] == FAIL else set()))
        if len(by) < 2 and not set(by) & set(trusted):
            out[key] = by[0] if by else "anonymous"
    return out


def format_table(rows: list[dict], printable=str) -> str:
    """The table as Markdown, one row per reviewer; `printable` makes names safe for a terminal."""
    if not rows:
        return "(no reviewer has decided anything yet)"
    c = rows[0]["confidence"]
    head = ("reviewer", "decided", "gold answered", "gold wrong", "overlaps", "disagreed", "error rate",
            f"{c:.0%} bounds", "verdict", "median on screen")
    body = [(printable(r["reviewer"]), str(r["decided"]), str(r["gold_answered"]), str(r["gold_wrong"]),
             str(r["overlaps"]), str(r["disagreed"]),
             "-" if r["error_rate"] is None else pct1(r["error_rate"]),
             f"[{pct1(r['lower'])}, {pct1(r['upper'])}]",
             r["verdict"] + (f" ({r['more_gold_to_decide']} more gold)" if r["more_gold_to_decide"] else ""),
             ("-" if r.get("median_seconds") is None else f"{r['median_seconds']:.2g} s")
             + (f": {r['pace_note']}" if r.get("pace_note") else ""))
            for r in rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in [head, tuple("---" for _ in head), *body])
