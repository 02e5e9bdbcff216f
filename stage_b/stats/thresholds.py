"""Threshold procedures on validation p_fail values: the candidates (ties), the measured rates, the point rule,
the certified thresholds (Clopper-Pearson bounds, stage_b.stats.certify), the review margin, and the family-wise
confidence (Bonferroni). stage_b.rules.operating_point states the rule they implement."""
from __future__ import annotations

import bisect
import math

from stage_b.contract.verdict import FAIL, PASS
from stage_b.stats.certify import upper_bound, upper_bound_weighted
from stage_b.stats.metrics import wilson

P_FAIL_TIE = 2.0 ** -20   # about 1e-6; a power of two, so thresholds and margins built from it are exact in binary


def candidate_thresholds(values) -> list[float]:
    """The thresholds the rule may pick over these validation p_fail values, ascending (module doc: ties)."""
    ordered = sorted(set(values))
    out = []
    for k, p in enumerate(ordered):
        if k == 0 or p - ordered[k - 1] > 2 * P_FAIL_TIE:   # the smallest value of a run of ties
            out.append(max(0.0, p - P_FAIL_TIE))
    if not ordered or ordered[-1] < 1.0 - P_FAIL_TIE:
        out.append(1.0)
    return out


def pairs(points) -> list[tuple[float, str]]:
    """(p_fail, expected) of points that may carry a weight as a third element (fair_points_of)."""
    return [(pt[0], pt[1]) for pt in points]


def weight(point) -> float:
    return point[2] if len(point) > 2 else 1.0


def rates_at(points, threshold: float) -> dict:
    """Miss and overkill at one threshold over (p_fail, expected[, weight]) points, counted (each group once), with
    95% Wilson intervals."""
    points = pairs(points)
    n_fail = sum(e == FAIL for _, e in points)
    n_pass = len(points) - n_fail
    misses = sum(e == FAIL and p < threshold for p, e in points)
    overkills = sum(e == PASS and p >= threshold for p, e in points)
    return {"threshold": threshold, "n": len(points), "n_fail": n_fail, "n_pass": n_pass,
            "misses": misses, "overkills": overkills,
            "miss_rate": misses / n_fail if n_fail else None, "miss_rate_ci95": wilson(misses, n_fail),
            "overkill_rate": overkills / n_pass if n_pass else None, "overkill_rate_ci95": wilson(overkills, n_pass)}


def curve(points) -> list[dict]:
    """The miss/overkill trade-off at every candidate threshold, from 1.0 down (miss falls, overkill rises)."""
    points = pairs(points)
    candidates = candidate_thresholds(p for p, _ in points)[::-1]
    fails = sorted(p for p, e in points if e == FAIL)
    passes = sorted(p for p, e in points if e == PASS)
    out = []
    for t in candidates:
        misses = _count_below(fails, t)
        overkills = len(passes) - _count_below(passes, t)
        out.append({"threshold": t, "miss_rate": misses / len(fails) if fails else None,
                    "overkill_rate": overkills / len(passes) if passes else None})
    return out


def _count_below(sorted_values: list[float], t: float) -> int:
    return bisect.bisect_left(sorted_values, t)


def pick_threshold(points, target_miss_rate: float) -> float | None:
    """The point rule's threshold: the largest candidate whose measured miss rate is <= the target; None when there
    is no fail group to measure a miss rate on."""
    if not any(pt[1] == FAIL for pt in points):
        return None
    return next(c["threshold"] for c in curve(points) if c["miss_rate"] <= target_miss_rate)


def picks_at(points, targets) -> list[tuple[float | None, dict | None]]:
    """For each miss-rate target, the point rule's threshold on these (p_fail, expected) points and the rates there
    ((None, None) without a fail group): report.md's curve table."""
    points = [tuple(pt) for pt in points]
    picked = [pick_threshold(points, target) for target in targets]
    return [(t, rates_at(points, t) if t is not None else None) for t in picked]


def weighted_below(points, label: str) -> tuple[list[float], list[float], list[float]]:
    """(sorted p_fail, weights in that order, their running sums) of the points with this label."""
    chosen = sorted((pt[0], weight(pt)) for pt in points if pt[1] == label)
    running, total = [], 0.0
    for _, w in chosen:
        total += w
        running.append(total)
    return [p for p, _ in chosen], [w for _, w in chosen], running


def bound_below(values, weights, running, t: float, confidence: float, above: bool = False) -> float:
    """The bound on the weighted share of these groups with p_fail < t (above: >= t)."""
    k = bisect.bisect_left(values, t)
    below = running[k - 1] if k else 0.0
    errors = (running[-1] - below) if above else below
    if all(w == 1 for w in weights):
        n_err = len(values) - k if above else k
        return upper_bound(n_err, len(values), confidence)
    return upper_bound_weighted([errors], weights, confidence)


def certified_threshold(points, target_miss_rate: float, confidence: float) -> float | None:
    """The largest candidate whose miss-rate bound at `confidence` is <= the target (module doc); None when none is.
    Points may carry weights (fair_points_of): the bound is then certify.upper_bound_weighted's."""
    fails, weights, running = weighted_below(points, FAIL)
    if not fails:
        return None
    for t in candidate_thresholds(pt[0] for pt in points)[::-1]:
        if bound_below(fails, weights, running, t, confidence) <= target_miss_rate:
            return t
    return None


def certified_fail_threshold(points, target_overkill_rate: float, confidence: float) -> float | None:
    """The smallest candidate whose overkill-rate bound at `confidence` is <= the target; None when none is."""
    passes, weights, running = weighted_below(points, PASS)
    if not passes:
        return None
    for t in candidate_thresholds(pt[0] for pt in points):
        if bound_below(passes, weights, running, t, confidence, above=True) <= target_overkill_rate:
            return t
    return None


def review_margin(points, threshold: float, share: float) -> float:
    """The rule's review margin (module doc)."""
    wrong = sorted(abs(p - threshold) for p, e in pairs(points) if verdict_at(p, threshold) != e)
    if not wrong:
        return 0.0
    return wrong[max(0, math.ceil(share * len(wrong)) - 1)] + P_FAIL_TIE   # the covered errors stay in under noise


def family(missions: list[str], sides: int, confidence: float, family_wise: bool) -> dict:
    """The confidence of all promises holding together, by Bonferroni's inequality: K claims each at confidence c
    hold jointly with probability >= 1 - K (1 - c). family_wise certifies each claim at c = 1 - (1 - C) / K, so that
    the family holds at C; otherwise each claim is at C and the family statement is the weaker 1 - K (1 - C)."""
    claims = len(missions) * sides
    per_claim = 1 - (1 - confidence) / claims if family_wise and claims else confidence
    return {"claims": claims, "sides": sides, "family_wise": family_wise, "per_claim_confidence": per_claim,
            "family_confidence": max(0.0, 1 - claims * (1 - per_claim))}


def verdict_at(p: float, threshold: float) -> str:
    return FAIL if p >= threshold else PASS
