"""The `swift rlhf` command for Stage-B GRPO, built from configs/stage_b_grpo.yaml plus the run's
choices (scripts/run_grpo.sh calls this). Pure: builds (environment, argv); `main` prints or runs it.

    python -m stage_b.launch mission=all cuda=0,1 model=DIR [stage_a_dir=… output_dir=… lora_last_k=4
                             num_generations=… prompts_per_step=… max_steps=… deepspeed=zero2|zero3|zero3_offload|none
                             rollout=colocate|server vllm_server=HOST:PORT config=… dry_run=1 extra="--flags"]

rollout=server trains against a separate vLLM rollout server (start it first on other GPUs with the
`swift rollout` command that dry_run prints); colocate (the YAML default) runs vLLM inside the trainers.

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

import yaml

from stage_a.engine import resolve_model
from stage_a.missions import load_registry

from .lora import target_regex

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO / "configs" / "stage_b_grpo.yaml"
GPU_ONLY = ("use_vllm", "vllm_mode", "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size", "sleep_level",
            "deepspeed", "offload_model", "offload_optimizer", "vllm_server_host", "vllm_server_port")
COLOCATE_ONLY = ("vllm_gpu_memory_utilization", "sleep_level")
DEEPSPEED = ("zero2", "zero3", "zero3_offload", "none")
ROLLOUTS = ("colocate", "server")
SETTINGS = ("mission", "cuda", "stage_a_dir", "model", "output_dir", "lora_last_k", "num_generations",
            "prompts_per_step", "max_steps", "deepspeed", "rollout", "vllm_server", "config", "dry_run", "extra")


def build_command(model: str, mission: str = "all", cuda: str = "cpu", stage_a_dir: str | None = None,
                  output_dir: str | None = None, lora_last_k: int = 4, num_generations: int | None = None,
                  prompts_per_step: int | None = None, max_steps: int | None = None,
                  deepspeed: str | None = None, rollout: str | None = None, vllm_server: str = "127.0.0.1:8000",
                  config: str | os.PathLike = DEFAULT_CONFIG, extra: list[str] | None = None) -> tuple[dict, list[str]]:
    """(environment additions, argv after `swift`). Raises ValueError on a bad mission or K."""
    registry = load_registry()
    missions = registry.select(mission)  # unknown mission: error naming the known ones
    selection = "all" if mission.strip().lower() == "all" else "/".join(m.name for m in missions)
    with open(config, encoding="utf-8") as f:
        cfg = yaml.safe_load(f) or {}
    env = {k: str(v) for k, v in (cfg.pop("ENV", None) or {}).items()}
    env["GROUP_QC_LORA_LAST_K"] = str(lora_last_k)
    if stage_a_dir:
        env["GROUP_QC_STAGE_A_DIR"] = str(stage_a_dir)
    spec = resolve_model(str(model))  # clear error for a wrong path; model_type/template from config.json
    args = dict(cfg)
    args.setdefault("model_type", spec.model_type)
    args.setdefault("template", spec.template)  # a local Qwen2.5-VL matches two templates: be explicit
    args.update(model=str(model), target_regex=target_regex(model, int(lora_last_k)),
                dataset=f"group_qc_train:{selection}")
    if output_dir:
        args["output_dir"] = str(output_dir)
    if num_generations:
        args["num_generations"] = int(num_generations)
    if max_steps:
        args["max_steps"] = int(max_steps)
    if deepspeed:
        if deepspeed not in DEEPSPEED:
            raise ValueError(f"deepspeed={deepspeed!r}: use one of {', '.join(DEEPSPEED)}")
        args["deepspeed"] = "" if deepspeed == "none" else deepspeed
    if rollout:
        if rollout not in ROLLOUTS:
            raise ValueError(f"rollout={rollout!r}: use one of {', '.join(ROLLOUTS)}")
        args.update(use_vllm=True, vllm_mode=rollout)
        if rollout == "server":
            host, _, port = vllm_server.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"vllm_server={vllm_server!r}: use HOST:PORT")
            for key in COLOCATE_ONLY:
                args.pop(key, None)
            args.update(vllm_server_host=host, vllm_server_port=int(port))
    if prompts_per_step and cuda != "cpu":
        args["per_device_train_batch_size"] = int(args.get("num_generations", 8)) * int(prompts_per_step)
    if cuda == "cpu":
        for key in GPU_ONLY:
            args.pop(key, None)
        g = int(args.get("num_generations", 4))
        # One process: a step sees prompts_per_step prompts x g samples (default 2, the fewest that can
        # hold one fail and one pass under GROUP_QC_BALANCE_LABELS).
        args.update(torch_dtype="float32", per_device_train_batch_size=g * int(prompts_per_step or 2),
                    gradient_accumulation_steps=1, report_to="none")
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        devices = [d for d in cuda.split(",") if d.strip()]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(devices)
        if len(devices) > 1:
            env["NPROC_PER_NODE"] = str(len(devices))
    argv = ["rlhf"]
    for key, value in args.items():
        argv.append(f"--{key}")
        argv += [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return env, argv + list(extra or [])


def parse_settings(tokens: list[str]) -> dict:
    settings = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or key not in SETTINGS:
            raise ValueError(f"unknown argument {token!r}; expected key=value with key in {', '.join(SETTINGS)}")
        settings[key] = value
    if not settings.get("model"):
        raise ValueError("model=<Qwen-VL checkpoint folder> is required")
    return settings


def main(argv=None) -> int:
    tokens = sys.argv[1:] if argv is None else argv
    if any(t in ("-h", "--help") for t in tokens):
        print(__doc__)
        return 0
    try:
        s = parse_settings(tokens)
        dry_run = s.pop("dry_run", "0") == "1"
        extra = shlex.split(s.pop("extra", ""))
        env, swift_argv = build_command(extra=extra, **s)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    swift = shutil.which("swift", path=str(Path(sys.executable).parent)) or "swift"
    if dry_run:
        if s.get("rollout") == "server":
            print(f"# first, on the rollout GPUs: CUDA_VISIBLE_DEVICES=<ids> {shlex.quote(swift)} rollout --model "
                  f"{shlex.quote(s['model'])} --external_plugins swift_plugins/qc_plugin.py --port "
                  f"{s.get('vllm_server', '127.0.0.1:8000').rpartition(':')[2]} --vllm_data_parallel_size <n>")
        print(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()), shlex.join([swift, *swift_argv]))
        return 0
    # Explicit settings win over the YAML's ENV defaults; the caller's own environment wins over both
    # only for keys the run did not set (e.g. NNODES, MASTER_ADDR for multi-node).
    os.execvpe(swift, [swift, *swift_argv], {**os.environ, **env})
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
