"""What the plugin's run callback (swift_plugins/qc_callbacks.py, QCRunCallback) reports about a GRPO run: greedy
validation counting groups, the vision tower's digest at the end of training, and the per-mission zero-advantage
share; and the switch that leaves the engine changes off.

What is tested is the callback, wired as in a run: on_train_begin wraps the trainer's `_compute_advantages` and
`evaluation_loop`, the group_qc_train/group_qc_val datasets are built by ms-swift's own dataset loader through the
plugin (which fills qc_callbacks.LOADED), rewards come from ms-swift's `compute_rewards_per_func` over the plugin's
reward functions, advantages from ms-swift's own `compute_advantages`, and the model is the real tiny Qwen2.5-VL
with LoRA on its last 2 layers. The trainer around them is a stand-in holding the attributes the callback reads:
a real `swift rlhf` run (tests/test_run_record.py) takes minutes, needs the SFT start point, and cannot be made to
change its frozen tower or to score one work order under two missions on purpose.
"""
from __future__ import annotations

import json
import logging
import os
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest

from stage_a.discovery import Group
from qc_core.jsonl import JsonlAppender
from qc_core.missions import load_registry
from qc_core.records import make_record
from stage_b.contract.verdict import FAIL, PASS

REPO = Path(__file__).resolve().parent.parent
REGISTRY = load_registry()
A, B = "BBU接地线检查", "挡风板安装检查"
IDS = [f"QC-TR-20250101-{k}" for k in range(12)]   # each work order photographed for both missions


@pytest.fixture(scope="module")
def plugin():
    sys.path.insert(0, str(REPO / "swift_plugins"))
    import qc_plugin  # noqa: F401 - registration at import
    return qc_plugin


@pytest.fixture
def policy(tiny_qwen2_5_vl):
    """The tiny Qwen2.5-VL with LoRA on its last 2 LLM layers, as run_grpo.sh targets it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText
    from stage_b.train.lora import target_regex
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen2_5_vl, dtype=torch.float32)
    return get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=target_regex(tiny_qwen2_5_vl, 2)))


class StandInTrainer:
    """The attributes of ms-swift's GRPOTrainer that QCRunCallback reads. `_compute_advantages` is ms-swift's own
    advantage computation; `evaluation_loop` scores `eval_batches` the way ms-swift's evaluation does (each batch's
    rewards, then `_compute_advantages`, which the callback has wrapped)."""

    def __init__(self, model, reward_names, weights, num_generations):
        import torch
        self.model = model
        self.reward_func_names = list(reward_names)
        self.reward_weights = torch.tensor(weights, dtype=torch.float32)
        self.num_generations = num_generations
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        self.request_config = SimpleNamespace(temperature=1.0)
        self.state = SimpleNamespace(global_step=2, is_world_process_zero=True)
        self.args = SimpleNamespace(dataloader_drop_last=True)
        self.template = None          # summaries-only rows: no visual tokens to count
        self.processing_class = None
        self.eval_batches: list[list] = []

    def _compute_advantages(self, samples, rewards_per_func, batch_encoded_inputs):
        from swift.rl_core.advantage import compute_advantages
        k = self.num_generations if self.model.training else 1
        return compute_advantages(rewards_per_func, self.reward_weights, k)[0]

    def evaluation_loop(self, *args, **kwargs):
        for samples in self.eval_batches:
            self._compute_advantages(samples, rewards(samples, self.reward_func_names), [])
        return "evaluated"

    def get_eval_dataloader(self, *args, **kwargs):
        return None


def samples_of(rows: list[dict], completions: list[str]):
    from swift.rl_core.data import GRPOSample
    return [GRPOSample.from_row({**row, "messages": row["messages"] + [{"role": "assistant", "content": c}]})
            for row, c in zip(rows, completions)]


def rewards(samples, names):
    """ms-swift's per-function rewards, with the reward functions the plugin registers."""
    import torch
    from swift.rewards import orms
    from swift.rl_core.grpo_algorithm import compute_rewards_per_func
    return compute_rewards_per_func(samples, [orms[n](args=None) for n in names], None, torch.device("cpu"))


