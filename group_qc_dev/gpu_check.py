#!/usr/bin/env python
"""One prepared check of group-qc on a GPU: every number the docs/gpu.md's table holds, in one command.

    python -m group_qc_dev.gpu_check --out DIR [--preset qwen2_5_vl-3b]   # on one GPU, at most 11 minutes
    python -m group_qc_dev.gpu_check --out DIR --tiny                     # the same steps, tiny model, CPU

Steps, each a separate process with its own timeout, so one that fails or runs out of time still leaves the
others' numbers:

  model        the preset (random weights, real dimensions, bf16) built on the GPU; with --tiny the tiny model
  stage_a      group_qc_dev.bench_stage_a: bare ms-swift against our pipeline at growing batch sizes (stopping at
               the first that runs out of memory or time; the largest that fit is reported), then --batch_size auto
  prepare      group_qc_dev.bench_prepare: decoding, resizing and encoding 12 MP photos on this host's cores, per
               photo on one thread and in pools of 1-8 threads, against Stage-A's best time per photo on the GPU
  judge        group_qc_dev.bench_stage_b --judging: p_fail per group and judging groups/s against evaluation's
               generation, on one loaded engine
  grpo_text    3 GRPO steps through scripts/run_grpo.sh rollout=hf deepspeed=none (no vLLM, no DeepSpeed):
               s/step and peak GPU memory (ms-swift's memory(GiB))
  grpo_photos  the same, photo-aware (images=1)
  grpo_photos_bare  (only when named in --steps: outside the 11 minutes) grpo_photos with GROUP_QC_BARE_ENGINE=1,
               our two engine changes off: what they are worth in training
  split        (only when named in --steps) group_qc_dev.stage_split: one Stage-A call per batch size (16, 64, 128)
               timed stage by stage with CUDA events (host encode, patch embedding, window and full blocks, merger,
               prefill, decode steps), each beside its FLOP or memory time on the card

Everything goes to DIR/gpu_check.json (rewritten after every step) and DIR/gpu_check.log, each step's own output
to DIR/logs/<step>.log. Exit status: 0 when every step passed, 1 when one failed or timed out (its entry says
which and where its log is), 2 when the check cannot start (no GPU without --tiny, a GPU with too little free
memory for the preset, a non-empty --out).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEPS = ("model", "stage_a", "prepare", "judge", "grpo_text", "grpo_photos", "grpo_photos_bare", "split")
OPTIONAL_STEPS = ("grpo_photos_bare", "split")   # run only when --steps names them
MISSION = "BBU接地线检查"
GIB = 2 ** 30

# Sizes and per-step timeouts (seconds): at most 11 minutes for the default steps. Measured by this check on one H200
# (2026-11-27, torch 2.11, our pins as wheels; docs/gpu/h200_gpu_check_engine_changes.json): the 3B preset built in 28
# s; the Stage-A step with batch 16, 32, 64 and auto and two variants took 227 s; judging 30 s; photo-aware GRPO 60 s
# (75 s with GROUP_QC_BARE_ENGINE=1), start included. The compiled decode variant adds its compile per batch size
# (42 s at batch 128, 25 s at 64 in docs/gpu/h200_bench_stage_a_compiled_decode.json), hence 360 s for the step and no
# batch size started after 240 s. The photos are the synthetic ones enlarged 4x (896x672 = 602112 pixels = 768 visual
# tokens on Qwen2.5-VL), 32 new tokens, as in the target. --tiny takes about 1.5 minutes on 2 idle cores.
PROFILES = {
    "gpu": dict(
        timeouts=dict(model=45, stage_a=360, prepare=90, judge=55, grpo_text=95, grpo_photos=125, grpo_photos_bare=125,
                      split=240),
        stage_a=["--photos", "64", "--photo_scale", "4", "--max_pixels", "602112", "--max_new_tokens", "32",
                 "--batch_sizes", "16", "32", "64", "--stop_after_s", "240",
                 "--variants", "ours_window_loop", "ours_compiled_decode"],
        prepare=["--photos", "64", "--photo_scale", "18", "--max_pixels", "602112", "--threads", "1", "2", "4", "8"],
        grpo=dict(num_generations="8", prompts_per_step="2", max_completion_length="64", max_pixels="200704"),
        split=["--batch_sizes", "16", "64", "128", "--photo_scale", "4", "--max_pixels", "602112",
               "--max_new_tokens", "32"],
        judge=["--groups", "2000", "--completions", "2000", "--judge_batch_size", "16", "--judge_max_new_tokens", "32"],
        data_groups=32,
    ),
    # Timeouts well above the 2-3 minutes the whole --tiny check takes on 2 idle cores: on a shared machine every
    # step can take several times as long, and a timeout here is a failure, not a measurement.
    "tiny": dict(
        timeouts=dict(model=120, stage_a=240, prepare=240, judge=240, grpo_text=300, grpo_photos=300,
                      grpo_photos_bare=300, split=240),
        stage_a=["--photos", "12", "--max_new_tokens", "8", "--batch_sizes", "4", "8", "--stop_after_s", "120",
                 "--variants", "ours_window_loop", "ours_compiled_decode"],
        prepare=["--photos", "8", "--photo_scale", "4", "--max_pixels", "12544", "--threads", "1", "2"],
        grpo=dict(num_generations="2", prompts_per_step="2", max_completion_length="8", max_pixels="12544"),
        split=["--batch_sizes", "2", "4", "--max_new_tokens", "4"],
        judge=["--groups", "200", "--completions", "200", "--judge_batch_size", "8", "--judge_max_new_tokens", "8"],
        data_groups=12,
    ),
}
GRPO_STEPS = 3


class CheckError(ValueError):
    """The check cannot start: the message says why and what to do (exit 2)."""


# --------------------------------------------------------------------------------------------------
# Before anything runs: the GPU, and whether the preset fits it
# --------------------------------------------------------------------------------------------------
def preset_parameters(preset: str) -> int:
    """The preset's parameter count, from its real transformers architecture built on the meta device (no memory)."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration

    from group_qc_dev import tiny_model
    dims = dict(tiny_model.PRESETS[preset])
    arch = dims.pop("arch")
    config = tiny_model.build_config(arch, dims.pop("layers"), dims.pop("hidden"), dims.pop("vision_depth"),
                                     dims.pop("vision_hidden"), dims.pop("init_std"), dtype="bfloat16", **dims)
    cls = Qwen2_5_VLForConditionalGeneration if arch == "qwen2_5_vl" else Qwen3VLForConditionalGeneration
    with torch.device("meta"):
        model = cls(config)
    return sum(p.numel() for p in model.parameters())


