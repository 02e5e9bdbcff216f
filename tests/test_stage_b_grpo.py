"""Stage-B through ms-swift for real: the reward path the trainer uses, the launcher's argument lists
parsed by ms-swift's own argument classes, and `swift rlhf --rlhf_type grpo` for 2 steps on tiny
Qwen2.5-VL and Qwen3-VL checkpoints reading JSONL that Stage-A's runner wrote."""
from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stage_b.data.dataset import build_rows
from stage_b.data.settings import Selection
from stage_b.train.launch import build_command
from stage_b.train.launch_settings import LaunchSettings, importable
from stage_b.train.lora import layer_of

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(270)

REPO = Path(__file__).resolve().parent.parent
REWARD_NAMES = ["qc_label", "qc_format", "qc_consistency"]


def EVERYTHING(package):   # can_import for a GPU node with vLLM and DeepSpeed installed
    return True


def NOTHING(package):      # can_import for a GPU box without them
    return False


@pytest.fixture(scope="module")
def stage_a_dir(tmp_path_factory, synthetic, tiny_qwen2_5_vl):
    """Stage-A output for all four missions, written by the real runner and engine."""
    from qc_core.checkpoints import resolve_model
    from stage_a.engine import SwiftSummaryEngine
    from stage_a.runner import StageAOptions, run_stage_a
    root = tmp_path_factory.mktemp("stage_b")
    synthetic.generate(root / "photos", seed=7, groups_per_label=2)
    engine = SwiftSummaryEngine(resolve_model(str(tiny_qwen2_5_vl)), batch_size=64, max_pixels=12_544,
                                max_new_tokens=8)
    run_stage_a(StageAOptions(input_dir=str(root / "photos"), output_dir=str(root / "stage_a"),
                              model=str(tiny_qwen2_5_vl), mission="all", batch_size=16, max_pixels=12_544,
                              max_new_tokens=8, progress=False), engine=engine)
    return root / "stage_a"


@pytest.fixture(scope="module")
def plugin():
    sys.path.insert(0, str(REPO / "swift_plugins"))
    import qc_plugin  # noqa: F401 - registration at import
    return qc_plugin


def _samples(rows, completions):
    from swift.rl_core.data import GRPOSample
    return [GRPOSample.from_row({**row, "messages": row["messages"] + [{"role": "assistant", "content": c}]})
            for row, c in zip(rows, completions)]


def _rewards(samples):
    import torch
    from swift.rewards import orms
    from swift.rl_core.grpo_algorithm import compute_rewards_per_func
    funcs = [orms[name](args=None) for name in REWARD_NAMES]
    return compute_rewards_per_func(samples, funcs, None, torch.device("cpu")).tolist()


def test_rewards_through_ms_swift_reward_path_follow_each_row(plugin, stage_a_dir):
    rows, _ = build_rows(Selection(stage_a_dir=str(stage_a_dir)), "all")
    num_generations = 4
    rows = [r for r in rows for _ in range(num_generations)]  # as the trainer repeats each prompt
    right = [f"{r['solution']}\n理由: 图片_1 依据摘要判定" for r in rows]
    scores = _rewards(_samples(rows, right))
    assert [s[0] for s in scores] == [1.0] * len(rows)          # qc_label
    assert [s[1] for s in scores] == [1.0] * len(rows)          # qc_format
    assert all(0.0 <= s[2] <= 1.0 for s in scores)              # qc_consistency
    # Shuffle completions against rows: a completion now scores 1 only where the labels happen to agree.
    order = list(range(len(rows)))
    random.Random(0).shuffle(order)
    shuffled = _rewards(_samples(rows, [right[i] for i in order]))
    expected = [1.0 if rows[i]["solution"] == rows[j]["solution"] else 0.0 for j, i in enumerate(order)]
    assert [s[0] for s in shuffled] == expected and 0.0 in expected


def _parse_with_ms_swift(argv):
    from swift.arguments import RLHFArguments
    from swift.utils.utils import _patch_get_type_hints
    from transformers import HfArgumentParser
    with _patch_get_type_hints():
        parser = HfArgumentParser([RLHFArguments])
    return parser.parse_args(argv)  # argparse: an unknown flag or a bad value exits here


