#!/usr/bin/env python
"""Stage-A throughput, measured in one run on one engine and one set of photos (a script, not a test).

    python -m group_qc_dev.bench_stage_a [--model DIR | --arch qwen2_5_vl | --preset qwen2_5_vl-3b] [--photos 64]
                                    [--batch_sizes 1 4 8 16] [--max_new_tokens 32] [--backends transformers vllm]
                                    [--resume_groups 10000] [--all_variants] [--json out.json]

Prints, per batch size: photos/s and output tokens/s of bare `engine.infer` calls and of our pipeline
(discovery, photo loading and encoding, prompts, validation, JSONL writing) on the same requests in the
same order, and their ratio; where each side's engine time went (ms-swift's encode, vision and collate,
generate) and whether both generated the same tokens; the cost of resuming a finished mission of
--resume_groups groups (no inference at all); peak memory. --variants times single design choices
(one preparation thread, encoding inside the engine, PIL inputs for bare) in the same run.
Without --model it builds the tiny random-weight model (group_qc_dev/tiny_model.py); on a GPU pass
`--model` a real checkpoint or `--preset qwen2_5_vl-3b` (random weights, real dimensions), and
`--backends transformers vllm` to measure both engines in the same run where vLLM is installed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from unittest.mock import patch

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from qc_core.checkpoints import resolve_model  # noqa: E402
from stage_a.engine import SwiftSummaryEngine  # noqa: E402
from qc_core.images import load_photo  # noqa: E402
from qc_core.jsonl import write_jsonl_atomic  # noqa: E402
from qc_core.missions import load_registry  # noqa: E402
from stage_a.prompts import stage_a_messages  # noqa: E402
from stage_a import runner  # noqa: E402
from stage_a.runner import StageAOptions, run_stage_a  # noqa: E402
from group_qc_dev import synthetic, tiny_model  # noqa: E402

M = "BBU接地线检查"


def make_photos(root: Path, n_photos: int, scale: int = 1) -> int:
    """At least n_photos synthetic photos of one mission (about 3 photos per group), each side
    enlarged `scale` times (the generator draws 224x168; real photos are far larger)."""
    import shutil

    from PIL import Image
    per_label = max(1, n_photos // 6)
    while True:
        shutil.rmtree(root, ignore_errors=True)
        truth = synthetic.generate(root, seed=11, groups_per_label=per_label, missions=M)
        if len(truth) >= n_photos:
            break
        per_label += max(1, per_label // 4)
    if scale > 1:
        for path in root.rglob("*.jpg"):
            with Image.open(path) as im:
                big = im.resize((im.width * scale, im.height * scale), Image.Resampling.BICUBIC)
            big.save(path, "JPEG", quality=90)
    return len(truth)


class EngineTimer:
    """Times one engine's work, split the same way for both sides: `encode` (ms-swift's template:
    loading, resizing and tokenising photos) and `generate` (the model), plus the number of engine
    calls and the generated tokens. The decode steps (the longest reply of each call, summed) show
    whether both sides asked the model for the same work. Wraps ms-swift's TransformersEngine
    internals; on other engines only the totals are kept."""

    def __init__(self, engine):
        self.engine, self.patched = engine, {}  # name -> the instance attribute it replaced, if any
        self.calls = self.tokens = self.decode_steps = self.prompt_tokens = 0
        self.seconds = self.encode_seconds = self.generate_seconds = 0.0
        self.digest = hashlib.sha256()

    def _wrap(self, name, account):
        inner = getattr(self.engine, name, None)
        if inner is None:
            return
        self.patched[name] = self.engine.__dict__.get(name)  # e.g. SwiftSummaryEngine's encode hook

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = inner(*args, **kwargs)
            account(out, time.perf_counter() - t0)
            return out

        setattr(self.engine, name, timed)

    def __enter__(self):
        per_batch = hasattr(self.engine, "_infer_full")  # TransformersEngine: `infer` loops over `_infer`

        def on_call(responses, dt):  # one batch the model ran
            tokens = [r.usage.completion_tokens for r in responses if hasattr(r, "usage")]
            for r in responses:   # what was generated, so that sides can be compared text for text
                if hasattr(r, "choices"):
                    self.digest.update((r.choices[0].message.content or "").encode() + b"\0")
            self.calls += 1
            self.tokens += sum(tokens)
            self.prompt_tokens += sum(r.usage.prompt_tokens for r in responses if hasattr(r, "usage"))
            self.decode_steps += max(tokens, default=0)

        def on_infer(responses, dt):
            self.seconds += dt
            if not per_batch:
                on_call(responses, dt)

        self._wrap("infer", on_infer)
        if per_batch:
            self._wrap("_infer", on_call)
            self._wrap("_batch_encode", self._adder("encode_seconds"))
            self._wrap("_infer_full", self._adder("generate_seconds"))
        return self

    def _adder(self, attr):
        return lambda _, dt: setattr(self, attr, getattr(self, attr) + dt)

    def __exit__(self, *exc):
        for name, before in self.patched.items():
            if before is None:
                delattr(self.engine, name)  # back to the class method
            else:
                setattr(self.engine, name, before)

    def result(self) -> dict:
        out = {"engine_calls": self.calls, "engine_seconds": self.seconds, "tokens": self.tokens,
               "decode_steps": self.decode_steps, "prompt_tokens": self.prompt_tokens,
               "texts_sha256": self.digest.hexdigest()[:16]}
        if "_batch_encode" in self.patched:  # the rest: collating, moving to the device, the vision tower
            out.update(encode_seconds=self.encode_seconds, generate_seconds=self.generate_seconds,
                       other_seconds=self.seconds - self.encode_seconds - self.generate_seconds)
        return out


def request_order(photos: Path) -> list[Path]:
    """The photos in the order our pipeline sends them (discovery order), so that bare and ours
    fill every batch with the same photos and generate the same replies."""
    from stage_a.discovery import discover_mission, mission_folders
    registry = load_registry()
    mission = registry.resolve(M)
    folders = mission_folders(photos, registry, [mission], strict_unknown=False)[M]
    groups, _ = discover_mission(photos, mission, folders, registry)
    return [photos / rel for g in groups for rel in g.images]


def bench_bare(engine: SwiftSummaryEngine, photos: Path, batch_size: int, max_pixels: int,
               limit: int | None = None, preloaded: bool = False) -> dict:
    """ms-swift alone: the same prompts and photos (as paths, in the order ours sends them) in one
    infer call that ms-swift splits into batches of batch_size. With `preloaded`, the photos go in as
    images our loader decoded before the clock starts: this isolates what PIL inputs (rather than
    paths) cost inside the engine."""
    from swift.infer_engine import InferRequest
    messages = stage_a_messages(load_registry().resolve(M))
    paths = [str(p) for p in request_order(photos)][:limit]
    inputs = [load_photo(p, max_pixels=max_pixels) for p in paths] if preloaded else paths
    requests = [InferRequest(messages=messages, images=[x]) for x in inputs]
    engine.engine.max_batch_size = batch_size
    engine.engine.template.max_pixels = max_pixels
    with EngineTimer(engine.engine) as timer:
        start = time.perf_counter()
        responses = engine.engine.infer(requests, engine.request_config, use_tqdm=False)
        seconds = time.perf_counter() - start
    tokens = sum(r.usage.completion_tokens for r in responses)
    return {"photos": len(paths), "seconds": seconds, "photos_per_s": len(paths) / seconds,
            "tokens_per_s": tokens / seconds, **timer.result()}


class BenchError(RuntimeError):
    """A side could not do the work (e.g. groups failed): its photos/s would mean nothing."""


def bench_ours(engine, model: str, photos: Path, out: Path, batch_size: int, max_pixels: int, max_new_tokens: int):
    engine.engine.max_batch_size = batch_size
    opts = StageAOptions(input_dir=str(photos), output_dir=str(out), model=model, mission=M, batch_size=batch_size,
                         max_pixels=max_pixels, max_new_tokens=max_new_tokens, overwrite=True, progress=False)
    # The time outside the engine's infer calls is the pipeline's own overhead (discovery, lock,
    # waiting for photos, validation, JSONL), reported in seconds.
    with EngineTimer(engine.engine) as timer:
        start = time.perf_counter()
        report = run_stage_a(opts, engine=engine)
        seconds = time.perf_counter() - start
    work = timer.result()
    failed = sum(report.failed.values())
    if failed:   # a batch that fails (out of memory) is retried photo by photo: no longer the same work as bare
        errors = out / f"{M}_stage_a.errors.jsonl"
        raise BenchError(f"ours failed {failed} group(s) at batch {batch_size}: "
                         + (errors.read_text(encoding="utf-8").splitlines()[-1][:300] if errors.is_file() else ""))
    return {"photos": report.photos, "seconds": seconds, "photos_per_s": report.photos / seconds,
            "tokens_per_s": work["tokens"] / seconds, "overhead_seconds": seconds - work["engine_seconds"], **work}


def bench_resume(model: str, root: Path, n_groups: int) -> dict:
    """A finished mission of n_groups groups: discovery + reading the JSONL, no model, no inference."""
    from group_qc_dev.photos import jpeg  # small valid JPEG writer shared with the tests
    src = jpeg(root / "one.jpg", size=(32, 24))
    photos, out = root / "photos", root / "out"
    records = []
    for k in range(n_groups):
        label = "审核通过" if k % 2 else "审核不通过"
        gid = f"QC-RS-20250101-{k}"
        folder = photos / M / label / gid
        folder.mkdir(parents=True)
        names = [f"{gid}_{i}.jpg" for i in (1, 2)]
        for name in names:
            os.link(src, folder / name)
        records.append({"group_id": gid, "mission": M, "label": "pass" if k % 2 else "fail",
                        "images": [f"{M}/{label}/{gid}/{n}" for n in names],
                        "per_image": {"图片_1": "接地线×1/已捆扎", "图片_2": "接地排×1"},
                        "model": model, "created_at": "2026-01-01T00:00:00+00:00"})
    out.mkdir()
    write_jsonl_atomic(out / f"{M}_stage_a.jsonl", records)
    opts = StageAOptions(input_dir=str(photos), output_dir=str(out), model=model, mission=M, progress=False)
    start = time.perf_counter()
    report = run_stage_a(opts)
    seconds = time.perf_counter() - start
    assert not report.model_loaded and report.skipped[M] == n_groups, report
    return {"groups": n_groups, "seconds": seconds}


def backend_missing(backend: str) -> str | None:
    """Why `backend` cannot run here, or None."""
    if backend == "vllm":
        import importlib.util
        if importlib.util.find_spec("vllm") is None:
            return "vLLM is not installed"
        import torch
        if not torch.cuda.is_available():
            return "vLLM needs a GPU"
    return None


def with_setting(owner, name: str, value, run):
    """run() with owner.name set to value, then put back."""
    with patch.object(owner, name, value):
        return run()


def with_static_cache(engine, run):
    """run() with transformers' static KV cache: set on the model's generation config, which ms-swift copies into
    every call's (prepare_generation_config); on a GPU transformers then also compiles the decode step. Tokens are
    identical (tests/test_gpu_check.py)."""
    config = engine.engine.generation_config
    before = getattr(config, "cache_implementation", None)
    config.cache_implementation = "static"
    try:
        return run()
    finally:
        config.cache_implementation = before


# --variants: each isolates one design choice, timed in the same run as bare and ours (key -> label).
# The encode variant that equals the engine's default (pre-encoding on an accelerator, not on a CPU) is
# skipped: it would time "ours" twice.
VARIANTS = {
    "ours_one_thread": "ours, 1 preparation thread",
    "ours_encode_ahead": "ours, encoded ahead",
    "ours_encode_inside": "ours, encoded in engine",
    "bare_preloaded": "bare, preloaded photos",
    "ours_static_cache": "ours, static KV cache",
    "ours_swift_stops": "ours, ms-swift's stop words",
    "ours_window_loop": "ours, a call per vision window",
    "ours_compiled_decode": "ours, compiled decode (cudagraphs)",
    "ours_compiled_inductor": "ours, compiled decode (inductor)",
}
COMPILED = {"ours_compiled_decode": "cudagraphs", "ours_compiled_inductor": "inductor"}   # variant -> backend


def out_of_memory(exc: BaseException) -> bool:
    return "out of memory" in str(exc).lower() or type(exc).__name__ == "OutOfMemoryError"


def bench_backend(backend: str, model: str, photos: Path, tmp: Path, args, progress=None) -> list[dict]:
    """Every batch size on one engine; bare, ours and the variants alternate so all see the same
    machine noise. Batch sizes grow in the order given: the first that runs out of memory (or starts after
    --stop_after_s) ends the list with a row saying so. With --auto, `--batch_size auto` is then resolved on the
    engine (a GPU memory probe, or the CPU's fixed size) and timed like the others. `progress(rows)` is called
    after each row."""
    import gc
    # vLLM schedules its own batches (continuous batching): one engine sized for the largest batch,
    # and the pipeline's chunk size is the only batch size that varies.
    engine = SwiftSummaryEngine(resolve_model(model), backend=backend, batch_size=max(args.batch_sizes),
                                max_pixels=args.max_pixels, max_new_tokens=args.max_new_tokens)
    # warm-up, not timed (each batch size warms its own shape up too): the smallest batch, so that a GPU that cannot
    # hold the largest still gets its rows
    bench_bare(engine, photos, min(args.batch_sizes), args.max_pixels, limit=2 * min(args.batch_sizes))
    print(f"  {backend}: model on {engine.model_device()}; ours encodes photos "
          f"{'ahead, on the preparation threads' if engine.pre_encodes else 'inside the engine calls'}", flush=True)

    compiled = {}   # (variant, batch size) -> CompiledDecode, warmed up in timed_row
    utilisation = FlopsMeter(model, photos, args.max_pixels, args.peak_tflops)

    def run(key, b):
        def ours():
            return bench_ours(engine, model, photos, tmp / f"out-{backend}-{b}", b, args.max_pixels,
                              args.max_new_tokens)
        sides = {
            "bare": lambda: bench_bare(engine, photos, b, args.max_pixels),
            "ours": ours,
            "ours_one_thread": lambda: with_setting(runner, "PREPARATION_THREADS", 1, ours),
            "ours_encode_ahead": lambda: with_setting(engine, "pre_encodes", True, ours),
            "ours_encode_inside": lambda: with_setting(engine, "pre_encodes", False, ours),
            "bare_preloaded": lambda: bench_bare(engine, photos, b, args.max_pixels, preloaded=True),
            "ours_static_cache": lambda: with_static_cache(engine, ours),
            # ms-swift's StopWordsCriteria in place of stage_a.stopping.HostStopWords: what the host-side stop test
            # costs per decode step (bare always uses ms-swift's)
            "ours_swift_stops": lambda: with_setting(engine, "host_stop_words", False, ours),
            # transformers' own vision attention (a call per window) in place of stage_a.vision_windows
            "ours_window_loop": lambda: with_setting(engine, "window_batches", False, ours),
            **{key: (lambda key=key: with_setting(engine, "compiled_decode", compiled[key, b], ours))
               for key in COMPILED},
        }
        return sides[key]()

    def timed_row(b, **extra):
        import torch
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        # Warm this batch shape up (kernel choice, allocator) before timing either side; otherwise
        # whichever side runs first pays for it (seen on a GPU: bare 0.86 vs ours 1.01 photos/s at batch 1).
        bench_bare(engine, photos, b, args.max_pixels, limit=2 * b)
        if "ours_static_cache" in args.variants:
            # On a GPU the static cache compiles the decode step per batch shape (a minute or more): pay it here, not
            # inside the timed pass
            with_static_cache(engine, lambda: bench_bare(engine, photos, b, args.max_pixels, limit=2 * b))
        warm_up = {}
        for key, backend_name in COMPILED.items():
            if key in args.variants:
                # compile and capture once per batch shape, before anything is timed; its cost reported apart
                from stage_a.compiled_decode import CompiledDecode
                compiled[key, b] = cd = CompiledDecode(engine.engine.model, b, backend=backend_name)
                with cd:
                    warm_up[key] = cd.warm_up(lambda: bench_bare(engine, photos, b, args.max_pixels, limit=b))
                print(f"  {backend} batch {b}: {label_of(key)} compiled and captured in {warm_up[key]:.1f} s",
                      flush=True)
        default = "ours_encode_ahead" if engine.pre_encodes else "ours_encode_inside"
        keys = ["bare", "ours", *(v for v in args.variants if v != default)]
        runs = {key: [] for key in keys}
        for _ in range(args.repeats):
            for key in keys:
                runs[key].append(run(key, b))
                print(f"    batch {b}, {label_of(key)}: {runs[key][-1]['photos_per_s']:.2f} photos/s", flush=True)
        row = {"batch_size": b, **extra, "ours_pre_encodes": engine.pre_encodes, "compile_warm_up_s": warm_up,
               **{key: median(r) for key, r in runs.items()}}
        bare = row["bare"]["photos_per_s"]
        row["over_bare"] = {key: row[key]["photos_per_s"] / bare for key in keys[1:]}
        row["ours_over_bare"] = row["over_bare"]["ours"]
        row["peak_gpu_mib"] = gpu_peak_mib()   # this batch size's peak, both sides
        for key in keys:
            runs_side = row[key]
            runs_side.update(utilisation.of(runs_side))
        print(f"  {backend} batch {b}{' (auto)' if extra.get('auto') else ''}: bare {bare:.2f} photos/s, " + ", ".join(
            f"{label_of(key)} {row[key]['photos_per_s']:.2f}" for key in keys[1:]), flush=True)
        return row

    def failed_row(b, exc):
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        why = "out of memory" if out_of_memory(exc) else f"{type(exc).__name__}: {str(exc)[:300]}"
        print(f"  {backend} batch {b}: {why}; no larger batch is tried", flush=True)
        return {"batch_size": b, "error": why}

    rows, start = [], time.perf_counter()
    for b in args.batch_sizes:
        if args.stop_after_s is not None and time.perf_counter() - start > args.stop_after_s:
            rows.append({"batch_size": b, "error": f"not started: past --stop_after_s {args.stop_after_s}"})
            break
        try:
            rows.append(timed_row(b))
        except (RuntimeError, MemoryError) as exc:   # torch.cuda.OutOfMemoryError is a RuntimeError
            rows.append(failed_row(b, exc))
            break
        finally:
            if progress:
                progress(rows)
    if args.auto and backend == "transformers":
        from stage_a.batching import AUTO
        engine.batch_size = AUTO
        try:
            b = engine.resolve_batch_size(stage_a_messages(load_registry().resolve(M)))
            auto = {"auto": True, "auto_batch": engine.auto_batch}
            rows.append(timed_row(b, **auto))
        except (RuntimeError, MemoryError, ValueError) as exc:
            rows.append({**failed_row("auto", exc), "auto": True, "auto_batch": engine.auto_batch})
        if progress:
            progress(rows)
    engine = None  # frees the model (the nested functions share this binding)
    gc.collect()
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass
    return rows


class FlopsMeter:
    """Model FLOPs per photo and MFU of one side's run (group_qc_dev.flops): the tower from the photos' own sizes,
    the prefill from the prompts' measured length, the decode from the tokens generated."""

    def __init__(self, model: str, photos: Path, max_pixels: int, peak_tflops: float | None):
        from PIL import Image

        from group_qc_dev import flops
        self.flops, self.sizes = flops, flops.sizes_of(model)
        sizes = []
        for path in request_order(photos):
            with Image.open(path) as im:
                sizes.append(im.size)
        self.patches = sum(flops.photo_patches(w, h, self.sizes, max_pixels) for w, h in sizes) / len(sizes)
        self.peak = flops.peak_flops(device_name(), peak_tflops)

    def of(self, side: dict) -> dict:
        n = side["photos"]
        if not n or not side.get("prompt_tokens"):
            return {}
        per_photo = self.flops.photo_flops(self.sizes, self.patches, side["prompt_tokens"] / n, side["tokens"] / n)
        utilisation = self.flops.mfu(per_photo["total"], side["photos_per_s"], self.peak)
        return {"tflop_per_photo": per_photo["total"] / 1e12,
                "mfu": None if utilisation is None else round(utilisation, 4)}


def label_of(key: str) -> str:
    return VARIANTS.get(key, key)


def print_engine_split(rows: list[dict]) -> None:
    """Where each side's engine time went, and whether both sides gave the model the same work."""
    print(f"\n{'batch':>5} | {'side':<26} | {'calls':>5} | {'tokens':>6} | {'decode steps':>12} | {'encode s':>8} | "
          f"{'vision+collate s':>16} | {'generate s':>10} | {'engine s':>8}")
    for r in rows:
        for key in ["bare", "ours", *VARIANTS]:
            if key not in r:
                continue
            w, label = r[key], label_of(key)
            split = (f"{w['encode_seconds']:>8.2f} | {w['other_seconds']:>16.2f} | {w['generate_seconds']:>10.2f}"
                     if "encode_seconds" in w else f"{'-':>8} | {'-':>16} | {'-':>10}")
            print(f"{r['batch_size']:>5} | {label:<26} | {w['engine_calls']:>5} | {w['tokens']:>6} | "
                  f"{w['decode_steps']:>12} | {split} | {w['engine_seconds']:>8.2f}")
        if (r["ours"]["tokens"], r["ours"]["decode_steps"]) != (r["bare"]["tokens"], r["bare"]["decode_steps"]):
            print(f"  WARNING batch {r['batch_size']}: ours and bare generated different work (tokens or decode "
                  f"steps differ), so their photos/s are not comparable")


def percent(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def gpu_peak_mib() -> float | None:
    """Peak GPU memory allocated by this process since it started (or the last reset: the auto probe resets it)."""
    try:
        import torch
    except ImportError:
        return None
    return torch.cuda.max_memory_allocated() / 2**20 if torch.cuda.is_available() else None


def median(runs: list[dict]) -> dict:
    return sorted(runs, key=lambda r: r["photos_per_s"])[len(runs) // 2]


def device_name() -> str:
    import torch
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="checkpoint folder (default: build the tiny model, or --preset)")
    p.add_argument("--arch", default="qwen2_5_vl", choices=["qwen2_5_vl", "qwen3_vl"], help="tiny model arch")
    p.add_argument("--preset", help="build a random-weight model of real dimensions instead of the tiny one "
                                    "(a PRESETS name in group_qc_dev/tiny_model.py, e.g. qwen2_5_vl-3b; bfloat16, "
                                    "initialised on the GPU when there is one)")
    p.add_argument("--photos", type=int, default=64, help="at least this many synthetic photos")
    p.add_argument("--batch_sizes", type=int, nargs="+", default=[1, 4, 8, 16])
    p.add_argument("--max_new_tokens", type=int, default=32)
    p.add_argument("--max_pixels", type=int, default=224 * 168)
    p.add_argument("--photo_scale", type=int, default=1,
                   help="enlarge the 224x168 synthetic photos this many times per side (e.g. 4 on a GPU)")
    p.add_argument("--backends", nargs="+", default=["transformers"], choices=["transformers", "vllm"],
                   help="engines to measure in this run; one that cannot run here is reported and skipped")
    p.add_argument("--resume_groups", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=3, help="runs per batch size and side; the median is kept")
    p.add_argument("--variants", nargs="*", default=[], choices=list(VARIANTS),
                   help="also time these, in the same run: ours with one preparation thread; ours encoding photos "
                        "ahead on the preparation threads / with ms-swift encoding each batch inside infer (the one "
                        "that is the default here is skipped); bare engine calls on photos decoded beforehand (PIL "
                        "inputs instead of paths); ours with transformers' static KV cache (compiled decode on a GPU)")
    p.add_argument("--all_variants", action="store_true", help="--variants with every variant")
    p.add_argument("--auto", action="store_true",
                   help="after the batch sizes, resolve --batch_size auto on the engine (on a GPU a probe of its free "
                        "memory, on a CPU a fixed size) and time that batch size too")
    p.add_argument("--stop_after_s", type=float, default=None,
                   help="start no further batch size after this many seconds (the JSON says which were left out)")
    p.add_argument("--peak_tflops", type=float, default=None,
                   help="the card's peak dense bf16 TFLOP/s for MFU (default: by the card's name, "
                        "group_qc_dev/flops.py; none on a CPU)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    if args.all_variants:
        args.variants = list(VARIANTS)

    with tempfile.TemporaryDirectory(prefix="bench-stage-a-") as tmp:
        tmp = Path(tmp)
        if args.model:
            model = args.model
        elif args.preset:
            if args.preset not in tiny_model.PRESETS:
                p.error(f"--preset must be one of {', '.join(sorted(tiny_model.PRESETS))}, got {args.preset!r}")
            import torch
            start = time.perf_counter()
            model = str(tiny_model.build_tiny_model(
                out=tmp / "model", force=True, dtype="bfloat16", device="cuda" if torch.cuda.is_available() else "cpu",
                **tiny_model.PRESETS[args.preset]))
            print(f"built {args.preset} in {time.perf_counter() - start:.0f} s", flush=True)
        else:
            model = str(tiny_model.build_tiny_model(args.arch, tmp / "model", force=True))
        n_photos = make_photos(tmp / "photos", args.photos, args.photo_scale)
        results, skipped = {}, {}

        def partial(backend):   # the JSON so far, after every row: a run stopped by a timeout keeps its rows
            def write(rows):
                if args.json:
                    Path(args.json).write_text(json.dumps(
                        {"device": device_name(), "photos": n_photos, "max_new_tokens": args.max_new_tokens,
                         "max_pixels": args.max_pixels, "photo_scale": args.photo_scale, "model": args.preset or model,
                         "backends": {**results, backend: rows}, "skipped": skipped, "partial": True,
                         "peak_gpu_mib": gpu_peak_mib()}, indent=2))
            return write

        for backend in args.backends:
            why = backend_missing(backend)
            if why:
                skipped[backend] = why
                print(f"{backend}: skipped ({why})", flush=True)
                continue
            results[backend] = bench_backend(backend, model, tmp / "photos", tmp, args, partial(backend))
        resume = bench_resume(model, tmp / "resume", args.resume_groups) if args.resume_groups else None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu_peak_mb = gpu_peak_mib()
    print(f"\nStage-A benchmark on {device_name()}: {n_photos} photos, max_new_tokens {args.max_new_tokens}, "
          f"photos {224 * args.photo_scale}x{168 * args.photo_scale}, max_pixels {args.max_pixels}, "
          f"model {args.preset or model}")
    for backend, rows in results.items():
        first = next((r for r in rows if "error" not in r), None)
        print(f"\nbackend {backend}")
        if first is None:
            print("  no batch size ran: " + "; ".join(f"{r['batch_size']}: {r['error']}" for r in rows))
            continue
        base = first["bare"]["photos_per_s"]
        print(f"{'batch':>5} | {'bare photos/s':>13} | {'bare tok/s':>10} | {'ours photos/s':>13} | "
              f"{'ours/bare':>9} | {'bare vs batch ' + str(first['batch_size']):>16} | "
              f"{'ours outside engine':>19} | {'ours MFU':>8}")
        for r in rows:
            if "error" in r:
                print(f"{r['batch_size']:>5} | {r['error']}")
                continue
            print(f"{r['batch_size']:>5} | {r['bare']['photos_per_s']:>13.2f} | {r['bare']['tokens_per_s']:>10.1f} | "
                  f"{r['ours']['photos_per_s']:>13.2f} | {r['ours_over_bare']:>9.3f} | "
                  f"{r['bare']['photos_per_s'] / base:>15.2f}x | {r['ours']['overhead_seconds']:>17.2f} s | "
                  f"{percent(r['ours'].get('mfu')):>8}"
                  + "".join(f" | {label_of(k)}/bare {v:.3f}" for k, v in r["over_bare"].items() if k != "ours"))
        print_engine_split([r for r in rows if "error" not in r])
    if len(results) == 2:
        print("\nvllm / transformers, ours photos/s: " + ", ".join(
            f"batch {a['batch_size']} {b['ours']['photos_per_s'] / a['ours']['photos_per_s']:.2f}x"
            for a, b in zip(results["transformers"], results["vllm"]) if "error" not in a and "error" not in b))
    for backend, why in skipped.items():
        print(f"backend {backend}: not measured ({why})")
    if resume:
        print(f"resume of a finished mission with {resume['groups']} groups: {resume['seconds']:.2f} s (no model load)")
    print(f"peak RSS: {peak_mb:.0f} MiB"
          + (f"; peak GPU memory allocated: {gpu_peak_mb:.0f} MiB" if gpu_peak_mb else ""))
    result = {"device": device_name(), "photos": n_photos, "max_new_tokens": args.max_new_tokens,
              "max_pixels": args.max_pixels, "photo_scale": args.photo_scale, "model": args.preset or model,
              "backends": results, "skipped": skipped, "resume": resume, "peak_rss_mib": peak_mb,
              "peak_gpu_mib": gpu_peak_mb}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
