#!/usr/bin/env python
"""Where one Stage-A batch spends its time, stage by stage, without torch's profiler (on the lent H200 a profiled call
never ended): one engine call as Stage-A makes it (our engine changes on), timed at each stage, at each batch size.

    python -m group_qc_dev.stage_split --model DIR [--batch_sizes 16 64 128] [--photo_scale 4 --max_pixels 602112]
        [--max_new_tokens 32] [--peak_tflops T --bandwidth_tbs B] [--json split.json]

Stages (forward hooks on the model's own modules, so a real checkpoint and the random-weight preset are timed by the
same code):

  host_encode     ms-swift's template encode of every request (its thread pool) and the collator, on the host
  patch_embed     the tower's patch embedding
  window_blocks   the tower's window-attention blocks (Qwen2.5-VL; Qwen3-VL has none)
  full_blocks     the tower's full-attention blocks (every Qwen3-VL block)
  merger          the patch merger (and Qwen3-VL's deepstack mergers)
  tower_other     the rest of the tower's forward: rotary tables, window index, cu_seqlens (host work between kernels)
  prefill         the language model's first forward of the call: every prompt token
  decode          each later forward: one new token per row (`decode_steps` of them; ms per step)
  lm_head         the vocabulary projection, prefill's and every step's
  not_covered     the call's wall minus the stages: generate's loop, sampling, stop tests, moving inputs

Timers: on a GPU, CUDA events recorded at each hook (torch.cuda.Event(enable_timing=True)), read after the call ends
and the device synchronises: each stage's time on the GPU's own clock, and no synchronisation inside the call (which
would add host stalls the real run does not have). On a CPU, time.perf_counter at each hook stands in (what the tests
run). A stage's ms per photo sits beside its FLOP time at the card's peak (group_qc_dev.flops: 2 FLOPs per weight per
token, attention's products) and a decode step beside its memory time (the language model's weights and the batch's
KV cache read once at the card's bandwidth); on a CPU or an unknown card those are null. One warm-up call per batch
size comes first (kernel selection, allocator).
"""
from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

STAGES = ("host_encode", "patch_embed", "window_blocks", "full_blocks", "merger", "tower_other", "prefill", "decode",
          "lm_head")
# Peak memory bandwidth, bytes/s, by card name (NVIDIA datasheets; the first name contained in the device's wins)
PEAK_BANDWIDTH = (("H100 PCIe", 2.0e12), ("H100 NVL", 3.9e12), ("H100", 3.35e12), ("H200", 4.8e12), ("H800", 3.35e12),
                  ("H20", 4.0e12), ("A100", 2.0e12), ("A800", 2.0e12), ("L40S", 0.864e12), ("L4", 0.3e12))


class StageClock:
    """Marks on the device's clock: CUDA events on a GPU (elapsed read after one synchronise), perf_counter on CPU."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def mark(self):
        if not self.cuda:
            return time.perf_counter()
        import torch
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def elapsed_ms(self, start, end) -> float:
        return start.elapsed_time(end) if self.cuda else 1000 * (end - start)

    def settle(self) -> None:
        if self.cuda:
            import torch
            torch.cuda.synchronize()


class StageTimer:
    """Forward hooks that record (start, end) marks per stage; `spans_ms()` after the call."""

    def __init__(self, clock: StageClock):
        self.clock = clock
        self.open: dict[int, list] = defaultdict(list)
        self.spans: dict[str, list] = defaultdict(list)
        self.handles = []

    def watch(self, module, stage) -> None:
        """`stage`: a name, or a function of the forward's (args, kwargs) that names it (prefill or decode)."""
        key = id(module)

        def before(mod, args, kwargs):
            name = stage(args, kwargs) if callable(stage) else stage
            self.open[key].append((name, self.clock.mark()))

        def after(mod, args, kwargs, output):
            name, start = self.open[key].pop()
            self.spans[name].append((start, self.clock.mark()))

        self.handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        self.handles.append(module.register_forward_hook(after, with_kwargs=True))

    def add_host(self, stage: str, seconds: float) -> None:
        self.spans[stage].append(seconds * 1000)

    def spans_ms(self) -> dict[str, list[float]]:
        self.clock.settle()
        return {stage: [s if isinstance(s, float) else self.clock.elapsed_ms(*s) for s in spans]
                for stage, spans in self.spans.items()}

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def tower_parts(model) -> dict:
    """The modules each stage times, found on a transformers Qwen2.5-VL or Qwen3-VL model: {stage: [modules]}."""
    inner = getattr(model, "model", model)
    visual, language = inner.visual, inner.language_model
    full = set(getattr(visual, "fullatt_block_indexes", None) or range(len(visual.blocks)))
    return {"tower": visual, "patch_embed": [visual.patch_embed],
            "window_blocks": [b for k, b in enumerate(visual.blocks) if k not in full],
            "full_blocks": [b for k, b in enumerate(visual.blocks) if k in full],
            "merger": [visual.merger, *list(getattr(visual, "deepstack_merger_list", None) or [])],
            "language_model": language, "lm_head": [model.lm_head]}