def memory_needed(parameters: int) -> float:
    """Bytes of GPU memory the check needs for a model of this size: its bf16 weights twice over plus 2 GiB. Seen on
    an H100: photo-aware GRPO on the 3B preset (7.0 GiB of weights) peaked at 14.0 GiB, the most of any step."""
    return 2 * 2 * parameters + 2 * GIB


def check_gpu_memory(preset: str, parameters: int, free_bytes: float, total_bytes: float, device: str) -> None:
    """Raises CheckError naming the memory when the GPU's free memory is below what the preset needs."""
    need = memory_needed(parameters)
    if free_bytes < need:
        raise CheckError(f"{device} has {free_bytes / GIB:.1f} GiB free (of {total_bytes / GIB:.1f} GiB), and the "
                         f"check of {preset} ({parameters / 1e9:.2f} B parameters, {2 * parameters / GIB:.1f} GiB in "
                         f"bf16) needs about {need / GIB:.1f} GiB: free the GPU, use a larger one, or a smaller "
                         f"--preset")


_QUERY = """import json, torch
gpu = torch.cuda.is_available()
free, total = torch.cuda.mem_get_info(0) if gpu else (0, 0)
print(json.dumps({"available": gpu, "name": torch.cuda.get_device_name(0) if gpu else None, "free_bytes": free,
                  "total_bytes": total, "torch": torch.__version__, "cuda": torch.version.cuda}))"""


