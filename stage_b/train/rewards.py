"""Stage-B rewards: small pure functions of `(completions, **kwargs) -> list[float]`, one value per
completion, never raising, always within [0, 1]. No torch/swift import: ms-swift adapters live in
swift_plugins/qc_plugin.py, and the same functions score completions in preflight and evaluation.

kwargs are the dataset columns ms-swift passes, one value per completion: `solution` (expected
verdict), `summaries` (the group's per-photo summaries), `mission` (canonical name).
"""
from __future__ import annotations

from collections.abc import Callable

from stage_b.contract.grounding import asserted_defects, defect_terms, ground
from stage_b.contract.verdict import FAIL, normalize, normalize_verdict, parse

COPY_RUN = 10           # a shared run of this many characters counts as copied text
PENALTY_INVALID_CITATION = 0.4
PENALTY_UNSUPPORTED_DEFECT = 0.4
PENALTY_CONTRADICTION = 0.4
PENALTY_WRONG_CITATION = 0.4
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
      0.4  a reason that contradicts its verdict: 通过 with a reason that asserts any defect or cites a
           photo whose summary shows one; 不通过 with a reason that asserts no defect and cites no such photo;
      0.4 x the share of the photos a 不通过 reason cites (within 1..N) whose summary shows no defect;
      0.2  no valid 图片_k citation at all;
      0.4 x the share of the reason's characters inside runs of >= 10 characters copied verbatim
           from the summaries (a transcript is not a judgement).
    Defect terms, negations, citations (ranges too) and contradictions are stage_b.contract.grounding's: the rule
    evaluation's grounding metrics and the judge's review flags use."""
    missions = mission if isinstance(mission, list) else [mission] * len(completions)
    return [_consistency(c, s, m) for c, s, m in zip(completions, summaries, missions)]


def _consistency(completion, summaries, mission) -> float:
    try:
        g = ground(completion, summaries, mission)
        if not g.two_lines:
            return 0.0
        reason = g.reason or ""   # two lines: the reason is there
        texts = [normalize(s) or "" for s in (summaries or []) if isinstance(s, str)]
        terms = defect_terms(mission)
        score = 1.0
        valid = [k for k in g.cited if 1 <= k <= len(texts)]
        if len(valid) < len(g.cited):
            score -= PENALTY_INVALID_CITATION
        if not valid:
            score -= PENALTY_NO_VALID_CITATION
        supported = set().union(*(asserted_defects(t, terms) for t in texts)) if texts else set()
        if asserted_defects(reason, terms) - supported:
            score -= PENALTY_UNSUPPORTED_DEFECT
        if g.contradiction:
            score -= PENALTY_CONTRADICTION
        if g.verdict == FAIL and valid:
            score -= PENALTY_WRONG_CITATION * sum(k not in g.defect_photos for k in valid) / len(valid)
        score -= PENALTY_COPYING * copied_share(reason, "\n".join(texts))
        return min(1.0, max(0.0, score))
    except Exception:  # noqa: BLE001 - a reward must never stop training; 0.0 is the safe score
        return 0.0


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


REWARDS: dict[str, Callable[..., list[float]]] = {"qc_label": qc_label, "qc_format": qc_format,
                                                  "qc_consistency": qc_consistency}
# Each reward's weight, beside the list: the verdict is what QC owners pay for; format keeps the output parseable;
# grounding discourages reasons that cite missing photos or invent defects, without outweighing the verdict. The
# launcher (a YAML without reward_funcs/reward_weights) and the preflight take both from here.
REWARD_WEIGHTS = {"qc_label": 1.0, "qc_format": 0.25, "qc_consistency": 0.25}


def reward_args(args: dict) -> dict:
    """`swift rlhf` arguments with the rewards and their weights taken from here where a config leaves them out (a
    config that names rewards without weights gets theirs); one weight per reward, or ValueError naming both."""
    names = list(args.get("reward_funcs") or REWARDS)
    weights = list(args.get("reward_weights") or reward_weights(names))
    if len(weights) != len(names):
        raise ValueError(f"reward_weights {weights} do not give one weight per reward of reward_funcs {names}")
    return {**args, "reward_funcs": names, "reward_weights": weights}


def swift_reward_args() -> str:
    """The flags `swift rlhf <yaml>` needs for the rewards when run by hand (stage_b.lora --swift_args prints them)."""
    return (f"--reward_funcs {' '.join(REWARDS)} --reward_weights "
            + " ".join(f"{w:g}" for w in reward_weights()))


def reward_weights(names=None) -> list[float]:
    """The weights of `names` (default: every reward, in REWARDS' order); a reward without a weight is named."""
    names = list(REWARDS) if names is None else list(names)
    missing = [n for n in names if n not in REWARD_WEIGHTS]
    if missing:
        raise KeyError(f"no weight for reward(s) {', '.join(missing)}: add it beside REWARDS "
                       f"(stage_b/train/rewards.py)")
    return [REWARD_WEIGHTS[n] for n in names]
