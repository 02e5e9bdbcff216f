"""Thin adapter from Stage-B rows to ms-swift's inference engines (preflight, evaluation, judging).
The only Stage-B module that imports swift/torch at run time, and only when an engine is built.

Two uses of one engine: `generate` (sampled or greedy completions, optionally continuing an assistant
prefix such as the verdict line) and `verdict_logprobs` (teacher-forced log-probabilities of the two
verdict lines, from which stage_b.rules.operating_point.p_fail is computed).
"""
from __future__ import annotations

from qc_core.checkpoints import ModelSpec, resolve_model
from qc_core.engines import build_swift_engine
from qc_core.library_logs import library_log

from stage_b.contract.verdict import FAIL, PASS

# A Qwen token covers at most about 4 characters: a prompt with more than 4 x max_length characters cannot fit,
# and is refused before ms-swift spends minutes tokenising it.
MAX_CHARS_PER_TOKEN = 4
# The first line of a reply, as the model writes it: the verdict and the line break that ends it. The break is
# part of what is scored: "通过" followed by anything but a line break is not a 通过 verdict line. With the Qwen
# tokenizer: "通过\n" = [通过, \n] and "不通过\n" = [不, 通过, \n] (tests/test_judge.py pins this).
VERDICT_LINES = {FAIL: FAIL + "\n", PASS: PASS + "\n"}


