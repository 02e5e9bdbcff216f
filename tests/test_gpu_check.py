"""The prepared GPU check (group_qc_dev.gpu_check) and Stage-A's --batch_size auto: the refusals before anything runs,
the batch-size arithmetic, and the whole check with --tiny on CPU (what CI runs, so the check cannot rot)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stage_a.batching import AUTO, AUTO_MAX_BATCH, CPU_AUTO_BATCH, GIB, auto_batch_size, parse_batch_size
from stage_a.runner import StageAOptions

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(200)

REPO = Path(__file__).resolve().parent.parent


def _gpu_check(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "group_qc_dev.gpu_check", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


def test_without_a_gpu_and_without_tiny_the_check_says_so_and_writes_nothing(tmp_path):
    result = _gpu_check("--out", str(tmp_path / "check"), env={"CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2, result.stderr[-2000:]
    assert "error: gpu_check needs a CUDA GPU, and torch" in result.stderr
    assert "CUDA_VISIBLE_DEVICES=''" in result.stderr and "add --tiny" in result.stderr
    assert not (tmp_path / "check").exists()


def test_a_folder_with_files_in_it_is_refused(tmp_path):
    (tmp_path / "old.json").write_text("{}")
    result = _gpu_check("--out", str(tmp_path), "--tiny")
    assert result.returncode == 2 and f"--out {tmp_path} exists and is not an empty folder" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]


def test_a_gpu_smaller_than_the_preset_needs_is_refused_naming_the_memory():
    from group_qc_dev.gpu_check import CheckError, check_gpu_memory, memory_needed, preset_parameters
    parameters = preset_parameters("qwen2_5_vl-3b")   # the real architecture, built on the meta device
    assert 3.5e9 < parameters < 4.0e9                 # Qwen2.5-VL-3B: 3.75 B with its vision tower
    with pytest.raises(CheckError, match=r"NVIDIA T4 has 12\.0 GiB free \(of 15\.0 GiB\), and the check of "
                                         r"qwen2_5_vl-3b \(3\.\d\d B parameters, 7\.\d GiB in bf16\) needs about "
                                         r"1[5-6]\.\d GiB: free the GPU, use a larger one"):
        check_gpu_memory("qwen2_5_vl-3b", parameters, 12 * GIB, 15 * GIB, "NVIDIA T4")
    check_gpu_memory("qwen2_5_vl-3b", parameters, 79 * GIB, 80 * GIB, "NVIDIA H100 80GB HBM3")   # fits
    assert memory_needed(parameters) > 14.0 * GIB   # the photo-aware GRPO peak seen on an H100


@pytest.mark.parametrize("value, expected", [("auto", AUTO), (" AUTO ", AUTO), ("16", 16), (8, 8)])
def test_batch_size_values(value, expected):
    assert parse_batch_size(value) == expected


@pytest.mark.parametrize("value", ["", "sixteen", "1.5", "autom"])
def test_a_batch_size_that_is_no_number_and_not_auto_is_refused_naming_it(value):
    with pytest.raises(ValueError, match=rf"--batch_size {value!r}: expected a whole number .* or auto"):
        parse_batch_size(value)


def test_auto_batch_size_fits_the_probe_into_the_free_memory():
    # 60 GiB free, 2 GiB fixed, 0.5 GiB per photo: 0.85 x 60 - 2 = 49 GiB -> 98 photos
    assert auto_batch_size(60 * GIB, 2 * GIB, 0.5 * GIB) == 98
    assert auto_batch_size(600 * GIB, 0, 0.01 * GIB) == AUTO_MAX_BATCH   # host memory caps it
    assert auto_batch_size(10 * GIB, 1 * GIB, 7 * GIB) == 1
    with pytest.raises(ValueError, match=r"--batch_size auto: the GPU \(NVIDIA A10\) has 4\.00 GiB free after loading "
                                         r"the model, and one photo needs 5\.00 GiB at this --max_pixels"):
        auto_batch_size(4 * GIB, 1 * GIB, 4 * GIB, device="the GPU (NVIDIA A10)")


@pytest.mark.parametrize("options, message", [
    (dict(batch_size="auto", infer_backend="vllm"), "auto sizes the transformers engine's batches to GPU memory; "
                                                    "vLLM schedules its own: give a number"),
    (dict(batch_size="big"), "--batch_size 'big' is out of range: an integer from 1 to 4096, or auto"),
    (dict(batch_size=0), "--batch_size 0 is out of range"),
])
def test_stage_a_refuses_a_batch_size_it_cannot_use(options, message, tmp_path):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        StageAOptions(input_dir=str(tmp_path), output_dir=str(tmp_path), model="m", **options).validate()


@pytest.mark.slow
def test_batch_size_auto_on_a_cpu_is_a_fixed_size_and_says_so(tiny_qwen2_5_vl, synthetic, tmp_path):
    """No GPU memory to probe: auto is CPU_AUTO_BATCH, logged, and the run writes every group."""
    truth = synthetic.generate(tmp_path / "photos", seed=3, groups_per_label=2, missions="BBU接地线检查")
    result = subprocess.run([sys.executable, "-m", "group_qc", "stage-a", "--input_dir", str(tmp_path / "photos"),
                             "--output_dir", str(tmp_path / "out"), "--model", str(tiny_qwen2_5_vl), "--mission",
                             "BBU接地线检查", "--batch_size", "auto", "--max_new_tokens", "4", "--no_progress"],
                            cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"--batch_size auto on a CPU: {CPU_AUTO_BATCH} photos per engine call" in result.stderr
    # logged after the model loaded: ms-swift's import had silenced group-qc's log lines from there on
    assert "summaries stopped at --max_new_tokens 4; raise it if summaries look cut off" in result.stderr
    lines = (tmp_path / "out" / "BBU接地线检查_stage_a.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == len({t["group_id"] for t in truth}) == 4


@pytest.mark.slow
def test_gpu_check_tiny_runs_every_step_and_writes_their_results(tmp_path):
    """The check as CI runs it: the tiny model on CPU through the same steps and commands as on a GPU (bench_stage_a,
    bench_stage_b --judging, run_grpo.sh rollout=hf deepspeed=none, text and photos), one JSON and a log."""
    out = tmp_path / "check"
    result = _gpu_check("--tiny", "--out", str(out), timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    report = json.loads((out / "gpu_check.json").read_text(encoding="utf-8"))
    assert report["mode"] == "tiny" and report["failed"] == []
    for step in ("model", "stage_a", "prepare", "judge", "grpo_text", "grpo_photos"):
        assert report["steps"][step]["status"] == "ok", step
        assert Path(report["steps"][step]["log"]).is_file()
    stage_a = report["stage_a"]
    fixed = [b for b in stage_a["batches"] if not b["auto"]]
    assert [b["batch_size"] for b in fixed] == [4, 8] and stage_a["largest_batch_that_ran"] >= 8
    assert all(b["same_tokens"] and b["ours_over_bare"] > 0 for b in stage_a["batches"])   # no error rows either
    # ours with a call per vision window (window batches off), ours with the compiled decode step and its warm-up
    assert all(set(b["variants_over_bare"]) == {"ours_window_loop", "ours_compiled_decode"} for b in fixed)
    assert all(set(b["compile_warm_up_s"]) == {"ours_compiled_decode"} for b in fixed)
    assert all(b["same_texts"] and b["tflop_per_photo"] > 0 and b["mfu"]["ours"] is None for b in fixed)
    assert all(stage_a["time_split"][side]["batch_sizes"] == 2 for side in ("bare", "ours"))
    assert "ms per photo (vision tower, prefill)" in (out / "gpu_check.log").read_text(encoding="utf-8")
    (auto,) = [b for b in stage_a["batches"] if b["auto"]]
    assert auto["batch_size"] == CPU_AUTO_BATCH and stage_a["auto_batch"]["device"] == "cpu"
    prepare = report["prepare"]   # the host's photo preparation against this check's GPU (here: CPU) time per photo
    assert set(prepare["pool_ms_per_photo"]) == {"1", "2"} and prepare["decode_resize_ms"] > 0
    assert prepare["gpu_ms_per_photo"] > 0 and isinstance(prepare["keeps_up"], bool)
    judge = report["judge"]
    assert set(judge["groups_per_s"]) == {"judge", "evaluate_with_p_fail", "evaluate_generation_only"}
    assert all(v > 0 for v in judge["groups_per_s"].values()) and judge["p_fail_ms_per_group"] > 0
    for step in ("grpo_text", "grpo_photos"):
        grpo = report[step]
        assert grpo["steps"] == 3 and grpo["s_per_step"] > 0 and grpo["run_record"], step
        assert grpo["lora_layers"] == [2, 3, 4, 5]
    assert all(t == 0 for t in report["grpo_text"]["photo_tokens_per_sample"])
    assert all(t > 0 for t in report["grpo_photos"]["photo_tokens_per_sample"])
    assert report["grpo_photos"]["frozen_tower_unchanged"] is True
    assert report["grpo_photos"]["engine_changes"] == {"window_batches": 1, "host_stop_words": True}
    assert "grpo_photos_bare" not in report["steps"]   # optional: only when --steps names it
    log = (out / "gpu_check.log").read_text(encoding="utf-8")
    for step in ("stage_a", "judge", "grpo_text", "grpo_photos"):
        assert f"{step}: ok in" in log
    assert "all steps passed" in log


@pytest.mark.slow
def test_gpu_check_grpo_photos_bare_runs_with_our_engine_changes_off(tmp_path):
    """The optional step that prices our engine changes in training: photo-aware GRPO with GROUP_QC_BARE_ENGINE=1,
    and the run record it summarises says both were off."""
    out = tmp_path / "check"
    result = _gpu_check("--tiny", "--out", str(out), "--steps", "grpo_photos_bare", timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    report = json.loads((out / "gpu_check.json").read_text(encoding="utf-8"))
    bare = report["grpo_photos_bare"]
    assert bare["status"] == "ok" and bare["steps"] == 3 and all(t > 0 for t in bare["photo_tokens_per_sample"])
    assert bare["engine_changes"] == {"window_batches": 0, "host_stop_words": False, "off_by": "GROUP_QC_BARE_ENGINE=1"}


@pytest.mark.slow
def test_the_static_kv_cache_generates_the_same_tokens_through_ms_swift(tiny_qwen3_vl, synthetic, tmp_path,
                                                                        monkeypatch):
    """transformers' static KV cache (what compiles the decode step on a GPU), switched on the way the Stage-A
    benchmark's ours_static_cache variant does (the model's generation config, which ms-swift copies into every
    call): static caches are really made, and the summaries are the default dynamic cache's, on CPU. Qwen3-VL here;
    Qwen2.5-VL in tests/test_benchmarks.py, where the variant must give the same tokens as bare ms-swift."""
    from group_qc_dev.bench_stage_a import with_static_cache
    from qc_core.checkpoints import resolve_model
    from stage_a.engine import SwiftSummaryEngine
    from qc_core.images import load_photo
    from qc_core.missions import load_registry
    from stage_a.prompts import stage_a_messages
    synthetic.generate(tmp_path, seed=5, groups_per_label=1, missions="BBU接地线检查")
    photos = sorted(tmp_path.rglob("*.jpg"))[:6]
    engine = SwiftSummaryEngine(resolve_model(str(tiny_qwen3_vl)), batch_size=3, max_pixels=12_544,
                                max_new_tokens=12)
    messages = stage_a_messages(load_registry().resolve("BBU接地线检查"))
    pairs = [(messages, load_photo(p, max_pixels=12_544)) for p in photos]
    from transformers.cache_utils import StaticCache
    made = []   # a spy (the real class runs): which run used a static cache at all
    real_init = StaticCache.__init__
    monkeypatch.setattr(StaticCache, "__init__", lambda self, *a, **k: (made.append(1), real_init(self, *a, **k))[1])
    dynamic = [s.text for s in engine.summarize(pairs)]
    assert made == []
    static = [s.text for s in with_static_cache(engine, lambda: engine.summarize(pairs))]
    assert len(made) == 2   # one per batch of 3
    assert static == dynamic and all(dynamic)
    assert engine.engine.generation_config.cache_implementation is None   # put back


class MemoryMeter:
    """torch.cuda's memory functions as the GPU probe uses them, reading a made-up GPU: `fixed` + n x `per_photo` GiB
    at a batch of n, out of memory above `fits`. The engine and model are real and really run each probe batch."""
    OutOfMemoryError = __import__("torch").cuda.OutOfMemoryError

    def __init__(self, engine, free, fixed, per_photo, fits):
        self.engine, self.free, self.fixed, self.per_photo, self.fits = engine, free, fixed, per_photo, fits
        self.syncs, self.batches = 0, []

    def synchronize(self):
        self.syncs += 1
        if self.syncs % 2 == 0:   # the one after a probe batch ran
            n = self.engine.engine.max_batch_size
            self.batches.append(n)
            if n > self.fits:
                raise self.OutOfMemoryError("CUDA out of memory (made up)")

    def max_memory_allocated(self):
        return (self.fixed + self.engine.engine.max_batch_size * self.per_photo) * GIB

    def mem_get_info(self):
        return self.free * GIB, 80 * GIB

    def memory_allocated(self):
        return 0

    def get_device_name(self, index):
        return "Made-up GPU"

    def empty_cache(self):
        pass

    def reset_peak_memory_stats(self):
        pass


@pytest.mark.slow
def test_the_gpu_probe_fits_verifies_and_halves_on_out_of_memory(tiny_qwen2_5_vl, caplog):
    """The probe's own logic, on a CPU: real engine calls at 1 and 4 probe photos forced to max_new_tokens, the fit,
    the verifying batch, halving after an out-of-memory, the log line; and a GPU that cannot hold the probe refused
    naming the memory. Only the memory readings are made up (no GPU here)."""
    from qc_core.checkpoints import resolve_model
    from stage_a.engine import SwiftSummaryEngine
    from qc_core.missions import load_registry
    from stage_a.prompts import stage_a_messages
    engine = SwiftSummaryEngine(resolve_model(str(tiny_qwen2_5_vl)), batch_size="auto", max_pixels=12_544,
                                max_new_tokens=3)
    messages = stage_a_messages(load_registry().resolve("BBU接地线检查"))
    # 0.85 x 20 GiB - 1 GiB fixed = 16 GiB = 64 photos of 0.25 GiB; 64 runs out, 32 fits
    meter = MemoryMeter(engine, free=20, fixed=1, per_photo=0.25, fits=40)
    with caplog.at_level("INFO", logger="group_qc.stage_a"):
        batch, details = engine.probe_gpu_batch(messages, cuda=meter)
    assert (batch, meter.batches, details["halved_after_out_of_memory_at"]) == (32, [1, 4, 64, 32], [64])
    assert details["per_photo_gib"] == pytest.approx(0.25) and details["fixed_gib"] == pytest.approx(1)
    assert "--batch_size auto: 32 photos per engine call on Made-up GPU (20.0 GiB free after the model" in caplog.text
    assert engine.engine.generation_config.min_new_tokens is None   # the forced reply length is put back
    with pytest.raises(ValueError, match=r"--batch_size auto: the probe of 4 photos at --max_pixels 12544 ran out of "
                                         r"the GPU's memory \(Made-up GPU, 2\.0 GiB free of 80\.0"):
        engine.probe_gpu_batch(messages, cuda=MemoryMeter(engine, free=2, fixed=1, per_photo=0.5, fits=1))
    assert engine.engine.generation_config.min_new_tokens is None


@pytest.mark.parametrize("rows, expected", [
    # 74 photos at batch 8 (10 calls x 32 steps) and 16 (5 x 32): 100 ms per photo and 20 ms per step, recovered
    ([(74, 320, 7.4 + 6.4), (74, 160, 7.4 + 3.2)], {"ms_per_photo": 100.0, "ms_per_decode_step": 20.0}),
    # the H200's bare rows (docs/gpu/h200_bench_stage_a.json)
    ([(74, 320, 19.262), (74, 160, 14.946)], {"ms_per_photo": 143.6, "ms_per_decode_step": 27.0}),
    ([(74, 320, 19.262)], None),                        # one batch size: nothing to split
    ([(74, 320, 19.262), (74, 320, 19.0)], None),       # two batch sizes with the same steps: nothing either
])
def test_time_split_separates_photos_from_decode_steps(rows, expected):
    from group_qc_dev.gpu_check import time_split
    split = time_split([{"photos": p, "decode_steps": d, "generate_seconds": t} for p, d, t in rows])
    if expected is None:
        assert split is None
    else:
        assert {k: split[k] for k in expected} == expected and split["batch_sizes"] == len(rows)
