"""The `swift rlhf` command for Stage-B GRPO, built from configs/stage_b_grpo.yaml plus the run's
choices (scripts/run_grpo.sh calls this). `build_command` is pure; `main` checks the data, then prints or runs.

    group-qc grpo mission=all cuda=0,1 model=DIR [stage_a_dir=… val_ratio=… split_seed=…
                  images=0|1 max_pixels=N input_dir=…
                  output_dir=… lora_last_k=4 num_generations=… prompts_per_step=… max_steps=…
                  val=0|1 eval_steps=N deepspeed=zero2|zero3|zero3_offload|none
                  rollout=colocate|server|hf vllm_server=HOST:PORT config=… nproc=N dry_run=1
                  model_type=… template=… extra="--flags"]

images=1: photo-aware GRPO, each group's photos beside their summaries (GROUP_QC_STAGE_B_IMAGES; max_pixels per
photo, GROUP_QC_STAGE_B_MAX_PIXELS; photos found under input_dir, else where the Stage-A records say).
model_type/template: ms-swift's names, for a Qwen-VL checkpoint whose config.json model_type group-qc does not
know (read from config.json otherwise).

Settings reach the run in this order of precedence: key=value arguments here, then GROUP_QC_* variables
exported in your environment, then the YAML's ENV block (its defaults). A variable that overrides the
YAML is named on stderr.

val=1 (the YAML's default) evaluates group_qc_val greedily every eval_steps and keeps the checkpoint with
the best qc_val/balanced_accuracy. cuda=cpu nproc=2 trains data-parallel in two CPU processes (gloo).
rollout=server trains against a separate vLLM rollout server (start it first on other GPUs with the
`swift rollout` command that dry_run prints); colocate (the YAML default) runs vLLM inside the trainers; hf rolls out
with the trainer's own generate (transformers), every vLLM key dropped: for a GPU without vLLM.

Without vLLM or DeepSpeed installed: the YAML's defaults (vLLM colocate rollouts, ZeRO-2) are dropped, with one
`note:` line each naming the setting that asks for that explicitly (rollout=hf, deepspeed=none); a setting given
here is never changed: rollout=colocate|server without vLLM, or deepspeed=zero2|zero3|zero3_offload without
DeepSpeed, is refused before anything loads, naming what to install or the setting to use instead.

The YAML is expanded into explicit flags (as `swift rlhf config.yaml` would), so the printed command
is exactly what runs, and cuda=cpu can drop the GPU-only keys (vLLM, DeepSpeed) that ms-swift refuses
to combine with a CPU run.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Callable, NamedTuple

import yaml

from qc_core.errors import UserError
from qc_core.checkpoints import resolve_model
from qc_core.exits import run_cli
from qc_core.missions import is_all, load_registry

from stage_b.data.dataset import build_rows
from stage_b.train.lora import target_regex
from stage_b.train.rewards import reward_args
from stage_b.data.settings import (ENV_LORA_LAST_K, ENV_STAGE_A_FILES, parse_flag, parse_seed,
                                   selection_from)
from stage_b.train.launch_settings import (COLOCATE_ONLY, DEFAULT_CONFIG, DEFAULT_EVAL_STEPS, importable,
                                           LaunchSettings, read_config, REPO, run_environment, VAL_ARGS, VAL_KEYS,
                                           vllm_server_address, without_vllm)


class Launch(NamedTuple):
    env: dict            # the variables the run gets on top of the caller's environment
    argv: list[str]      # after `swift`
    notes: list[str]     # what was dropped or overridden, one line each


def launch_environment(settings: LaunchSettings, environ) -> tuple[dict, list[str]]:
    """(variables, notes): the YAML's ENV, exported variables and key=value settings in that order of precedence
    (run_environment), then the whole Stage-B selection as `Selection.to_env()` writes it, so the run reads exactly
    the values checked here. A bad GROUP_QC_* value stops here, naming the variable."""
    yaml_env, _ = read_config(settings.config)
    explicit = settings.selection_values()
    if settings.stage_a_dir is not None and environ.get(ENV_STAGE_A_FILES):
        explicit[ENV_STAGE_A_FILES] = ""   # the folder given here is the input: exported files would win over it
    env, notes = run_environment(yaml_env, environ, explicit)
    merged = {**environ, **env}
    env.update(selection_from(environ=merged).to_env())
    k = merged.get(ENV_LORA_LAST_K, "").strip()
    env[ENV_LORA_LAST_K] = str(parse_seed(k, ENV_LORA_LAST_K) if k else 4)
    return env, notes


def uses_validation(settings: LaunchSettings, args: dict) -> bool:
    """val= when given, else whether the YAML evaluates a validation split."""
    return parse_flag(settings.val, "val") if settings.val is not None else "val_dataset" in args


def build_command(settings: LaunchSettings, environ=None, val_groups: int | None = None,
                  can_import: Callable[[str], bool] = importable) -> Launch:
    """The run's variables, its `swift` argv and notes. Raises ValueError on a bad setting. `val_groups`: the
    validation split's size, to fit the evaluation batch to it. `can_import(name)` says whether vllm / deepspeed are
    installed (on GPUs, a YAML default that needs a missing one is dropped with a note, and a setting given here that
    needs one is refused)."""
    environ = os.environ if environ is None else environ
    missions = load_registry().select(settings.mission)  # unknown mission: error naming the known ones
    selection = "all" if is_all(settings.mission) else "/".join(m.name for m in missions)
    env, notes = launch_environment(settings, environ)
    _, args = read_config(settings.config)
    use_val = uses_validation(settings, args)
    args = reward_args(model_args(settings, args, int(env[ENV_LORA_LAST_K]), selection))
    args = rollout_args(settings, training_args(settings, args))
    args, device_env, processes, missing = device_args(settings, args, can_import)
    args = validation_args(settings, args, use_val, selection, processes, val_groups)
    argv = ["rlhf"]
    for key, value in args.items():
        argv.append(f"--{key}")
        argv += [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return Launch({**env, **device_env}, argv + list(settings.extra), notes + missing)


def model_args(settings: LaunchSettings, args: dict, last_k: int, selection: str) -> dict:
    """The model, its LoRA target (the last `last_k` blocks), the dataset and the plugin's absolute path."""
    # a clear error for a wrong path; model_type/template from config.json unless given (here or in the YAML)
    spec = resolve_model(str(settings.model), (), settings.model_type or args.get("model_type"),
                         settings.template or args.get("template"))
    args = {**args, "model_type": spec.model_type, "template": spec.template}  # a local Qwen2.5-VL matches two
    args.update(model=str(settings.model), target_regex=target_regex(settings.model, last_k),
                dataset=f"group_qc_train:{selection}")
    # the YAML names our plugin relative to the repository; the command may run from any folder (group-qc grpo, or
    # run_grpo.sh, which runs in the caller's folder so that their relative paths are theirs)
    plugin = args.get("external_plugins")
    if isinstance(plugin, str) and not Path(plugin).is_absolute() and (REPO / plugin).is_file():
        args["external_plugins"] = str(REPO / plugin)
    return args


