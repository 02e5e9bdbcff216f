#!/usr/bin/env python
"""Stage-A throughput, measured in one run on one engine and one set of photos (a script, not a test).

    python scripts/bench_stage_a.py [--model DIR | --arch qwen2_5_vl | --preset qwen2_5_vl-3b] [--photos 64]
                                    [--batch_sizes 1 4 8 16] [--max_new_tokens 32] [--backends transformers vllm]
                                    [--resume_groups 10000] [--json out.json]

Prints, per batch size: photos/s and output tokens/s of bare `engine.infer` calls and of our pipeline
(discovery, photo loading, prompts, validation, JSONL writing) on the same requests, and their ratio;
the cost of resuming a finished mission of --resume_groups groups (no inference at all); peak memory.
Without --model it builds the tiny random-weight model (scripts/make_tiny_model.py); on a GPU pass
`--model` a real checkpoint or `--preset qwen2_5_vl-3b` (random weights, real dimensions), and
`--backends transformers vllm` to measure both engines in the same run where vLLM is installed.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from stage_a.engine import SwiftSummaryEngine, resolve_model  # noqa: E402
from stage_a.images import load_photo  # noqa: E402
from stage_a.jsonl import write_jsonl_atomic  # noqa: E402
from stage_a.missions import load_registry  # noqa: E402
from stage_a.prompts import stage_a_messages  # noqa: E402
from stage_a import runner  # noqa: E402
from stage_a.runner import StageAOptions, run_stage_a  # noqa: E402

M = "BBU接地线检查"


def _load(name):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def make_photos(root: Path, n_photos: int, scale: int = 1) -> int:
    """At least n_photos synthetic photos of one mission (about 3 photos per group), each side
    enlarged `scale` times (the generator draws 224x168; real photos are far larger)."""
    import shutil

    from PIL import Image
    synthetic = _load("make_synthetic_qc")
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


def bench_bare(engine: SwiftSummaryEngine, photos: Path, batch_size: int, max_pixels: int,
               limit: int | None = None, preloaded: bool = False) -> dict:
    """ms-swift alone: the same prompts and photos as paths, infer in chunks of batch_size. With
    `preloaded`, the photos go in as images our loader decoded before the clock starts: this isolates
    what PIL inputs (rather than paths) cost inside the engine."""
    from swift.infer_engine import InferRequest
    messages = stage_a_messages(load_registry().resolve(M))
    paths = sorted(str(p) for p in photos.rglob("*.jpg"))[:limit]
    inputs = [load_photo(p, max_pixels=max_pixels) for p in paths] if preloaded else paths
    requests = [InferRequest(messages=messages, images=[x]) for x in inputs]
    engine.engine.max_batch_size = batch_size
    engine.engine.template.max_pixels = max_pixels
    start = time.perf_counter()
    responses = engine.engine.infer(requests, engine.request_config, use_tqdm=False)
    seconds = time.perf_counter() - start
    tokens = sum(r.usage.completion_tokens for r in responses)
    return {"photos": len(paths), "seconds": seconds, "photos_per_s": len(paths) / seconds,
            "tokens_per_s": tokens / seconds}


def bench_ours(engine, model: str, photos: Path, out: Path, batch_size: int, max_pixels: int, max_new_tokens: int):
    engine.engine.max_batch_size = batch_size
    opts = StageAOptions(input_dir=str(photos), output_dir=str(out), model=model, mission=M, batch_size=batch_size,
                         max_pixels=max_pixels, max_new_tokens=max_new_tokens, overwrite=True, progress=False)
    # Time spent inside the engine's infer calls, so the rest of the wall time is the pipeline's own
    # overhead (discovery, lock, waiting for photos, validation, JSONL), reported in seconds.
    inside = 0.0
    infer = engine.engine.infer

    def timed_infer(*args, **kwargs):
        nonlocal inside
        t0 = time.perf_counter()
        try:
            return infer(*args, **kwargs)
        finally:
            inside += time.perf_counter() - t0

    engine.engine.infer = timed_infer
    try:
        start = time.perf_counter()
        report = run_stage_a(opts, engine=engine)
        seconds = time.perf_counter() - start
    finally:
        del engine.engine.infer  # back to the class method
    return {"photos": report.photos, "seconds": seconds, "photos_per_s": report.photos / seconds,
            "engine_seconds": inside, "overhead_seconds": seconds - inside}


def bench_resume(model: str, root: Path, n_groups: int) -> dict:
    """A finished mission of n_groups groups: discovery + reading the JSONL, no model, no inference."""
    from tests.photos import jpeg  # small valid JPEG writer shared with the tests
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


def bench_backend(backend: str, model: str, photos: Path, tmp: Path, args) -> list[dict]:
    """Every batch size on one engine; bare and ours alternate so both see the same machine noise."""
    import gc
    # vLLM schedules its own batches (continuous batching): one engine sized for the largest batch,
    # and the pipeline's chunk size is the only batch size that varies.
    engine = SwiftSummaryEngine(resolve_model(model), backend=backend, batch_size=max(args.batch_sizes),
                                max_pixels=args.max_pixels, max_new_tokens=args.max_new_tokens)
    bench_bare(engine, photos, max(args.batch_sizes), args.max_pixels)  # warm-up, not timed
    rows = []
    for b in args.batch_sizes:
        # Warm this batch shape up (kernel choice, allocator) before timing either side; otherwise
        # whichever side runs first pays for it (seen on a GPU: bare 0.86 vs ours 1.01 photos/s at batch 1).
        bench_bare(engine, photos, b, args.max_pixels, limit=2 * b)
        bares, ourses, serials, preloads = [], [], [], []
        for _ in range(args.repeats):
            bares.append(bench_bare(engine, photos, b, args.max_pixels))
            ourses.append(bench_ours(engine, model, photos, tmp / f"out-{backend}-{b}", b, args.max_pixels,
                                     args.max_new_tokens))
            if args.compare_decode:  # the same pipeline with one photo-decoding thread
                workers, runner.DECODE_WORKERS = runner.DECODE_WORKERS, 1
                try:
                    serials.append(bench_ours(engine, model, photos, tmp / f"out-{backend}-{b}", b,
                                              args.max_pixels, args.max_new_tokens))
                finally:
                    runner.DECODE_WORKERS = workers
                preloads.append(bench_bare(engine, photos, b, args.max_pixels, preloaded=True))
        bare, ours = median(bares), median(ourses)
        row = {"batch_size": b, "bare": bare, "ours": ours, "ours_over_bare": ours["photos_per_s"] / bare["photos_per_s"]}
        if serials:
            row["bare_preloaded"] = median(preloads)
            row["preloaded_over_bare"] = row["bare_preloaded"]["photos_per_s"] / bare["photos_per_s"]
            row["ours_one_decode_thread"] = median(serials)
            row["one_thread_over_bare"] = row["ours_one_decode_thread"]["photos_per_s"] / bare["photos_per_s"]
        rows.append(row)
        print(f"  {backend} batch {b}: bare {bare['photos_per_s']:.2f} photos/s, ours {ours['photos_per_s']:.2f}"
              + (f", ours with one decode thread {row['ours_one_decode_thread']['photos_per_s']:.2f}" if serials else ""),
              flush=True)
    del engine
    gc.collect()
    try:
        import torch
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:
        pass
    return rows


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
                                    "(a PRESETS name in scripts/make_tiny_model.py, e.g. qwen2_5_vl-3b; bfloat16, "
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
    p.add_argument("--compare_decode", action="store_true",
                   help="also time our pipeline with one photo-decoding thread instead of runner.DECODE_WORKERS, "
                        "and bare engine calls on photos decoded beforehand (PIL inputs instead of paths)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-stage-a-") as tmp:
        tmp = Path(tmp)
        make = _load("make_tiny_model")
        if args.model:
            model = args.model
        elif args.preset:
            if args.preset not in make.PRESETS:
                p.error(f"--preset must be one of {', '.join(sorted(make.PRESETS))}, got {args.preset!r}")
            import torch
            start = time.perf_counter()
            model = str(make.build_tiny_model(out=tmp / "model", force=True, dtype="bfloat16",
                                              device="cuda" if torch.cuda.is_available() else "cpu",
                                              **make.PRESETS[args.preset]))
            print(f"built {args.preset} in {time.perf_counter() - start:.0f} s", flush=True)
        else:
            model = str(make.build_tiny_model(args.arch, tmp / "model", force=True))
        n_photos = make_photos(tmp / "photos", args.photos, args.photo_scale)
        results, skipped = {}, {}
        for backend in args.backends:
            why = backend_missing(backend)
            if why:
                skipped[backend] = why
                print(f"{backend}: skipped ({why})", flush=True)
                continue
            results[backend] = bench_backend(backend, model, tmp / "photos", tmp, args)
        resume = bench_resume(model, tmp / "resume", args.resume_groups) if args.resume_groups else None
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gpu_peak_mb = None
    try:
        import torch
        if torch.cuda.is_available():
            gpu_peak_mb = torch.cuda.max_memory_allocated() / 2**20
    except ImportError:
        pass
    print(f"\nStage-A benchmark on {device_name()}: {n_photos} photos, max_new_tokens {args.max_new_tokens}, "
          f"photos {224 * args.photo_scale}x{168 * args.photo_scale}, max_pixels {args.max_pixels}, "
          f"model {args.preset or model}")
    for backend, rows in results.items():
        base = rows[0]["bare"]["photos_per_s"]
        print(f"\nbackend {backend}")
        print(f"{'batch':>5} | {'bare photos/s':>13} | {'bare tok/s':>10} | {'ours photos/s':>13} | "
              f"{'ours/bare':>9} | {'bare vs batch ' + str(rows[0]['batch_size']):>16} | "
              f"{'ours outside engine':>19}")
        for r in rows:
            print(f"{r['batch_size']:>5} | {r['bare']['photos_per_s']:>13.2f} | {r['bare']['tokens_per_s']:>10.1f} | "
                  f"{r['ours']['photos_per_s']:>13.2f} | {r['ours_over_bare']:>9.3f} | "
                  f"{r['bare']['photos_per_s'] / base:>15.2f}x | {r['ours']['overhead_seconds']:>17.2f} s"
                  + (f" | one decode thread: ours/bare {r['one_thread_over_bare']:.3f}; bare on preloaded photos/bare "
                     f"{r['preloaded_over_bare']:.3f}" if "one_thread_over_bare" in r else ""))
    if len(results) == 2:
        print("\nvllm / transformers, ours photos/s: " + ", ".join(
            f"batch {a['batch_size']} {b['ours']['photos_per_s'] / a['ours']['photos_per_s']:.2f}x"
            for a, b in zip(results["transformers"], results["vllm"])))
    for backend, why in skipped.items():
        print(f"backend {backend}: not measured ({why})")
    if resume:
        print(f"resume of a finished mission with {resume['groups']} groups: {resume['seconds']:.2f} s (no model load)")
    print(f"peak RSS: {peak_mb:.0f} MiB" + (f"; peak GPU memory allocated: {gpu_peak_mb:.0f} MiB" if gpu_peak_mb else ""))
    result = {"device": device_name(), "photos": n_photos, "max_new_tokens": args.max_new_tokens,
              "max_pixels": args.max_pixels, "photo_scale": args.photo_scale, "model": args.preset or model, "backends": results,
              "skipped": skipped, "resume": resume, "peak_rss_mib": peak_mb, "peak_gpu_mib": gpu_peak_mb}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
