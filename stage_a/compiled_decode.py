"""A compiled decode step for Stage-A's engine calls: one static KV cache per run, every batch padded to one shape,
the decode step compiled (and on a GPU captured as a CUDA graph) once, before the first batch (an adapter: imports
torch and transformers).

Why: on the H200 a decode step of the 3B model was ~2,020 eager torch ops, 20-39 ms of host dispatch against ~2 ms
of weight reads (docs/gpu.md; docs/gpu/). A CUDA graph replays the whole step's kernels in one launch. It needs
fixed shapes and fixed addresses, hence:

- **one static cache**, sized once per run (`batch` rows x the longest prompt plus `max_new_tokens`, rounded up to
  `CACHE_STEP` tokens) and reset before each call, passed to transformers' `generate` as its cache. transformers then
  builds the step's 4D attention mask at the cache's full length (a fixed shape) and runs the decode steps (never the
  prefill) through `torch.compile` (`CompileConfig`); its default mode, "reduce-overhead", captures CUDA graphs.
- **one batch shape**: a call of fewer photos than the run's batch size, but more than half, is padded with rows that
  attend to one pad token and are marked finished from the first step (`PaddedRowsDone`), so they never keep the loop
  running; their rows are cut from the output. Without padding each new batch size would compile and capture again.
  A call of half the batch or fewer (a run's last batch, a photo retried alone) runs as ms-swift runs it: padding it
  would prefill more rows than it has.
- **once, up front**: `warm_up` runs one padded call of the longest prompt with every row forced to `max_new_tokens`
  (what compiles and captures), and returns its seconds, which the caller logs. A later call whose prompt does not fit
  the cache gets a larger cache, which compiles again; that is logged too.

The tokens are those of ms-swift's own call (tests/test_compiled_decode.py, both architectures, on CPU with
torch.compile's "eager" backend, the path without a GPU's code generation). On a CPU it is slower (compiling, and a
cache attended at its full length every step) and stays off; it is for GPUs, where group_qc_dev.gpu_check times it.
"""
from __future__ import annotations

import copy
import functools
import logging
import time

import torch
from transformers import StoppingCriteria, StoppingCriteriaList
from transformers.cache_utils import StaticCache
from transformers.generation.configuration_utils import CompileConfig

from qc_core.errors import UserError

log = logging.getLogger("group_qc.stage_a")

CACHE_STEP = 256          # cache lengths are multiples of this: prompts a few tokens longer reuse the same graph
BACKENDS = ("inductor", "cudagraphs", "eager")   # torch.compile backends; "eager" only traces (CPU tests)
# The inputs of a generate call that carry one row per photo, and the dimension that does; any other tensor
# (pixel_values, image_grid_thw: one row per patch or per image) is left as it is.
ROW_INPUTS = {"input_ids": 0, "attention_mask": 0, "mm_token_type_ids": 0, "token_type_ids": 0, "position_ids": 1,
              "inputs_embeds": 0}


class PaddedRowsDone(StoppingCriteria):
    """Rows from `first` on are padding: finished from the first step, so they never hold the loop open."""

    def __init__(self, first: int):
        self.first = first

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs) -> torch.Tensor:
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        done[self.first:] = True
        return done


def pad_rows(inputs: dict, rows: int, pad_token_id: int) -> dict:
    """The generate inputs with padding rows added up to `rows`: pad tokens, each row attending to its last one."""
    n = inputs["attention_mask"].shape[0]
    extra = rows - n
    if extra <= 0:
        return inputs
    out = dict(inputs)
    for key, dim in ROW_INPUTS.items():
        value = inputs.get(key)
        if not isinstance(value, torch.Tensor):
            continue
        shape = list(value.shape)
        shape[dim] = extra
        fill = pad_token_id if key == "input_ids" else 0
        padding = torch.full(shape, fill, dtype=value.dtype, device=value.device)
        if key == "attention_mask":
            padding[:, -1] = 1   # one attended token: no row is masked everywhere (softmax of nothing is NaN)
        out[key] = torch.cat([value, padding], dim=dim)
    return out


def cut_rows(output, n: int):
    """generate's output (a tensor, or a ModelOutput of tensors and tuples of tensors) for the first n rows only."""
    if isinstance(output, torch.Tensor):
        return output[:n]
    for key, value in list(output.items()):
        if isinstance(value, torch.Tensor):
            output[key] = value[:n]
        elif isinstance(value, tuple) and value and all(isinstance(v, torch.Tensor) for v in value):
            output[key] = tuple(v[:n] for v in value)
    return output


