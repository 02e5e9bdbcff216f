"""Thin adapter from Stage-A to ms-swift's inference engines (the only Stage-A module that
imports torch/swift, and only when an engine is built).

`resolve_model` checks a checkpoint folder before anything heavy happens, so a wrong path fails in
a second with a message instead of after minutes of discovery or model loading.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

# config.json `model_type` -> (ms-swift model_type, ms-swift template). A local Qwen2.5-VL folder
# matches two ms-swift templates (qwen2_5_vl, mimo_vl), so the template is always passed explicitly.
ARCHITECTURES = {
    "qwen2_vl": ("qwen2_vl", "qwen2_vl"),
    "qwen2_5_vl": ("qwen2_5_vl", "qwen2_5_vl"),
    "qwen3_vl": ("qwen3_vl", "qwen3_vl"),
    "qwen3_vl_moe": ("qwen3_vl_moe", "qwen3_vl"),
}
BACKENDS = ("transformers", "vllm")


class ModelPathError(ValueError):
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
                                 f"({', '.join(ARCHITECTURES)}); pass --model_type and --template to force one")
        model_type = model_type or ARCHITECTURES[arch][0]
        template = template or ARCHITECTURES[arch][1]
    return ModelSpec(str(path), model_type, template, tuple(str(a) for a in adapters))


def build_swift_engine(spec: ModelSpec, backend: str = "transformers", batch_size: int = 8, **vllm_kwargs):
    """ms-swift's TransformersEngine or VllmEngine for a resolved checkpoint (Stage-A and Stage-B share it)."""
    if backend == "transformers":
        from swift.infer_engine import TransformersEngine
        return TransformersEngine(spec.path, model_type=spec.model_type, template_type=spec.template,
                                  adapters=list(spec.adapters) or None, max_batch_size=batch_size)
    if backend == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise ModelPathError("--infer_backend vllm needs vLLM (pip install vllm on a GPU machine); "
                                 "use --infer_backend transformers otherwise") from None
        from swift.infer_engine import VllmEngine
        return VllmEngine(spec.path, model_type=spec.model_type, template_type=spec.template,
                          adapters=list(spec.adapters) or None, max_num_seqs=max(batch_size, 1), **vllm_kwargs)
    raise ValueError(f"unknown --infer_backend {backend!r}; choose one of {', '.join(BACKENDS)}")


@dataclass
class Summary:
    text: str | None
    finish_reason: str | None
    error: str | None = None


class SwiftSummaryEngine:
    """One ms-swift engine, greedy by default, fed one request per photo."""

    def __init__(self, spec: ModelSpec, *, backend: str = "transformers", batch_size: int = 8,
                 max_pixels: int | None = None, max_new_tokens: int = 128, temperature: float = 0.0,
                 seed: int | None = None):
        from swift.infer_engine import RequestConfig

        self.spec = spec
        self.engine = build_swift_engine(spec, backend, batch_size, limit_mm_per_prompt={"image": 1, "video": 0})
        if max_pixels:
            # Photos arrive already resized by stage_a.images; this keeps ms-swift's own resize
            # (qwen_vl_utils.smart_resize) from ever exceeding the same bound.
            self.engine.template.max_pixels = max_pixels
        self.request_config = RequestConfig(max_tokens=max_new_tokens, temperature=temperature, seed=seed)

    def summarize(self, requests: list[tuple[list[dict], object]]) -> list[Summary]:
        """(messages, PIL image) pairs -> one Summary each, in order. A batch that fails as a whole
        is retried photo by photo, so one bad photo costs its own group only."""
        from swift.infer_engine import InferRequest

        infer_requests = [InferRequest(messages=m, images=[img]) for m, img in requests]
        try:
            responses = self.engine.infer(infer_requests, self.request_config, use_tqdm=False)
        except Exception:
            if len(infer_requests) == 1:
                raise
            responses = []
            for request in infer_requests:
                try:
                    responses.extend(self.engine.infer([request], self.request_config, use_tqdm=False))
                except Exception as exc:  # noqa: BLE001 - reported per photo, the run goes on
                    responses.append(exc)
        out = []
        for resp in responses:
            if isinstance(resp, Exception):
                out.append(Summary(None, None, f"{type(resp).__name__}: {resp}"))
            else:
                choice = resp.choices[0]
                out.append(Summary(choice.message.content, choice.finish_reason))
        return out