def find_gpu() -> dict:
    """What torch sees of the first CUDA device (available, name, free and total bytes, versions), asked in a child
    process so that this one holds no CUDA context (hundreds of MB) while the steps run."""
    result = subprocess.run([sys.executable, "-c", _QUERY], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise CheckError(f"could not ask torch about the GPU: {result.stderr.strip()[-500:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def no_gpu_message(gpu: dict) -> str:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    where = "CUDA_VISIBLE_DEVICES unset" if visible is None else f"CUDA_VISIBLE_DEVICES={visible!r}"
    return (f"gpu_check needs a CUDA GPU, and torch {gpu['torch']} sees none here ({where}): run it on the GPU "
            f"machine, or add --tiny for the same steps with the tiny model on CPU")


# --------------------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------------------
def run_step(argv: list[str], timeout: float, log_path: Path, env: dict) -> dict:
    """Runs one step as its own process group; on timeout the whole group (swift's children too) is stopped."""
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + shlex.join(argv) + "\n")
        log.flush()
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout)
            status = "ok" if returncode == 0 else "failed"
        except subprocess.TimeoutExpired:
            status = "timeout"
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
            returncode = proc.returncode
    return {"status": status, "returncode": returncode, "seconds": round(time.perf_counter() - start, 1),
            "timeout_s": timeout, "log": str(log_path), "command": shlex.join(argv)}


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def time_split(sides: list[dict]) -> dict | None:
    """generate seconds = photos x P + decode steps x D, fitted (least squares) over the batch sizes of one side: P is
    the vision tower and prefill per photo, D one decode step of a batch. Every batch size sees the same photos and the
    same tokens, so only the number of calls (and with it the decode steps) changes. None with fewer than two batch
    sizes; a negative value means the rows were too noisy to split."""
    points = [(s["photos"], s["decode_steps"], s["generate_seconds"]) for s in sides if "generate_seconds" in s]
    if len({steps for _, steps, _ in points}) < 2:
        return None
    import numpy as np
    a = np.array([[photos, steps] for photos, steps, _ in points], dtype=float)
    (p, d), *_ = np.linalg.lstsq(a, np.array([t for _, _, t in points]), rcond=None)
    return {"ms_per_photo": round(1000 * float(p), 1), "ms_per_decode_step": round(1000 * float(d), 1),
            "batch_sizes": len(points)}


def stage_a_summary(bench: dict | None) -> dict:
    """Per batch size: bare and ours photos/s, their ratio, whether both generated the same tokens; the largest
    batch that ran, and what --batch_size auto chose."""
    if not bench:
        return {}
    rows = (bench.get("backends") or {}).get("transformers") or []
    out = {"device": bench.get("device"), "photos": bench.get("photos"), "max_pixels": bench.get("max_pixels"),
           "max_new_tokens": bench.get("max_new_tokens"), "peak_gpu_mib": bench.get("peak_gpu_mib"), "batches": []}
    for r in rows:
        if "error" in r:
            out["batches"].append({"batch_size": r["batch_size"], "auto": r.get("auto", False), "error": r["error"]})
            continue
        bare, ours = r["bare"], r["ours"]
        out["batches"].append({
            "batch_size": r["batch_size"], "auto": r.get("auto", False),
            "bare_photos_per_s": round(bare["photos_per_s"], 3), "ours_photos_per_s": round(ours["photos_per_s"], 3),
            "ours_over_bare": round(r["ours_over_bare"], 3), "peak_gpu_mib": r.get("peak_gpu_mib"),
            "same_tokens": (bare["tokens"], bare["decode_steps"]) == (ours["tokens"], ours["decode_steps"]),
            # the replies text for text (a digest of each side's); on a GPU in bf16 a random-weight model's near-ties
            # can flip with the kernels a batch shape picks, so this may be false where same_tokens is true
            "same_texts": bare.get("texts_sha256") is not None and bare.get("texts_sha256") == ours.get("texts_sha256"),
            "tflop_per_photo": ours.get("tflop_per_photo"),
            "mfu": {side: r[side].get("mfu") for side in ("bare", "ours", *r.get("over_bare", {})) if side in r},
            "compile_warm_up_s": r.get("compile_warm_up_s") or None,
            # all of bare's generate over its decode steps, the vision tower and prefill included (the README's
            # "ms per generated token"); time_split below separates the photos from the steps
            "bare_generate_ms_per_step": round(1000 * bare.get("generate_seconds", bare["engine_seconds"]) /
                                               max(bare["decode_steps"], 1), 1),
            # the variants (--variants), each over bare: e.g. ours_swift_stops, ours with ms-swift's stop test
            "variants_over_bare": {k: round(v, 3) for k, v in r.get("over_bare", {}).items() if k != "ours"}})
    ran = [b["batch_size"] for b in out["batches"] if "error" not in b]
    out["largest_batch_that_ran"] = max(ran, default=None)
    out["time_split"] = {side: time_split([r[side] for r in rows if "error" not in r and not r.get("auto")])
                         for side in ("bare", "ours")}
    out["auto_batch"] = next((r.get("auto_batch") for r in rows if r.get("auto")), None)
    return out


