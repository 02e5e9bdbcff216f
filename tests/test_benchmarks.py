"""The benchmark scripts run and measure like for like (their timings are not tested: they are printed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(77)

REPO = Path(__file__).resolve().parent.parent


def bench(script: str, *args: str, json_out: Path, timeout: int = 600) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", f"group_qc_dev.{script}", *args, "--json", str(json_out)], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(json_out.read_text())


@pytest.mark.slow
def test_stage_a_bench_gives_both_sides_the_same_work(tiny_qwen2_5_vl, tmp_path):
    """Bare and ours get the same photos in the same order, so they generate the same tokens in the same
    number of decode steps; otherwise their photos/s would not be comparable. vLLM, absent here, is
    reported as skipped."""
    result = bench("bench_stage_a", "--model", str(tiny_qwen2_5_vl), "--photos", "6", "--batch_sizes", "1", "4",
                   "--repeats", "1", "--max_new_tokens", "4", "--resume_groups", "20",
                   "--backends", "transformers", "vllm", "--all_variants", json_out=tmp_path / "a.json")
    rows = result["backends"]["transformers"]
    assert [r["batch_size"] for r in rows] == [1, 4]
    for r in rows:
        assert not r["ours_pre_encodes"]  # on a CPU ms-swift encodes inside infer; the ahead variant is timed
        # every variant generates the same tokens: the static KV cache, ms-swift's stop test, a call per window
        sides = [r["bare"], r["ours"], r["ours_one_thread"], r["ours_encode_ahead"], r["bare_preloaded"],
                 r["ours_static_cache"], r["ours_swift_stops"], r["ours_window_loop"], r["ours_compiled_decode"],
                 r["ours_compiled_inductor"]]
        assert len({(s["photos"], s["tokens"], s["decode_steps"]) for s in sides}) == 1, r
        assert len({s["texts_sha256"] for s in sides}) == 1, r   # text for text, on CPU in float32
        # model FLOPs per photo from the prompts' measured length; no MFU on a CPU (no peak to divide by)
        assert all(s["tflop_per_photo"] > 0 and s["mfu"] is None for s in sides)
        assert set(r["compile_warm_up_s"]) == {"ours_compiled_decode", "ours_compiled_inductor"}
        assert r["ours_encode_ahead"]["encode_seconds"] < r["bare"]["encode_seconds"]  # off the engine's clock
        assert r["ours_over_bare"] > 0
        assert set(r["over_bare"]) == {"ours", "ours_one_thread", "ours_encode_ahead", "bare_preloaded",
                                       "ours_static_cache", "ours_swift_stops", "ours_window_loop",
                                       "ours_compiled_decode", "ours_compiled_inductor"}
    assert rows[0]["bare"]["engine_calls"] == rows[0]["bare"]["photos"]  # batch 1: one call per photo
    assert "vllm" in result["skipped"] and result["resume"]["groups"] == 20


def test_stage_b_bench_measures_rewards_and_rows_without_a_model(tmp_path):
    result = bench("bench_stage_b", "--groups", "300", "--completions", "300", "--steps", "0",
                   json_out=tmp_path / "b.json")
    assert set(result["rewards_completions_per_s"]) == {"qc_label", "qc_format", "qc_consistency"}
    assert all(rate > 0 for rate in result["rewards_completions_per_s"].values())
    assert result["dataset"]["groups"] == 300
    assert not any(key.startswith("grpo") for key in result)


@pytest.mark.slow
@pytest.mark.parametrize("ours", [False, True], ids=["bare", "ours"])
def test_profile_stage_a_times_prefill_against_decode(tiny_qwen2_5_vl, tmp_path, ours):
    """profile_stage_a (what a GPU session runs when the check says the time is lost) runs without the profiler and
    measures one batch with 1 and with --max_new_tokens new tokens, bare and with --ours; 4 photos x 4 tokens. (That
    our_changes engages both changes is tested in tests/test_stopping.py and tests/test_vision_windows.py.)"""
    result = bench("profile_stage_a", "--model", str(tiny_qwen2_5_vl), "--batch_size", "4", "--max_new_tokens", "4",
                   *(["--ours"] if ours else []), json_out=tmp_path / "p.json")
    assert result["ours"] is ours and result["device"] == "cpu" and result["tokens"] == 4 * 4
    assert result["decode_steps"] == 3 and result["full_s"] > 0 and result["one_token_s"] > 0
    assert result["photos_per_s"] == pytest.approx(4 / result["full_s"])


def test_the_monitor_bench_runs_the_guard_and_reports_each_cell(tmp_path):
    """A few simulated missions per cell through the live guard's own code: a Stage-A shift is withdrawn after the
    change and never before, nothing withdraws a promise that holds, and each cell reports its numbers."""
    result = bench("bench_monitor", "--runs", "3", "--scenarios", "nothing", "stage_a", "--shares", "0.2",
                   "--volumes", "150", "--workers", "1", json_out=tmp_path / "m.json", timeout=300)
    cells = {c["scenario"]: c for c in result["cells"]}
    assert cells["nothing"]["withdrawals"] == 0 and cells["nothing"]["runs"] == 3
    assert cells["stage_a"]["withdrawn_after_change"] == 3 and cells["stage_a"]["withdrawn_before_change"] == 0
    assert cells["stage_a"]["delay_days_median"] <= 3


def test_the_parallel_sft_bench_names_what_it_needs_before_it_runs(tmp_path):
    """group_qc_dev.bench_parallel_sft times the demo's two SFT runs three ways (minutes: not run here); without a
    demo folder it says what to run first."""
    result = subprocess.run([sys.executable, "-m", "group_qc_dev.bench_parallel_sft", "--out", str(tmp_path)],
                            cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "tiny-qwen2_5_vl" in result.stderr and "make demo" in result.stderr
