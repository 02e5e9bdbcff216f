"""Silent failures a review planted into this code one at a time, with the suite staying green (issue 12).
Each test here fails on its bug, on real Stage-A files and through ms-swift's own code paths:

  1 the split computed with Python's salted hash()          test_split_is_the_same_in_every_process
  2 the split by row position instead of group id            test_split_follows_group_ids_not_row_positions
  3 the split settings from the environment ignored          test_plugin_datasets_take_the_split_from_the_environment
  4 evaluation pairing completions with the wrong rows       test_evaluate_pairs_each_completion_with_its_own_row
  5 qc_consistency handed another row's summaries            test_consistency_reward_sees_its_own_rows_summaries
  6 an empty split no longer refused                         test_an_empty_split_is_refused
  7 a requested mission's missing Stage-A file only logged   test_a_requested_missions_missing_file_is_an_error
"""
from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stage_b.data.dataset import DatasetError, build_rows
from stage_b.train.rewards import qc_consistency
from stage_b.data.settings import Selection
from stage_b.data.split import split_of
from tests.helpers import ALL_MISSIONS, write_stage_a_all_missions

REPO = Path(__file__).resolve().parent.parent
IDS = [f"QC-T-20250101-{i}" for i in range(12)]   # the ids write_stage_a_all_missions gives, per mission
# sha1("<seed>:<id>") as a fraction of 2^64 below the ratio -> val. Fixed forever: a run trained last month
# must split the same way as evaluation today.
GOLDEN = {(0.5, 7): ["train", "train", "val", "val", "val", "train", "train", "val", "val", "val", "val", "train"],
          (0.2, 0): ["train", "val", "train", "train", "train", "train", "train", "val", "train", "train", "val",
                     "train"]}


def test_split_is_the_same_in_every_process():
    code = ("import json; from stage_b.data.split import split_of; "
            f"print(json.dumps([[split_of(i, r, s) for i in {IDS!r}] for r, s in {list(GOLDEN)!r}]))")
    seen = []
    for hash_seed in ("1", "2"):   # the trainer and evaluation are different processes
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PYTHONHASHSEED": hash_seed})
        assert out.returncode == 0, out.stderr
        seen.append(json.loads(out.stdout))
    assert seen[0] == seen[1] == list(GOLDEN.values())
    assert [[split_of(i, r, s) for i in IDS] for r, s in GOLDEN] == list(GOLDEN.values())


def test_split_follows_group_ids_not_row_positions(tmp_path):
    folder = write_stage_a_all_missions(tmp_path / "sa", groups_per_mission=12)
    selection = Selection(stage_a_dir=str(folder), val_ratio=0.5, seed=7)
    before = {(r["mission"], r["group_id"]) for r in build_rows(selection, "val")[0]}
    for path in folder.glob("*.jsonl"):   # the same groups in another order, e.g. a Stage-A rerun
        lines = path.read_text(encoding="utf-8").splitlines()
        path.write_text("\n".join(lines[::-1]) + "\n", encoding="utf-8")
    after = {(r["mission"], r["group_id"]) for r in build_rows(selection, "val")[0]}
    assert after == before
    expected = {(m, g) for m in ALL_MISSIONS for g, s in zip(IDS, GOLDEN[(0.5, 7)]) if s == "val"}
    assert before == expected


@pytest.fixture(scope="module")
def plugin():
    sys.path.insert(0, str(REPO / "swift_plugins"))
    import qc_plugin  # noqa: F401 - registration at import
    return qc_plugin


def _load_with_ms_swift(name: str) -> list[dict]:
    from swift.dataset import load_dataset
    dataset, _ = load_dataset([name], split_dataset_ratio=0, load_from_cache_file=False)
    return list(dataset)


def test_plugin_datasets_take_the_split_from_the_environment(plugin, tmp_path, monkeypatch):
    folder = write_stage_a_all_missions(tmp_path / "sa", groups_per_mission=12)
    monkeypatch.setenv("GROUP_QC_STAGE_A_DIR", str(folder))
    monkeypatch.setenv("GROUP_QC_VAL_RATIO", "0.5")
    monkeypatch.setenv("GROUP_QC_SPLIT_SEED", "7")
    val = _load_with_ms_swift("group_qc_val:BBU接地线检查")
    train = _load_with_ms_swift("group_qc_train:BBU接地线检查")
    assert [r["group_id"] for r in val] == [g for g, s in zip(IDS, GOLDEN[(0.5, 7)]) if s == "val"]
    assert sorted(r["group_id"] for r in train) == sorted(g for g, s in zip(IDS, GOLDEN[(0.5, 7)]) if s == "train")
    assert GOLDEN[(0.5, 7)] != GOLDEN[(0.2, 0)]   # the defaults would have given another split