@pytest.mark.parametrize("cuda, nproc", [("cpu", None), ("cpu", "2"), ("0", None), ("0,1,2,3", None)])
def test_launcher_argument_lists_parse_with_ms_swift_argument_classes(tiny_qwen2_5_vl, cuda, nproc):
    env, argv, _ = build_command(LaunchSettings(str(tiny_qwen2_5_vl), mission="BBU线缆布放,挡风板安装检查", cuda=cuda,
                                                nproc=nproc and int(nproc), lora_last_k=3, num_generations=6,
                                                max_steps=5), val_groups=10,
                                 environ={}, can_import=EVERYTHING)   # a GPU node with vLLM and DeepSpeed
    assert argv[0] == "rlhf"
    ns = _parse_with_ms_swift(argv[1:])
    assert ns.dataset == ["group_qc_train:BBU线缆布放要求/挡风板安装检查"]
    assert ns.reward_funcs == REWARD_NAMES and ns.callbacks == ["qc_lora_guard", "qc_order_guard"]
    assert ns.num_generations == 6 and ns.max_steps == 5 and ns.template == "qwen2_5_vl"
    # label-balanced steps: the plugin alternates verdicts and the trainer keeps that order (qc_order_guard
    # checks the prompt count per step at run time); left padding keeps logits to the completions
    assert ns.dataset_shuffle is False and env["GROUP_QC_BALANCE_LABELS"] == "1" and ns.padding_side == "left"
    assert ns.target_regex.startswith(r"^model\.language_model\.layers\.(3|4|5)\.")
    assert env["GROUP_QC_LORA_LAST_K"] == "3"
    # validation during training (the YAML's default): greedy group_qc_val, best checkpoint by balanced accuracy
    assert ns.val_dataset == ["group_qc_val:BBU线缆布放要求/挡风板安装检查"] and ns.num_generations_eval == 1
    assert ns.metric_for_best_model == "qc_val/balanced_accuracy" and ns.greater_is_better is True
    assert ns.eval_strategy == "steps" and ns.eval_steps == ns.save_steps == 100
    processes = int(nproc or 1) if cuda == "cpu" else len(cuda.split(","))
    assert ns.per_device_eval_batch_size == min(16, 10 // processes)   # never more than the split holds
    if cuda == "cpu":
        assert not ns.use_vllm and ns.vllm_mode is None and not ns.deepspeed and ns.torch_dtype == "float32"
        assert ns.per_device_train_batch_size == 6 * 2
        assert (ns.use_cpu, ns.ddp_backend, env.get("NPROC_PER_NODE")) == (
            (True, "gloo", "2") if nproc else (False, None, None))
    else:
        assert ns.use_vllm and ns.vllm_mode == "colocate" and ns.deepspeed == "zero2"
        assert env.get("NPROC_PER_NODE") == ("4" if cuda == "0,1,2,3" else None)


@pytest.mark.parametrize("settings, expected", [
    (dict(deepspeed="zero3", rollout="server", vllm_server="10.0.0.5:8001"),
     dict(deepspeed="zero3", vllm_mode="server", vllm_server_host=["10.0.0.5"], vllm_server_port=[8001],
          vllm_enable_lora=True)),
    # colocate: vLLM sleeps while the trainer steps, and takes the LoRA matrices each step instead of merged weights
    (dict(deepspeed="none", rollout="colocate"), dict(deepspeed=None, vllm_mode="colocate", sleep_level=1,
                                                      vllm_enable_lora=True)),
    (dict(rollout="hf", deepspeed="zero3"), dict(deepspeed="zero3", use_vllm=False, vllm_mode=None, sleep_level=0,
                                                 vllm_gpu_memory_utilization=0.9, vllm_enable_lora=False)),
    (dict(num_generations=4, prompts_per_step=8), dict(per_device_train_batch_size=32, num_generations=4)),
    (dict(val="0"), dict(val_dataset=[], eval_strategy=None, metric_for_best_model=None, num_generations_eval=None)),
    (dict(eval_steps=20), dict(eval_steps=20, save_steps=20)),
])
def test_scale_out_variants_parse_with_ms_swift(tiny_qwen2_5_vl, settings, expected):
    _, argv, _ = build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda="0,1,2,3", **settings), environ={},
                               can_import=EVERYTHING)
    ns = _parse_with_ms_swift(argv[1:])
    for key, value in expected.items():
        assert getattr(ns, key) == value, key


