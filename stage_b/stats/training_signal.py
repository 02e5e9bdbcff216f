"""What GRPO training shows per mission, computed from what the trainer scored. Pure (no torch/swift).

`step_signal`: per generation batch, per mission, the label reward mean and the share of prompts whose
samples all got the same total reward (zero advantage: GRPO learns nothing from them), plus how many
prompts of each expected verdict the batch held. `validation_metrics`: greedy verdicts on the
validation split, per mission, in the QC numbers of `stage_b.stats.metrics`.
The plugin (swift_plugins/qc_callbacks.py) logs both through ms-swift, so they land in `logging.jsonl`
and TensorBoard beside ms-swift's own metrics.
"""
from __future__ import annotations

import math

from stage_b.stats.metrics import compute_metrics
from stage_b.contract.verdict import FAIL, PASS, parse

TRAIN_PREFIX = "qc"           # qc/label_reward/<mission>, qc/zero_advantage/<mission>, qc/prompts/<verdict>
VAL_PREFIX = "qc_val"         # qc_val/<metric> overall, qc_val/<metric>/<mission>; logged as eval_qc_val/...
VAL_METRICS = ("accuracy", "balanced_accuracy", "miss_rate", "overkill_rate")
BEST_METRIC = f"{VAL_PREFIX}/balanced_accuracy"   # what run_grpo.sh val=1 keeps the best checkpoint by
VERDICT_KEYS = {FAIL: "fail", PASS: "pass"}


def _equal(values: list[float], tol: float = 1e-6) -> bool:
    return max(values) - min(values) <= tol


def step_signal(missions: list[str], solutions: list[str], label_rewards: list[float | None] | None,
                totals: list[float], num_generations: int) -> dict[str, float]:
    """Per-mission signal of one generation batch. Samples are in prompt groups of `num_generations`
    consecutive entries (as the trainer scores them); `totals` are the weighted rewards advantages come from."""
    if num_generations < 1 or len(totals) % num_generations:
        raise ValueError(f"{len(totals)} samples do not form groups of {num_generations}")
    by_mission: dict[str, dict] = {}
    out: dict[str, float] = {f"{TRAIN_PREFIX}/prompts/{key}": 0 for key in VERDICT_KEYS.values()}
    for start in range(0, len(totals), num_generations):
        group = range(start, start + num_generations)
        mission = missions[start]
        m = by_mission.setdefault(mission, {"prompts": 0, "zero": 0, "label": []})
        m["prompts"] += 1
        m["zero"] += _equal([totals[i] for i in group])
        if label_rewards is not None:
            m["label"] += [r for r in (label_rewards[i] for i in group) if r is not None and not math.isnan(r)]
        if solutions[start] in VERDICT_KEYS:
            out[f"{TRAIN_PREFIX}/prompts/{VERDICT_KEYS[solutions[start]]}"] += 1
    for mission, m in by_mission.items():
        out[f"{TRAIN_PREFIX}/zero_advantage/{mission}"] = m["zero"] / m["prompts"]
        if m["label"]:
            out[f"{TRAIN_PREFIX}/label_reward/{mission}"] = sum(m["label"]) / len(m["label"])
    return out


def validation_metrics(rows: list[dict]) -> dict[str, float]:
    """QC metrics of greedy completions on validation rows ({mission, solution, completion}), overall and
    per mission; rates over zero groups are left out rather than logged as 0."""
    predictions = [{"mission": r["mission"], "expected": r["solution"], "predicted": parse(r["completion"]).verdict}
                   for r in rows]
    metrics = compute_metrics(predictions)
    out: dict[str, float] = {f"{VAL_PREFIX}/groups": float(len(rows))}
    for scope, m in [("", metrics["overall"]), *((f"/{k}", v) for k, v in metrics["per_mission"].items())]:
        for name in VAL_METRICS:
            if m[name] is not None:
                out[f"{VAL_PREFIX}/{name}{scope}"] = float(m[name])
    return out
