"""GRPO must learn, through the real pipeline: the reduced demo.

A wiring bug (rewards scored against another row, zero advantage, the adapter not used at rollout, a
config value that never reaches the trainer, the label-balanced order shuffled away) leaves every unit
test green and the model not learning. This test catches that class:

1. `swift sft` with the demo's recipe (configs/demo/sft.yaml) turns the tiny random model into the demo's
   start point (both verdicts for every workshop group, grounded reasons, the reading task): it writes the
   format, its verdict is a coin. (The `start_point` fixture, tests/conftest.py.)
2. `swift rlhf` + our plugin (scripts/run_grpo.sh with the demo's recipe, configs/demo/grpo.yaml) on 8
   fixed held-out groups, 4 fail and 4 pass: the label reward must climb from chance to >= 0.9.
3. The same run where every prompt appears twice, once with each label, must not reach 0.9: a reward
   that follows its row cannot average more than 0.5 there, while one that ignores the row (a favourite
   verdict, the format) would climb just the same.
   (A fixed permutation of the 8 labels is no control here: measured, GRPO memorised it as fast as the
   true labels, 0.50 -> 0.97 in 22 steps, because 8 prompts are easy to tell apart.)
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from stage_a.discovery import Group
from qc_core.jsonl import write_jsonl_atomic
from qc_core.missions import load_registry
from qc_core.records import make_record
from tests.helpers import run_command

REPO = Path(__file__).resolve().parent.parent
# Measured with 30 steps: the label reward jumped from chance to 0.94 at step 13 and stayed >= 0.91 from step 16
# (0.50 0.53 0.56 0.41 0.62 0.44 0.44 0.66 0.59 0.53 0.47 0.66 0.94 0.84 0.84 0.94 0.97 1.00 0.91 0.94 ...), the control
# stayed <= 0.66. 20 steps keep 7 steps of margin and cost 2 x 10 steps (about 90 s) less.
GRPO_STEPS = 20
# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = [pytest.mark.slow, pytest.mark.file_seconds(295)]


@pytest.fixture(scope="module")
def fixed_groups(tmp_path_factory, synthetic):
    """8 held-out groups (never seen in SFT), 4 fail and 4 pass, with their ground-truth summaries."""
    root = tmp_path_factory.mktemp("fixed")
    truth = synthetic.generate(root / "photos", seed=1, groups_per_label=2)
    groups = synthetic.groups_of(truth)
    fails = [(g["group_id"], g) for g in groups if g["label"] == "fail"][:4]
    passes = [(g["group_id"], g) for g in groups if g["label"] == "pass"][:4]
    return fails + passes


def _stage_a_dir(folder: Path, groups, labels) -> Path:
    """Stage-A JSONL for (group, label) pairs; a group may appear with several labels (suffixed ids)."""
    registry = load_registry()
    by_mission: dict[str, list] = {}
    seen: dict[str, int] = {}
    for (gid, g), label in zip(groups, labels):
        seen[gid] = seen.get(gid, 0) + 1
        gid = gid if seen[gid] == 1 else f"{gid}{seen[gid]}"
        record = make_record(Group(gid, g["mission"], label, tuple(g["images"])), g["summaries"], model="truth")
        by_mission.setdefault(registry.resolve(g["mission"]).stage_a_stem, []).append(record)
    folder.mkdir(parents=True)
    for stem, records in by_mission.items():
        write_jsonl_atomic(folder / f"{stem}.jsonl", records)
    return folder


def _grpo_label_rewards(model: Path, stage_a_dir: Path, out: Path) -> list[float]:
    """The demo's GRPO recipe, on every group (no validation split: these 8 groups are the test)."""
    run_command(["bash", "scripts/run_grpo.sh", "config=configs/demo/grpo.yaml", "mission=all", "cuda=cpu",
                 f"model={model}", f"stage_a_dir={stage_a_dir}", f"max_steps={GRPO_STEPS}", f"output_dir={out}",
                 "val=0", "extra=--save_strategy no"], out.parent / f"{out.name}.log", env={"GROUP_QC_VAL_RATIO": "0"})
    (log,) = out.glob("v*/logging.jsonl")
    return [r["rewards/qc_label/mean"] for r in map(json.loads, log.read_text().splitlines())
            if "rewards/qc_label/mean" in r]


def test_grpo_learns_the_labels_of_fixed_groups_and_not_contradictory_ones(start_point, fixed_groups, tmp_path):
    true_labels = [g["label"] for _, g in fixed_groups]
    flipped = ["pass" if label == "fail" else "fail" for label in true_labels]
    rewards = _grpo_label_rewards(start_point, _stage_a_dir(tmp_path / "true", fixed_groups, true_labels),
                                  tmp_path / "grpo_true")
    control = _grpo_label_rewards(start_point, _stage_a_dir(tmp_path / "both", fixed_groups * 2, true_labels + flipped),
                                  tmp_path / "grpo_both")
    first = sum(rewards[:5]) / 5
    last = sum(rewards[-5:]) / 5
    last_control = sum(control[-5:]) / 5
    curve = " ".join(f"{x:.2f}" for x in rewards)
    control_curve = " ".join(f"{x:.2f}" for x in control)
    print(f"true labels: {curve}\nboth labels: {control_curve}")
    assert len(rewards) == len(control) == GRPO_STEPS, curve
    assert 0.25 <= first <= 0.75, f"the start point should be at chance on its verdicts: {curve}"
    assert last >= 0.9, f"GRPO did not learn the fixed groups' labels: {curve}"
    assert last_control < 0.9, (f"label reward {last_control:.2f} where every prompt carries both labels: the reward "
                                f"does not follow each row: {control_curve}")