@pytest.mark.parametrize("bad, message", [
    (dict(deepspeed="zero9"), "deepspeed='zero9'"),
    (dict(rollout="remote"), "rollout='remote'"),
    (dict(rollout="server", vllm_server="nohost"), "HOST:PORT"),
    (dict(lora_last_k=7), "lora_last_k 7 is out of range: the language model has 6 layers"),
    (dict(lora_last_k=0), "lora_last_k 0 is out of range"),
    (dict(mission="RRU"), "unknown mission 'RRU'"),
    (dict(val="maybe"), "val='maybe': use 1"),
    (dict(val_ratio="1.5"), "GROUP_QC_VAL_RATIO='1.5' is out of range"),
    (dict(split_seed="abc"), "GROUP_QC_SPLIT_SEED='abc' is not an integer"),
    (dict(cuda="0", nproc="2"), "nproc= is for cuda=cpu"),
    (dict(cuda="0", rollout="hf", vllm_server="10.0.0.5:8001"),
     r"vllm_server='10.0.0.5:8001' is the address of a vLLM rollout server, used with rollout=server only; drop it "
     r"\(rollout=hf rolls out inside the trainer\), or add rollout=server"),
    (dict(cuda="0", vllm_server="10.0.0.5:8001"), "used with rollout=server only"),
    (dict(cuda="cpu", rollout="colocate"), "rollout=colocate runs vLLM, which needs GPUs; .* use rollout=hf"),
    (dict(cuda="cpu", deepspeed="zero2"), "deepspeed=zero2 needs GPUs; .* deepspeed=none"),
])
def test_launcher_refuses_bad_settings(tiny_qwen2_5_vl, bad, message):
    with pytest.raises(ValueError, match=message):
        build_command(LaunchSettings(str(tiny_qwen2_5_vl), **bad), environ={}, can_import=EVERYTHING)


def _vllm_or_deepspeed_keys(argv):
    return [a for a in argv if a.startswith("--") and (a[2:].startswith("vllm") or a[2:] in (
        "use_vllm", "sleep_level", "offload_model", "offload_optimizer", "deepspeed"))]


@pytest.mark.parametrize("cuda", ["0", "0,1"])
def test_rollout_hf_deepspeed_none_drops_every_vllm_and_deepspeed_key(tiny_qwen2_5_vl, cuda):
    """The GPU-without-vLLM launch: what ms-swift refused on an H100 (`--use_vllm false` beside the YAML's
    vllm_mode) cannot happen, because no vLLM key is left; bf16 and the GPU batch stay."""
    env, argv, notes = build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda=cuda, rollout="hf", deepspeed="none"),
                                     environ={}, can_import=EVERYTHING)
    assert _vllm_or_deepspeed_keys(argv) == [] and notes == []
    ns = _parse_with_ms_swift(argv[1:])
    assert not ns.use_vllm and ns.vllm_mode is None and ns.deepspeed is None and ns.torch_dtype == "bfloat16"
    assert env["CUDA_VISIBLE_DEVICES"] == cuda and ns.per_device_train_batch_size == 8


@pytest.mark.parametrize("settings, message", [
    (dict(rollout="colocate"), "rollout=colocate needs vLLM, which is not installed here: pip install vllm, or use "
                               "rollout=hf"),
    (dict(rollout="server"), "rollout=server needs vLLM, which is not installed here"),
    (dict(rollout="hf", deepspeed="zero3"), "deepspeed=zero3 needs DeepSpeed, which is not installed here: pip "
                                            "install deepspeed, or use deepspeed=none"),
])
def test_a_setting_given_that_needs_a_missing_package_is_refused(tiny_qwen2_5_vl, settings, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda="0", **settings), environ={}, can_import=NOTHING)


def test_the_yaml_defaults_that_need_a_missing_package_are_dropped_with_a_note(tiny_qwen2_5_vl):
    """Adapt, not refuse, for the YAML's defaults: the command that runs is the rollout=hf deepspeed=none one, and a
    note for each names the setting that asks for it explicitly."""
    _, adapted, notes = build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda="0"), environ={}, can_import=NOTHING)
    _, explicit, none = build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda="0", rollout="hf", deepspeed="none"),
                                      environ={}, can_import=NOTHING)
    assert adapted == explicit and none == [] and _vllm_or_deepspeed_keys(adapted) == []
    assert len(notes) == 2
    assert notes[0].startswith("vLLM is not installed: the YAML's vLLM colocate rollouts are dropped") and \
        "rollout=hf asks for this explicitly" in notes[0]
    assert notes[1].startswith("DeepSpeed is not installed: the YAML's deepspeed zero2 is dropped") and \
        "deepspeed=none asks for this explicitly" in notes[1]
    # only what is missing is dropped
    _, argv, notes = build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda="0"), environ={},
                                   can_import=lambda p: p == "vllm")
    assert "--use_vllm" in argv and "--deepspeed" not in argv and len(notes) == 1


