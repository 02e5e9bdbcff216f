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
that mission; so is one right on fewer than `min_gold_accuracy` (default 0.8) of MIN_GOLD or more known-answer
groups (stage_b.labels.gold). Their labels are kept (they train) but certify nothing
(stage_b.rules.routes.evidence_weight) unless a
second reviewer decided the group the same way. A reviewer with fewer paired and known-answer groups is `unmeasured`,
and certifies as before: a day with one reviewer and no gold has nothing to compare with.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from itertools import combinations

from stage_b.contract.bounds import in_range
from stage_b.contract.verdict import FAIL, PASS, label_from_file
from stage_b.labels.resolve import DecisionGroup
from stage_b.stats.metrics import Z95

DEFAULT_MIN_KAPPA = 0.6
MIN_PAIRED = 10
DEFAULT_MIN_GOLD_ACCURACY = 0.8
MIN_GOLD = 5


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


def quality(agreement: dict[str, dict[tuple[str, str], dict]], min_kappa: float = DEFAULT_MIN_KAPPA,
            gold: dict[str, dict[str, dict]] | None = None, min_gold_accuracy: float = DEFAULT_MIN_GOLD_ACCURACY
            ) -> dict[str, dict[str, dict]]:
    """{mission: {reviewer: {"status": "ok" | "below the bar", "why"}}} for every reviewer measured on MIN_PAIRED
    paired groups or MIN_GOLD known-answer groups or more (module doc); reviewers not listed are unmeasured. Below
    either bar is below the bar."""
    out: dict[str, dict[str, dict]] = {}
    lowest: dict[tuple[str, str], dict] = {}
    for mission, by_pair in agreement.items():
        for (a, b), k in by_pair.items():
            if k["n"] < MIN_PAIRED or k["kappa"] is None:
                continue
            for me, other in ((a, b), (b, a)):
                if (mission, me) not in lowest or k["kappa"] < lowest[(mission, me)]["kappa"]:
                    lowest[(mission, me)] = {"kappa": k["kappa"], "with": other, "n": k["n"]}
    for (mission, me), k in lowest.items():
        out.setdefault(mission, {})[me] = {
            "status": "below the bar" if k["kappa"] < min_kappa else "ok",
            "why": f"{me}, whose kappa with {k['with']} is {k['kappa']:.2f} on {k['n']} groups decided by both"}
    for mission, by_reviewer in (gold or {}).items():
        for me, g in by_reviewer.items():
            if g["n"] < MIN_GOLD:
                continue
            accuracy = g["correct"] / g["n"]
            if accuracy < min_gold_accuracy or me not in out.get(mission, {}):
                out.setdefault(mission, {})[me] = {
                    "status": "below the bar" if accuracy < min_gold_accuracy else "ok",
                    "why": f"{me}, right on {g['correct']} of {g['n']} known-answer groups"}
    return out


def gold_scores(groups: Mapping[tuple, DecisionGroup]) -> dict[str, dict[str, dict]]:
    """{mission: {reviewer: {"n", "correct", "unsure"}}}: each reviewer's latest decision on the known-answer groups
    (stage_b.labels.gold) against the answer; an unsure is counted apart, not as right or wrong."""
    out: dict[str, dict[str, dict]] = {}
    for (mission, _), g in groups.items():
        answer = label_from_file((g["record"].get("gold") or {}).get("label"))
        if answer is None:
            continue
        for d in g["decisions"]:
            s = out.setdefault(mission, {}).setdefault(d["reviewer"], {"n": 0, "correct": 0, "unsure": 0})
            if d["decision"] not in (PASS, FAIL):
                s["unsure"] += 1
                continue
            s["n"] += 1
            s["correct"] += d["decision"] == answer
    return out


def check_min_gold_accuracy(value) -> float:
    return in_range(value, "--min_gold_accuracy", 0.0, 1.0, "a share from 0 to 1, e.g. 0.8")


def check_min_kappa(value) -> float:
    return in_range(value, "--min_kappa", -1.0, 1.0, "a kappa from -1 to 1, e.g. 0.6")