def judge_summary(bench: dict | None) -> dict:
    j = (bench or {}).get("judging")
    if not j:
        return {}
    return {"groups": j["groups"], "batch_size": j["batch_size"], "max_new_tokens": j["max_new_tokens"],
            "groups_per_s": {k: round(v, 3) for k, v in j["groups_per_s"].items()},
            "p_fail_ms_per_group": round(j["p_fail_ms_per_group"], 2), "peak_gpu_mib": bench.get("peak_gpu_mib")}


def prepare_summary(prepare: dict | None, stage_a: dict | None) -> dict:
    """Photo preparation per photo (one thread, and each pool size) against the GPU's time per photo: Stage-A's
    best ours photos/s in this check, when the stage_a step ran."""
    if not prepare:
        return {}
    rows = ((stage_a or {}).get("backends") or {}).get("transformers") or []
    best = max((r["ours"]["photos_per_s"] for r in rows if "ours" in r), default=None)
    out = {k: prepare[k] for k in ("photo_size", "cores", "decode_resize_ms", "encode_ms", "pool_ms_per_photo",
                                   "runner_threads")}
    if best:
        gpu_ms = 1000 / best
        pool = prepare["pool_ms_per_photo"].get(str(prepare["runner_threads"]))
        out.update(gpu_ms_per_photo=round(gpu_ms, 1), keeps_up=pool is not None and pool <= gpu_ms)
    return out


def grpo_summary(out_dir: Path) -> dict:
    """s/step (the steps after the first, which pays for warm-up), peak memory, photo tokens, from ms-swift's
    logging.jsonl and our run record, whatever of them the run got to write."""
    runs = sorted(out_dir.glob("v*"))
    if not runs:
        return {}
    run = runs[-1]
    steps = []
    log = run / "logging.jsonl"
    if log.is_file():
        for line in log.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if "step_time" in row:
                steps.append(row)
    times = [s["step_time"] for s in steps]
    later = times[1:] or times
    record = read_json(run / "group_qc_run.json") or {}
    frozen = record.get("frozen_parts_sha256") or {}
    out = {"run": str(run), "steps": len(steps), "step_seconds": [round(t, 2) for t in times],
           "s_per_step": round(sum(later) / len(later), 2) if later else None,
           "peak_memory_gib": max((s.get("memory(GiB)", 0) for s in steps), default=None) or None,
           "completion_mean_length": [s.get("completions/mean_length") for s in steps],
           "photo_tokens_per_sample": [s.get("qc/photo_tokens_per_sample") for s in steps],
           "run_record": bool(record), "engine_changes": record.get("engine_changes"),
           "lora_layers": sorted(int(k) for k in (record.get("lora") or {}).get("trained_layers") or {})}
    if frozen:
        out["frozen_tower_unchanged"] = frozen.get("at_start") == frozen.get("at_end") and "at_end" in frozen
    return out


def write_data(folder: Path, groups: int) -> Path:
    """Stage-A records of `groups` groups of 1-6 phone-sized photos (one mission, labels alternating), written
    directly: GRPO and judging measure without depending on the stage_a step."""
    from group_qc_dev.bench_stage_b import write_photo_groups
    stage_a = folder / "stage_a"
    stage_a.mkdir(parents=True)
    write_photo_groups(stage_a, folder / "photos", n=groups)
    return stage_a