def test_rollout_hf_passes_ms_swift_own_argument_checks(tiny_qwen2_5_vl, tmp_path):
    """ms-swift's RLHFArguments, built for real (its __post_init__ checks), accept the rollout=hf command where they
    refused `extra="--use_vllm false"`. float32 is the one change for this CPU machine (bf16 needs a GPU here)."""
    from swift.arguments import RLHFArguments
    from swift.utils.utils import _patch_get_type_hints
    from transformers import HfArgumentParser
    with _patch_get_type_hints():
        parser = HfArgumentParser([RLHFArguments])

    def parse(**settings):
        env, argv, _ = build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda="0", val="0", output_dir=str(tmp_path),
                                                    **settings),
                                     environ={}, can_import=EVERYTHING)
        return parser.parse_args_into_dataclasses(argv[1:] + ["--torch_dtype", "float32"])[0]

    with pytest.raises(ValueError, match="vllm_mode is not supported when use_vllm is false"):
        parse(deepspeed="none", extra=["--use_vllm", "false"])
    args = parse(rollout="hf", deepspeed="none")
    assert args.use_vllm is False and args.vllm_mode is None and args.deepspeed is None


def test_run_grpo_sh_on_a_gpu_box_without_vllm_or_deepspeed(tiny_qwen2_5_vl, stage_a_dir):
    """This machine has neither vLLM nor DeepSpeed: cuda=0 rollout=hf prints a command without their keys; without
    rollout= the YAML's defaults are dropped with a note each; rollout=colocate is refused in seconds (exit 2), before
    the rows are built or anything loads."""
    if importable("vllm") or importable("deepspeed"):
        pytest.skip("vLLM or DeepSpeed is installed here")
    base = ["bash", "scripts/run_grpo.sh", "mission=all", "cuda=0", f"model={tiny_qwen2_5_vl}",
            f"stage_a_dir={stage_a_dir}", "dry_run=1"]
    env = {**os.environ, "PYTHON": sys.executable}

    def run(*settings):
        return subprocess.run([*base, *settings], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)

    out = run("rollout=hf")
    assert out.returncode == 0, out.stderr
    assert "--use_vllm" not in out.stdout and "vllm" not in out.stdout.replace("--external_plugins", "")
    assert "--deepspeed" not in out.stdout and "CUDA_VISIBLE_DEVICES=0 " in out.stdout
    assert "note: DeepSpeed is not installed" in out.stderr and "note: vLLM" not in out.stderr
    out = run()
    assert out.returncode == 0 and "--use_vllm" not in out.stdout and "note: vLLM is not installed" in out.stderr
    start = time.perf_counter()
    out = run("rollout=colocate", "stage_a_dir=/nonexistent")   # refused before the data is even looked at
    assert out.returncode == 2 and time.perf_counter() - start < 30
    assert "error: rollout=colocate needs vLLM, which is not installed here" in out.stderr


@pytest.mark.parametrize("environ, explicit, expected, note", [
    # the YAML's ENV is a default: an exported variable wins, and the launcher says so
    ({"GROUP_QC_VAL_RATIO": "0.5"}, {}, {"GROUP_QC_VAL_RATIO": "0.5"}, "GROUP_QC_VAL_RATIO=0.5 from your environment "
                                                                      "overrides the YAML's 0.2"),
    ({"GROUP_QC_STAGE_A_DIR": "/data/sa"}, {}, {"GROUP_QC_STAGE_A_DIR": "/data/sa"},
     "overrides the YAML's output/stage_a"),
    # a key=value setting wins over both
    ({"GROUP_QC_SPLIT_SEED": "3"}, {"split_seed": "7"}, {"GROUP_QC_SPLIT_SEED": "7"},
     "GROUP_QC_SPLIT_SEED=7 from the command line overrides your environment's 3"),
    ({}, {"stage_a_dir": "/x"}, {"GROUP_QC_STAGE_A_DIR": "/x", "GROUP_QC_VAL_RATIO": "0.2"}, None),
    ({"GROUP_QC_LORA_LAST_K": "2"}, {}, {"GROUP_QC_LORA_LAST_K": "2"}, None),  # and it sizes the LoRA regex
    # the folder given here is the input: exported files (which win over a folder at one level) do not
    ({"GROUP_QC_STAGE_A_FILES": "/old/*.jsonl"}, {"stage_a_dir": "/x"},
     {"GROUP_QC_STAGE_A_DIR": "/x", "GROUP_QC_STAGE_A_FILES": ""},
     "GROUP_QC_STAGE_A_FILES= from the command line overrides your environment's /old/*.jsonl"),
])
def test_exported_variables_win_over_the_yaml_and_settings_over_both(tiny_qwen2_5_vl, environ, explicit, expected,
                                                                     note):
    env, argv, notes = build_command(LaunchSettings(str(tiny_qwen2_5_vl), **explicit), environ=environ)
    for key, value in expected.items():
        assert env.get(key) == value, key   # the run gets every selection value as the launcher checked it
    if note:
        assert any(note in n for n in notes), notes
    if environ.get("GROUP_QC_LORA_LAST_K"):
        assert r"layers\.(4|5)\." in argv[argv.index("--target_regex") + 1]


