"""The README's `swift infer` recipe (ms-swift's own batch inference on group_qc_val, re-scored by stage_b.evaluate),
run as written from another folder: without GROUP_QC_STAGE_A_DIR the plugin stops before the model loads with one
line saying what to export (it was a 12-frame traceback after loading, saying 'pass --stage_a_dir', which swift has
no flag for); exported, it writes one row per validation group (issue 26)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parent.parent
SWIFT = str(Path(sys.executable).parent / "swift")


def _recipe(model: Path, result: Path, cwd: Path, **env) -> subprocess.CompletedProcess:
    """`swift infer --model $M $(group-qc lora --model $M --swift_args) --val_dataset group_qc_val
    --infer_backend transformers --result_path …`, as the README writes it."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GROUP_QC_")}
    lora = subprocess.run([sys.executable, "-m", "group_qc", "lora", "--model", str(model), "--swift_args"], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=True).stdout.split()
    return subprocess.run([SWIFT, "infer", "--model", str(model), *lora, "--val_dataset", "group_qc_val",
                           "--infer_backend", "transformers", "--result_path", str(result), "--max_new_tokens", "8"],
                          cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**clean, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "", **env})


def test_swift_infer_without_a_stage_a_folder_says_what_to_export_before_the_model_loads(tiny_qwen2_5_vl,
                                                                                         tmp_path):
    result = _recipe(tiny_qwen2_5_vl, tmp_path / "infer.jsonl", tmp_path)
    assert result.returncode != 0
    assert "error: group_qc_val: no Stage-A input for the group_qc datasets: swift has no flag for it, so export " \
           "GROUP_QC_STAGE_A_DIR=<the Stage-A output_dir>" in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "--stage_a_dir" not in result.stderr
    assert "Loading weights" not in result.stderr   # stopped before the model loaded
    assert not (tmp_path / "infer.jsonl").exists()


def test_swift_infer_with_the_folder_exported_writes_a_row_per_validation_group(tiny_qwen2_5_vl, tmp_path):
    from stage_b.data.dataset import build_rows
    from stage_b.data.settings import Selection
    from tests.helpers import write_stage_a_all_missions
    stage_a = write_stage_a_all_missions(tmp_path / "sa", groups_per_mission=6)
    val = build_rows(Selection(stage_a_dir=str(stage_a)), "val")[0]
    result = _recipe(tiny_qwen2_5_vl, tmp_path / "infer.jsonl", tmp_path, GROUP_QC_STAGE_A_DIR="sa")  # relative: cwd's
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Loading weights" in result.stderr   # what the failing run above must not get to
    rows = [json.loads(line) for line in (tmp_path / "infer.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(r["group_id"] for r in rows) == sorted(r["group_id"] for r in val) and val