def step_commands(mode: str, model: Path, out: Path, stage_a: Path, preset: str) -> dict[str, list[str]]:
    py = sys.executable
    profile = PROFILES[mode]
    if mode == "gpu":
        build = [py, "-m", "group_qc_dev.tiny_model", "--preset", preset, "--device", "cuda", "--out", str(model),
                 "--force"]
        cuda = "0"
    else:
        build = [py, "-m", "group_qc_dev.tiny_model", "--arch", "qwen2_5_vl", "--out", str(model), "--force"]
        cuda = "cpu"
    g = profile["grpo"]

    def grpo(name: str, images: bool) -> list[str]:
        return ["bash", "scripts/run_grpo.sh", f"mission={MISSION}", f"cuda={cuda}", "rollout=hf", "deepspeed=none",
                f"model={model}", f"stage_a_dir={stage_a}", f"output_dir={out / name}", f"max_steps={GRPO_STEPS}",
                "val=0", f"num_generations={g['num_generations']}", f"prompts_per_step={g['prompts_per_step']}",
                *(["images=1", f"max_pixels={g['max_pixels']}"] if images else []),
                f"extra=--max_completion_length {g['max_completion_length']} --dynamic_sample false "
                f"--save_strategy no --report_to none --gradient_accumulation_steps 1 --logging_steps 1"]

    return {
        "model": build,
        "stage_a": [py, "-m", "group_qc_dev.bench_stage_a", "--model", str(model), *profile["stage_a"], "--auto",
                    "--repeats", "1", "--resume_groups", "0", "--json", str(out / "stage_a.json")],
        "prepare": [py, "-m", "group_qc_dev.bench_prepare", "--model", str(model), *profile["prepare"],
                    "--json", str(out / "prepare.json")],
        "judge": [py, "-m", "group_qc_dev.bench_stage_b", "--model", str(model), "--steps", "0", "--judging",
                  "--judge_model", str(model), "--judge_stage_a_dir", str(stage_a), "--judge_repeats", "1",
                  *profile["judge"], "--json", str(out / "judge.json")],
        "grpo_text": grpo("grpo_text", False),
        "grpo_photos": grpo("grpo_photos", True),
        "grpo_photos_bare": ["env", "GROUP_QC_BARE_ENGINE=1", *grpo("grpo_photos_bare", True)],
        "split": [py, "-m", "group_qc_dev.stage_split", "--model", str(model), *profile["split"],
                  "--json", str(out / "split.json")],
    }


def summarize(name: str, out: Path) -> dict:
    if name == "stage_a":
        return stage_a_summary(read_json(out / "stage_a.json"))
    if name == "judge":
        return judge_summary(read_json(out / "judge.json"))
    if name == "prepare":
        return prepare_summary(read_json(out / "prepare.json"), read_json(out / "stage_a.json"))
    if name.startswith("grpo"):
        return grpo_summary(out / name)
    if name == "split":
        return read_json(out / "split.json") or {}
    return {}


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------
class Report:
    """DIR/gpu_check.json, rewritten whole after every step (atomically), and DIR/gpu_check.log."""

    def __init__(self, out: Path, head: dict):
        self.out, self.data = out, {**head, "steps": {}}
        self.log_file = open(out / "gpu_check.log", "a", encoding="utf-8")

    def say(self, line: str) -> None:
        stamped = f"[{datetime.now(timezone.utc).strftime('%H:%M:%S')}] {line}"
        print(stamped, flush=True)
        self.log_file.write(stamped + "\n")
        self.log_file.flush()

    def put(self, name: str, result: dict) -> None:
        self.data["steps"][name] = result
        if name in STEPS[1:]:
            self.data[name] = result
        self.save()

    def save(self) -> None:
        tmp = self.out / ".gpu_check.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=2, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.out / "gpu_check.json")


