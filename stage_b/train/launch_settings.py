"""The launcher's settings: the YAML recipe (configs/stage_b_grpo.yaml and variants) read into ms-swift's arguments and
the run's environment, the launcher's own settings (mission, devices, rollouts, validation, counts) checked into one
record (LaunchSettings), and which ms-swift arguments belong to vLLM. Pure: nothing is imported to check a package
but importlib's finder."""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from qc_core.errors import UserError
from qc_core.key_values import count, parse_key_values, words
from stage_b.data.settings import (
    ENV_IMAGES,
    ENV_INPUT_DIR,
    ENV_LORA_LAST_K,
    ENV_MAX_PIXELS,
    ENV_SPLIT_SEED,
    ENV_STAGE_A_DIR,
    ENV_VAL_RATIO,
)
from stage_b.stats.training_signal import BEST_METRIC

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "configs" / "stage_b_grpo.yaml"


# Keys that only mean something with vLLM rollouts (ms-swift refuses `vllm_mode` without `use_vllm`): every
# `vllm_*` key, plus these. They and `deepspeed` are what a CPU run (and rollout=hf deepspeed=none) drops.
VLLM_KEYS = ("use_vllm", "sleep_level", "offload_model", "offload_optimizer")
COLOCATE_ONLY = ("vllm_gpu_memory_utilization", "sleep_level")


# What val=1 adds (and val=0 removes): ms-swift evaluates group_qc_val every eval_steps; the plugin makes
# that greedy and logs eval_qc_val/*; HF's metric_for_best_model keeps the best checkpoint.
VAL_ARGS = {"eval_strategy": "steps", "num_generations_eval": 1, "metric_for_best_model": BEST_METRIC,
            "greater_is_better": True}
VAL_KEYS = ("val_dataset", "eval_steps", "per_device_eval_batch_size", *VAL_ARGS)
DEFAULT_EVAL_STEPS = 100
DEEPSPEED = ("zero2", "zero3", "zero3_offload", "none")
ROLLOUTS = ("colocate", "server", "hf")
DEFAULT_VLLM_SERVER = "127.0.0.1:8000"
SETTINGS = ("mission", "cuda", "nproc", "stage_a_dir", "val_ratio", "split_seed", "model", "output_dir",
            "lora_last_k", "num_generations", "prompts_per_step", "max_steps", "val", "eval_steps", "deepspeed",
            "rollout", "vllm_server", "config", "dry_run", "extra", "model_type", "template", "images", "max_pixels",
            "input_dir")
COUNT_SETTINGS = ("nproc", "num_generations", "prompts_per_step", "max_steps", "eval_steps")   # whole numbers >= 1
ENV_SETTINGS = {"stage_a_dir": ENV_STAGE_A_DIR, "val_ratio": ENV_VAL_RATIO, "split_seed": ENV_SPLIT_SEED,
                "lora_last_k": ENV_LORA_LAST_K, "images": ENV_IMAGES, "max_pixels": ENV_MAX_PIXELS,
                "input_dir": ENV_INPUT_DIR}


def read_config(config) -> tuple[dict, dict]:
    """(ENV block, arguments) of a `swift rlhf` YAML: plain YAML only (a Python tag is refused by safe_load, never
    run), a mapping of settings whose ENV is a mapping too."""
    with open(config, encoding="utf-8") as f:
        try:
            cfg = yaml.safe_load(f)
        except yaml.YAMLError as exc:
            where = getattr(exc, "problem_mark", None)
            at = f":{where.line + 1}" if where is not None else ""
            raise UserError(f"config={config}{at} is not plain YAML ({getattr(exc, 'problem', None) or exc}; tags "
                             f"such as !!python/... are never read): fix it, or start from "
                             f"configs/stage_b_grpo.yaml") from None
    cfg = {} if cfg is None else cfg
    if not isinstance(cfg, dict) or not isinstance(cfg.get("ENV") or {}, dict):
        raise UserError(f"config={config} is not a mapping of settings (with an ENV: mapping, if any), as "
                         f"configs/stage_b_grpo.yaml is")
    return {k: str(v) for k, v in (cfg.pop("ENV", None) or {}).items()}, cfg


def run_environment(yaml_env: dict, environ, explicit: dict) -> tuple[dict, list[str]]:
    """The variables the run gets on top of `environ`: the YAML's ENV unless exported, then the explicit
    key=value settings. Notes name every exported variable that overrides the YAML."""
    env, notes = {}, []
    for key, value in yaml_env.items():
        if key in environ:
            if environ[key] != value:
                notes.append(f"{key}={environ[key]} from your environment overrides the YAML's {value}")
            continue
        env[key] = value
    for key, value in explicit.items():
        if key in environ and environ[key] != value:
            notes.append(f"{key}={value} from the command line overrides your environment's {environ[key]}")
        env[key] = value
    return env, notes


