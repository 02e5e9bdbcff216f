"""Drift of a day's work against the groups a promise was certified on (stage_b.monitoring.monitor and the
inspection states). Pure (scipy on first use).

Drift, per mission and day against the validation groups the promise was certified on (the operating point's
`profile`): the two-sample Kolmogorov-Smirnov test of the p_fail values (scipy.stats.ks_2samp) and Fisher's exact
test of the share of groups with a summary that shows a defect (scipy.stats.fisher_exact), each two-sided at
--drift_alpha (default 0.001), so a day's false alarm rate is at most 2 x 0.001 per mission.
"""
from __future__ import annotations

import functools


def drift(p_fails: list[float] | None, defect_groups: int, profile: dict | None, alpha: float,
          groups: int | None = None, against: str = "validation") -> dict:
    """Today's p_fail values and defect share against the reference the promise was certified on (the operating
    point's validation profile; after a clean tightened run, those days: stage_b.monitoring.inspection). `p_fails`
    None: only the
    defect share is tested, over `groups` groups (the audit planner's and the bench's simulated days)."""
    n = len(p_fails) if p_fails is not None else int(groups or 0)
    if not profile or not profile.get("groups") or not n:
        return {"ks_p": None, "defect_p": None, "defect_share": (defect_groups / n) if n else None,
                "validation_defect_share": None, "fired": False,
                "why": None if n else "no group judged", "tests": 0}
    from scipy.stats import ks_2samp
    ks_p = float(ks_2samp(p_fails, profile["p_fail"]).pvalue) if p_fails and profile.get("p_fail") else None
    v_n, v_k = profile["groups"], profile["defect_groups"]
    defect_p = fisher_p(defect_groups, n, v_k, v_n)
    reasons = []
    if ks_p is not None and ks_p < alpha:
        reasons.append(f"p_fail values differ from {against}'s (Kolmogorov-Smirnov p = {ks_p:.2g} < {alpha:g})")
    if defect_p < alpha:
        reasons.append(f"{defect_groups} of {n} groups have a summary showing a defect against {v_k} of {v_n} on "
                       f"{against} (Fisher's exact p = {defect_p:.2g} < {alpha:g})")
    return {"ks_p": ks_p, "defect_p": defect_p, "defect_share": defect_groups / n, "validation_defect_share": v_k / v_n,
            "fired": bool(reasons), "why": "; ".join(reasons) or None, "tests": 2 if ks_p is not None else 1,
            "against": against}


@functools.lru_cache(maxsize=65536)
def fisher_p(k: int, n: int, ref_k: int, ref_n: int) -> float:
    """Fisher's exact two-sided p of k of n against ref_k of ref_n (cached: simulated days repeat their counts)."""
    from scipy.stats import fisher_exact
    return float(fisher_exact([[k, n - k], [ref_k, ref_n - ref_k]])[1])
