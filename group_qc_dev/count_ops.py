#!/usr/bin/env python
"""The host's work in one Stage-A batch, counted: torch ops dispatched per photo in the vision tower, per call in
the language model's prefill, per decode step, and the host reads (device-to-host waits on a GPU) per decode step;
bare ms-swift's engine against ours (SwiftSummaryEngine.our_changes: vision windows by length, the stop test at one
copy per step). Counts, not times: they are the same on a CPU as on a GPU, and where a GPU waits for the host
(small kernels, one launch each) the host's time is about ops x the cost of one.

    python -m group_qc_dev.count_ops --skeleton qwen2_5_vl-3b [--batch_size 16] [--photo_scale 4 --max_pixels 602112]
    python -m group_qc_dev.count_ops --model DIR ... [--json out.json]

`--skeleton PRESET` builds the preset's skeleton: its architecture and depth (layers, vision blocks, which blocks
attend in windows), tiny widths, random weights. The ops a forward dispatches depend on the depth and the photos,
not on the widths (tests/test_count_ops.py checks two widths give the same counts), so the skeleton's counts are the
real-size model's, counted in seconds on a CPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from group_qc_dev import underscored

# torch functions that make the host wait for the device (or copy to it) when the tensors live on a GPU
HOST_READS = frozenset({"tolist", "item", "__bool__", "__int__", "__float__", "__index__", "__setitem__", "tensor",
                        "cpu"})
SECTIONS = ("vision", "language", "rest")   # the vision tower, the language model, everything else in the call


class OpCount(TorchDispatchMode):
    """Counts each dispatched aten op under the section being run: `ops` all of them, `kernels` those that are not
    views (on a GPU most of them launch a kernel, a cast to the dtype a tensor already has does not; a view only
    costs the host)."""

    def __init__(self):
        super().__init__()
        self.section = ["rest"]
        self.ops = dict.fromkeys(SECTIONS, 0)
        self.kernels = dict.fromkeys(SECTIONS, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[self.section[-1]] += 1
        self.kernels[self.section[-1]] += not func.is_view
        return func(*args, **(kwargs or {}))


class CallCount(TorchFunctionMode):
    """Counts host reads (HOST_READS) and attention calls (scaled_dot_product_attention) under the section."""

    def __init__(self, sections: list[str]):
        super().__init__()
        self.section = sections
        self.host_reads = dict.fromkeys(SECTIONS, 0)
        self.attention = dict.fromkeys(SECTIONS, 0)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        self.host_reads[self.section[-1]] += name in HOST_READS
        self.attention[self.section[-1]] += name == "scaled_dot_product_attention"
        return func(*args, **(kwargs or {}))


def towers(model) -> dict[str, torch.nn.Module]:
    """The vision tower and the language model of a Qwen-VL model (transformers 5 nests both under .model)."""
    inner = getattr(model, "model", model)
    return {"vision": inner.visual, "language": inner.language_model}


@contextmanager
def counting(model):
    """Yields a dict filled, on exit, with the counts per section of everything run inside."""
    ops = OpCount()
    calls = CallCount(ops.section)
    hooks = []
    for name, module in towers(model).items():
        hooks.append(module.register_forward_pre_hook(lambda *_, name=name: ops.section.append(name)))
        hooks.append(module.register_forward_hook(lambda *_: ops.section.pop() and None))   # None: output kept
    result: dict = {}
    try:
        with ops, calls:
            yield result
    finally:
        for hook in hooks:
            hook.remove()
    result.update(ops=ops.ops, kernels=ops.kernels, host_reads=calls.host_reads, attention=calls.attention)


def count_call(engine, requests, max_new_tokens: int, ours: bool) -> dict:
    """The counts of one engine call, bare ms-swift's or (ours) inside our_changes, and the decode steps it made."""
    from group_qc_dev.profile_stage_a import engine_call
    with counting(engine.engine.model) as counts:
        responses = engine_call(engine, requests, max_new_tokens, ours)
    counts["decode_steps"] = max(r.usage.completion_tokens for r in responses) - 1
    return counts