def training_args(settings: LaunchSettings, args: dict) -> dict:
    """output_dir, num_generations, max_steps and deepspeed where given here."""
    args = dict(args)
    if settings.output_dir:
        args["output_dir"] = str(settings.output_dir)
    if settings.num_generations:
        args["num_generations"] = int(settings.num_generations)
    if settings.max_steps:
        args["max_steps"] = int(settings.max_steps)
    if settings.deepspeed == "none":
        args.pop("deepspeed", None)
    elif settings.deepspeed:
        args["deepspeed"] = settings.deepspeed
    return args


def rollout_args(settings: LaunchSettings, args: dict) -> dict:
    """rollout=hf drops every vLLM key; colocate or server asks vLLM for that mode (server: at vllm_server)."""
    if settings.rollout == "hf":
        return without_vllm(args)
    if not settings.rollout:
        return args
    args = {**args, "use_vllm": True, "vllm_mode": settings.rollout}
    if settings.rollout == "server":
        host, port = vllm_server_address(settings.vllm_server)
        args = {k: v for k, v in args.items() if k not in COLOCATE_ONLY}
        args.update(vllm_server_host=host, vllm_server_port=port)
    return args


def device_args(settings: LaunchSettings, args: dict,
                can_import: Callable[[str], bool]) -> tuple[dict, dict, int, list[str]]:
    """(arguments, variables, processes, notes) for the devices in cuda=: CPU (fp32, no vLLM or DeepSpeed; nproc
    processes with gloo) or GPUs (one process per id; a missing vLLM or DeepSpeed handled by gpu_packages)."""
    if settings.cuda == "cpu":
        args = cpu_args(args, settings.prompts_per_step)
        processes = int(settings.nproc or 1)
        env = {"CUDA_VISIBLE_DEVICES": ""}
        if processes > 1:  # accelerate runs data-parallel on CPU only when told so (use_cpu), with gloo
            args.update(use_cpu=True, ddp_backend="gloo")
            env["NPROC_PER_NODE"] = str(processes)
        return args, env, processes, []
    if settings.prompts_per_step:
        args = {**args, "per_device_train_batch_size": int(args.get("num_generations", 8))
                * int(settings.prompts_per_step)}
    args, notes = gpu_packages(args, settings, can_import)
    devices = [d for d in settings.cuda.split(",") if d.strip()]
    env = {"CUDA_VISIBLE_DEVICES": ",".join(devices)}
    if len(devices) > 1:
        env["NPROC_PER_NODE"] = str(len(devices))
    return args, env, len(devices), notes


