"""Thin adapter from Stage-B rows to ms-swift's inference engines (preflight, evaluation).
The only Stage-B module that imports swift at run time, and only when an engine is built."""
from __future__ import annotations

from stage_a.engine import ModelSpec, resolve_model


class VerdictEngine:
    """Generates completions for Stage-B rows (text-only chat) with a Qwen-VL checkpoint."""

    def __init__(self, model: str, *, adapters=(), backend: str = "transformers", batch_size: int = 16,
                 max_new_tokens: int = 64, temperature: float = 0.0, seed: int | None = None):
        from swift.infer_engine import RequestConfig
        self.spec: ModelSpec = resolve_model(model, tuple(adapters))
        if backend == "vllm":
            from swift.infer_engine import VllmEngine
            self.engine = VllmEngine(self.spec.path, model_type=self.spec.model_type,
                                     template_type=self.spec.template, adapters=list(self.spec.adapters) or None,
                                     max_num_seqs=batch_size)
        else:
            from swift.infer_engine import TransformersEngine
            self.engine = TransformersEngine(self.spec.path, model_type=self.spec.model_type,
                                             template_type=self.spec.template,
                                             adapters=list(self.spec.adapters) or None, max_batch_size=batch_size)
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed
        self._request_config = RequestConfig

    def generate(self, rows: list[dict], n: int = 1) -> list[list[str]]:
        """n completions per row (n > 1 samples at self.temperature), in row order."""
        from swift.infer_engine import InferRequest
        config = self._request_config(max_tokens=self.max_new_tokens, temperature=self.temperature, n=n,
                                      seed=self.seed)
        requests = [InferRequest(messages=row["messages"]) for row in rows]
        responses = self.engine.infer(requests, config, use_tqdm=len(requests) > 1)
        return [[choice.message.content or "" for choice in resp.choices] for resp in responses]
