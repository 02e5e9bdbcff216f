"""Thin adapter from Stage-B rows to ms-swift's inference engines (preflight, evaluation).
The only Stage-B module that imports swift at run time, and only when an engine is built."""
from __future__ import annotations

from stage_a.engine import ModelSpec, build_swift_engine, resolve_model


class VerdictEngine:
    """Generates completions for Stage-B rows (text-only chat) with a Qwen-VL checkpoint."""

    def __init__(self, model: str, *, adapters=(), backend: str = "transformers", batch_size: int = 16,
                 max_new_tokens: int = 64, temperature: float = 0.0, seed: int | None = None):
        self.spec: ModelSpec = resolve_model(model, tuple(adapters))
        self.engine = build_swift_engine(self.spec, backend, batch_size)
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed

    def generate(self, rows: list[dict], n: int = 1) -> list[list[str]]:
        """n completions per row (n > 1 samples at self.temperature), in row order."""
        from swift.infer_engine import InferRequest, RequestConfig
        config = RequestConfig(max_tokens=self.max_new_tokens, temperature=self.temperature, n=n,
                                      seed=self.seed)
        requests = [InferRequest(messages=row["messages"]) for row in rows]
        responses = self.engine.infer(requests, config, use_tqdm=len(requests) > 1)
        return [[choice.message.content or "" for choice in resp.choices] for resp in responses]
