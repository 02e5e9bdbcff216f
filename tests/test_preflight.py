"""Preflight: reward spread before GRPO, scored with the training rewards."""
import subprocess
import sys
from pathlib import Path

import pytest

from stage_b.train.preflight import advice, score, select_groups

REPO = Path(__file__).resolve().parent.parent
M = "BBU接地线检查"


def row(solution, mission=M):
    return {"mission": mission, "solution": solution, "summaries": ["接地线×1/未捆扎"], "group_id": "g"}


def test_score_counts_zero_advantage_groups_accuracy_and_format():
    rows = [row("不通过"), row("通过")]
    completions = [
        ["不通过\n理由: 图片_1 未捆扎", "通过\n理由: 图片_1 正常"],   # spread: learnable
        ["乱码", "也是乱码"],                                          # all zero: no advantage
    ]
    stats = score(rows, completions, [1.0, 0.25, 0.25])[M]
    assert stats["groups"] == 2 and stats["completions"] == 4
    assert stats["zero_advantage_share"] == 0.5
    assert stats["accuracy"] == 0.25 and stats["format_rate"] == 0.5


@pytest.mark.parametrize("stats, expected", [
    (dict(zero_advantage_share=0.9, format_rate=0.0, accuracy=0.0),
     ["zero advantage", "SFT", "temperature", "num_generations"]),
    (dict(zero_advantage_share=0.9, format_rate=1.0, accuracy=0.0), ["zero advantage", "check that labels"]),
    (dict(zero_advantage_share=0.9, format_rate=1.0, accuracy=0.95), ["already high"]),
    (dict(zero_advantage_share=0.2, format_rate=1.0, accuracy=0.5), []),
])
def test_advice(stats, expected):
    text = " ".join(advice(stats, temperature=0.7, num_generations=4))
    assert all(e in text for e in expected) and (expected or not text)


def test_select_groups_takes_the_first_n_per_mission():
    rows = [row("通过", "a"), row("通过", "b"), row("不通过", "a"), row("通过", "a")]
    assert select_groups(rows, 2) == rows[:3]


@pytest.mark.slow
def test_preflight_cli_on_the_tiny_model(tiny_qwen2_5_vl, tmp_path):
    from stage_a.discovery import Group
    from qc_core.jsonl import JsonlAppender
    from qc_core.records import make_record
    with JsonlAppender(tmp_path / f"{M}_stage_a.jsonl") as out:
        for k in range(6):
            out.write(make_record(Group(f"g{k}", M, "fail" if k % 2 else "pass", ("a.jpg",)), ["接地线×1"], "m"))
    result = subprocess.run([sys.executable, "-m", "group_qc", "preflight", "--model", str(tiny_qwen2_5_vl),
                             "--stage_a_dir", str(tmp_path), "--mission", M, "--split", "all", "--groups", "3",
                             "--num_generations", "2", "--max_new_tokens", "8", "--output_json",
                             str(tmp_path / "p.json")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "zero advantage" in result.stdout  # an untrained model: the warning must show
    assert (tmp_path / "p.json").exists()


def test_preflight_refuses_a_wrong_stage_a_dir(tmp_path):
    result = subprocess.run([sys.executable, "-m", "group_qc", "preflight", "--model", str(tmp_path),
                             "--stage_a_dir", str(tmp_path / "nope")], cwd=REPO, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2 and "does not exist" in result.stderr
