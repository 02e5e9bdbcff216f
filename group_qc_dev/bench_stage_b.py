#!/usr/bin/env python
"""Stage-B costs, measured in one run (a script, not a test).

    python -m group_qc_dev.bench_stage_b [--model DIR] [--groups 100000] [--completions 20000] [--steps 2]

1. reward throughput: completions/s of each reward on realistic completions;
2. building Stage-B rows from a Stage-A file of --groups groups;
3. a GRPO run of --steps steps on the tiny model (in-process `swift rlhf`), split into model load,
   rollout, reward, loss forward and backward, with the rewards' share of a step; then the same run with
   a trivial constant reward, to show what our rewards cost inside the trainer; and with ms-swift's
   default right padding instead of the config's left padding, to show what that saves; and photo-aware
   (GROUP_QC_STAGE_B_IMAGES=1, phone-sized photos at the default GROUP_QC_STAGE_B_MAX_PIXELS) against text-only:
   s/step, and tokens per prompt as ms-swift's template encodes them (visual tokens among them);
4. with --judging: groups/s of judging (p_fail, then the reason after the threshold's verdict, written to a
   verdicts file) against evaluation's generation alone and generation + p_fail, on the same groups with
   one loaded engine, alternating, --judge_repeats times; and p_fail's cost per group.

    python -m group_qc_dev.bench_stage_b --steps 0 --judging [--judge_model DIR --judge_adapters DIR
                                    --judge_stage_a_dir DIR]   # e.g. the demo's GRPO checkpoint and field set
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import ExitStack
from pathlib import Path
from unittest.mock import patch

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from stage_a.discovery import Group  # noqa: E402
from qc_core.jsonl import write_jsonl_atomic  # noqa: E402
from qc_core.missions import load_registry  # noqa: E402
from qc_core.records import make_record  # noqa: E402
from stage_b.data.dataset import build_rows  # noqa: E402 - HF_HUB_OFFLINE is set first
from stage_b.data.settings import Selection  # noqa: E402
from stage_b.train.rewards import REWARDS  # noqa: E402
from stage_b.judging import scoring  # noqa: E402

M = "BBU接地线检查"
SUMMARIES = ["机柜侧接地螺丝×1，接地线×1/未捆扎 备注：接地线散乱未捆扎",
             "接地排×1，接地排侧接地螺丝×1，接地线×1/已捆扎",
             "无关图片", "接地排×1，接地排侧接地螺丝×1，接地线×1/已捆扎"]
COMPLETIONS = ["不通过\n理由: 图片_1 接地线散乱未捆扎", "通过\n理由: 图片_2、图片_4 接地线已捆扎",
               "不通过\n理由: 图片_7 螺丝缺失", "通过",
               "<think>先看图片_1</think>不通过\n理由：图片_1 接地线未捆扎", "乱码 random text " * 6]


def bench_rewards(n: int) -> dict:
    rng = random.Random(0)
    completions = [rng.choice(COMPLETIONS) for _ in range(n)]
    kwargs = {"solution": [rng.choice(["通过", "不通过"]) for _ in range(n)], "summaries": [SUMMARIES] * n,
              "mission": [M] * n}
    out = {}
    for name, func in REWARDS.items():
        start = time.perf_counter()
        func(completions, **kwargs)
        out[name] = n / (time.perf_counter() - start)
    return out


def bench_dataset(folder: Path, n_groups: int) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    mission = load_registry().resolve(M)
    records = (make_record(Group(f"QC-BD-20250101-{k}", M, "fail" if k % 2 else "pass",
                                 tuple(f"{M}/x/g{k}/{i}.jpg" for i in range(1, 5))), SUMMARIES, model="m",
                           created_at="2026-01-01T00:00:00+00:00") for k in range(n_groups))
    write_jsonl_atomic(folder / f"{mission.stage_a_stem}.jsonl", records)
    start = time.perf_counter()
    rows, counts = build_rows(Selection(stage_a_dir=str(folder), missions=M), "all")
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    from datasets import Dataset
    Dataset.from_list(rows)  # what the plugin hands to ms-swift
    return {"groups": n_groups, "build_rows_s": seconds, "to_hf_dataset_s": time.perf_counter() - start}


TIMED = ("_generate_completions", "_compute_rewards_per_func", "_prepare_inputs", "compute_loss", "training_step")


def bench_grpo(model: str, stage_a_dir: Path, out: Path, steps: int, reward_funcs: list[str],
               extra: tuple[str, ...] = (), images: bool = False) -> dict:
    """One in-process `swift rlhf` run with timers around the trainer's phases."""
    from swift.callbacks import TrainerCallback, callbacks_map
    from swift.pipelines import rlhf_main
    from swift.rlhf_trainers.grpo_trainer import GRPOTrainer
    from swift_plugins import qc_plugin  # noqa: F401 - registers the datasets and rewards
    from swift.rewards import ORM, orms
    from stage_b.train.launch import build_command
    from stage_b.train.launch_settings import LaunchSettings

    class Constant(ORM):
        def __call__(self, completions, **kwargs):
            return [1.0 for _ in completions]
    orms["bench_constant"] = Constant

    times: dict = defaultdict(float)
    marks: dict = {}

    def timed(name, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                times[name] += time.perf_counter() - start
        return wrapper

    class Marks(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            marks["train_begin"] = time.perf_counter()

        def on_train_end(self, args, state, control, **kwargs):
            marks["train_end"] = time.perf_counter()
    callbacks_map["bench_marks"] = Marks

    env, argv, _ = build_command(LaunchSettings(model, mission=M, stage_a_dir=str(stage_a_dir), lora_last_k="2",
                                                num_generations=4, max_steps=steps, output_dir=str(out), val="0",
                                                images="1" if images else "0"))
    os.environ.update(env)
    argv = argv[1:] + ["--max_completion_length", "16", "--dynamic_sample", "false", "--save_strategy", "no",
                       "--callbacks", "qc_lora_guard", "bench_marks", "--reward_funcs", *reward_funcs,
                       "--reward_weights", *["1"] * len(reward_funcs), *extra]
    start = time.perf_counter()
    with ExitStack() as timers:   # every phase timed for this run only, put back afterwards
        for name in TIMED:
            timers.enter_context(patch.object(GRPOTrainer, name, timed(name, getattr(GRPOTrainer, name))))
        rlhf_main(argv)
    total = time.perf_counter() - start
    train = marks["train_end"] - marks["train_begin"]
    reward = times["_compute_rewards_per_func"]
    backward = times["training_step"] - times["_prepare_inputs"] - times["compute_loss"]
    return {"reward_funcs": reward_funcs, "extra": list(extra), "images": images, "steps": steps, "total_s": total,
            "model_load_and_setup_s": total - train, "s_per_step": train / steps,
            "train_s": train, "rollout_s": times["_generate_completions"], "reward_s": reward,
            "loss_forward_s": times["compute_loss"], "backward_s": backward,
            "reward_share_of_train": reward / train}


def prompt_tokens(model: str, stage_a_dir: Path) -> dict:
    """Tokens per prompt, text-only and photo-aware, as ms-swift's template encodes the rows (default budget)."""
    from stage_b.model.generate import VerdictEngine
    from qc_core.missions import load_registry as registry
    engine = VerdictEngine(model, batch_size=1)
    pad = engine.engine.template.image_token_id
    out = {}
    for mode, images in (("text", False), ("photos", True)):
        rows, _ = build_rows(Selection(stage_a_dir=str(stage_a_dir), missions=M, images=images), "all",
                             registry())
        ids = [engine._encode(row)["input_ids"] for row in rows]
        out[mode] = {"prompts": len(rows), "photos_per_prompt": sum(len(r["summaries"]) for r in rows) / len(rows),
                     "tokens_per_prompt": sum(map(len, ids)) / len(ids),
                     "visual_tokens_per_prompt": sum(list(i).count(pad) for i in ids) / len(ids)}
    return out


def write_photo_groups(folder: Path, photos: Path, n: int = 32) -> None:
    """n groups of 1 to 6 phone-sized photos (1600x1200 JPEG) and their Stage-A records: prompt lengths differ
    by ~100 text tokens, as in real data, and by the photos' visual tokens in photo-aware mode."""
    from PIL import Image, ImageDraw
    records = []
    for k in range(n):
        rels = [f"g{k}/{i}.jpg" for i in range(1, k % 6 + 2)]
        for i, rel in enumerate(rels):
            im = Image.new("RGB", (1600, 1200), (90 + 20 * i, 110, 130))
            draw = ImageDraw.Draw(im)
            for j in range(12):   # cabinet-like edges, so the JPEG is not trivially flat
                draw.rectangle((60 * j, 40 * j, 1600 - 50 * j, 1200 - 30 * j), outline=(20 * j % 255, 200, 40), width=6)
            (photos / rel).parent.mkdir(parents=True, exist_ok=True)
            im.save(photos / rel, "JPEG", quality=90)
        records.append(make_record(Group(f"g{k}", M, "fail" if k % 2 else "pass", tuple(rels)),
                                   (SUMMARIES * 2)[:len(rels)], model="m", input_dir=photos))
    write_jsonl_atomic(folder / f"{M}_stage_a.jsonl", records)


def bench_judging(model: str, adapters: list[str], stage_a_dir: Path, out: Path, repeats: int,
                  batch_size: int = 16, max_new_tokens: int = 32) -> dict:
    from stage_b.data.dataset import load_records
    from stage_b.evaluate import verdict_probabilities
    from stage_b.model.generate import VerdictEngine
    from stage_b.rules.operating_point import manual_point
    registry = load_registry()
    selection = Selection(stage_a_dir=str(stage_a_dir))
    records = load_records(selection, registry, require_label=False)
    prompts, unjudgeable = scoring.prompt_rows(records, selection, registry)
    rows = [prompts[scoring.group_key(r)] for r in records if scoring.group_key(r) in prompts]
    engine = VerdictEngine(model, adapters=adapters, batch_size=batch_size, max_new_tokens=max_new_tokens)
    engine.generate(rows[:batch_size])               # warm-up: first calls pay one-off costs
    engine.verdict_logprobs(rows[:batch_size])
    point = manual_point(0.5)
    times = defaultdict(list)
    for r in range(repeats):
        t = time.perf_counter()
        engine.generate(rows)
        times["generate"].append(time.perf_counter() - t)
        t = time.perf_counter()
        verdict_probabilities(engine, rows)
        times["p_fail"].append(time.perf_counter() - t)
        t = time.perf_counter()
        by_mission = defaultdict(list)
        for rec in records:
            by_mission[rec["mission"]].append(rec)
        for mission, todo in by_mission.items():
            scoring.score_and_write(engine, prompts, unjudgeable, todo, point, {"model": model},
                                 out / f"{r}-{mission}.jsonl", out / f"{r}-{mission}.errors.jsonl", batch_size)
        times["judge"].append(time.perf_counter() - t)
    best = {k: min(v) for k, v in times.items()}
    n = len(rows)
    return {"groups": n, "repeats": repeats, "batch_size": batch_size, "max_new_tokens": max_new_tokens,
            "seconds": times, "groups_per_s": {
                "evaluate_generation_only": n / best["generate"],
                "evaluate_with_p_fail": n / (best["generate"] + best["p_fail"]),
                "judge": n / best["judge"]},
            "p_fail_ms_per_group": 1000 * best["p_fail"] / n}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="checkpoint (default: build the tiny Qwen2.5-VL)")
    p.add_argument("--groups", type=int, default=100_000)
    p.add_argument("--completions", type=int, default=20_000)
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--judging", action="store_true", help="also measure judging against evaluation (item 4)")
    p.add_argument("--judge_model", help="checkpoint for item 4 (default: the tiny Qwen2.5-VL, random weights)")
    p.add_argument("--judge_adapters", nargs="*", default=[])
    p.add_argument("--judge_stage_a_dir", help="Stage-A folder for item 4 (default: 32 made-up groups)")
    p.add_argument("--judge_repeats", type=int, default=2)
    p.add_argument("--judge_batch_size", type=int, default=16)
    p.add_argument("--judge_max_new_tokens", type=int, default=32)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    result = {"rewards_completions_per_s": bench_rewards(args.completions)}
    with tempfile.TemporaryDirectory(prefix="bench-stage-b-") as tmp:
        tmp = Path(tmp)
        result["dataset"] = bench_dataset(tmp / "big", args.groups)
        if args.steps or args.judging:
            from group_qc_dev import tiny_model
            model = args.model or str(tiny_model.build_tiny_model("qwen2_5_vl", tmp / "model", force=True))
            small = tmp / "small"
            small.mkdir()
            write_photo_groups(small, tmp / "photos")
        if args.judging:
            (tmp / "judging").mkdir()
            result["judging"] = bench_judging(args.judge_model or model, args.judge_adapters,
                                              Path(args.judge_stage_a_dir) if args.judge_stage_a_dir else small,
                                              tmp / "judging", args.judge_repeats, args.judge_batch_size,
                                              args.judge_max_new_tokens)
        if args.steps:
            result["grpo_ours"] = bench_grpo(model, small, tmp / "ours", args.steps, list(REWARDS))
            result["grpo_trivial"] = bench_grpo(model, small, tmp / "trivial", args.steps, ["bench_constant"])
            # the YAML's padding_side left against ms-swift's default right padding, same run otherwise
            result["grpo_right_padding"] = bench_grpo(model, small, tmp / "right", args.steps, list(REWARDS),
                                                      ("--padding_side", "right"))
            # photo-aware, same groups, same rewards; last, since each run exports its GROUP_QC_* variables
            result["grpo_photos"] = bench_grpo(model, small, tmp / "photos_run", args.steps, list(REWARDS), images=True)
            result["prompt_tokens"] = prompt_tokens(model, small)
    print("\nStage-B benchmark")
    for name, rate in result["rewards_completions_per_s"].items():
        print(f"  reward {name:<15} {rate:>12,.0f} completions/s")
    d = result["dataset"]
    print(f"  rows from {d['groups']:,} Stage-A groups: {d['build_rows_s']:.2f} s (+ {d['to_hf_dataset_s']:.2f} s "
          f"to a datasets.Dataset)")
    for key in ("grpo_ours", "grpo_trivial", "grpo_right_padding", "grpo_photos"):
        if key in result:
            g = result[key]
            print(f"  GRPO {g['steps']} steps{', photo-aware' if g['images'] else ''}, rewards "
                  f"{' '.join(g['reward_funcs'])}: total {g['total_s']:.1f} s = "
                  f"load/setup {g['model_load_and_setup_s']:.1f} + train {g['train_s']:.1f} "
                  f"(rollout {g['rollout_s']:.2f}, reward {g['reward_s'] * 1000:.1f} ms, loss forward "
                  f"{g['loss_forward_s']:.2f}, backward {g['backward_s']:.2f}); reward share "
                  f"{g['reward_share_of_train']:.3%}")
    if "grpo_ours" in result:
        print(f"  our rewards vs a constant reward, train time ratio: "
              f"{result['grpo_ours']['train_s'] / result['grpo_trivial']['train_s']:.3f}")
        print(f"  right padding (ms-swift default) vs our left padding, train time ratio: "
              f"{result['grpo_right_padding']['train_s'] / result['grpo_ours']['train_s']:.2f}x")
    if "grpo_photos" in result:
        t = result["prompt_tokens"]
        print(f"  photo-aware vs text-only GRPO, s/step: {result['grpo_photos']['s_per_step']:.2f} vs "
              f"{result['grpo_ours']['s_per_step']:.2f} = "
              f"{result['grpo_photos']['s_per_step'] / result['grpo_ours']['s_per_step']:.2f}x")
        print(f"  tokens per prompt ({t['text']['photos_per_prompt']:.1f} photos per group): text-only "
              f"{t['text']['tokens_per_prompt']:.0f}, photo-aware {t['photos']['tokens_per_prompt']:.0f} of which "
              f"{t['photos']['visual_tokens_per_prompt']:.0f} visual = "
              f"{t['photos']['tokens_per_prompt'] / t['text']['tokens_per_prompt']:.2f}x")
    if "judging" in result:
        j = result["judging"]
        g = j["groups_per_s"]
        print(f"  judging {j['groups']} groups (batch {j['batch_size']}, up to {j['max_new_tokens']} new tokens, "
              f"best of {j['repeats']}): judge {g['judge']:.2f} groups/s; evaluate {g['evaluate_with_p_fail']:.2f} "
              f"with p_fail, {g['evaluate_generation_only']:.2f} generation only")
        print(f"  judge / evaluate: {g['judge'] / g['evaluate_with_p_fail']:.3f} (both with p_fail), "
              f"{g['judge'] / g['evaluate_generation_only']:.3f} (against generation alone); p_fail "
              f"{j['p_fail_ms_per_group']:.1f} ms per group")
    try:
        import torch
        if torch.cuda.is_available():   # peak GPU memory of this process (the judging engine; GRPO runs in-process too)
            result["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
    except ImportError:
        pass
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(json.dumps(result, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
