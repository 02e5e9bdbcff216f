"""A GRPO run records itself, trains what we meant, and evaluation obeys it (issue 12), on the real trainer:

- `swift rlhf` by hand with the plugin (no --callbacks, no launcher), split settings exported as GROUP_QC_*,
  writes group_qc_run.json with what it trained on, logs per-mission signal, and changes exactly the LoRA
  matrices of the last K layers while the vision tower and aligner stay bit-identical;
- `scripts/eval.sh` with no split flags then scores exactly the run's validation groups, and evaluation
  refuses groups the run trained on unless told to score them;
- data-parallel GRPO in two CPU processes (torchrun, gloo) through run_grpo.sh.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.missions import load_registry
from stage_b.data.dataset import build_rows, ids_digest
from stage_b.train.lora import target_regex
from qc_core.paths import resolved
from stage_b.train.run_record import RUN_FILE, best_checkpoint, file_facts, portable_selection, run_selection
from stage_b.data.settings import Selection
from stage_b.data.split import split_of
from tests.helpers import LAST_K, SEED, VAL_RATIO, clean_env, run_command, stage_a_from_truth

REPO = Path(__file__).resolve().parent.parent
# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = [pytest.mark.slow, pytest.mark.file_seconds(291)]


def _record(run) -> dict:
    return json.loads((run["run_dir"] / RUN_FILE).read_text(encoding="utf-8"))


def test_a_run_by_hand_records_what_it_trained_on(recorded_run):
    assert [p.name for p in recorded_run["root"].rglob(RUN_FILE)] == [RUN_FILE]
    record = _record(recorded_run)
    run_dir = recorded_run["run_dir"]
    selection = Selection(stage_a_dir=str(recorded_run["stage_a"]), val_ratio=VAL_RATIO, seed=SEED)
    # paths relative to the run folder (a copied project reads its own data), resolved back where it is now
    assert record["selection"] == portable_selection({**selection.to_record(), "balance_labels": True}, run_dir)
    assert not Path(record["selection"]["stage_a_dir"]).is_absolute() and record["written_in"] == str(run_dir)
    assert run_selection(record, run_dir / RUN_FILE).stage_a_dir == os.path.abspath(recorded_run["stage_a"])
    assert record["selection_origin"]["val_ratio"] == "GROUP_QC_VAL_RATIO"
    assert record["selection_origin"]["seed"] == "GROUP_QC_SPLIT_SEED"
    _, train = build_rows(selection, "train")
    _, val = build_rows(selection, "val")
    for mission, facts in record["missions"].items():
        assert facts["train_groups"] == train[mission]["rows"] and facts["val_groups"] == val[mission]["rows"]
        expected_ids = {gid for gid in train[mission]["ids"] if split_of(gid, VAL_RATIO, SEED) == "train"}
        assert facts["train_ids_sha256"] == ids_digest(expected_ids)
    files = [{**f, "path": str(resolved(f["path"], run_dir).resolve())} for f in record["stage_a_files"]]
    assert sorted(f["path"] for f in files) == sorted(str(p.resolve()) for p in recorded_run["stage_a"].glob("*.jsonl"))
    assert all(f == file_facts(f["path"]) for f in files)
    best = best_checkpoint(record, run_dir / RUN_FILE)
    assert best is None or (best.is_dir() and not Path(record["validation"]["best_checkpoint"]).is_absolute())
    assert record["rewards"] == {"names": ["qc_label"], "weights": [1.0]}
    assert record["lora"]["last_k"] == LAST_K and set(record["lora"]["trained_layers"]) == {"4", "5"}
    assert record["lora"]["target_modules"] == target_regex(recorded_run["model"], LAST_K)
    assert record["world_size"] == 1 and record["format"] == 1
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    assert record["code"]["git_commit"] == head and record["code"]["package"]


def test_each_step_logs_the_signal_per_mission(recorded_run):
    steps = [json.loads(line) for line in (recorded_run["run_dir"] / "logging.jsonl").read_text().splitlines()]
    steps = [s for s in steps if "reward" in s]
    assert len(steps) == 2
    for step in steps:
        missions = {k.split("/", 2)[2] for k in step if k.startswith("qc/label_reward/")}
        assert missions and missions <= set(load_registry().names)
        assert {k.split("/", 2)[2] for k in step if k.startswith("qc/zero_advantage/")} == missions
        assert step["qc/prompts/fail"] == step["qc/prompts/pass"] == 1   # label-balanced: 2 prompts per step
    # the per-mission label means average back to ms-swift's own qc_label mean (each prompt has 8 samples)
    step = steps[0]
    per_mission = [step[k] for k in step if k.startswith("qc/label_reward/")]
    if len(per_mission) == 2:
        assert sum(per_mission) / 2 == pytest.approx(step["rewards/qc_label/mean"], abs=1e-6)


def test_the_run_trained_exactly_the_last_k_lora_matrices_and_nothing_else(recorded_run):
    from safetensors import safe_open
    from swift_plugins.qc_callbacks import tensor_digest
    record = _record(recorded_run)
    at_start = record["lora"]["trainable_sha256_at_start"]
    with safe_open(str(recorded_run["checkpoint"] / "adapter_model.safetensors"), "pt") as f:
        saved = {key: f.get_tensor(key) for key in f.keys()}
    assert set(saved) == set(at_start)   # nothing else was saved, and nothing trained went unsaved
    layers = {int(k.split(".layers.")[1].split(".")[0]) for k in saved}
    assert layers == {4, 5} and all(".lora_A." in k or ".lora_B." in k for k in saved)
    unchanged = [k for k, tensor in saved.items() if tensor_digest([("", tensor)]) == at_start[k]]
    assert not unchanged, f"LoRA matrices that never moved: {unchanged}"
    assert not list(recorded_run["checkpoint"].glob("model*.safetensors"))
    # vision tower + aligner of the model that trained == the checkpoint's, bit for bit, at start and at end
    with safe_open(str(recorded_run["model"] / "model.safetensors"), "pt") as f:
        checkpoint = [(k[k.index("visual."):], f.get_tensor(k)) for k in f.keys() if "visual." in k]
    assert checkpoint
    frozen = record["frozen_parts_sha256"]
    assert frozen["at_start"] == frozen["at_end"] == tensor_digest(checkpoint)


def test_eval_sh_without_split_flags_scores_exactly_the_runs_validation_groups(recorded_run, tmp_path):
    out = run_command(["bash", "scripts/eval.sh", f"model={recorded_run['model']}",
                       f"adapters={recorded_run['checkpoint']}", f"output_dir={tmp_path / 'eval'}"],
                      tmp_path / "eval.log", env=clean_env())
    predictions = [json.loads(line) for line in (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()]
    everything, _ = build_rows(Selection(stage_a_dir=str(recorded_run["stage_a"])), "all")
    expected = {(r["mission"], r["group_id"]) for r in everything if split_of(r["group_id"], VAL_RATIO, SEED) == "val"}
    assert {(p["mission"], p["group_id"]) for p in predictions} == expected and len(predictions) == len(expected)
    assert f"val_ratio 0.5 (run {recorded_run['run_dir'] / RUN_FILE})" in out
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert resolved(metrics["data"]["run"], tmp_path / "eval") == recorded_run["run_dir"] / RUN_FILE
    assert metrics["data"]["train_overlap"] == 0


def _evaluate(*args, env=None):
    return subprocess.run([sys.executable, "-m", "group_qc", "evaluate", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env=env or clean_env())


def test_evaluate_refuses_groups_the_run_trained_on(recorded_run, tmp_path):
    everything, _ = build_rows(Selection(stage_a_dir=str(recorded_run["stage_a"])), "all")
    asked = [r for r in everything if split_of(r["group_id"], VAL_RATIO, 1) == "val"]
    overlap = [r for r in asked if split_of(r["group_id"], VAL_RATIO, SEED) == "train"]
    assert overlap
    common = ["--model", str(recorded_run["model"]), "--adapters", str(recorded_run["checkpoint"]),
              "--max_new_tokens", "4"]
    for how, env, source in [("flag", None, "--split_seed"), ("variable", clean_env(GROUP_QC_SPLIT_SEED="1"),
                                                                "GROUP_QC_SPLIT_SEED")]:
        flags = ["--split_seed", "1"] if how == "flag" else []
        result = _evaluate(*common, *flags, "--output_dir", str(tmp_path / how), env=env)
        assert result.returncode == 2, result.stderr[-2000:]
        assert f"{len(overlap)} of the {len(asked)} groups of the val split were in the training run's train split" \
            in result.stderr
        assert f"split_seed 1 ({source})" in result.stderr and "split_seed 7 (run " in result.stderr
        assert "--allow_train_overlap" in result.stderr
    result = _evaluate(*common, "--split_seed", "1", "--allow_train_overlap", "--output_dir", str(tmp_path / "anyway"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "anyway" / "metrics.json").read_text())["data"]["train_overlap"] == len(overlap)
    assert f"WARNING: {len(overlap)} of these groups were in the training run's train split" in \
        (tmp_path / "anyway" / "report.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("damage, note", [
    ("missing", "no group_qc_run.json beside"),
    ("old", "has format 0, this group-qc reads format 1"),
])
def test_evaluate_falls_back_to_flags_when_the_run_file_is_missing_or_old(recorded_run, tmp_path, damage, note):
    run = tmp_path / "run"
    shutil.copytree(recorded_run["run_dir"], run, ignore=shutil.ignore_patterns("checkpoint-*", "last-checkpoint"))
    shutil.copytree(recorded_run["checkpoint"], run / "checkpoint-2")
    if damage == "missing":
        (run / RUN_FILE).unlink()
    else:
        (run / RUN_FILE).write_text(json.dumps({**_record(recorded_run), "format": 0}), encoding="utf-8")
    result = _evaluate("--model", str(recorded_run["model"]), "--adapters", str(run / "checkpoint-2"),
                       "--stage_a_dir", str(recorded_run["stage_a"]), "--val_ratio", "0.5", "--split_seed", "7",
                       "--max_new_tokens", "4", "--output_dir", str(tmp_path / "eval"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert note in result.stderr and "pass the training run's --val_ratio and --split_seed" in result.stderr
    assert "no training run recorded" in (tmp_path / "eval" / "report.md").read_text(encoding="utf-8")


def test_data_parallel_grpo_in_two_cpu_processes(tiny_qwen2_5_vl, synthetic, tmp_path):
    """run_grpo.sh cuda=cpu nproc=2: torchrun starts two ranks (gloo); both import the plugin and build the same
    rows, every step holds as many fails as passes across the ranks, validation scores every group once,
    the adapter and the run record are written once, and the per-mission signal reaches TensorBoard."""
    stage_a = stage_a_from_truth(tmp_path / "stage_a", synthetic, seed=9, groups_per_label=3)
    out = tmp_path / "grpo"
    log = run_command(["bash", "scripts/run_grpo.sh", "mission=all", "cuda=cpu", "nproc=2", f"model={tiny_qwen2_5_vl}",
                       f"stage_a_dir={stage_a}", "lora_last_k=2", "num_generations=4", "max_steps=2", "eval_steps=1",
                       f"output_dir={out}",
                       "extra=--max_completion_length 4 --dynamic_sample false --report_to tensorboard"],
                      tmp_path / "ddp.log", env=clean_env())
    for rank in (0, 1):
        assert f"[INFO:group_qc.stage_b rank {rank}] group_qc train:" in log
    rows_by_rank = [sorted(line.split("] ", 1)[1] for line in log.splitlines()
                           if f"[INFO:group_qc.stage_b rank {rank}] group_qc " in line) for rank in (0, 1)]
    assert rows_by_rank[0] == rows_by_rank[1] and len(rows_by_rank[0]) >= 8   # same counts and id digests
    (run_dir,) = out.glob("v*")
    steps = [json.loads(line) for line in (run_dir / "logging.jsonl").read_text().splitlines()]
    train = [s for s in steps if "reward" in s]
    assert len(train) == 2 and all(s["qc/prompts/fail"] == s["qc/prompts/pass"] == 2 for s in train)
    val_groups = len(build_rows(Selection(stage_a_dir=str(stage_a)), "val")[0])
    evals = [s for s in steps if "eval_qc_val/groups" in s]
    assert len(evals) == 2 and all(s["eval_qc_val/groups"] == val_groups for s in evals)
    assert log.count(f"wrote {run_dir / RUN_FILE}") == 1
    record = json.loads((run_dir / RUN_FILE).read_text())
    assert record["world_size"] == 2 and record["validation"]["best_step"] in (1, 2)
    # The random model gets zero advantage everywhere, so its weights never move: greedy validation must give
    # the same replies at both evaluations (sampling at temperature 1 would not).
    history = record["validation"]["history"]
    assert [h["step"] for h in history] == [1, 2]
    assert history[0]["completions_sha256"] == history[1]["completions_sha256"]
    assert len(list(out.rglob("adapter_model.safetensors"))) == len(list(run_dir.glob("checkpoint-*")))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    (events,) = run_dir.rglob("events.out.tfevents.*")
    board = EventAccumulator(str(events))
    board.Reload()
    tags = set(board.Tags()["scalars"])
    assert {"train/qc/prompts/fail", "eval/qc_val/balanced_accuracy"} <= tags
    assert any(t.startswith("train/qc/zero_advantage/") for t in tags)


def test_validation_does_not_change_what_training_samples(recorded_run, tmp_path):
    """The same 4 steps from the coin-verdict start point, with greedy validation every 2 steps and without:
    identical rewards at every step (evaluation used to advance the random generators, so the rollouts after
    the first evaluation differed, and the demo's 30-step result with it)."""
    curves = {}
    for val in ("0", "1"):
        out = tmp_path / f"val{val}"
        run_command(["bash", "scripts/run_grpo.sh", "config=configs/demo/grpo.yaml", "mission=all", "cuda=cpu",
                     f"model={recorded_run['model']}", f"stage_a_dir={recorded_run['stage_a']}", "max_steps=4",
                     f"val={val}", "eval_steps=2", f"output_dir={out}", "extra=--save_strategy no"],
                    tmp_path / f"val{val}.log", env=clean_env())
        (log,) = out.glob("v*/logging.jsonl")
        steps = [json.loads(line) for line in log.read_text().splitlines()]
        curves[val] = [s["rewards/qc_label/mean"] for s in steps if "reward" in s]
        if val == "1":
            assert len([s for s in steps if "eval_qc_val/groups" in s]) == 2
    assert len(curves["0"]) == 4 and curves["0"] == curves["1"]
    assert len(set(curves["0"])) > 1   # a coin: rewards vary, so a shifted random stream would show
