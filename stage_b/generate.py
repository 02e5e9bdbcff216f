"""Thin adapter from Stage-B rows to ms-swift's inference engines (preflight, evaluation).
The only Stage-B module that imports swift at run time, and only when an engine is built."""
from __future__ import annotations

from stage_a.engine import ModelSpec, build_swift_engine, resolve_model

# A Qwen token covers at most about 4 characters: a prompt with more than 4 x max_length characters cannot fit,
# and is refused before ms-swift spends minutes tokenising it.
MAX_CHARS_PER_TOKEN = 4


class VerdictEngine:
    """Generates completions for Stage-B rows (text-only chat) with a Qwen-VL checkpoint."""

    def __init__(self, model: str, *, adapters=(), backend: str = "transformers", batch_size: int = 16,
                 max_new_tokens: int = 64, temperature: float = 0.0, seed: int | None = None):
        self.spec: ModelSpec = resolve_model(model, tuple(adapters))
        self.engine = build_swift_engine(self.spec, backend, batch_size)
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed

    def generate(self, rows: list[dict], n: int = 1) -> tuple[list[list[str]], dict[int, str]]:
        """(n completions per row, in row order; {row index: why it has none}). A row the model cannot take
        (a prompt over its max_length, say) fails alone, named by group and mission; the others are
        generated. When every row fails, the first reason is raised: the problem is not one group."""
        from swift.infer_engine import InferRequest, RequestConfig
        config = RequestConfig(max_tokens=self.max_new_tokens, temperature=self.temperature, n=n, seed=self.seed)
        errors = {i: why for i, row in enumerate(rows) if (why := self._too_long(row))}
        todo = [i for i in range(len(rows)) if i not in errors]
        out: list[list[str]] = [[] for _ in rows]

        def infer(indices):
            requests = [InferRequest(messages=rows[i]["messages"]) for i in indices]
            responses = self.engine.infer(requests, config, use_tqdm=len(requests) > 1)
            for i, resp in zip(indices, responses):
                out[i] = [choice.message.content or "" for choice in resp.choices]
        try:
            infer(todo)
        except Exception:  # noqa: BLE001 - one bad row fails ms-swift's whole batch: find it, keep the rest
            for i in todo:
                try:
                    infer([i])
                except Exception as exc:  # noqa: BLE001
                    errors[i] = f"{type(exc).__name__}: {exc}"
        errors = {i: f"group {rows[i].get('group_id')} of {rows[i].get('mission')}: {why}"
                  for i, why in sorted(errors.items())}
        if rows and len(errors) == len(rows):
            raise RuntimeError(f"no row could be generated; the first: {next(iter(errors.values()))}")
        return out, errors

    def _too_long(self, row: dict) -> str | None:
        max_length = getattr(getattr(self.engine, "template", None), "max_length", None)
        chars = sum(len(m["content"]) for m in row["messages"] if isinstance(m.get("content"), str))
        if max_length and chars > MAX_CHARS_PER_TOKEN * max_length:
            return (f"its prompt has {chars:,} characters, more than the model's max_length of {max_length:,} tokens "
                    f"can hold; shorten that group's summaries")
        return None
