"""`group-qc preflight`: will GRPO learn from this starting point? Five minutes before
five GPU-days.

Generates G completions for N groups per mission with the starting model (ms-swift engine, sampling as
in training), scores them with the training rewards, and prints per mission: the mean of each reward,
the format rate, the verdict accuracy, and the share of groups whose G weighted rewards are all equal
(zero advantage: GRPO learns nothing from them), with a warning and suggestions when that share is high.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass

from qc_core.errors import UserError
from qc_core.exits import run_cli

from stage_b.data.dataset import build_rows
from stage_b.model.engine_settings import EngineSettings, add_engine_args
from stage_b.train.rewards import REWARDS, reward_weights
from stage_b.train.run_record import selection_for
from stage_b.data.settings import add_selection_args, selection_flags

ZERO_ADVANTAGE_WARN = 0.5


def select_groups(rows: list[dict], groups_per_mission: int) -> list[dict]:
    """The first N rows of each mission in file order (deterministic, same as training's data)."""
    taken: dict[str, int] = defaultdict(int)
    chosen = []
    for row in rows:
        if taken[row["mission"]] < groups_per_mission:
            taken[row["mission"]] += 1
            chosen.append(row)
    return chosen


def score(rows: list[dict], completions: list[list[str]], weights: list[float]) -> dict:
    """Per-mission statistics of G completions per row, scored with the training rewards."""
    stats: dict[str, dict] = {}
    for row, group in zip(rows, completions):
        kwargs = {"solution": [row["solution"]] * len(group), "summaries": [row["summaries"]] * len(group),
                  "mission": [row["mission"]] * len(group)}
        per_reward = {name: func(group, **kwargs) for name, func in REWARDS.items()}
        totals = [sum(w * per_reward[name][i] for w, name in zip(weights, REWARDS, strict=True))
                  for i in range(len(group))]
        s = stats.setdefault(row["mission"], {"groups": 0, "completions": 0, "zero_advantage_groups": 0,
                                              **{f"{name}_sum": 0.0 for name in REWARDS}})
        s["groups"] += 1
        s["completions"] += len(group)
        s["zero_advantage_groups"] += int(max(totals) - min(totals) < 1e-9)
        for name in REWARDS:
            s[f"{name}_sum"] += sum(per_reward[name])
    report = {}
    for mission, s in stats.items():
        n = s["completions"]
        report[mission] = {
            "groups": s["groups"], "completions": n,
            **{f"mean_{name}": s[f"{name}_sum"] / n for name in REWARDS},
            "format_rate": s["qc_format_sum"] / n,   # qc_format is 0/1
            "accuracy": s["qc_label_sum"] / n,       # qc_label is 0/1
            "zero_advantage_share": s["zero_advantage_groups"] / s["groups"],
        }
    return report


def advice(stats: dict, temperature: float, num_generations: int) -> list[str]:
    tips = []
    if stats["zero_advantage_share"] > ZERO_ADVANTAGE_WARN:
        tips.append(f"{stats['zero_advantage_share']:.0%} of groups give zero advantage (all {num_generations} "
                    f"samples score the same): GRPO will barely learn.")
        if stats["format_rate"] < 0.2:
            tips.append("almost no completion follows the two-line format: SFT the model on the format first "
                        "(swift sft on a few hundred rows), or raise the qc_format weight.")
        if temperature < 1.0:
            tips.append(f"raise the sampling temperature (now {temperature}) so samples differ.")
        tips.append(f"raise num_generations (now {num_generations}) and keep dynamic_sample true.")
        if stats["accuracy"] > 0.9:
            tips.append("accuracy is already high: there is little left to learn on these missions.")
        elif stats["accuracy"] < 0.1 and stats["format_rate"] > 0.5:
            tips.append("the verdict is almost always wrong yet the format is right: check that labels "
                        "(审核通过/审核不通过) match the folders.")
    return tips


@dataclass(frozen=True)
class PreflightSettings:
    """What `group-qc preflight` samples and how (built in `main` from its flags)."""
    engine: EngineSettings
    selection_flags: dict
    split: str = "train"
    groups: int = 16
    num_generations: int = 8
    temperature: float = 1.0
    reward_weights: tuple[float, ...] = ()   # empty: REWARD_WEIGHTS (stage_b.train.rewards)
    seed: int = 0
    output_json: str | None = None

    def __post_init__(self):
        if self.groups < 1 or self.num_generations < 2:
            raise UserError("--groups must be >= 1 and --num_generations >= 2 (advantages need two samples)")
        if not self.reward_weights:
            object.__setattr__(self, "reward_weights", tuple(reward_weights()))
        if len(self.reward_weights) != len(REWARDS):
            raise UserError(f"--reward_weights takes one weight per reward ({', '.join(REWARDS)}): "
                            f"{len(self.reward_weights)} given")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc preflight", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_engine_args(p, model_help="the GRPO starting checkpoint (local folder)", max_new_tokens=64)
    add_selection_args(p)
    p.add_argument("--split", default="train", choices=["train", "val", "all"])
    p.add_argument("--groups", type=int, default=16, help="groups per mission")
    p.add_argument("--num_generations", type=int, default=8, help="samples per group, as in training")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, as in training")
    p.add_argument("--reward_weights", type=float, nargs="+", default=None,
                   help=f"weights of {' '.join(REWARDS)}, as in training (default "
                        f"{' '.join(f'{w:g}' for w in reward_weights())}: stage_b.train.rewards)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--output_json", help="also write the statistics here")
    args = p.parse_args(argv)

    def settings() -> PreflightSettings:
        return PreflightSettings(EngineSettings.from_args(args), selection_flags(args), args.split, args.groups,
                                 args.num_generations, args.temperature,
                                 tuple(args.reward_weights or ()), args.seed,
                                 args.output_json)
    return run_cli(lambda: preflight(settings()))


def preflight(settings: PreflightSettings) -> int:
    selection, _, _, notes = selection_for(settings.selection_flags, settings.engine.adapters)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    rows, _ = build_rows(selection, settings.split)
    engine = settings.engine.engine(temperature=settings.temperature, seed=settings.seed)
    chosen = select_groups(rows, settings.groups)
    generated, failed = engine.generate(chosen, n=settings.num_generations)
    for why in failed.values():
        print(f"WARNING: left out: {why}", file=sys.stderr)
    kept = [i for i in range(len(chosen)) if i not in failed]
    chosen, generated = [chosen[i] for i in kept], [generated[i] for i in kept]
    report = score(chosen, generated, list(settings.reward_weights))
    print(f"\npreflight: {settings.engine.model} on {len(chosen)} groups x {settings.num_generations} samples "
          f"(temperature {settings.temperature}); the model reads {selection.describe_mode()}")
    print_report(report, settings)
    if settings.output_json:
        with open(settings.output_json, "w", encoding="utf-8") as f:
            json.dump(report, f, ensure_ascii=False, indent=2)
    return 0


def print_report(report: dict, settings: PreflightSettings) -> None:
    """The reward table per mission, with a warning for each mission whose rewards give GRPO too little spread."""
    names = list(REWARDS)
    print(f"{'mission':<22} {'groups':>6} " + " ".join(f"{n:>14}" for n in names) +
          f" {'format':>7} {'accuracy':>8} {'zero-adv':>8}")
    warned = False
    for mission, s in report.items():
        print(f"{mission:<22} {s['groups']:>6} " + " ".join(f"{s['mean_' + n]:>14.3f}" for n in names) +
              f" {s['format_rate']:>7.2f} {s['accuracy']:>8.2f} {s['zero_advantage_share']:>8.2f}")
        for tip in advice(s, settings.temperature, settings.num_generations):
            warned = True
            print(f"  WARNING {mission}: {tip}")
    if not warned:
        print("OK: every mission has enough reward spread for GRPO to learn.")


if __name__ == "__main__":
    sys.exit(main())