def test_an_empty_split_is_refused(plugin, tmp_path, monkeypatch):
    folder = write_stage_a_all_missions(tmp_path / "sa")
    with pytest.raises(DatasetError, match="the val split of the selection 'all' is empty"):
        build_rows(Selection(stage_a_dir=str(folder), val_ratio=0.0), "val")
    monkeypatch.setenv("GROUP_QC_STAGE_A_DIR", str(folder))
    monkeypatch.setenv("GROUP_QC_VAL_RATIO", "0")
    # through ms-swift's loader the plugin ends the command with one line (SystemExit), not a traceback
    with pytest.raises(SystemExit, match="the val split of the selection 'BBU接地线检查' is empty"):
        _load_with_ms_swift("group_qc_val:BBU接地线检查")


def test_a_requested_missions_missing_file_is_an_error(tmp_path, caplog):
    folder = write_stage_a_all_missions(tmp_path / "sa")
    (folder / "挡风板安装检查_stage_a.jsonl").unlink()
    with pytest.raises(DatasetError, match=r"missing Stage-A output: .*挡风板安装检查_stage_a.jsonl"):
        build_rows(Selection(stage_a_dir=str(folder), missions="BBU接地线检查,挡风板安装检查"), "all")
    with pytest.raises(DatasetError, match=r"挡风板安装检查_stage_a.jsonl"):  # every mission named, one by one
        build_rows(Selection(stage_a_dir=str(folder), missions=",".join(ALL_MISSIONS)), "all")
    with caplog.at_level(logging.WARNING, logger="group_qc.stage_b"):
        rows, counts = build_rows(Selection(stage_a_dir=str(folder)), "all")   # 'all': what exists, with a warning
    assert set(counts) == set(ALL_MISSIONS) - {"挡风板安装检查"}
    assert "left out of 'all'" in caplog.text and "挡风板安装检查_stage_a.jsonl" in caplog.text


def test_consistency_reward_sees_its_own_rows_summaries(plugin, tmp_path):
    """Through ms-swift's reward path: each row's qc_consistency equals the pure function on that row's own
    summaries, and the rows are built so that any other row's summaries would score differently."""
    import torch
    from swift.rewards import orms
    from swift.rl_core.data import GRPOSample
    from swift.rl_core.grpo_algorithm import compute_rewards_per_func
    m = "BBU接地线检查"
    defects = ["接地线松动", "接地线未捆扎", "接地排缺失", "螺丝未拧紧"]
    rows = [{"messages": [{"role": "user", "content": f"组{k}"}], "solution": "不通过", "mission": m,
             "group_id": f"g{k}", "summaries": ["接地排×1/正常"] * k + [defect]}
            for k, defect in enumerate(defects)]
    completions = [f"不通过\n理由: 图片_{k + 1} {defect}" for k, defect in enumerate(defects)]
    samples = [GRPOSample.from_row({**r, "messages": r["messages"] + [{"role": "assistant", "content": c}]})
               for r, c in zip(rows, completions)]
    scores = compute_rewards_per_func(samples, [orms["qc_consistency"](args=None)], None, torch.device("cpu"))
    got = scores[:, 0].tolist()
    own = [qc_consistency([c], summaries=[r["summaries"]], mission=[m])[0] for r, c in zip(rows, completions)]
    assert got == own == [1.0] * 4
    for shift in (1, 2, 3):   # any other pairing scores lower somewhere
        other = [qc_consistency([c], summaries=[rows[(k + shift) % 4]["summaries"]], mission=[m])[0]
                 for k, c in enumerate(completions)]
        assert min(other) < 1.0


@pytest.mark.slow
def test_evaluate_pairs_each_completion_with_its_own_row(tiny_qwen2_5_vl, tmp_path):
    """Batched evaluation through the CLI; each prediction's completion must be what the model says to that
    row alone (greedy), and the completions must differ across rows, or a mix-up could hide."""
    from stage_b.model.generate import VerdictEngine
    folder = write_stage_a_all_missions(tmp_path / "sa", groups_per_mission=3)
    out = subprocess.run([sys.executable, "-m", "group_qc", "evaluate",
                          "--model", str(tiny_qwen2_5_vl), "--stage_a_dir",
                          str(folder), "--split", "all", "--batch_size", "5", "--max_new_tokens", "6",
                          "--output_dir", str(tmp_path / "eval")], cwd=REPO, capture_output=True, text=True,
                         timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-3000:]
    predictions = [json.loads(line) for line in (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()]
    rows = {(r["mission"], r["group_id"]): r for r in build_rows(Selection(stage_a_dir=str(folder)), "all")[0]}
    assert len(predictions) == len(rows) == 12
    engine = VerdictEngine(str(tiny_qwen2_5_vl), batch_size=1, max_new_tokens=6, temperature=0.0)
    alone = {key: engine.generate([row])[0][0][0] for key, row in rows.items()}
    for p in predictions:
        key = (p["mission"], p["group_id"])
        assert p["completion"] == alone[key], key
        assert p["summaries"] == rows[key]["summaries"] and p["expected"] == rows[key]["solution"]
    assert len(set(alone.values())) > 1