@pytest.fixture
def run(plugin, policy, tmp_path, monkeypatch):
    """Stage-A files for two missions sharing every group id, the plugin's datasets built by ms-swift's loader,
    and a factory for the callback on a stand-in trainer, begun as a run begins."""
    from swift.dataset import load_dataset
    from swift_plugins import qc_callbacks
    stage_a = tmp_path / "sa"
    stage_a.mkdir()
    for m in (A, B):
        with JsonlAppender(stage_a / f"{REGISTRY.resolve(m).stage_a_stem}.jsonl") as out:
            for k, gid in enumerate(IDS):
                label = "fail" if k % 2 else "pass"
                summary = "接地线×1/未捆扎" if label == "fail" else "接地线×1/已捆扎"
                out.write(make_record(Group(gid, m, label, ("1.jpg",)), [summary], model="m"))
    for name in [n for n in os.environ if n.startswith("GROUP_QC_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("GROUP_QC_STAGE_A_DIR", str(stage_a))
    monkeypatch.setenv("GROUP_QC_VAL_RATIO", "0.5")
    monkeypatch.setenv("GROUP_QC_SPLIT_SEED", "7")
    monkeypatch.setattr(qc_callbacks, "LOADED", {})
    data = {split: list(load_dataset([f"group_qc_{split}:{A}/{B}"], split_dataset_ratio=0,
                                     load_from_cache_file=False)[0]) for split in ("train", "val")}
    assert set(qc_callbacks.LOADED) == {"train", "val"}

    def begin(reward_names=("qc_label",), weights=(1.0,), num_generations=2):
        trainer = StandInTrainer(policy, reward_names, weights, num_generations)
        args = SimpleNamespace(output_dir=str(tmp_path / "grpo"), world_size=1, eval_steps=2,
                               metric_for_best_model="qc_val/balanced_accuracy")
        Path(args.output_dir).mkdir(exist_ok=True)
        state = SimpleNamespace(is_world_process_zero=True, best_global_step=None, best_metric=None,
                                best_model_checkpoint=None)
        callback = qc_callbacks.QCRunCallback(args, trainer)
        callback.on_train_begin(args, state, None, model=policy)
        return SimpleNamespace(trainer=trainer, callback=callback, args=args, state=state,
                               record=lambda: json.loads((Path(args.output_dir) / "group_qc_run.json").read_text()))
    return SimpleNamespace(data=data, begin=begin, model=policy)


def _other(verdict: str) -> str:
    return PASS if verdict == FAIL else FAIL


# planted-bug test (issue 27, class 6): validation counts (mission, group)
def test_greedy_validation_counts_one_work_order_once_per_mission(run, caplog):
    """Silent bug: greedy validation de-duplicating the validation groups by group id alone, so one work order
    photographed for two missions counts once (the later mission's verdict replacing the other's), and no test could
    show it because every synthetic id was unique across missions. Here every validation id is in both missions:
    A's verdicts are all right and B's all wrong, so each mission's accuracy, the overall one and the group count
    tell the two apart. The last group is scored twice, as ms-swift pads a last batch: that one counts once."""
    val = run.data["val"]
    assert {r["mission"] for r in val} == {A, B}
    assert sorted(r["group_id"] for r in val if r["mission"] == A) == sorted(r["group_id"] for r in val
                                                                               if r["mission"] == B)
    job = run.begin()
    run.model.eval()
    replies = [f"{r['solution'] if r['mission'] == A else _other(r['solution'])}\n理由: 图片_1 接地线" for r in val]
    padded = val + val[-1:]
    padded_replies = replies + replies[-1:]
    job.trainer.eval_batches = [samples_of(padded[:8], padded_replies[:8]), samples_of(padded[8:], padded_replies[8:])]
    with caplog.at_level(logging.WARNING, logger="group_qc"):
        assert job.trainer.evaluation_loop() == "evaluated"
    logged = {k: v[-1] for k, v in job.trainer._metrics["eval"].items()}
    assert logged["qc_val/groups"] == len(val) == 2 * len({r["group_id"] for r in val})
    accuracy = (logged[f"qc_val/accuracy/{A}"], logged[f"qc_val/accuracy/{B}"], logged["qc_val/accuracy"])
    assert accuracy == (1.0, 0.0, 0.5)
    assert not [r for r in caplog.records if "validation scored" in r.getMessage()]
    job.callback.on_train_end(job.args, job.state, None)
    (entry,) = job.record()["validation"]["history"]
    assert entry["qc_val/groups"] == len(val) and entry[f"qc_val/accuracy/{A}"] == 1.0


# planted-bug test (issue 27, class 12): the tower's digest at the end
@pytest.mark.parametrize("touched, changed", [
    ("visual.blocks.0.attn.qkv.weight", True),    # the vision tower
    ("visual.merger.mlp.0.weight", True),         # the aligner
    ("lora_B", False),                            # a LoRA matrix: meant to train, not a frozen part
    (None, False),                                # nothing
])
def test_the_end_of_training_digest_is_recomputed_and_a_changed_tower_is_reported(run, caplog, touched, changed):
    """Silent bug: the run record's end-of-training digest of the vision tower and aligner copied from the start
    instead of computed again, so a tower that changed during training could never be reported (no test changed it
    on purpose). Here a frozen weight is changed between on_train_begin and on_train_end: group_qc_run.json's
    at_end must be the digest of the weights as they are then, differ from at_start, and the error be logged;
    a LoRA matrix moving, or nothing moving, keeps the digests equal and logs nothing."""
    import torch
    from swift_plugins.qc_callbacks import frozen_parts, tensor_digest
    job = run.begin()
    start = job.record()["frozen_parts_sha256"]
    assert start["at_start"] == tensor_digest(frozen_parts(run.model)) and start["at_end"] is None
    if touched:
        name, param = next((n, p) for n, p in run.model.named_parameters() if touched in n)
        with torch.no_grad():
            param.add_(1e-3)
    with caplog.at_level(logging.ERROR, logger="group_qc"):
        job.callback.on_train_end(job.args, job.state, None)
    frozen = job.record()["frozen_parts_sha256"]
    assert frozen["at_start"] == start["at_start"]
    assert frozen["at_end"] == tensor_digest(frozen_parts(run.model))
    assert (frozen["at_end"] != frozen["at_start"]) is changed
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert bool([e for e in errors if "vision tower or aligner changed" in e]) is changed, errors


# planted-bug test (issue 27, class 13): zero advantage from weighted rewards
# Two prompts per mission, two samples each (num_generations 2): what each sample wrote.
#   "v": the right verdict alone (qc_label 1, qc_format 0); "v+r": the right verdict and a reason (1, 1);
#   "w+r": the wrong verdict and a reason (0, 1).
PROMPTS = [(A, ("v", "w+r")), (A, ("v+r", "v+r")), (B, ("v+r", "v")), (B, ("v", "w+r"))]


@pytest.mark.parametrize("weights, zero_share", [
    ((1.0, 1.0), {A: 1.0, B: 0.5}),   # equal weights: the weighted and unweighted sums agree
    ((1.0, 0.5), {A: 0.5, B: 0.0}),   # unweighted, A's first and B's second prompt would look flat
    ((2.0, 1.0), {A: 0.5, B: 0.0}),
    ((1.0, 0.0), {A: 0.5, B: 0.5}),   # a reward with weight 0: B's first prompt is flat, its second is not
])
def test_the_zero_advantage_share_per_mission_follows_the_weighted_rewards(run, weights, zero_share):
    """Silent bug: the per-mission zero-advantage share (qc/zero_advantage/<mission>) computed from unweighted
    reward sums, while GRPO's advantages come from the weighted ones; every run-level test trained with one reward
    of weight 1 and checked no value. Two rewards (qc_label, qc_format) with weights under which the weighted and
    unweighted sums disagree on which prompt groups are flat: the logged share must be the table's, and the share of
    prompts whose advantages ms-swift computed as all zero."""
    import torch
    job = run.begin(reward_names=("qc_label", "qc_format"), weights=weights, num_generations=2)
    run.model.train()
    by_mission = {m: [r for r in run.data["train"] if r["mission"] == m] for m in (A, B)}
    rows, completions, taken = [], [], {A: 0, B: 0}
    for mission, kinds in PROMPTS:
        row = by_mission[mission][taken[mission]]
        taken[mission] += 1
        for kind in kinds:
            verdict = row["solution"] if kind.startswith("v") else _other(row["solution"])
            rows.append(row)
            completions.append(verdict + ("\n理由: 图片_1 接地线已捆扎" if kind.endswith("+r") else ""))
    samples = samples_of(rows, completions)
    per_func = rewards(samples, job.trainer.reward_func_names)
    advantages = job.trainer._compute_advantages(samples, per_func, [])
    flat = [bool(torch.all(advantages[2 * i:2 * i + 2].abs() < 1e-6)) for i in range(len(PROMPTS))]
    logged = {k: v[-1] for k, v in job.trainer._metrics["train"].items()}
    for mission in (A, B):
        mine = [f for (m, _), f in zip(PROMPTS, flat) if m == mission]
        assert sum(mine) / len(mine) == zero_share[mission]                    # ms-swift's advantages agree ...
        assert logged[f"qc/zero_advantage/{mission}"] == zero_share[mission]  # ... with what the callback logs
        assert logged[f"qc/label_reward/{mission}"] == 0.75


# planted-bug test (issue 36): the engine switch
@pytest.mark.parametrize("environ, bare", [({}, False), ({"GROUP_QC_BARE_ENGINE": ""}, False),
                                           ({"GROUP_QC_BARE_ENGINE": "0"}, False),
                                           ({"GROUP_QC_BARE_ENGINE": "1"}, True)])
def test_the_engine_changes_are_on_unless_asked_off(environ, bare):
    from swift_plugins.qc_callbacks import bare_engine_asked
    assert bare_engine_asked(environ) is bare