def validation_args(settings: LaunchSettings, args: dict, use_val: bool, selection: str, processes: int,
                    val_groups: int | None) -> dict:
    """val=1: evaluate group_qc_val every eval_steps (a checkpoint at each), the eval batch fitted to the split;
    val=0: every validation key dropped."""
    if not use_val:
        return {k: v for k, v in args.items() if k not in VAL_KEYS}
    steps = int(settings.eval_steps or args.get("eval_steps") or DEFAULT_EVAL_STEPS)
    args = {**args, **VAL_ARGS, "val_dataset": f"group_qc_val:{selection}", "eval_steps": steps, "save_steps": steps}
    batch = int(args.get("per_device_eval_batch_size") or args["per_device_train_batch_size"])
    if val_groups is not None:  # ms-swift refuses an eval batch larger than the split
        batch = max(1, min(batch, val_groups // processes))
    args["per_device_eval_batch_size"] = batch
    return args


def refuse_missing_packages(settings: LaunchSettings, can_import: Callable[[str], bool] = importable) -> None:
    """A setting given here that needs a package this machine lacks is refused, naming the package and the setting to
    use instead (run before the data is read: it is the quicker answer)."""
    if settings.cuda == "cpu":
        return
    if settings.rollout in ("colocate", "server") and not can_import("vllm"):
        raise UserError(f"rollout={settings.rollout} needs vLLM, which is not installed here: pip install vllm, or "
                         f"use rollout=hf (rollouts by the trainer's own generate, no vLLM)")
    if settings.deepspeed not in (None, "none") and not can_import("deepspeed"):
        raise UserError(f"deepspeed={settings.deepspeed} needs DeepSpeed, which is not installed here: pip install "
                         f"deepspeed, or use deepspeed=none")


def gpu_packages(args: dict, settings: LaunchSettings,
                 can_import: Callable[[str], bool]) -> tuple[dict, list[str]]:
    """(arguments, notes) for a GPU run on a machine that may lack vLLM or DeepSpeed. A YAML default that needs a
    missing package is dropped with a note naming the setting that says so explicitly; a setting given on the
    command line is never changed: it is refused (refuse_missing_packages)."""
    refuse_missing_packages(settings, can_import)
    notes = []
    if args.get("use_vllm") and not can_import("vllm"):
        args = without_vllm(args)
        notes.append("vLLM is not installed: the YAML's vLLM colocate rollouts are dropped and the trainer rolls out "
                     "with its own generate (slower; same recipe otherwise). rollout=hf asks for this explicitly; "
                     "pip install vllm for the YAML's default")
    if args.get("deepspeed") and not can_import("deepspeed"):
        notes.append(f"DeepSpeed is not installed: the YAML's deepspeed {args['deepspeed']} is dropped (with LoRA the "
                     f"optimizer state it shards is a few MB per GPU). deepspeed=none asks for this explicitly; "
                     f"pip install deepspeed for the YAML's default")
        args = {k: v for k, v in args.items() if k != "deepspeed"}
    return args, notes


def check_data(settings: LaunchSettings, environ=None) -> int:
    """Builds the rows the run will read, before any model loads: a missing folder, an unknown mission or an
    empty split fails here in seconds. Returns the number of validation groups."""
    environ = os.environ if environ is None else environ
    env, _ = launch_environment(settings, environ)
    selection = selection_from({"mission": settings.mission}, environ={**environ, **env})
    build_rows(selection, "train")
    val_rows, _ = build_rows(selection, "val", allow_empty=True)
    if uses_validation(settings, read_config(settings.config)[1]) and not val_rows:
        raise UserError(f"val=1 evaluates the validation split during training, but it is empty "
                         f"({selection.describe_split()}): set val=0, or a val_ratio above 0")
    return len(val_rows)


def cpu_args(args: dict, prompts_per_step: int | None = None) -> dict:
    """The YAML's arguments for a CPU run: the GPU-only keys (vLLM, DeepSpeed) dropped, fp32, one step per batch.
    configs/stage_b_grpo_cpu.yaml is this applied to configs/stage_b_grpo.yaml (`group-qc grpo
    cpu_config` prints it; a test keeps the two in step)."""
    args = hf_args(args)
    g = int(args.get("num_generations", 4))
    # A process's step sees prompts_per_step prompts x g samples: given here, else the YAML's batch,
    # and at least 2, the fewest that can hold one fail and one pass under GROUP_QC_BALANCE_LABELS.
    per_step = int(prompts_per_step or max(2, int(args.get("per_device_train_batch_size", 0)) // g))
    return {**args, "torch_dtype": "float32", "per_device_train_batch_size": g * per_step,
            "gradient_accumulation_steps": 1, "report_to": "none"}


def hf_args(args: dict) -> dict:
    """The YAML's arguments for GPUs without vLLM or DeepSpeed (rollout=hf deepspeed=none): every vLLM key and
    DeepSpeed dropped, the rest (bfloat16, batch, accumulation) as on GPUs."""
    return {k: v for k, v in without_vllm(args).items() if k != "deepspeed"}


# Generated variants of the GPU YAML: name -> (file, what it is, how its arguments are made). Tests keep each
# file equal to its text.
VARIANTS = {
    "cpu_config": ("stage_b_grpo_cpu.yaml", "the same recipe on CPU (no vLLM, no DeepSpeed, fp32)", cpu_args),
    "hf_config": ("stage_b_grpo_hf.yaml", "the same recipe on GPUs without vLLM or DeepSpeed (rollouts by the "
                                          "trainer's own generate, bf16;\n# what run_grpo.sh rollout=hf "
                                          "deepspeed=none runs)", hf_args),
}


def variant_text(name: str, config=DEFAULT_CONFIG) -> str:
    file, what, make = VARIANTS[name]
    env, args = read_config(config)
    header = (f"# GENERATED from {Path(config).name} by `group-qc grpo {name}` (tests keep it in step):\n"
              f"# {what}. By hand, from any folder:\n"
              f"#   swift rlhf configs/{file} --model <Qwen-VL dir> \\\n"
              f"#     $(group-qc lora --model <Qwen-VL dir> --last_k 4 --swift_args)\n")
    return header + yaml.safe_dump({"ENV": env, **make(reward_args(args))}, allow_unicode=True, sort_keys=False)


def cpu_config_text(config=DEFAULT_CONFIG) -> str:
    return variant_text("cpu_config", config)


def hf_config_text(config=DEFAULT_CONFIG) -> str:
    return variant_text("hf_config", config)


def swift_command() -> list[str]:
    """ms-swift's `swift` beside this Python (its virtual environment's), else this Python running ms-swift's CLI module
    (what the `swift` script runs). Seen on a GPU machine with ms-swift installed by `pip --target`: no `swift` script
    anywhere on PATH, so a bare `swift` failed with 'No such file or directory'; another env's `swift` on PATH would
    run another ms-swift."""
    beside = shutil.which("swift", path=str(Path(sys.executable).parent))
    return [beside] if beside else [sys.executable, "-m", "swift.cli.main"]


def main(argv=None) -> int:
    tokens = sys.argv[1:] if argv is None else argv
    if any(t in ("-h", "--help") for t in tokens):
        print(__doc__)
        return 0
    if len(tokens) == 1 and tokens[0] in VARIANTS:
        print(variant_text(tokens[0]), end="")
        return 0
    return run_cli(lambda: _launch(tokens))


def _launch(tokens: list[str]) -> int:
    settings = LaunchSettings.from_tokens(tokens)
    refuse_missing_packages(settings)
    env, swift_argv, notes = build_command(settings, val_groups=check_data(settings))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    swift_cmd = swift_command()
    if settings.dry_run:
        if settings.rollout == "server":
            print(rollout_server_command(settings, swift_argv, shlex.join(swift_cmd)))
        print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join([*swift_cmd, *swift_argv]))
        return 0
    # key=value settings win over exported variables, which win over the YAML's ENV (run_environment).
    os.execvpe(swift_cmd[0], [*swift_cmd, *swift_argv], {**os.environ, **env})
    return 0  # not reached


def rollout_server_command(settings: LaunchSettings, swift_argv: list[str], swift: str) -> str:
    """The `swift rollout` command that rollout=server trains against (started first, on other GPUs)."""
    plugin = shlex.quote(str(REPO / "swift_plugins" / "qc_plugin.py"))
    port = vllm_server_address(settings.vllm_server)[1]
    return (f"# first, on the rollout GPUs: CUDA_VISIBLE_DEVICES=<ids> {swift} rollout --model "
            f"{shlex.quote(settings.model)} --external_plugins {plugin} --port {port} --vllm_data_parallel_size <n>"
            + (" --vllm_enable_lora true" if "--vllm_enable_lora" in swift_argv else ""))


if __name__ == "__main__":
    sys.exit(main())