def is_vllm_key(key: str) -> bool:
    return key in VLLM_KEYS or key.startswith("vllm_")


def without_vllm(args: dict) -> dict:
    """The arguments with every vLLM key dropped: rollouts by the trainer's own generate (ms-swift's
    TransformersEngine on the policy), the way ms-swift runs GRPO when `use_vllm` is absent."""
    return {k: v for k, v in args.items() if not is_vllm_key(k)}


def importable(name: str) -> bool:
    """Whether a top-level package could be imported here (nothing is imported)."""
    return importlib.util.find_spec(name) is not None


@dataclass(frozen=True)
class LaunchSettings:
    """One GRPO launch's key=value settings (module doc), typed. None: not given here, so the YAML's value (or an
    exported GROUP_QC_* variable) stands. Settings that contradict one another are refused on construction."""
    model: str
    mission: str = "all"
    cuda: str = "cpu"
    nproc: int | None = None
    stage_a_dir: str | None = None
    val_ratio: str | None = None
    split_seed: str | None = None
    output_dir: str | None = None
    lora_last_k: str | None = None
    num_generations: int | None = None
    prompts_per_step: int | None = None
    max_steps: int | None = None
    val: str | None = None
    eval_steps: int | None = None
    deepspeed: str | None = None
    rollout: str | None = None
    vllm_server: str | None = None
    config: str | os.PathLike = DEFAULT_CONFIG
    extra: tuple[str, ...] = ()
    model_type: str | None = None
    template: str | None = None
    images: str | None = None
    max_pixels: str | None = None
    input_dir: str | None = None
    dry_run: bool = False

    def __post_init__(self):
        if self.deepspeed is not None and self.deepspeed not in DEEPSPEED:
            raise UserError(f"deepspeed={self.deepspeed!r}: use one of {', '.join(DEEPSPEED)}")
        if self.rollout and self.rollout not in ROLLOUTS:
            raise UserError(f"rollout={self.rollout!r}: use one of {', '.join(ROLLOUTS)}")
        if self.vllm_server is not None and self.rollout != "server":
            raise UserError(f"vllm_server={self.vllm_server!r} is the address of a vLLM rollout server, used with "
                             f"rollout=server only; drop it"
                             f"{' (rollout=hf rolls out inside the trainer)' if self.rollout else ''}, or add "
                             f"rollout=server")
        if self.rollout == "server":
            vllm_server_address(self.vllm_server)
        if self.cuda == "cpu":
            if self.rollout in ("colocate", "server"):
                raise UserError(f"rollout={self.rollout} runs vLLM, which needs GPUs; with cuda=cpu the trainer rolls "
                                 f"out itself: drop rollout= (or use rollout=hf)")
            if self.deepspeed and self.deepspeed != "none":
                raise UserError(f"deepspeed={self.deepspeed} needs GPUs; cuda=cpu trains without DeepSpeed: drop "
                                 f"deepspeed= (or use deepspeed=none)")
        elif self.nproc:
            raise UserError("nproc= is for cuda=cpu; with GPUs the processes are one per id in cuda=")

    @classmethod
    def from_tokens(cls, tokens: list[str]) -> "LaunchSettings":
        """The settings of `key=value` arguments (run_grpo.sh, `group-qc grpo`)."""
        given = parse_key_values(tokens, SETTINGS, required=("model",))
        typed: dict = {k: v for k, v in given.items() if k not in COUNT_SETTINGS + ("extra", "dry_run")}
        typed.update({k: count(given[k], k) for k in COUNT_SETTINGS if given.get(k)})
        return cls(**typed, extra=tuple(words(given.get("extra", ""), "extra")), dry_run=given.get("dry_run") == "1")

    def selection_values(self) -> dict[str, str]:
        """The GROUP_QC_* variables given here as key=value settings (they win over exported ones)."""
        values = {env: str(getattr(self, key)) for key, env in ENV_SETTINGS.items() if getattr(self, key) is not None}
        return values


def vllm_server_address(address: str | None) -> tuple[str, int]:
    """(host, port) of vllm_server= (default DEFAULT_VLLM_SERVER)."""
    address = address or DEFAULT_VLLM_SERVER
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"vllm_server={address!r}: use HOST:PORT")
    return host, int(port)
