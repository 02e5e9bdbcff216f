"""Is p_fail a probability? Reliability per mission: p_fail in equal-width bins against the share of groups in
each bin that reviewers failed, and the expected calibration error. Pure (math only).

    ECE = sum over bins of (groups in the bin / groups) x |mean p_fail in the bin - observed fail share in the bin|

A bin holds p_fail in [lo, hi) (the last one also 1.0). A well-calibrated model's points lie on the diagonal and
its ECE is near 0; a model whose p_fail all sit near 0 while half the groups fail has an ECE near 0.5.
"""
from __future__ import annotations

from stage_b.contract.verdict import FAIL

BINS = 10


def reliability(points: list[tuple[float, str]], bins: int = BINS) -> dict:
    """{"bins": [{"lo", "hi", "n", "mean_p_fail", "fail_share"}] (non-empty bins), "ece", "n"} over (p_fail,
    expected) pairs; ece None when there are no points."""
    groups: dict[int, list[tuple[float, str]]] = {}
    for p, e in points:
        groups.setdefault(min(int(p * bins), bins - 1), []).append((p, e))
    out, ece = [], 0.0
    for k in sorted(groups):
        members = groups[k]
        mean_p = sum(p for p, _ in members) / len(members)
        share = sum(e == FAIL for _, e in members) / len(members)
        ece += len(members) / len(points) * abs(mean_p - share)
        out.append({"lo": k / bins, "hi": (k + 1) / bins, "n": len(members), "mean_p_fail": mean_p,
                    "fail_share": share})
    return {"bins": out, "ece": ece if points else None, "n": len(points)}


def calibration(by_mission: dict[str, list[tuple[float, str]]], missions: list[str]) -> dict:
    """metrics.json's `calibration`: reliability per mission and pooled."""
    pooled = [pt for m in missions for pt in by_mission.get(m, [])]
    return {"bins": BINS, "per_mission": {m: reliability(by_mission.get(m, [])) for m in missions},
            "overall": reliability(pooled)}
