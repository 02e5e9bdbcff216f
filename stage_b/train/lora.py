"""LoRA on the last K blocks of the language model, vision tower and aligner frozen. Pure (json/re).

`group-qc lora --model DIR --last_k 4` prints the anchored `--target_regex` for a checkpoint;
with `--swift_args`, every flag `swift rlhf <yaml>` needs beside --model, for any local Qwen-VL folder and from any
folder: `--model_type`, `--template` (from config.json), `--target_regex` and `--external_plugins` (absolute); with
`--grpo` the rewards and their weights too (stage_b.train.rewards: `swift rlhf` by hand). Without --last_k,
`--swift_args` leaves out the regex: what `swift infer`/`swift deploy` take.
Module paths are those of current transformers (5.x) Qwen-VL classes, as ms-swift matches them:
language model `model.language_model.layers.<i>`, vision tower `model.visual`, aligner
`model.visual.merger` (Qwen3-VL adds `model.visual.deepstack_merger_list`).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from qc_core.errors import UserError
from qc_core.checkpoints import resolve_model
from qc_core.exits import run_cli
from stage_b.train.rewards import swift_reward_args

LLM_LAYER = re.compile(r"(?:^|\.)language_model\.layers\.(\d+)\.")
FROZEN_PARTS = ("visual.",)  # vision tower and aligner (merger, deepstack mergers) live under it
PROJECTIONS = r"(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)"


def num_llm_layers(model_dir) -> int:
    """The language model's layer count of a Qwen-VL checkpoint. A checkpoint without a vision tower is refused:
    its layers sit at `model.layers`, so the regex below (anchored on `model.language_model`) would match nothing
    and LoRA would train nothing."""
    config_path = Path(model_dir) / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {config_path}: {exc}") from None
    if "vision_config" not in config:
        raise UserError(f"{config_path}: model_type {config.get('model_type')!r} has no vision_config, so it is not a "
                         f"Qwen-VL checkpoint: its language model is not at model.language_model and a last-K regex "
                         f"would match nothing. Pass a Qwen2.5-VL / Qwen3-VL checkpoint folder")
    text = config.get("text_config") or config
    if "num_hidden_layers" not in text:
        raise UserError(f"{config_path}: no text_config.num_hidden_layers; is this a Qwen-VL checkpoint?")
    return int(text["num_hidden_layers"])


def last_k_layers(num_layers: int, last_k: int) -> list[int]:
    if not isinstance(last_k, int) or not 1 <= last_k <= num_layers:
        raise UserError(f"lora_last_k {last_k!r} is out of range: the language model has {num_layers} "
                         f"layers, so use 1..{num_layers}")
    return list(range(num_layers - last_k, num_layers))


def target_regex(model_dir, last_k: int) -> str:
    """Anchored regex matching only the attention/MLP projections of the LLM's last K layers."""
    layers = last_k_layers(num_llm_layers(model_dir), last_k)
    return rf"^model\.language_model\.layers\.({'|'.join(map(str, layers))})\.{PROJECTIONS}$"


def layer_of(param_name: str) -> int | None:
    m = LLM_LAYER.search(param_name)
    return int(m.group(1)) if m else None


def audit_trainable(named_trainable: list[tuple[str, int]], num_layers: int, last_k: int | None) -> tuple[dict, list]:
    """(trainable parameter count per LLM layer, problems). Problems: a trainable vision/aligner
    parameter, a trainable parameter outside the LLM's layers, a layer set other than the last K."""
    per_layer: Counter = Counter()
    problems = []
    for name, numel in named_trainable:
        if any(part in name for part in FROZEN_PARTS):
            problems.append(f"vision/aligner parameter is trainable: {name}")
            continue
        layer = layer_of(name)
        if layer is None:
            problems.append(f"trainable parameter outside the language model's layers: {name}")
            continue
        per_layer[layer] += numel
    if not per_layer:
        problems.append("no trainable LoRA parameter in the language model: the target regex matched nothing")
    if last_k is not None and per_layer:
        expected = set(last_k_layers(num_layers, last_k))
        if set(per_layer) != expected:
            problems.append(f"trainable layers {sorted(per_layer)} != the last {last_k} layers {sorted(expected)}: "
                            f"regenerate --target_regex with group-qc lora --last_k {last_k}")
    return dict(sorted(per_layer.items())), problems


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc lora", description="print the --target_regex for "
                                "LoRA on the last K language-model blocks of a Qwen-VL checkpoint")
    p.add_argument("--model", required=True, help="checkpoint folder (reads config.json)")
    p.add_argument("--last_k", type=int, help="number of final LLM blocks to adapt (required without --swift_args)")
    p.add_argument("--swift_args", action="store_true",
                   help="print --model_type --template --target_regex --external_plugins for swift rlhf")
    p.add_argument("--grpo", action="store_true",
                   help="with --swift_args: the rewards and their weights too (stage_b.train.rewards), for swift rlhf")
    args = p.parse_args(argv)

    def body() -> int:
        if args.last_k is None and not args.swift_args:
            raise UserError("--last_k is required (the number of final LLM blocks to adapt)")
        regex = target_regex(args.model, args.last_k) if args.last_k is not None else None
        if not args.swift_args:
            print(regex)
            return 0
        spec = resolve_model(args.model)
        plugin = Path(__file__).resolve().parents[2] / "swift_plugins" / "qc_plugin.py"
        # one line, unquoted words: `$(group-qc lora … --swift_args)` splits into flags (the regex holds
        # no space, *, ? or [, so the shell neither splits nor globs it)
        print(f"--model_type {spec.model_type} --template {spec.template}"
              + (f" --target_regex {regex}" if regex else "") + (f" {swift_reward_args()}" if args.grpo else "")
              + f" --external_plugins {plugin}")
        return 0
    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