def prepare(args) -> tuple[str, dict]:
    """(mode, device description), or CheckError before anything is written."""
    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CheckError(f"--out {out} exists and is not an empty folder: give a new or empty one (the check never "
                         f"mixes its files with earlier ones)")
    if args.tiny:
        return "tiny", {"name": "CPU (--tiny)", "cores": os.cpu_count()}
    gpu = find_gpu()
    if not gpu.pop("available"):
        raise CheckError(no_gpu_message(gpu))
    from group_qc_dev import tiny_model
    if args.preset not in tiny_model.PRESETS:
        raise CheckError(f"--preset {args.preset!r}: use one of {', '.join(sorted(tiny_model.PRESETS))}")
    parameters = preset_parameters(args.preset)
    check_gpu_memory(args.preset, parameters, gpu["free_bytes"], gpu["total_bytes"], gpu["name"])
    return "gpu", {**gpu, "preset_parameters": parameters, "memory_needed_gib": memory_needed(parameters) / GIB}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m group_qc_dev.gpu_check", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="a new or empty folder for gpu_check.json, gpu_check.log, logs/")
    p.add_argument("--tiny", action="store_true", help="the tiny model on CPU, in a few minutes (what CI runs)")
    p.add_argument("--preset", default="qwen2_5_vl-3b", help="the random-weight model of real size to build on the GPU")
    p.add_argument("--steps", nargs="+", choices=STEPS[1:], default=[s for s in STEPS[1:] if s not in OPTIONAL_STEPS],
                   help="run only these (the model is always built; default: all but grpo_photos_bare)")
    args = p.parse_args(argv)
    try:
        mode, device = prepare(args)
    except CheckError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    (out / "logs").mkdir(parents=True, exist_ok=True)
    profile = PROFILES[mode]
    report = Report(out, {"mode": mode, "device": device, "preset": None if mode == "tiny" else args.preset,
                          "started_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          "budget_s": sum(profile["timeouts"][s] for s in ("model", *args.steps)),
                          "grpo_steps": GRPO_STEPS, "grpo": profile["grpo"]})
    report.say(f"gpu_check ({mode}) on {device['name']}; results: {out / 'gpu_check.json'}")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    if mode == "tiny":
        env["CUDA_VISIBLE_DEVICES"] = ""
    model = out / "model"
    stage_a = write_data(out / "data", profile["data_groups"])
    commands = step_commands(mode, model, out, stage_a, args.preset)
    failed = []
    for name in ("model", *args.steps):
        if name != "model" and report.data["steps"]["model"]["status"] != "ok":
            report.put(name, {"status": "skipped", "why": "the model step did not finish"})
            failed.append(name)
            continue
        timeout = profile["timeouts"][name]
        report.say(f"{name}: starting (timeout {timeout} s), log {out / 'logs' / (name + '.log')}")
        result = run_step(commands[name], timeout, out / "logs" / f"{name}.log", env)
        result.update(summarize(name, out))
        report.put(name, result)
        report.say(f"{name}: {result['status']} in {result['seconds']} s" + headline(name, result))
        if result["status"] != "ok":
            failed.append(name)
    report.data["finished_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    report.data["failed"] = failed
    report.save()
    report.say("all steps passed" if not failed else f"failed or timed out: {', '.join(failed)} (see their logs)")
    return 1 if failed else 0


def mfu_text(share) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def headline(name: str, r: dict) -> str:
    """The step's key numbers in one line of the log."""
    if name == "stage_a" and r.get("batches"):
        parts = [f"batch {b['batch_size']}{' (auto)' if b.get('auto') else ''}: " +
                 (b["error"] if "error" in b else f"bare {b['bare_photos_per_s']}, ours {b['ours_photos_per_s']} "
                                                  f"photos/s ({b['ours_over_bare']}x, same tokens {b['same_tokens']}, "
                                                  f"MFU {mfu_text(b['mfu'].get('ours'))})")
                 for b in r["batches"]]
        parts += [f"{side}: {split['ms_per_photo']} ms per photo (vision tower, prefill) + "
                  f"{split['ms_per_decode_step']} ms per decode step"
                  for side, split in (r.get("time_split") or {}).items() if split]
        return "; " + "; ".join(parts)
    if name == "prepare" and r.get("pool_ms_per_photo"):
        return (f"; one photo: decode+resize {r['decode_resize_ms']:.1f} ms, encode {r['encode_ms']:.1f} ms; pools: "
                + ", ".join(f"{k} threads {v:.1f} ms/photo" for k, v in r["pool_ms_per_photo"].items())
                + (f"; GPU {r['gpu_ms_per_photo']} ms/photo, keeps up: {r['keeps_up']}" if "keeps_up" in r else ""))
    if name == "judge" and r.get("groups_per_s"):
        g = r["groups_per_s"]
        return (f"; judge {g['judge']} groups/s, evaluate {g['evaluate_with_p_fail']} with p_fail, "
                f"{g['evaluate_generation_only']} generation only; p_fail {r['p_fail_ms_per_group']} ms/group")
    if name.startswith("grpo") and r.get("steps"):
        return (f"; {r['steps']} steps, {r['s_per_step']} s/step (steps {r['step_seconds']}), peak memory "
                f"{r['peak_memory_gib']} GiB")
    if name == "split" and r.get("batches"):
        def largest(b):
            stage = max(b["stages"], key=lambda s: b["stages"][s]["ms"])
            return f"{stage} {b['stages'][stage]['ms_per_photo']:.3g}"
        return "; ms per photo: " + "; ".join(f"batch {b['batch_size']}: wall {b['wall_ms'] / b['photos']:.3g}, "
                                              f"largest {largest(b)}" for b in r["batches"])
    return ""


if __name__ == "__main__":
    sys.exit(main())