def _prefill_or_decode(args, kwargs) -> str:
    embeds = kwargs.get("inputs_embeds")
    ids = kwargs.get("input_ids") if embeds is None else None
    tokens = (embeds if embeds is not None else ids if ids is not None else args[0]).shape[1]
    return "prefill" if tokens > 1 else "decode"


@contextmanager
def timed(engine, timer: StageTimer):
    """While entered, every stage of `engine`'s calls is timed (hooks on its model, its encode and collator
    wrapped)."""
    swift_engine = engine.engine
    parts = tower_parts(swift_engine.model)
    for stage in ("patch_embed", "window_blocks", "full_blocks", "merger", "lm_head"):
        for module in parts[stage]:
            timer.watch(module, stage)
    timer.watch(parts["tower"], "tower")
    timer.watch(parts["language_model"], _prefill_or_decode)
    encode, collate = swift_engine._batch_encode, swift_engine.template.data_collator

    def host(stage, fn):
        def call(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                timer.add_host(stage, time.perf_counter() - start)
        return call

    swift_engine._batch_encode = host("host_encode", encode)
    swift_engine.template.data_collator = host("host_encode", collate)
    try:
        yield
    finally:
        del swift_engine._batch_encode
        del swift_engine.template.data_collator
        timer.remove()


def split_of(spans: dict[str, list[float]], wall_ms: float, photos: int) -> dict:
    """Stage totals, ms per photo, calls; the tower's rest and what no stage covers."""
    total = {stage: sum(spans.get(stage, [])) for stage in (*STAGES, "tower")}
    total["tower_other"] = max(0.0, total.pop("tower") - sum(total[s] for s in ("patch_embed", "window_blocks",
                                                                               "full_blocks", "merger")))
    covered = sum(total[s] for s in STAGES)
    stages = {s: {"ms": round(total[s], 3), "ms_per_photo": round(total[s] / photos, 4),
                  "calls": len(spans.get(s, [])) if s != "tower_other" else None} for s in STAGES}
    steps = len(spans.get("decode", []))
    return {"photos": photos, "wall_ms": round(wall_ms, 3), "stages": stages, "decode_steps": steps,
            "ms_per_decode_step": round(total["decode"] / steps, 4) if steps else None,
            "covered_ms": round(covered, 3), "not_covered_ms": round(max(0.0, wall_ms - covered), 3)}


def bandwidth_of(device: str, bandwidth_tbs: float | None = None) -> float | None:
    if bandwidth_tbs:
        return bandwidth_tbs * 1e12
    return next((b for name, b in PEAK_BANDWIDTH if name in device), None)


def limits(model, patches: int, prompt_tokens: float, batch: int, peak: float | None, bandwidth: float | None) -> dict:
    """FLOP time per photo of each compute stage at `peak`, and the memory time of one decode step for the batch at
    `bandwidth` (ms; None without them)."""
    parts = tower_parts(model)
    text = model.config.get_text_config(decoder=True)
    vision = model.config.vision_config

    def params(modules) -> int:
        return sum(p.numel() for m in modules for p in m.parameters())
    width = vision.hidden_size
    window = (getattr(vision, "window_size", 0) // vision.patch_size) ** 2 or patches
    merged = patches / vision.spatial_merge_size ** 2
    flops = {"patch_embed": 2 * patches * params(parts["patch_embed"]),
             "window_blocks": 2 * patches * params(parts["window_blocks"])
             + 4 * patches * min(window, patches) * width * len(parts["window_blocks"]),
             "full_blocks": 2 * patches * params(parts["full_blocks"]) + 4 * patches * patches * width
             * len(parts["full_blocks"]),
             "merger": 2 * merged * params(parts["merger"])}
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    llm = params([parts["language_model"]]) - params([parts["language_model"].embed_tokens])
    flops["prefill"] = 2 * prompt_tokens * llm + 2 * prompt_tokens ** 2 * text.num_attention_heads * head_dim * \
        text.num_hidden_layers
    out = {s: (round(1000 * f / peak, 4) if peak else None) for s, f in flops.items()}
    bytes_per = next(model.parameters()).element_size()
    kv = 2 * text.num_hidden_layers * text.num_key_value_heads * head_dim * prompt_tokens * batch * bytes_per
    weights = (llm + params(parts["lm_head"])) * bytes_per
    out["decode_step_memory_ms"] = round(1000 * (weights + kv) / bandwidth, 4) if bandwidth else None
    return out


def measure(engine, requests, max_new_tokens: int, cuda: bool) -> dict:
    """One timed engine call of `requests` (after one untimed warm-up call)."""
    from group_qc_dev.profile_stage_a import engine_call
    engine_call(engine, requests, max_new_tokens, ours=True)   # warm-up
    timer = StageTimer(StageClock(cuda))
    with timed(engine, timer):
        timer.clock.settle()
        start = time.perf_counter()
        responses = engine_call(engine, requests, max_new_tokens, ours=True)
        timer.clock.settle()
        wall_ms = 1000 * (time.perf_counter() - start)
    out = split_of(timer.spans_ms(), wall_ms, len(requests))
    out["tokens"] = sum(r.usage.completion_tokens for r in responses)
    out["prompt_tokens_per_photo"] = sum(r.usage.prompt_tokens for r in responses) / len(requests)
    return out


def run(model: str, batch_sizes: list[int], photo_scale: int, max_pixels: int, max_new_tokens: int,
        peak_tflops: float | None = None, bandwidth_tbs: float | None = None) -> dict:
    import torch

    from group_qc_dev.bench_stage_a import device_name
    from group_qc_dev.flops import peak_flops
    from group_qc_dev.profile_stage_a import one_batch
    cuda = torch.cuda.is_available()
    device = device_name()
    peak, bandwidth = peak_flops(device, peak_tflops), bandwidth_of(device, bandwidth_tbs)
    batches = []
    for batch in batch_sizes:
        engine, requests = one_batch(model, batch, photo_scale, max_pixels, max_new_tokens)
        row = {"batch_size": batch, **measure(engine, requests, max_new_tokens, cuda)}
        hf = engine.engine.model
        grid = engine.engine.template.encode(requests[0])["image_grid_thw"]
        patches = int(grid.prod(-1).sum())
        row["patches_per_photo"] = patches
        row["limits_ms"] = limits(hf, patches, row["prompt_tokens_per_photo"], batch, peak, bandwidth)
        batches.append(row)
        del engine
        if cuda:
            torch.cuda.empty_cache()
    return {"device": device, "timer": "cuda events" if cuda else "perf_counter (no GPU)",
            "peak_flops": peak, "bandwidth_bytes_per_s": bandwidth, "max_new_tokens": max_new_tokens,
            "max_pixels": max_pixels, "photo_scale": photo_scale, "batches": batches}


def print_split(result: dict) -> None:
    print(f"Stage-A time split on {result['device']} ({result['timer']}), ms per photo (FLOP time at peak):")
    for row in result["batches"]:
        parts = ", ".join(f"{s} {row['stages'][s]['ms_per_photo']:.3g}"
                          + (f" ({row['limits_ms'][s]:.3g})" if row["limits_ms"].get(s) is not None else "")
                          for s in STAGES)
        step = row["ms_per_decode_step"]
        memory = row["limits_ms"]["decode_step_memory_ms"]
        print(f"  batch {row['batch_size']}: wall {row['wall_ms'] / row['photos']:.3g}; {parts}; not covered "
              f"{row['not_covered_ms'] / row['photos']:.3g}; {row['decode_steps']} decode steps of "
              f"{step if step is None else round(step, 3)} ms (memory floor {memory})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m group_qc_dev.stage_split", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--batch_sizes", type=int, nargs="+", default=[16, 64, 128])
    p.add_argument("--photo_scale", type=int, default=1)
    p.add_argument("--max_pixels", type=int, default=37632)
    p.add_argument("--max_new_tokens", type=int, default=32)
    p.add_argument("--peak_tflops", type=float, help="the card's peak dense bf16 TFLOP/s, if not in flops' table")
    p.add_argument("--bandwidth_tbs", type=float, help="the card's memory bandwidth in TB/s, if not in the table")
    p.add_argument("--json", help="write the split here")
    args = p.parse_args(argv)
    if any(b < 1 for b in args.batch_sizes) or args.max_new_tokens < 1:
        p.error("--batch_sizes and --max_new_tokens must be at least 1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    result = run(args.model, args.batch_sizes, args.photo_scale, args.max_pixels, args.max_new_tokens,
                 args.peak_tflops, args.bandwidth_tbs)
    print_split(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
