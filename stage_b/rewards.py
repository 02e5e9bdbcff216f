"""Stage-B rewards: small pure functions of `(completions, **kwargs) -> list[float]`, one value per
completion, never raising, always within [0, 1]. No torch/swift import: ms-swift adapters live in
swift_plugins/qc_plugin.py, and the same functions score completions in preflight and evaluation.

kwargs are the dataset columns ms-swift passes, one value per completion: `solution` (expected
verdict), `summaries` (the group's per-photo summaries), `mission` (canonical name).
"""
from __future__ import annotations

import re
from functools import lru_cache

from .verdict import PASS, normalize, normalize_verdict, parse

# Defect words every mission shares; each mission adds its own (configs/missions.yaml defect_terms).
GENERIC_DEFECT_TERMS = ("缺失", "缺少", "松动", "破损", "损坏", "脱落", "不规范", "不合格", "错误", "裸露",
                        "未安装", "未捆扎", "未拧紧", "未套保护管", "散乱", "不到位")
# A defect word right after one of these is denied, not asserted ("螺丝齐全，无松动").
NEGATIONS = ("无", "没有", "未见", "未发现", "不存在", "并无", "未出现", "不见")
_CITATION = re.compile(r"图片?\s*_?\s*(\d+)")
COPY_RUN = 10           # a shared run of this many characters counts as copied text
PENALTY_INVALID_CITATION = 0.4
PENALTY_UNSUPPORTED_DEFECT = 0.4
PENALTY_PASS_WITH_DEFECT = 0.4
PENALTY_NO_VALID_CITATION = 0.2
PENALTY_COPYING = 0.4


def qc_label(completions, solution, **kwargs) -> list[float]:
    """1.0 when the first line (whitespace stripped) is exactly the expected verdict, else 0.0.
    `不通过` never counts as `通过` (exact match, never substring)."""
    return [1.0 if (expected := normalize_verdict(sol)) is not None and parse(c).verdict == expected else 0.0
            for c, sol in zip(completions, solution)]


def qc_format(completions, **kwargs) -> list[float]:
    """1.0 when the whole completion, stripped, is exactly two lines: `通过` or `不通过`, then
    `理由:` (or `理由：`) followed by non-empty text; else 0.0."""
    return [1.0 if parse(c).two_lines else 0.0 for c in completions]


def qc_consistency(completions, summaries, mission=None, **kwargs) -> list[float]:
    """Grounding of the reason in the group's summaries, in [0, 1]; 0.0 unless the two-line contract
    holds. Starting from 1.0, subtract:
      0.4  a citation 图片_k outside 1..N (N = number of summaries);
      0.4  a defect term asserted in the reason that no summary asserts;
      0.4  verdict 通过 with a reason that asserts any defect, or that cites a photo whose summary
           asserts one;
      0.2  no valid 图片_k citation at all;
      0.4 x the share of the reason's characters inside runs of >= 10 characters copied verbatim
           from the summaries (a transcript is not a judgement).
    Defect terms: the mission's `defect_terms` plus GENERIC_DEFECT_TERMS; a term preceded by a
    negation (无, 没有, 未发现, …) is denied, not asserted."""
    missions = mission if isinstance(mission, list) else [mission] * len(completions)
    return [_consistency(c, s, m) for c, s, m in zip(completions, summaries, missions)]


def _consistency(completion, summaries, mission) -> float:
    try:
        parsed = parse(completion)
        if not parsed.two_lines:
            return 0.0
        texts = [normalize(s) or "" for s in (summaries or []) if isinstance(s, str)]
        reason = parsed.reason
        terms = defect_terms(mission)
        score = 1.0
        cited = [int(k) for k in _CITATION.findall(reason)]
        if any(not 1 <= k <= len(texts) for k in cited):
            score -= PENALTY_INVALID_CITATION
        if not any(1 <= k <= len(texts) for k in cited):
            score -= PENALTY_NO_VALID_CITATION
        asserted = asserted_defects(reason, terms)
        supported = set().union(*(asserted_defects(t, terms) for t in texts)) if texts else set()
        if asserted - supported:
            score -= PENALTY_UNSUPPORTED_DEFECT
        cited_defect = any(asserted_defects(texts[k - 1], terms) for k in cited if 1 <= k <= len(texts))
        if parsed.verdict == PASS and (asserted or cited_defect):
            score -= PENALTY_PASS_WITH_DEFECT
        score -= PENALTY_COPYING * copied_share(reason, "\n".join(texts))
        return min(1.0, max(0.0, score))
    except Exception:  # noqa: BLE001 - a reward must never stop training; 0.0 is the safe score
        return 0.0


@lru_cache(maxsize=64)
def defect_terms(mission) -> tuple[str, ...]:
    terms = list(GENERIC_DEFECT_TERMS)
    try:
        from stage_a.missions import load_registry
        terms += load_registry().resolve(mission).defect_terms if mission else []
    except Exception:  # noqa: BLE001 - unknown mission: generic terms still apply
        pass
    # Longest first, so "未套保护管" is matched before a shorter term inside it.
    return tuple(sorted(set(terms), key=len, reverse=True))


def asserted_defects(text: str, terms) -> set[str]:
    """Defect terms present in `text` and not preceded by a negation."""
    found = set()
    for term in terms:
        for m in re.finditer(re.escape(term), text):
            before = text[max(0, m.start() - 4):m.start()]
            if not any(before.endswith(neg) or before[:-1].endswith(neg) for neg in NEGATIONS):
                found.add(term)
                break
    return found


def copied_share(reason: str, source: str, run: int = COPY_RUN) -> float:
    """Share of `reason`'s characters covered by runs of >= `run` characters found in `source`."""
    if len(reason) < run or not source:
        return 0.0
    covered = [False] * len(reason)
    for i in range(len(reason) - run + 1):
        if reason[i:i + run] in source:
            for j in range(i, i + run):
                covered[j] = True
    return sum(covered) / len(reason)


REWARDS = {"qc_label": qc_label, "qc_format": qc_format, "qc_consistency": qc_consistency}
