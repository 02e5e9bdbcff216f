"""SFT on Stage-B (issue 16 item 1) and failing before the model loads (item 3), through ms-swift's own CLIs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qc_core.missions import load_registry
from stage_b.data.sft import NOT_CONFIRMED, grounded_reason, reply_for
from tests.helpers import M, stage_a_folder

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(123)

REPO = Path(__file__).resolve().parent.parent
SWIFT = str(Path(sys.executable).parent / "swift")
PLUGIN = str(REPO / "swift_plugins" / "qc_plugin.py")
MISSION = load_registry().resolve(M)


@pytest.mark.parametrize("summaries, verdict, reason", [
    # 不通过: each photo that asserts a defect, with its remark ...
    (["接地排×1，接地线×1/已捆扎", "机柜侧接地螺丝×1，接地线×1/未捆扎 备注：接地线散乱未捆扎"], "不通过",
     "图片_2 接地线散乱未捆扎"),
    # ... or the mission's defect terms found in its summary
    (["接地线×1/松动", "接地排×1", "接地螺丝×1/缺失"], "不通过", "图片_1 松动；图片_3 缺失"),
    # nothing in the summaries shows the defect: the conservative reason, never an invented photo
    (["接地排×1，接地线×1/已捆扎"], "不通过", NOT_CONFIRMED),
    # 通过: every photo seen, every checkpoint holds
    (["接地排×1", "接地线×1/已捆扎", "无关图片"], "通过", "图片_1至图片_3 均符合要求，检查要点均已确认"),
    (["接地排×1"], "通过", "图片_1 均符合要求，检查要点均已确认"),
])
def test_the_sft_reason_is_grounded_in_the_summaries(summaries, verdict, reason):
    assert grounded_reason(MISSION, summaries, verdict) == reason
    assert reply_for(MISSION, summaries, verdict) == f"{verdict}\n理由: {reason}"


def test_the_origins_reviewer_reason_becomes_the_reason_to_learn():
    from qc_core.records import from_origin
    from stage_b.data.dataset import sft_row
    record = from_origin({"group_id": "QC-A-20250101-1", "mission": M, "label": "fail", "images": ["a.jpg"],
                          "per_image": {"图片_1": "接地排×1"}, "gt_fail_reason_text": "接地线未接地"})
    assert sft_row(record, load_registry())["messages"][-1]["content"] == "不通过\n理由: 接地线未接地"


def test_a_reviewer_reason_wins_and_stays_on_one_line():
    assert reply_for(MISSION, ["接地排×1"], "不通过", "接地排侧\n螺丝未拧紧 ") == "不通过\n理由: 接地排侧 螺丝未拧紧"
    assert reply_for(MISSION, ["接地排×1"], "通过", "  ").endswith("检查要点均已确认")


def test_group_qc_sft_rows_are_the_train_split_with_the_reply(tmp_path, monkeypatch):
    from stage_b.data.dataset import build_rows, sft_row
    from stage_b.data.settings import Selection
    stage_a = stage_a_folder(tmp_path / "sa", n=12)
    selection = Selection(stage_a_dir=str(stage_a))
    prompts, _ = build_rows(selection, "train")
    sft, _ = build_rows(selection, "train", make_row=sft_row)
    assert [r["group_id"] for r in sft] == [r["group_id"] for r in prompts]   # same split, same order
    for p, s in zip(prompts, sft):
        assert s["messages"][:-1] == p["messages"] and s["messages"][-1]["role"] == "assistant"
        assert s["messages"][-1]["content"].split("\n")[0] == p["solution"]


def _swift(command, *args, stage_a, timeout=600, env=None):
    return subprocess.run([SWIFT, command, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
                               "GROUP_QC_STAGE_A_DIR": str(stage_a), **(env or {})})


COMMON = ["--model_type", "qwen2_5_vl", "--template", "qwen2_5_vl", "--external_plugins", PLUGIN,
          "--check_model", "false", "--tuner_type", "lora", "--max_steps", "2", "--per_device_train_batch_size", "2",
          "--save_steps", "2", "--logging_steps", "1", "--report_to", "none", "--max_length", "1024"]


@pytest.mark.slow
@pytest.mark.parametrize("command, dataset, stage_a_name, more, env, message", [
    ("sft", "group_qc_train:all", "sa", [], {}, "use group_qc_sft"),                  # the reported silent no-op
    ("sft", "group_qc_sft:all", "missing", [], {}, "does not exist"),                  # a wrong Stage-A folder
    ("sft", "group_qc_sft:挡风板安装检查", "sa", [], {}, "missing Stage-A output"),     # a mission with no file
    ("rlhf", "group_qc_sft:all", "sa", [], {}, "use group_qc_train"),
    # ms-swift's own check of the evaluation batch comes after the model has loaded
    ("rlhf", "group_qc_train:all", "sa", ["--val_dataset", "group_qc_val:all", "--per_device_eval_batch_size", "16"],
     {}, "fewer than the evaluation batch of 16"),
    # a training variable that only qc_run reads, at train start
    ("rlhf", "group_qc_train:all", "sa", [], {"GROUP_QC_BARE_ENGINE": "yes"},
     "GROUP_QC_BARE_ENGINE='yes': use 1 (on) or 0 (off)"),
])
def test_a_dataset_or_setting_that_cannot_serve_the_command_stops_before_the_model_loads(tiny_qwen2_5_vl, tmp_path,
                                                                              command, dataset, stage_a_name, more,
                                                                              env, message):
    stage_a_folder(tmp_path / "sa", n=8)
    out = tmp_path / "out"
    extra = ["--rlhf_type", "grpo", "--num_generations", "2", *more] if command == "rlhf" else []
    started = time.monotonic()
    result = _swift(command, "--model", str(tiny_qwen2_5_vl), "--dataset", dataset, "--output_dir", str(out),
                    *COMMON, *extra, stage_a=tmp_path / stage_a_name, env=env)
    assert result.returncode != 0 and message in result.stderr, result.stderr[-3000:]
    assert "Loading weights" not in result.stderr   # stopped before the model loaded
    assert not out.exists() or not any(out.iterdir()), list(out.rglob("*"))   # no empty run folder left behind
    assert time.monotonic() - started < 120


@pytest.mark.slow
def test_swift_sft_on_group_qc_sft_trains(tiny_qwen2_5_vl, tmp_path):
    """The rows carry the reply: loss and gradient are not zero (group_qc_train gave 0 and 0, and exited 0)."""
    stage_a_folder(tmp_path / "sa", n=8)
    result = _swift("sft", "--model", str(tiny_qwen2_5_vl), "--dataset", "group_qc_sft:all",
                    "--output_dir", str(tmp_path / "out"), *COMMON, stage_a=tmp_path / "sa")
    assert result.returncode == 0, result.stderr[-3000:]
    logs = [json.loads(line) for line in next((tmp_path / "out").glob("v*/logging.jsonl")).read_text().splitlines()]
    steps = [r for r in logs if "loss" in r]
    assert steps and all(r["loss"] > 0 and r["grad_norm"] > 0 for r in steps), steps
