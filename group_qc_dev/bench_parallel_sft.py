#!/usr/bin/env python
"""The demo's two SFT runs (the Stage-A summary model and the Stage-B start point), measured three ways in one run:
one after the other with torch's default threads, side by side with one thread each (what scripts/demo.sh does), and
side by side with default threads. Prints the wall times and the ratios.

    python -m group_qc_dev.bench_parallel_sft [--out demo_out] [--steps 30]

Needs a demo folder that has reached step 3 (its tiny model and the two SFT row files: make demo).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _sft(swift: str, model: Path, rows: Path, out: Path, steps: int, threads: int | None) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    else:
        env.pop("OMP_NUM_THREADS", None)
    log = open(f"{out}.log", "w")
    return subprocess.Popen([swift, "sft", "configs/demo/sft.yaml", "--model", str(model), "--dataset", str(rows),
                             "--max_steps", str(steps), "--save_steps", str(steps), "--gradient_accumulation_steps",
                             "1", "--output_dir", str(out)], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)


def _timed(runs) -> float:
    start = time.perf_counter()
    for batch in runs:
        procs = [start_run() for start_run in batch]
        if any(p.wait() != 0 for p in procs):
            raise SystemExit("an SFT run failed: see the .log files beside its output folder")
    return time.perf_counter() - start


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="demo_out")
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args(argv)
    out = Path(args.out)
    model, rows_a, rows_b = out / "models/tiny-qwen2_5_vl", out / "sft/stage_a.jsonl", out / "sft/stage_b_start.jsonl"
    missing = [str(x) for x in (model, rows_a, rows_b) if not x.exists()]
    if missing:
        print(f"error: {', '.join(missing)} missing: run make demo first", file=sys.stderr)
        return 2
    swift = str(Path(sys.executable).parent / "swift")
    with tempfile.TemporaryDirectory() as tmp:
        def run(name, rows, threads):
            return lambda: _sft(swift, model, rows, Path(tmp) / name, args.steps, threads)
        one_after = _timed([[run("a1", rows_a, None)], [run("b1", rows_b, None)]])
        side_one = _timed([[run("a2", rows_a, 1), run("b2", rows_b, 1)]])
        side_default = _timed([[run("a3", rows_a, None), run("b3", rows_b, None)]])
    print(f"{args.steps} steps of each SFT: one after the other, default threads {one_after:.1f} s; side by side, "
          f"one thread each {side_one:.1f} s ({side_one / one_after:.2f} of it); side by side, default threads "
          f"{side_default:.1f} s ({side_default / one_after:.2f} of it)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
