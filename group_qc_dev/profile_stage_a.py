#!/usr/bin/env python
"""Where one Stage-A batch spends its time: bare ms-swift's engine on one batch of photos, timed with 1 and with
--max_new_tokens new tokens (prefill + vision tower against the decode steps), then with --profile one call under
torch's profiler (the ops that take the most CPU and GPU time, and how much of the wall the GPU was busy).

    python -m group_qc_dev.profile_stage_a --model DIR [--batch_size 16] [--photo_scale 4 --max_pixels 602112]
        [--static_cache] [--ours] [--profile] [--json out.json]

A GPU busy for a small share of the wall means the decode loop is bound by the host (Python, kernel launches,
synchronisations), which CUDA graphs (a static cache compiles the decode step) or larger batches remove; a GPU busy
most of the wall means the arithmetic is the limit.
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from group_qc_dev.bench_stage_a import M, make_photos, request_order, stage_a_messages, with_static_cache
from qc_core.checkpoints import resolve_model
from stage_a.engine import SwiftSummaryEngine
from qc_core.images import load_photo
from qc_core.missions import load_registry


def one_batch(model, batch_size: int, photo_scale: int, max_pixels: int, max_new_tokens: int):
    """(engine, requests): our engine on `model` and one batch of Stage-A requests on synthetic photos, decoded
    beforehand (decoding is not what is timed or counted)."""
    from swift.infer_engine import InferRequest
    with tempfile.TemporaryDirectory(prefix="profile-stage-a-") as tmp:
        photos = Path(tmp) / "photos"
        make_photos(photos, batch_size, photo_scale)
        images = [load_photo(str(x), max_pixels=max_pixels) for x in request_order(photos)[:batch_size]]
    engine = SwiftSummaryEngine(resolve_model(str(model)), backend="transformers", batch_size=batch_size,
                                max_pixels=max_pixels, max_new_tokens=max_new_tokens)
    engine.engine.max_batch_size = batch_size
    engine.engine.template.max_pixels = max_pixels
    messages = stage_a_messages(load_registry().resolve(M))
    return engine, [InferRequest(messages=messages, images=[im]) for im in images]


def engine_call(engine, requests, max_new_tokens: int, ours: bool = False) -> list:
    """One greedy engine call: bare ms-swift's, or with `ours` the same call with our changes on (SwiftSummaryEngine's
    our_changes: the stop test at one copy per step, vision windows by length)."""
    from contextlib import nullcontext

    from swift.infer_engine import RequestConfig
    with engine.our_changes() if ours else nullcontext():
        return engine.engine.infer(requests, RequestConfig(max_tokens=max_new_tokens, temperature=0), use_tqdm=False)


def timed_call(engine, requests, max_new_tokens: int, ours: bool = False) -> tuple[float, int]:
    import torch
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    responses = engine_call(engine, requests, max_new_tokens, ours)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start, sum(r.usage.completion_tokens for r in responses)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--photo_scale", type=int, default=1)
    p.add_argument("--max_pixels", type=int, default=37632)
    p.add_argument("--max_new_tokens", type=int, default=32)
    p.add_argument("--static_cache", action="store_true", help="transformers' static KV cache (compiled decode on GPU)")
    p.add_argument("--ours", action="store_true",
                   help="with our changes to the engine on (the stop test, vision windows by length), as Stage-A runs")
    p.add_argument("--profile", action="store_true",
                   help="then one call under torch's profiler (CPU and CUDA ops); "
                        "can hang where CUPTI is proxied (gVisor)")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--json")
    args = p.parse_args(argv)
    import torch
    from torch.profiler import ProfilerActivity, profile

    engine, requests = one_batch(args.model, args.batch_size, args.photo_scale, args.max_pixels, args.max_new_tokens)

    def calls():
        out = {}
        for _ in range(2):   # warm-up (and, with a static cache on a GPU, compilation) for both lengths
            timed_call(engine, requests, 1, args.ours)
            timed_call(engine, requests, args.max_new_tokens, args.ours)
        out["one_token_s"], _ = timed_call(engine, requests, 1, args.ours)
        out["full_s"], out["tokens"] = timed_call(engine, requests, args.max_new_tokens, args.ours)
        out["decode_steps"] = args.max_new_tokens - 1
        out["ms_per_decode_step"] = 1000 * (out["full_s"] - out["one_token_s"]) / (args.max_new_tokens - 1)
        out["photos_per_s"] = len(requests) / out["full_s"]
        # printed before the profiler starts: on the H200 we were lent (gVisor) a profiled call did not end within
        # a minute, and these numbers were lost with it
        print(json.dumps(out), flush=True)
        if not args.profile:
            return out
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        with profile(activities=activities) as prof:
            wall = timed_call(engine, requests, args.max_new_tokens, args.ours)[0]
        events = prof.key_averages()
        gpu = torch.cuda.is_available()
        key = "self_device_time_total" if gpu else "self_cpu_time_total"
        rows = sorted(events, key=lambda e: getattr(e, key, 0), reverse=True)[:args.top]
        out["profiled_wall_s"] = wall
        if gpu:
            busy = sum(getattr(e, "self_device_time_total", 0) for e in events) / 1e6
            out["gpu_busy_s"] = busy
            out["gpu_busy_share"] = busy / wall
        out["top_ops"] = [{"op": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1000,
                           "self_gpu_ms": getattr(e, "self_device_time_total", 0) / 1000} for e in rows]
        print(events.table(sort_by=key, row_limit=args.top), flush=True)
        if gpu:   # the host's side of the same call
            print(events.table(sort_by="self_cpu_time_total", row_limit=args.top), flush=True)
        return out

    result = with_static_cache(engine, calls) if args.static_cache else calls()
    result.update(batch_size=args.batch_size, max_pixels=args.max_pixels, static_cache=args.static_cache,
                  ours=args.ours,
                  device=torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu")
    print(json.dumps({k: v for k, v in result.items() if k != "top_ops"}, indent=1), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
