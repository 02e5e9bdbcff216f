#!/usr/bin/env python
"""Is a batch of photos ready before the GPU needs it? Stage-A's photo preparation, measured on this machine's CPU
(a script, not a test).

    python -m group_qc_dev.bench_prepare [--model DIR] [--photos 64] [--photo_scale 18] [--max_pixels 602112]
                                         [--threads 1 2 4 8] [--gpu_ms_per_photo 60] [--json out.json]

Per photo, on one thread: decoding and resizing (qc_core.images.load_photo: PIL, JPEG draft decoding) and
ms-swift's template encode (the image processor: rescale, normalise, patches; the prompt's tokens), the two steps
the runner's preparation threads do while the model works on the previous batch. Then a pool like the runner's
preparing all the photos at each --threads count (the runner uses stage_a.runner.PREPARATION_THREADS), in ms per
photo: how well the steps share a machine's cores (decoding releases the GIL; the encode's Python does not).
Photos are the synthetic ones
enlarged --photo_scale times per side (18: 4032x3024, a phone's 12 MP), so decoding costs what a real photo's does.

The verdict line compares the pool's time per photo with --gpu_ms_per_photo, the GPU's time per photo: 60 ms is
Stage-A's best on the H200 (16.7 photos/s, docs/gpu/h200_gpu_check_engine_changes.json), 29 ms the issue's moonshot
(34 photos/s). Preparation keeps up when the pool is faster than the GPU: the next batch is then ready when the
current one ends (the runner prepares one batch plus one photo per thread ahead).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="checkpoint folder (default: the tiny model; only its processor matters)")
    p.add_argument("--photos", type=int, default=64)
    p.add_argument("--photo_scale", type=int, default=18, help="enlarge the 224x168 synthetic photos (18: 12 MP)")
    p.add_argument("--max_pixels", type=int, default=602112)
    p.add_argument("--threads", type=int, nargs="+", default=None,
                   help="pool sizes to time (default: 1 and the runner's PREPARATION_THREADS)")
    p.add_argument("--gpu_ms_per_photo", type=float, default=60.0)
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)

    from group_qc_dev import tiny_model
    from group_qc_dev.bench_stage_a import M, make_photos, request_order
    from stage_a import runner
    from qc_core.checkpoints import resolve_model
    from stage_a.engine import SwiftSummaryEngine
    from qc_core.images import load_photo
    from qc_core.missions import load_registry
    from stage_a.prompts import stage_a_messages

    with tempfile.TemporaryDirectory(prefix="bench-prepare-") as tmp:
        tmp = Path(tmp)
        model = args.model or str(tiny_model.build_tiny_model("qwen2_5_vl", tmp / "model", force=True))
        make_photos(tmp / "photos", args.photos, args.photo_scale)
        paths = request_order(tmp / "photos")[:args.photos]
        # pre_encode=True: the runner's GPU path (encoding on the preparation threads), whatever this machine has
        engine = SwiftSummaryEngine(resolve_model(model), batch_size=len(paths), max_pixels=args.max_pixels,
                                    max_new_tokens=8, pre_encode=True)
        messages = stage_a_messages(load_registry().resolve(M))
        engine.setup_preparation_thread()
        from PIL import Image
        with Image.open(paths[0]) as im:
            size = im.size
        load_ms, encode_ms = [], []
        for path in paths:
            start = time.perf_counter()
            image = load_photo(path, max_pixels=args.max_pixels)
            middle = time.perf_counter()
            prepared = engine.prepare(messages, image)
            end = time.perf_counter()
            assert prepared.error is None, prepared.error
            load_ms.append(1000 * (middle - start))
            encode_ms.append(1000 * (end - middle))
        pools = {}
        for threads in args.threads or sorted({1, runner.PREPARATION_THREADS}):
            with ThreadPoolExecutor(threads, initializer=engine.setup_preparation_thread) as pool:
                start = time.perf_counter()
                list(pool.map(lambda path: engine.prepare(messages, load_photo(path, max_pixels=args.max_pixels)),
                              paths))
                pools[threads] = 1000 * (time.perf_counter() - start) / len(paths)
    one = statistics.median(load_ms) + statistics.median(encode_ms)
    runner_threads = runner.PREPARATION_THREADS
    pool_ms = pools.get(runner_threads, min(pools.values()))
    print(f"{len(paths)} photos of {size[0]}x{size[1]} to --max_pixels {args.max_pixels}, on {os.cpu_count()} cores")
    print(f"one thread, median per photo: decode and resize {statistics.median(load_ms):.1f} ms, template encode "
          f"{statistics.median(encode_ms):.1f} ms, together {one:.1f} ms")
    for threads, ms in pools.items():
        print(f"a pool of {threads} thread(s){' (the runner' + chr(39) + 's)' if threads == runner_threads else ''}: "
              f"{ms:.1f} ms per photo ({1000 / ms:.1f} photos/s; a batch of 64 in {64 * ms / 1000:.2f} s)")
    ratio = args.gpu_ms_per_photo / pool_ms
    print(f"against the GPU's {args.gpu_ms_per_photo:.0f} ms per photo: preparation is {ratio:.1f}x as fast"
          + (" (keeps up: the next batch is ready when the GPU finishes the current one)" if ratio >= 1
             else " (falls behind: the GPU waits for photos)"))
    if args.json:
        Path(args.json).write_text(json.dumps({
            "photos": len(paths), "photo_size": list(size), "max_pixels": args.max_pixels, "cores": os.cpu_count(),
            "decode_resize_ms": statistics.median(load_ms), "encode_ms": statistics.median(encode_ms),
            "pool_ms_per_photo": {str(k): v for k, v in pools.items()}, "runner_threads": runner_threads,
            "gpu_ms_per_photo": args.gpu_ms_per_photo, "keeps_up": ratio >= 1}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
