"""Which local checkpoint, with which ms-swift model_type and template: `resolve_model` checks a folder (and its
LoRA adapters) before anything heavy happens, so a wrong path fails in a second with a message instead of after
minutes of discovery or model loading. Pure (json/pathlib): the launchers and the LoRA regex use it without
importing an engine (stage_a.engine builds those). It also fingerprints what a command loads and reads
(`checkpoint_identity`, `checkpoint_identities`, `stage_a_identity`, `file_digest`), so that an operating point or a
verdict names the very checkpoints and files it was made with.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UserError
from .jsonl import file_sha256

# config.json `model_type` -> (ms-swift model_type, ms-swift template). A local Qwen2.5-VL folder
# matches two ms-swift templates (qwen2_5_vl, mimo_vl), so the template is always passed explicitly.
ARCHITECTURES = {
    "qwen2_vl": ("qwen2_vl", "qwen2_vl"),
    "qwen2_5_vl": ("qwen2_5_vl", "qwen2_5_vl"),
    "qwen3_vl": ("qwen3_vl", "qwen3_vl"),
    "qwen3_vl_moe": ("qwen3_vl_moe", "qwen3_vl"),
}
BACKENDS = ("transformers", "vllm")


class ModelPathError(UserError):
    """A model or adapter folder that cannot be used."""


@dataclass(frozen=True)
class ModelSpec:
    path: str
    model_type: str
    template: str
    adapters: tuple[str, ...] = ()


def resolve_model(model: str, adapters=(), model_type: str | None = None,
                  template: str | None = None) -> ModelSpec:
    """Validate a local checkpoint (and LoRA adapters) and pick ms-swift's model_type/template."""
    path = Path(model).expanduser()
    config = path / "config.json"
    if not config.is_file():
        what = "does not exist" if not path.exists() else "has no config.json"
        raise ModelPathError(
            f"model path {model!r} {what}; pass a local Qwen2.5-VL/Qwen3-VL checkpoint folder "
            f"(download it first; group-qc never reaches a model hub at run time)")
    for adapter in adapters:
        if not (Path(adapter).expanduser() / "adapter_config.json").is_file():
            raise ModelPathError(f"adapter path {adapter!r} has no adapter_config.json; pass a LoRA "
                                 f"checkpoint folder (e.g. output/.../checkpoint-100)")
    if model_type is None or template is None:
        try:
            arch = json.loads(config.read_text(encoding="utf-8")).get("model_type")
        except (OSError, ValueError) as exc:
            raise ModelPathError(f"cannot read {config}: {exc}") from None
        if arch not in ARCHITECTURES:
            raise ModelPathError(f"{config}: model_type {arch!r} is not a supported Qwen-VL architecture "
                                 f"({', '.join(ARCHITECTURES)}); for a Qwen-VL checkpoint saved under another name, "
                                 f"pass --model_type and --template (scripts/run_grpo.sh: model_type=… template=…) "
                                 f"to force one")
        model_type = model_type or ARCHITECTURES[arch][0]
        template = template or ARCHITECTURES[arch][1]
    return ModelSpec(str(path), model_type, template, tuple(str(a) for a in adapters))


def add_model_type_args(parser) -> None:
    """--model_type/--template, for every command that loads a checkpoint (resolve_model's message names them)."""
    parser.add_argument("--model_type", default=None, help="ms-swift model_type (default: from config.json)")
    parser.add_argument("--template", default=None, help="ms-swift template (default: from config.json)")


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")
_SAMPLE = 1 << 20


def checkpoint_identity(path) -> dict:
    """{"path", "fingerprint"} of a model or adapter folder. The fingerprint hashes its config files whole and,
    per weight file, the name, the size and the first and last MiB: any retrained or other checkpoint differs,
    a copied or moved one does not, and a 15 GB model is identified in milliseconds, not minutes."""
    folder = Path(path).expanduser().resolve()
    digest = hashlib.sha256()
    for f in sorted(folder.iterdir()):
        if not f.is_file():
            continue
        if f.name in ("config.json", "adapter_config.json"):
            digest.update(f.name.encode() + b"\0" + f.read_bytes())
        elif f.suffix in _WEIGHT_SUFFIXES:
            size = f.stat().st_size
            with f.open("rb") as fh:
                head = fh.read(_SAMPLE)
                fh.seek(max(0, size - _SAMPLE))
                tail = fh.read(_SAMPLE)
            digest.update(f"{f.name}\0{size}\0".encode() + head + tail)
    return {"path": str(folder), "fingerprint": digest.hexdigest()[:32]}


def stage_a_fingerprint(model: str, adapters=()) -> str | None:
    """One digest of the Stage-A checkpoint and its adapters (checkpoint_identity of each), written on every Stage-A
    record (`model_fingerprint`): a promise names the Stage-A model whose summaries it was certified on by it. None
    when a folder cannot be read (a test's engine without a checkpoint)."""
    try:
        parts = [checkpoint_identity(model)["fingerprint"], *(checkpoint_identity(a)["fingerprint"] for a in adapters)]
    except OSError:
        return None
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def checkpoint_identities(model: str, adapters, model_type: str | None = None, template: str | None = None) -> dict:
    """{"model", "adapters"} identities of the checkpoints a command loads; a wrong path fails here, naming it."""
    spec = resolve_model(model, tuple(adapters), model_type, template)
    return {"model": checkpoint_identity(spec.path), "adapters": [checkpoint_identity(a) for a in spec.adapters]}


def stage_a_identity(record: Mapping[str, Any]) -> str:
    """What Stage-A model wrote a record's summaries: its fingerprint (stage_a_fingerprint), or for a record written
    before fingerprints its model path and adapters."""
    if record.get("model_fingerprint"):
        return str(record["model_fingerprint"])
    adapters = record.get("adapters") or []
    return "path:" + str(record.get("model")) + "".join(f"+{a}" for a in adapters)


def file_digest(path) -> str:
    """sha256 of a file's bytes (the judge records which operating point it used)."""
    return file_sha256(path)