def side_counts(engine, requests, max_new_tokens: int, ours: bool) -> dict:
    """Per photo in the tower, per call outside it, per decode step: a call with one new token (the tower, the
    prefill, the first token) and one with max_new_tokens; their difference over the extra steps is a decode step."""
    count_call(engine, requests, 1, ours)   # warm-up: first-call caches are not what is counted
    one = count_call(engine, requests, 1, ours)
    full = count_call(engine, requests, max_new_tokens, ours)
    steps = full["decode_steps"]
    if steps < 1:
        raise RuntimeError("every reply ended at its first token: no decode step to count (a larger "
                           "--max_new_tokens, or a model that does not stop at once)")
    photos = len(requests)

    def step(kind, section=None):
        sections = [section] if section else SECTIONS
        return round(sum(full[kind][s] - one[kind][s] for s in sections) / steps, 2)

    return {
        "vision_ops_per_photo": round(one["ops"]["vision"] / photos, 1),
        "vision_kernels_per_photo": round(one["kernels"]["vision"] / photos, 1),
        "vision_attention_calls_per_photo": round(one["attention"]["vision"] / photos, 2),
        "vision_host_reads_per_call": one["host_reads"]["vision"],
        "prefill_language_ops_per_call": one["ops"]["language"],
        "call_ops_outside_the_model": one["ops"]["rest"],
        "decode_step_ops": step("ops"),
        "decode_step_language_ops": step("ops", "language"),
        "decode_step_kernels": step("kernels"),
        "decode_step_host_reads": step("host_reads"),
        "decode_steps": steps,
    }


def skeleton_kwargs(preset: str) -> dict:
    """tiny_model.build_tiny_model's arguments for the preset's depth at tiny widths (the tiny defaults')."""
    from group_qc_dev.tiny_model import PRESETS
    real = PRESETS[preset]
    return dict(arch=real["arch"], layers=real["layers"], vision_depth=real["vision_depth"])


def count(model: Path, batch_size: int, photo_scale: int, max_pixels: int, max_new_tokens: int) -> dict:
    from group_qc_dev.profile_stage_a import one_batch
    engine, requests = one_batch(model, batch_size, photo_scale, max_pixels, max_new_tokens)
    encoded = engine.engine.template.encode(requests[0])
    visual_tokens = int((torch.as_tensor(encoded["input_ids"]) == engine.engine.model.config.image_token_id).sum())
    result = {"bare": side_counts(engine, requests, max_new_tokens, ours=False),
              "ours": side_counts(engine, requests, max_new_tokens, ours=True)}
    result.update(batch_size=len(requests), visual_tokens_first_photo=visual_tokens, max_pixels=max_pixels)
    return result


def table(result: dict) -> str:
    bare, ours = result["bare"], result["ours"]
    lines = [f"batch {result['batch_size']}, {result['visual_tokens_first_photo']} visual tokens in the first photo",
             f"{'':40} {'bare':>10} {'ours':>10} {'bare/ours':>10}"]
    for key in bare:
        ratio = f"{bare[key] / ours[key]:.1f}x" if ours[key] else ""
        lines.append(f"{key:40} {bare[key]:>10} {ours[key]:>10} {ratio:>10}")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="a Qwen-VL checkpoint directory")
    which.add_argument("--skeleton", help="a tiny_model preset whose depth to build at tiny widths "
                                          "(e.g. qwen2_5_vl-3b)")
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--photo_scale", type=int, default=4, help="each synthetic photo's sides times this")
    p.add_argument("--max_pixels", type=int, default=602112, help="768 visual tokens at most, as the GPU check")
    p.add_argument("--max_new_tokens", type=int, default=8)
    p.add_argument("--json")
    args = p.parse_args(underscored(sys.argv[1:] if argv is None else argv))
    from group_qc_dev.tiny_model import PRESETS, build_tiny_model
    if args.skeleton and args.skeleton not in PRESETS:
        p.error(f"--skeleton {args.skeleton!r}: not a preset ({', '.join(sorted(PRESETS))})")
    if args.batch_size < 1 or args.max_new_tokens < 2:
        p.error("--batch_size must be >= 1 and --max_new_tokens >= 2 (one decode step at least)")
    if args.model:
        from qc_core.checkpoints import ModelPathError, resolve_model
        try:
            resolve_model(args.model)
        except ModelPathError as e:
            p.error(str(e))
    with tempfile.TemporaryDirectory(prefix="count-ops-model-") as tmp:
        model = Path(args.model) if args.model else build_tiny_model(out=Path(tmp) / "m",
                                                                     **skeleton_kwargs(args.skeleton))
        result = count(model, args.batch_size, args.photo_scale, args.max_pixels, args.max_new_tokens)
    result.update(model=args.model or f"skeleton of {args.skeleton}")
    print(table(result), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