def cache_length(prompt_tokens: int, max_new_tokens: int) -> int:
    return -(-(prompt_tokens + max_new_tokens) // CACHE_STEP) * CACHE_STEP


class CompiledDecode:
    """While entered, `model.generate` runs with the static cache, the padding and the compiled decode step. One per
    engine; `batch` is the run's batch size (every call is padded to it)."""

    def __init__(self, model, batch: int, backend: str = "inductor", mode: str | None = "reduce-overhead"):
        if backend not in BACKENDS:
            raise UserError(f"compiled decode backend {backend!r}: use one of {', '.join(BACKENDS)}")
        self.model, self.batch = model, batch
        # reduce-overhead (CUDA graphs) exists for inductor only; the cudagraphs backend captures by itself. The
        # ignore: transformers annotates `mode` as str, yet hands it to torch.compile, whose mode=None is its default
        self.compile_config = CompileConfig(fullgraph=False, dynamic=False, backend=backend,
                                            mode=mode if backend == "inductor" else None)  # type: ignore[arg-type]
        # transformers compiles on accelerators only unless told otherwise: the CPU tests trace with "eager" (a
        # private flag transformers declares as None, so mypy would refuse True)
        setattr(self.compile_config, "_compile_all_devices", backend == "eager" or None)
        self.cache: StaticCache | None = None
        self.cache_len = 0
        self.compiles = 0          # caches made: the first compiles, each later one compiles again
        self.eager_calls = 0       # calls of half the batch or fewer, run uncompiled
        self._generate = None

    def __enter__(self):
        original = self.model.generate
        self._generate = original

        @functools.wraps(original)   # ms-swift reads generate's signature (use_model_defaults)
        def generate(*args, **kwargs):
            return self.generate(original, *args, **kwargs)

        self.model.generate = generate
        return self

    def __exit__(self, *exc):
        del self.model.generate   # the instance attribute goes; the class's generate shows again
        self._generate = None

    def _cache_for(self, prompt_tokens: int, max_new_tokens: int) -> StaticCache:
        need = prompt_tokens + max_new_tokens
        if self.cache is None or need > self.cache_len:
            grown = self.cache is not None
            self.cache_len = cache_length(prompt_tokens, max_new_tokens)
            self.cache = StaticCache(config=self.model.config.get_text_config(decoder=True),
                                     max_cache_len=self.cache_len)
            self.compiles += 1
            if grown:
                log.warning("compiled decode: a prompt of %d tokens does not fit the static cache; a cache of %d "
                            "tokens is made and the decode step compiled again", prompt_tokens, self.cache_len)
        else:
            self.cache.reset()
        return self.cache

    def generate(self, original, *args, generation_config=None, stopping_criteria=None, **inputs):
        if args or "attention_mask" not in inputs or generation_config is None:
            raise ValueError("compiled decode: expected generate(generation_config=..., input_ids=..., "
                             "attention_mask=..., ...) as ms-swift's TransformersEngine calls it")
        n, prompt_tokens = inputs["attention_mask"].shape
        if n > self.batch:
            raise ValueError(f"compiled decode: a call of {n} rows is larger than the run's batch size {self.batch}")
        if 2 * n <= self.batch:
            # A run's last batch, or a photo retried alone: padding would prefill more rows than it has, so it runs
            # as ms-swift runs it (dynamic cache, eager decode)
            self.eager_calls += 1
            return original(*args, generation_config=generation_config, stopping_criteria=stopping_criteria,
                            **inputs)
        config = copy.copy(generation_config)   # ms-swift's, one per call; ours changes three fields
        config.cache_implementation = None
        config.compile_config = self.compile_config
        config.disable_compile = False
        criteria = StoppingCriteriaList(stopping_criteria or [])
        if n < self.batch:
            criteria.append(PaddedRowsDone(n))
        pad = config.pad_token_id if config.pad_token_id is not None else 0
        padded = pad_rows(inputs, self.batch, pad)
        cache = self._cache_for(prompt_tokens, config.max_new_tokens or 0)
        output = original(generation_config=config, stopping_criteria=criteria, past_key_values=cache, **padded)
        return cut_rows(output, n)

    def warm_up(self, infer) -> float:
        """Seconds of `infer()`: the caller's one padded call of the longest prompt, every row forced to
        max_new_tokens, made while this is entered (it compiles and captures the decode step)."""
        if self.model.device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        infer()
        if self.model.device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start
