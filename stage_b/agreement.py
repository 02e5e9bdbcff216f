"""How far reviewers agree, and which reviewers' labels may certify. Pure (math).

Cohen's kappa (Cohen 1960, "A coefficient of agreement for nominal scales", Educational and Psychological
Measurement 20:37-46) over the groups two reviewers both decided definitely (通过 or 不通过; a group either called
unsure is left out and counted): kappa = (p_o - p_e) / (1 - p_e), p_o the share they agree on, p_e the share two
reviewers with their own pass/fail rates would agree on by chance. Its 95% interval is kappa +- 1.96 SE with the
large-sample variance of Fleiss, Cohen and Everitt (1969, "Large sample standard errors of kappa and weighted kappa",
Psychological Bulletin 72:323-327), clipped to [-1, 1]; tests/test_agreement.py checks its coverage by simulation.
Kappa is undefined (None) when p_e = 1 (both reviewers gave one answer only).

The quality bar (`quality`): a reviewer whose kappa with another reviewer, on at least MIN_PAIRED groups of a mission,
is below `min_kappa` (default 0.6, the lower end of "substantial" in Landis and Koch 1977), is `below the bar` for
that mission. Their labels are kept (they train) but certify nothing (stage_b.routes.evidence_weight) unless a second
reviewer decided the group the same way. A reviewer with fewer paired groups is `unmeasured`, and certifies as
before: a day with one reviewer has nobody to compare with.
"""
from __future__ import annotations

import math
from itertools import combinations

PASS, FAIL = "通过", "不通过"
DEFAULT_MIN_KAPPA = 0.6
MIN_PAIRED = 10
Z95 = 1.959963984540054


def kappa(pairs: list[tuple[str, str]]) -> dict:
    """Cohen's kappa of (first reviewer's, second reviewer's) definite decisions, with its 95% interval (module doc)."""
    n = len(pairs)
    out = {"n": n, "agreed": sum(a == b for a, b in pairs), "kappa": None, "ci95": None}
    if n == 0:
        return out
    cats = (PASS, FAIL)
    p = {(i, j): sum(a == i and b == j for a, b in pairs) / n for i in cats for j in cats}
    row = {i: p[(i, PASS)] + p[(i, FAIL)] for i in cats}
    col = {j: p[(PASS, j)] + p[(FAIL, j)] for j in cats}
    p_o = p[(PASS, PASS)] + p[(FAIL, FAIL)]
    p_e = sum(row[i] * col[i] for i in cats)
    if p_e >= 1.0:
        return out
    k = (p_o - p_e) / (1 - p_e)
    # Fleiss, Cohen and Everitt (1969), eq. for the variance of kappa under no assumption of independence
    a = sum(p[(i, i)] * (1 - (row[i] + col[i]) * (1 - k)) ** 2 for i in cats)
    b = (1 - k) ** 2 * sum(p[(i, j)] * (col[i] + row[j]) ** 2 for i in cats for j in cats if i != j)
    c = (k - p_e * (1 - k)) ** 2
    se = math.sqrt(max(0.0, a + b - c) / (n * (1 - p_e) ** 2))
    return {**out, "kappa": k, "se": se, "ci95": [max(-1.0, k - Z95 * se), min(1.0, k + Z95 * se)]}


def pairwise(decided: dict[tuple[str, str], dict[str, str]]) -> dict[str, dict[tuple[str, str], dict]]:
    """{mission: {(reviewer a, reviewer b): kappa(...) and "unsure"}} from {(mission, group id): {reviewer: latest
    decision}}; pairs in name order, over the groups both decided."""
    pairs: dict[str, dict[tuple[str, str], dict]] = {}
    for (mission, _), by_reviewer in decided.items():
        for a, b in combinations(sorted(by_reviewer), 2):
            entry = pairs.setdefault(mission, {}).setdefault((a, b), {"pairs": [], "unsure": 0})
            da, db = by_reviewer[a], by_reviewer[b]
            if da in (PASS, FAIL) and db in (PASS, FAIL):
                entry["pairs"].append((da, db))
            else:
                entry["unsure"] += 1
    return {m: {ab: {**kappa(e["pairs"]), "unsure": e["unsure"]} for ab, e in by_pair.items()}
            for m, by_pair in pairs.items()}


def quality(agreement: dict[str, dict[tuple[str, str], dict]], min_kappa: float = DEFAULT_MIN_KAPPA
            ) -> dict[str, dict[str, dict]]:
    """{mission: {reviewer: {"status": "ok" | "below the bar", "kappa": the lowest measured, "with": partner}}} for
    every reviewer measured on MIN_PAIRED groups or more (module doc); reviewers not listed are unmeasured."""
    out: dict[str, dict[str, dict]] = {}
    for mission, by_pair in agreement.items():
        for (a, b), k in by_pair.items():
            if k["n"] < MIN_PAIRED or k["kappa"] is None:
                continue
            for me, other in ((a, b), (b, a)):
                mine = out.setdefault(mission, {}).get(me)
                if mine is None or k["kappa"] < mine["kappa"]:
                    out[mission][me] = {"kappa": k["kappa"], "with": other, "n": k["n"],
                                        "status": "below the bar" if k["kappa"] < min_kappa else "ok"}
    return out


def check_min_kappa(value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--min_kappa {value!r} is not a number; use a kappa from -1 to 1, e.g. 0.6") from None
    if math.isnan(x) or not -1.0 <= x <= 1.0:
        raise ValueError(f"--min_kappa {value!r} is out of range: use a kappa from -1 to 1, e.g. 0.6")
    return x