class VerdictEngine:
    """Generates completions for Stage-B rows (summaries, or summaries and photos) with a Qwen-VL checkpoint."""

    def __init__(self, model: str, *, adapters=(), backend: str = "transformers", batch_size: int = 16,
                 max_new_tokens: int = 64, temperature: float = 0.0, seed: int | None = None,
                 model_type: str | None = None, template: str | None = None):
        self.spec: ModelSpec = resolve_model(model, tuple(adapters), model_type, template)
        self.engine = build_swift_engine(self.spec, backend, batch_size)
        if backend == "transformers":
            # heavy: torch, transformers and ms-swift at import; loaded only when a transformers engine is built
            from stage_a.stopping import use_host_stop_words
            from stage_a.vision_windows import use_window_batches
            use_host_stop_words(self.engine.template)   # the same stops, one device-to-host copy per decode step
            use_window_batches(self.engine.model)       # photo-aware rows: a vision call per window length
        self.batch_size = batch_size
        self.max_new_tokens, self.temperature, self.seed = max_new_tokens, temperature, seed

    def generate(self, rows: list[dict], n: int = 1, prefixes: list[str] | None = None
                 ) -> tuple[list[list[str]], dict[int, str]]:
        """(n completions per row, in row order; {row index: why it has none}). With `prefixes`, row i's reply
        starts with prefixes[i] (an assistant message the model continues; ms-swift adds no end token after it
        at inference) and each completion is the prefix plus what the model wrote after it.
        A row the model cannot take (a prompt over its max_length, say) fails alone, named by group and
        mission; the others are generated. When every row fails, the first reason is raised."""
        from swift.infer_engine import RequestConfig
        config = RequestConfig(max_tokens=self.max_new_tokens, temperature=self.temperature, n=n, seed=self.seed)
        out: list[list[str]] = [[] for _ in rows]

        def infer(indices):
            requests = [_request(rows[i], prefixes and prefixes[i]) for i in indices]
            responses = self.engine.infer(requests, config, use_tqdm=len(requests) > 1 and library_log() is None)
            for i, resp in zip(indices, responses):
                head = prefixes[i] if prefixes else ""
                out[i] = [head + (choice.message.content or "") for choice in resp.choices]
        return out, self._each_row(rows, infer, "generated")

    def verdict_logprobs(self, rows: list[dict]) -> tuple[list[dict[str, float] | None], dict[int, str]]:
        """({verdict: log-probability of its whole first line}, per row; {row index: why none}).

        Teacher-forced through the engine's own template and model (adapters included), nothing sampled: one
        forward pass over the batch's prompts (as ms-swift encodes them for generation) gives the first token
        of each verdict line; the rest of each line is fed on the prompts' cached keys and values."""
        scores: list[dict[str, float] | None] = [None] * len(rows)

        def score(indices):
            for k in range(0, len(indices), self.batch_size):
                chunk = indices[k:k + self.batch_size]
                for i, logprobs in zip(chunk, self._score_batch([rows[i] for i in chunk])):
                    scores[i] = logprobs
        return scores, self._each_row(rows, score, "scored")

    def _score_batch(self, rows: list[dict]) -> list[dict[str, float]]:
        import torch
        engine, template = self.engine, self.engine.template
        if not hasattr(engine, "model"):
            raise NotImplementedError(f"verdict probabilities need a model in this process; {type(engine).__name__} "
                                      f"has none: use --infer_backend transformers")
        model = engine.model
        model.eval()
        if template.use_model:   # as TransformersEngine._infer does before it encodes
            template.model = model
        template.set_mode("transformers")
        lines = {v: template.tokenizer.encode(line, add_special_tokens=False) for v, line in VERDICT_LINES.items()}
        prompts = [self._encode(row) for row in rows]
        self._check_continuation(rows[0], prompts[0], lines)
        with torch.inference_mode():
            # Left-padded by the template for inference: every prompt ends at the last position.
            inputs = {k: v.to(model.device) if hasattr(v, "to") else v
                      for k, v in template.data_collator(prompts).items()}
            if engine.model_meta.is_multimodal:
                _, inputs = template.pre_forward_hook(model, None, inputs)
            out = model(**inputs, use_cache=True, logits_to_keep=1)
            first = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
            cache, mask = out.past_key_values, inputs["attention_mask"]
            length, batch = mask.shape[1], mask.shape[0]
            totals = {}
            for verdict, ids in lines.items():
                total = first[:, ids[0]].clone()
                n = len(ids) - 1
                if n:   # the line's other tokens, after the prompt's cached keys and values
                    cache.crop(length)
                    step = {"input_ids": torch.tensor([ids[:-1]] * batch, device=model.device),
                            "attention_mask": torch.cat([mask, mask.new_ones(batch, n)], dim=1),
                            "past_key_values": cache, "use_cache": True}
                    if "position_ids" in inputs:   # Qwen-VL's multi-row positions: each row goes on counting
                        step["position_ids"] = (inputs["position_ids"][..., -1:] + 1
                                                + torch.arange(n, device=model.device))
                    logprobs = torch.log_softmax(model(**step).logits.float(), dim=-1)
                    for j in range(1, len(ids)):
                        total += logprobs[:, j - 1, ids[j]]
                totals[verdict] = total
        return [{v: float(t[i]) for v, t in totals.items()} for i in range(len(rows))]

    def _encode(self, row: dict, prefix: str | None = None) -> dict:
        return self.engine.template.encode(_request(row, prefix))

    def _check_continuation(self, row: dict, prompt: dict, lines: dict[str, list[int]]) -> None:
        """The template must encode a reply that starts with a verdict line as the prompt followed by that line's
        tokens, or the scored tokens would not be the ones the model writes after the prompt."""
        for verdict, ids in lines.items():
            full = list(self._encode(row, VERDICT_LINES[verdict])["input_ids"])
            if full != list(prompt["input_ids"]) + ids:
                raise RuntimeError(f"the template does not encode a reply starting {VERDICT_LINES[verdict]!r} as the "
                                   f"prompt followed by that line's tokens; p_fail cannot be computed for this model")

    def _each_row(self, rows: list[dict], run, what: str) -> dict[int, str]:
        """Run `run(indices)` over all rows at once; when that fails, row by row, so one bad row (a prompt over
        the model's max_length, say) fails alone. {row index: why, named by group and mission}; every row
        failing raises the first reason: the problem is not one group."""
        errors = {i: why for i, row in enumerate(rows) if (why := self._too_long(row))}
        todo = [i for i in range(len(rows)) if i not in errors]
        try:
            run(todo)
        except NotImplementedError:
            raise
        except Exception:  # noqa: BLE001 - one bad row fails ms-swift's whole batch: find it, keep the rest
            for i in todo:
                try:
                    run([i])
                except Exception as exc:  # noqa: BLE001
                    errors[i] = f"{type(exc).__name__}: {exc}"
        errors = {i: f"group {rows[i].get('group_id')} of {rows[i].get('mission')}: {why}"
                  for i, why in sorted(errors.items())}
        if rows and len(errors) == len(rows):
            raise RuntimeError(f"no row could be {what}; the first: {next(iter(errors.values()))}")
        return errors

    def _too_long(self, row: dict) -> str | None:
        max_length = getattr(getattr(self.engine, "template", None), "max_length", None)
        chars = sum(len(m["content"]) for m in row["messages"] if isinstance(m.get("content"), str))
        if max_length and chars > MAX_CHARS_PER_TOKEN * max_length:
            return (f"its prompt has {chars:,} characters, more than the model's max_length of {max_length:,} tokens "
                    f"can hold; shorten that group's summaries")
        return None


def _request(row: dict, prefix: str | None = None):
    """The row as ms-swift's request: its messages (plus the start of the assistant's reply when given) and, for a
    photo-aware row, its photos, one per `<image>` in the prompt."""
    from swift.infer_engine import InferRequest
    messages = row["messages"] + [{"role": "assistant", "content": prefix}] if prefix else row["messages"]
    return InferRequest(messages=messages, images=list(row.get("images") or []))