def test_run_grpo_sh_keeps_an_exported_stage_a_dir_and_checks_data_before_the_model(tiny_qwen2_5_vl, stage_a_dir,
                                                                                   tmp_path):
    """The user's export reaches the command (it used to be replaced by the YAML's output/stage_a), and a bad
    data setting fails in seconds, before any model loads."""
    base = ["bash", "scripts/run_grpo.sh", "mission=all", "cuda=cpu", f"model={tiny_qwen2_5_vl}", "dry_run=1"]
    env = {**os.environ, "PYTHON": sys.executable, "GROUP_QC_STAGE_A_DIR": str(stage_a_dir)}
    out = subprocess.run(base, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert f"GROUP_QC_STAGE_A_DIR={stage_a_dir} " in out.stdout   # the exported value stands, and the command says so
    assert "GROUP_QC_STAGE_A_DIR=output/stage_a" not in out.stdout
    assert f"GROUP_QC_STAGE_A_DIR={stage_a_dir} from your environment overrides the YAML's output/stage_a" in out.stderr
    for setting, message in [(f"stage_a_dir={tmp_path / 'nope'}", "does not exist"),
                             ("val_ratio=0", "val=1 evaluates the validation split during training, but it is empty"),
                             ("mission=RRU", "unknown mission 'RRU'")]:
        out = subprocess.run([*base, setting], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
        assert out.returncode == 2 and message in out.stderr, out.stderr


def _run_swift(env, argv, timeout=600):
    swift = str(Path(sys.executable).parent / "swift")
    return subprocess.run([swift, *argv], cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_swift_rlhf_grpo_two_steps_trains_exactly_the_last_k_llm_layers(arch, tiny_model_factory, stage_a_dir,
                                                                       tmp_path):
    model = tiny_model_factory(arch)
    out = tmp_path / "grpo"
    result = subprocess.run(
        ["bash", "scripts/run_grpo.sh", "mission=all", "cuda=cpu", f"model={model}", f"stage_a_dir={stage_a_dir}",
         "lora_last_k=2", "num_generations=4", "max_steps=2", f"output_dir={out}", "val=0",
         "extra=--max_completion_length 12 --save_steps 2 --dynamic_sample false"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHON": sys.executable})
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    assert "trainable parameters per LLM layer (of 6): {4: " in log
    (run_dir,) = out.glob("v*")
    steps = [json.loads(line) for line in (run_dir / "logging.jsonl").read_text().splitlines()]
    logged = steps[0]
    for name in REWARD_NAMES:
        assert f"rewards/{name}/mean" in logged
    assert "frac_reward_zero_std" in logged
    args = json.loads((run_dir / "args.json").read_text())  # what the trainer actually received
    assert args["num_generations"] == 4 and args["lora_rank"] == 16 and args["beta"] == 0.04
    assert args["reward_weights"] == [1.0, 0.25, 0.25]
    from safetensors import safe_open
    with safe_open(str(run_dir / "checkpoint-2" / "adapter_model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert not [k for k in keys if "visual" in k]
    assert {layer_of(k) for k in keys} == {4, 5}
    projections = {k.split(".")[-3] for k in keys}
    assert projections == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}


def _checkpoint_digest(model_dir: Path, part: str = "visual.") -> str:
    """tensor_digest of a checkpoint's tensors under `part` (vision tower and aligner), read from its files."""
    from safetensors import safe_open
    from swift_plugins.qc_callbacks import tensor_digest
    tensors = []
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        with safe_open(str(path), "pt") as f:
            tensors += [(k[k.index(part):], f.get_tensor(k)) for k in f.keys() if part in k]
    assert tensors
    return tensor_digest(tensors)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_photo_aware_grpo_trains_last_k_llm_layers_with_the_tower_bit_identical_then_evaluates(
        arch, tiny_model_factory, stage_a_dir, tmp_path):
    """run_grpo.sh images=1 for 2 steps: the trainer's inputs hold the photos' visual tokens, the adapter holds only
    the last K LLM layers, the vision tower and aligner after training are bit-identical to the checkpoint's, and
    evaluation scores the result in the same mode (from the run record) and says so."""
    model = tiny_model_factory(arch)
    out = tmp_path / "grpo"
    result = subprocess.run(
        ["bash", "scripts/run_grpo.sh", "mission=all", "cuda=cpu", f"model={model}", f"stage_a_dir={stage_a_dir}",
         "lora_last_k=2", "num_generations=4", "max_steps=2", f"output_dir={out}", "val=0", "images=1",
         "max_pixels=12544", "extra=--max_completion_length 12 --save_steps 2 --dynamic_sample false"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHON": sys.executable})
    log = result.stdout + result.stderr
    assert result.returncode == 0, log[-4000:]
    (run_dir,) = out.glob("v*")
    record = json.loads((run_dir / "group_qc_run.json").read_text())
    assert record["selection"]["images"] is True and record["selection"]["max_pixels"] == 12544
    assert record["photo_tokens_per_sample"] >= 8   # 1-6 photos of >= 4 visual tokens each reached the policy
    steps = [json.loads(line) for line in (run_dir / "logging.jsonl").read_text().splitlines()]
    assert steps[0]["qc/photo_tokens_per_sample"] > 0
    frozen = record["frozen_parts_sha256"]
    assert frozen["at_start"] == frozen["at_end"] == _checkpoint_digest(model)
    from safetensors import safe_open
    with safe_open(str(run_dir / "checkpoint-2" / "adapter_model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert keys and not [k for k in keys if "visual" in k or "merger" in k]
    assert {layer_of(k) for k in keys} == {4, 5}
    evaluation = subprocess.run(
        [sys.executable, "-m", "group_qc", "evaluate",
         "--model", str(model), "--adapters", str(run_dir / "checkpoint-2"),
         "--output_dir", str(tmp_path / "eval"), "--max_new_tokens", "8", "--no_review"],
        cwd=REPO, capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert evaluation.returncode == 0, evaluation.stderr[-3000:]
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert metrics["data"]["mode"] == "summaries+photos" and metrics["data"]["selection"]["max_pixels"] == 12544
    predictions = [json.loads(line) for line in (tmp_path / "eval" / "predictions.jsonl").read_text().splitlines()]
    assert predictions and {p["mode"] for p in predictions} == {"summaries+photos"}
    assert "The model read: summaries and photos" in (tmp_path / "eval" / "report.md").read_text()


@pytest.mark.slow
def test_grpo_with_our_engine_changes_trains_exactly_as_ms_swift_alone(tiny_qwen2_5_vl, stage_a_dir, tmp_path):
    """Photo-aware GRPO with our two engine changes (the default: the vision tower's windows attended one call per
    length, ms-swift's rollouts stopped by the host stop test) and with GROUP_QC_BARE_ENGINE=1: the same completions
    and rewards, and bit for bit the same per-token log-probabilities in every forward (tests/plugins/logps_probe.py:
    the tiny model's losses are 0 and could not tell); the rollouts went through our stop test only where it is on;
    the run record says which ran. The synthetic photos at
    224x168 are 2x2 windows of two lengths each, so the windows are regrouped for real."""
    runs = {}
    plugins = f"{REPO / 'swift_plugins' / 'qc_plugin.py'} {REPO / 'tests' / 'plugins' / 'logps_probe.py'}"
    for bare in ("0", "1"):
        out, probe = tmp_path / f"bare{bare}", tmp_path / f"logps{bare}.jsonl"
        result = subprocess.run(
            ["bash", "scripts/run_grpo.sh", "mission=all", "cuda=cpu", f"model={tiny_qwen2_5_vl}",
             f"stage_a_dir={stage_a_dir}", "lora_last_k=2", "num_generations=4", "max_steps=2", f"output_dir={out}",
             "val=0", "images=1", "max_pixels=200704",
             "extra=--max_completion_length 12 --save_strategy no --dynamic_sample false --log_completions true "
             f"--external_plugins {plugins}"],
            cwd=REPO, capture_output=True, text=True, timeout=900,
            env={**os.environ, "PYTHON": sys.executable, "GROUP_QC_BARE_ENGINE": bare, "QC_TEST_LOGPS_OUT": str(probe)})
        assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
        (run_dir,) = out.glob("v*")
        steps = [json.loads(line) for line in (run_dir / "logging.jsonl").read_text().splitlines()]
        learned = [{k: v for k, v in step.items() if k == "loss" or k.startswith(("reward", "completions/"))}
                   for step in steps if "loss" in step]
        runs[bare] = {"learned": learned, "completions": (run_dir / "completions.jsonl").read_text().splitlines(),
                      "logps": [x for x in probe.read_text().splitlines() if '"logps"' in x],
                      "host_stop_tests": probe.read_text().count('"host_stop_test"'),
                      "record": json.loads((run_dir / "group_qc_run.json").read_text())["engine_changes"]}
    ours, bare = runs["0"], runs["1"]
    assert ours["record"] == {"window_batches": 1, "host_stop_words": True}
    assert bare["record"] == {"window_batches": 0, "host_stop_words": False, "off_by": "GROUP_QC_BARE_ENGINE=1"}
    assert len(ours["learned"]) == 2 and len(ours["logps"]) >= 4   # reference and policy log-probs, each step
    assert ours["host_stop_tests"] >= 2 * 11 and bare["host_stop_tests"] == 0   # the rollouts' decode steps
    assert ours["logps"] == bare["logps"]
    assert ours["learned"] == bare["learned"]
    assert ours["completions"] and ours["completions"] == bare["completions"]


@pytest.mark.slow
def test_lora_guard_stops_a_run_whose_layers_are_not_the_last_k(tiny_qwen2_5_vl, stage_a_dir, tmp_path):
    env, argv, _ = build_command(LaunchSettings(str(tiny_qwen2_5_vl), mission="BBU接地线检查",
                                                stage_a_dir=str(stage_a_dir),
                                                lora_last_k=2, num_generations=2, max_steps=1,
                                                output_dir=str(tmp_path / "o"), val="0"), environ={})
    env["GROUP_QC_LORA_LAST_K"] = "3"   # the K the user asked for never reached the regex
    result = _run_swift(env, argv + ["--max_completion_length", "4"])
    assert result.returncode != 0
    assert ("group-qc LoRA guard: trainable layers [4, 5] != the last 3 layers [3, 4, 5]"
            in result.stdout + result.stderr)
    assert not list((tmp_path / "o").glob("v*/checkpoint-*"))


def _completion_logps(model_dir, padding_side, rows):
    """Per-token log-probs of each row's assistant reply, the way GRPOTrainer gets them: ms-swift's
    template collates the batch, `logits_to_keep` comes from the labels, one forward."""
    import torch
    from swift.model import get_model_processor
    from swift.template import get_template

    from qc_core.checkpoints import resolve_model

    spec = resolve_model(str(model_dir))
    model, processor = get_model_processor(spec.path, model_type=spec.model_type, torch_dtype=torch.float32,
                                           device_map="cpu")
    template = get_template(processor, template_type=spec.template, padding_side=padding_side)
    template.model = model  # mrope position ids come from the model, as in the trainer
    template.set_mode("train")
    batch = template.data_collator([template.encode({"messages": r}) for r in rows])
    labels = batch.pop("labels")
    keep = int((labels.shape[-1] - torch.ne(labels, -100).int().argmax(-1)).max())
    with torch.no_grad():
        logits = model(**batch, logits_to_keep=keep + 1).logits[:, :-1]
    labels = labels[:, -keep:]
    logps = torch.log_softmax(logits, -1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return keep, [logps[i][labels[i] != -100].tolist() for i in range(len(rows))]


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_left_padding_keeps_log_probs_and_cuts_logits_to_the_completions(arch, tiny_model_factory):
    """configs/stage_b_grpo.yaml sets padding_side: left for speed; it must not change a single log-prob."""
    from qc_core.missions import load_registry
    from stage_b.data.prompts import stage_b_messages

    mission = load_registry().resolve("BBU接地线检查")
    replies = [(1, "通过\n理由: 图片_1 符合要求"), (6, "不通过"), (3, "不通过\n理由: 图片_2 接地线散乱未捆扎")]
    rows = [stage_b_messages(mission, ["接地排×1，接地线×1/已捆扎"] * n) + [{"role": "assistant", "content": c}]
            for n, c in replies]
    keep_right, right = _completion_logps(tiny_model_factory(arch), "right", rows)
    keep_left, left = _completion_logps(tiny_model_factory(arch), "left", rows)
    for a, b in zip(right, left):
        assert len(a) == len(b) > 0
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-4
    longest_reply = max(len(x) for x in left)
    assert keep_left == longest_reply  # only the completions' logits, however long the prompts
    assert keep_right > longest_reply + 50  # right padding pays for the prompt-length spread too
    yaml_text = (Path(__file__).resolve().parent.parent / "configs" / "stage_b_grpo.yaml").read_text(encoding="utf-8")
    assert "\npadding_side: left" in yaml_text


@pytest.mark.parametrize("settings, message", [
    (dict(dataset_shuffle=True, per_device_train_batch_size=32, num_generations=8), "dataset_shuffle"),
    (dict(dataset_shuffle=False, per_device_train_batch_size=24, num_generations=8), "3 prompts per generation"),
    (dict(dataset_shuffle=False, per_device_train_batch_size=32, num_generations=8), None),
])
def test_order_guard_stops_runs_that_would_undo_label_balance(plugin, monkeypatch, settings, message):
    from types import SimpleNamespace
    from swift_plugins import qc_callbacks
    monkeypatch.setitem(qc_callbacks.LOADED, "train", (Selection(balance_labels=True), {}, []))
    args = SimpleNamespace(generation_batch_size=None, **settings)
    guard = plugin.callbacks_map["qc_order_guard"](args, None)
    if message is None:
        guard.on_init_end(args, None, None)
    else:
        with pytest.raises(RuntimeError, match=message):
            guard.on_init_end(args, None, None)
    monkeypatch.setitem(qc_callbacks.LOADED, "train", (Selection(balance_labels=False), {}, []))
    guard.on_init_end(SimpleNamespace(dataset_shuffle=True), None, None)   # balance off: nothing to guard


def test_run_grpo_sh_from_another_folder_reads_relative_paths_there(tiny_qwen2_5_vl, stage_a_dir, tmp_path):
    """run_grpo.sh runs in the caller's folder (so stage_a_dir=sa means the user's ./sa) and names the plugin by its
    absolute path (the YAML's relative one would not be found from there: `AssertionError: py_dir …`)."""
    caller = tmp_path / "caller"
    caller.mkdir()
    (caller / "sa").symlink_to(stage_a_dir, target_is_directory=True)
    out = subprocess.run(["bash", str(REPO / "scripts" / "run_grpo.sh"), "mission=all", "cuda=cpu",
                          f"model={tiny_qwen2_5_vl}", "stage_a_dir=sa", "output_dir=runs", "dry_run=1"], cwd=caller,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHON": sys.executable})
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"--external_plugins {REPO / 'swift_plugins' / 'qc_plugin.py'}" in out.stdout
    assert "GROUP_QC_STAGE_A_DIR=sa " in out.stdout and "--output_dir runs" in out.stdout


def test_run_grpo_sh_with_packages_on_pythonpath_runs_swift_by_the_same_python(tiny_qwen2_5_vl, stage_a_dir):
    """The GPU machine's setup: ms-swift installed with `pip --target` and put on PYTHONPATH, no `swift` script beside
    the Python (nor on PATH). The launcher used to exec a bare `swift` there and fail with 'No such file or directory';
    it now runs ms-swift's CLI module with the same Python (what the `swift` script runs)."""
    base_python = Path(os.path.realpath(sys.executable))   # the venv's interpreter, outside the venv
    assert not (base_python.parent / "swift").exists()
    site = next(Path(p) for p in sys.path if p.endswith("site-packages") and (Path(p) / "swift").is_dir())
    env = {**os.environ, "PYTHON": str(base_python), "PYTHONPATH": os.pathsep.join([str(site), str(REPO)]),
           "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["bash", "scripts/run_grpo.sh", "mission=all", "cuda=cpu", f"model={tiny_qwen2_5_vl}",
                          f"stage_a_dir={stage_a_dir}", "dry_run=1"], cwd=REPO, capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f" {base_python} -m swift.cli.main rlhf " in out.stdout
