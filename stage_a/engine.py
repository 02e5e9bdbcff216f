"""Thin adapter from Stage-A to ms-swift's inference engines (the only Stage-A module that
imports torch/swift, and only when an engine is built). Checkpoints are resolved by qc_core.checkpoints.
"""
from __future__ import annotations

import inspect
import logging
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from qc_core.errors import UserError
from .batching import AUTO, CPU_AUTO_BATCH, GIB, Auto, auto_batch_size
from qc_core.checkpoints import ModelSpec
from qc_core.engines import build_swift_engine

if TYPE_CHECKING:   # for the annotation only: it imports torch and transformers
    from .compiled_decode import CompiledDecode

log = logging.getLogger("group_qc.stage_a")

# Stage-A's vLLM settings, set for speed on one photo per request after vLLM's own Qwen-VL recipes; unmeasured here
# (no vLLM on CPU, none on the GPU image we were lent). The prompt's text is given this many tokens in max_model_len:
# every mission's Stage-A prompt is far below it (tests/test_stage_a_vllm.py tokenizes each).
PROMPT_TOKEN_ALLOWANCE = 1024
VISUAL_TOKEN_PIXELS = 28 * 28   # pixels per visual token on Qwen2.5-VL (14-pixel patches, 2x2 merged); Qwen3-VL: 32x32
VLLM_ENGINE_KWARGS = {"mm_encoder_tp_mode": "data"}   # vLLM's EngineArgs, passed where the installed vLLM has them


def stage_a_vllm_settings(max_pixels: int, max_new_tokens: int) -> dict:
    """ms-swift VllmEngine arguments for Stage-A: one image and no video per prompt (vLLM then reserves no encoder
    budget for video and sizes its multimodal profiling for one photo); no multimodal processor cache (every photo
    is unique: the cache only costs memory and hashing); max_model_len fitted to a prompt of one photo at
    max_pixels plus max_new_tokens (not the model's 128k, which sizes vLLM's scheduler budget and warm-up); the
    vision encoder run data-parallel where vLLM runs tensor-parallel (its Qwen2.5-VL recipe)."""
    visual = max_pixels // VISUAL_TOKEN_PIXELS + 2   # plus <|vision_start|> and <|vision_end|>
    length = PROMPT_TOKEN_ALLOWANCE + visual + max_new_tokens
    return {"limit_mm_per_prompt": {"image": 1, "video": 0}, "mm_processor_cache_gb": 0,
            "max_model_len": -(-length // 256) * 256, "engine_kwargs": dict(VLLM_ENGINE_KWARGS)}


DEFAULT_VLLM_PIXELS = 1024 * 28 * 28   # what a photo may be when no max_pixels is given (Qwen-VL's own default)


# TransformersEngine's private encode step, which encoding ahead replaces; as in ms-swift 4.6.
BATCH_ENCODE_PARAMETERS = ("self", "infer_requests", "strict")
_warned_hook = False


def batch_encode_hook_problem(engine) -> str | None:
    """Why encoding ahead cannot hook this engine's `_batch_encode` (a private method of ms-swift's
    TransformersEngine: an upgrade may rename it or change its arguments), or None. Said once per process as a
    warning: photos are then encoded inside the engine calls, as bare ms-swift does, which is correct but slower
    on a GPU."""
    global _warned_hook
    method = getattr(type(engine), "_batch_encode", None)
    problem: str | None
    if method is None:
        problem = f"{type(engine).__name__} has no _batch_encode"
    else:
        found = tuple(inspect.signature(method).parameters)
        problem = None if found == BATCH_ENCODE_PARAMETERS else \
            f"{type(engine).__name__}._batch_encode takes {found}, not {BATCH_ENCODE_PARAMETERS}"
    if problem and not _warned_hook:
        _warned_hook = True
        log.warning("%s (this ms-swift differs from 4.6): photos are encoded inside the engine calls, not ahead "
                    "on the preparation threads", problem)
    return problem


@dataclass
class Summary:
    text: str | None
    finish_reason: str | None
    error: str | None = None


@dataclass
class PreparedPhoto:
    """One photo's request, already through ms-swift's template (resize, image processor, tokens)
    when `encoded` is set, so the engine goes straight to the model. Made on the runner's preparation
    threads while the model works on the previous batch."""
    request: object  # swift InferRequest
    encoded: dict | None = None
    error: str | None = None  # the template refused the photo; it never reaches the engine


class SwiftSummaryEngine:
    """One ms-swift engine, greedy by default, fed one request per photo."""

    def __init__(self, spec: ModelSpec, *, backend: str = "transformers", batch_size: int | Auto = 8,
                 max_pixels: int | None = None, max_new_tokens: int = 128, temperature: float = 0.0,
                 seed: int | None = None, pre_encode: bool | None = None, host_stop_words: bool = True,
                 window_batches: bool = True):
        """batch_size 'auto' (transformers engine only): resolve_batch_size() picks it before the first batch.
        host_stop_words: our calls test ms-swift's stop words with stage_a.stopping.HostStopWords (the same stops,
        one device-to-host copy per decode step); calls made on `self.engine` directly stay ms-swift's own.
        window_batches: during our calls the vision tower attends its windows one call per window length
        (stage_a.vision_windows), not one call per window; the same arithmetic."""
        from swift.infer_engine import RequestConfig

        if batch_size == AUTO and backend != "transformers":
            raise UserError(f"--batch_size auto sizes the transformers engine's batches to GPU memory; {backend} "
                             f"schedules its own: give a number (its max_num_seqs)")
        self.spec = spec
        self.batch_size = batch_size
        self.max_pixels = max_pixels
        self.auto_batch: dict | None = None   # how auto was resolved, for logs and benchmarks
        self.engine = build_swift_engine(spec, backend, 1 if batch_size == AUTO else batch_size,
                                         **stage_a_vllm_settings(max_pixels or DEFAULT_VLLM_PIXELS, max_new_tokens))
        if max_pixels:
            # Photos arrive already resized by qc_core.images; this keeps ms-swift's own resize
            # (qwen_vl_utils.smart_resize) from ever exceeding the same bound.
            self.engine.template.max_pixels = max_pixels
        self.request_config = RequestConfig(max_tokens=max_new_tokens, temperature=temperature, seed=seed)
        import torch
        self.torch_threads = torch.get_num_threads()  # the model's; see setup_preparation_thread
        # TransformersEngine encodes a batch's requests itself (`_batch_encode`) before it can start the
        # model. With pre-encoding, prepare() encodes on the preparation threads while the model works
        # on the previous batch, and this hook hands the encodings over. By default that happens when the
        # model is on an accelerator, whose host cores idle while it generates. On a CPU the model's own
        # threads already use every core: encoding beside them measured 5% slower (the demo's Stage-A,
        # 853 photos, batch 16, 2 cores: 21.8/22.6 against 22.9/23.8 photos/s), so ms-swift encodes
        # inside infer there. vLLM encodes inside its own scheduler and keeps its own path.
        self._handover: dict[int, dict] = {}  # id(InferRequest) -> encoding, for one infer call
        self.host_stop_words = host_stop_words and backend == "transformers"
        self._inside_infer = False
        if self.host_stop_words:
            from .stopping import use_host_stop_words   # heavy: torch and ms-swift at import
            use_host_stop_words(self.engine.template, when=lambda: self.host_stop_words and self._inside_infer)
        self.window_batches = window_batches and backend == "transformers"
        # made by use_compiled_decode once the batch size is known
        self.compiled_decode: CompiledDecode | None = None
        self._windows = None
        if self.window_batches:
            from .vision_windows import WindowBatches   # heavy: torch and transformers at import
            self._windows = WindowBatches(self.engine.model)
        can = backend == "transformers" and batch_encode_hook_problem(self.engine) is None
        if pre_encode and not can:
            raise UserError(f"pre_encode needs the transformers backend of ms-swift 4.x, not {backend!r}")
        self.pre_encodes = can and (pre_encode if pre_encode is not None else self.model_device() != "cpu")
        if can:
            self._engine_batch_encode = self.engine._batch_encode
            self.engine._batch_encode = self._batch_encode
            if self.engine.template.use_model:  # what TransformersEngine._infer sets before it encodes
                self.engine.template.model = self.engine.model

    def resolve_batch_size(self, messages: list[dict]) -> int:
        """The batch size, resolving 'auto' once: on a CPU CPU_AUTO_BATCH (no device memory to probe; see its
        measurements); on a GPU the largest batch its free memory holds, from a probe (probe_gpu_batch). Logged
        either way."""
        if self.batch_size != AUTO:
            return self.batch_size
        device = self.model_device()
        if device == "cpu":
            self.batch_size = CPU_AUTO_BATCH
            self.auto_batch = {"device": "cpu", "batch_size": CPU_AUTO_BATCH,
                               "why": "on a CPU --batch_size auto is a fixed size: there is no GPU memory to probe"}
            log.info("--batch_size auto on a CPU: %d photos per engine call (a fixed size: there is no GPU memory to "
                     "probe; give a larger number where this machine's memory is known to hold it)", CPU_AUTO_BATCH)
        else:
            self.batch_size, self.auto_batch = self.probe_gpu_batch(messages)
        self.engine.max_batch_size = self.batch_size
        return self.batch_size

    def start_compiled_decode(self, backend: str, batch: int, messages: list[dict]) -> float:
        """Our calls' decode step compiled from here on (stage_a.compiled_decode), for batches of `batch`: one warm-up
        call of `batch` photos of --max_pixels, every reply forced to max_new_tokens, compiles and captures it now,
        before the first real batch. Returns the warm-up's seconds, also logged."""
        from .compiled_decode import CompiledDecode   # heavy: torch and transformers at import
        if self.model_device() == "cpu" and backend != "eager":
            log.warning("--compiled_decode %s on a CPU: transformers compiles the decode step on accelerators only, so "
                        "it runs with the static cache uncompiled, slower than without it; leave it off on a CPU",
                        backend)
        self.compiled_decode = CompiledDecode(self.engine.model, batch, backend=backend)
        request = self._probe_request(messages)
        self.engine.max_batch_size = batch
        with self._replies_at_full_length():
            seconds = self.compiled_decode.warm_up(
                lambda: self._infer([PreparedPhoto(request) for _ in range(batch)]))
        log.info("--compiled_decode %s: the decode step compiled and captured for batches of %d (a static cache of %d "
                 "tokens) in %.1f s, once for the run", backend, batch, self.compiled_decode.cache_len, seconds)
        return seconds

    def _probe_request(self, messages: list[dict]):
        """A request of one noise photo of --max_pixels (the longest prompt this run sends)."""
        import numpy as np
        from PIL import Image
        pixels = self.max_pixels or 1024 * 28 * 28
        width = int((pixels * 4 / 3) ** 0.5)
        image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (width * 3 // 4, width, 3), dtype=np.uint8))
        return self._request(messages, image)

    @contextmanager
    def _replies_at_full_length(self):
        """Every reply of the calls made inside runs to max_new_tokens (the worst case): min_new_tokens on the
        engine's generation config, which ms-swift copies into every call's."""
        config = self.engine.generation_config
        before = getattr(config, "min_new_tokens", None)
        config.min_new_tokens = self.request_config.max_tokens
        try:
            yield
        finally:
            config.min_new_tokens = before

    def probe_gpu_batch(self, messages: list[dict], cuda=None) -> tuple[int, dict]:
        """(batch, details): peak GPU memory above the loaded model for 1 and 4 probe photos of --max_pixels
        (noise, every reply forced to max_new_tokens: the worst case) gives a fixed and a per-photo cost;
        auto_batch_size fits them in the free memory; one batch of that size is then run, halving on out-of-memory,
        so the run itself never meets one. `cuda`: torch.cuda (the default) or anything with the same memory
        functions, for a run of this logic on a CPU."""
        import torch

        torch_cuda = torch.cuda if cuda is None else cuda
        pixels = self.max_pixels or 1024 * 28 * 28
        request = self._probe_request(messages)

        def peak(n: int) -> int:
            torch_cuda.synchronize()
            torch_cuda.empty_cache()
            torch_cuda.reset_peak_memory_stats()
            base = torch_cuda.memory_allocated()
            self.engine.max_batch_size = n
            self.engine.infer([request] * n, self.request_config, use_tqdm=False)
            torch_cuda.synchronize()
            return torch_cuda.max_memory_allocated() - base

        name = torch_cuda.get_device_name(0)
        with self._replies_at_full_length():
            try:
                one, four = peak(1), peak(4)
            except torch_cuda.OutOfMemoryError:
                torch_cuda.empty_cache()
                free, total = torch_cuda.mem_get_info()
                raise UserError(f"--batch_size auto: the probe of 4 photos at --max_pixels {pixels} ran out of the "
                                 f"GPU's memory ({name}, {free / GIB:.1f} GiB free of {total / GIB:.1f} after loading "
                                 f"the model): lower --max_pixels or --batch_size, or use a larger GPU") from None
            torch_cuda.empty_cache()
            free, total = torch_cuda.mem_get_info()
            per_photo = max((four - one) / 3, 2 ** 20)
            fixed = max(one - per_photo, 0.0)
            batch = auto_batch_size(free, fixed, per_photo, device=f"the GPU ({name})")
            tried = []
            while True:
                try:
                    peak(batch)
                    break
                except torch_cuda.OutOfMemoryError:
                    tried.append(batch)
                    if batch == 1:
                        raise UserError(f"--batch_size auto: one photo at --max_pixels {pixels} runs out of the GPU's "
                                         f"memory ({name}, {free / GIB:.1f} GiB free of {total / GIB:.1f}): lower "
                                         f"--max_pixels or use a larger GPU") from None
                    batch //= 2
        details = {"device": name, "batch_size": batch, "free_gib": free / GIB, "total_gib": total / GIB,
                   "probe_peak_gib": {"1": one / GIB, "4": four / GIB}, "per_photo_gib": per_photo / GIB,
                   "fixed_gib": fixed / GIB, "halved_after_out_of_memory_at": tried}
        log.info("--batch_size auto: %d photos per engine call on %s (%.1f GiB free after the model; probe: %.2f GiB "
                 "for 1 photo, %.2f GiB for 4, so %.3f GiB per photo at --max_pixels %d%s)", batch, name, free / GIB,
                 one / GIB, four / GIB, per_photo / GIB, pixels,
                 f"; halved after running out of memory at {tried}" if tried else "")
        return batch, details

    def model_device(self) -> str:
        """'cpu', 'cuda', ... for the transformers engine; 'cuda' for vLLM."""
        model = getattr(self.engine, "model", None)
        device = getattr(model, "device", None)
        return getattr(device, "type", "cuda")

    def setup_preparation_thread(self) -> None:
        """Run once on each thread that calls prepare(): torch ops there (the image processor) use one
        core. With torch's default, every such thread starts its own OpenMP team of one thread per
        core, whose spinning starves the model's threads: measured on 2 CPU cores, tiny model, batch
        16 (group_qc_dev/bench_stage_a.py), ours/bare 0.66 with torch's default against 1.03 with one thread."""
        import threading

        import torch
        torch.get_num_threads()  # torch sets a thread's count on its first use; let that happen now
        torch.set_num_threads(1)
        # That also set the count every thread starting torch work later begins with (the main thread
        # too, if it had not used torch yet). Setting it back from a throwaway thread restores that
        # default and leaves this thread at 1.
        restore = threading.Thread(target=torch.set_num_threads, args=(self.torch_threads,))
        restore.start()
        restore.join()

    def prepare(self, messages: list[dict], image) -> PreparedPhoto:
        """Thread-safe (ms-swift itself encodes a batch on many threads): the request for one photo,
        encoded by the engine's own template exactly as `engine.infer` would encode it."""
        request = self._request(messages, image)
        if not self.pre_encodes:
            return PreparedPhoto(request)
        import torch
        try:
            with torch.inference_mode():  # as in TransformersEngine._infer
                return PreparedPhoto(request, self.engine.template.encode(request, return_template_inputs=True))
        except Exception as exc:  # noqa: BLE001 - reported for this photo only
            return PreparedPhoto(request, error=f"{type(exc).__name__}: {exc}")

    @staticmethod
    def _request(messages: list[dict], image):
        from swift.infer_engine import InferRequest
        return InferRequest(messages=messages, images=[image])

    def _batch_encode(self, infer_requests, strict):
        """TransformersEngine's encode step: the encodings prepare() made, each used once; anything
        else (a retry, a request made elsewhere) is encoded by ms-swift as usual."""
        encoded = [self._handover.pop(id(r), None) for r in infer_requests]
        if all(e is not None for e in encoded):
            return encoded, []
        return self._engine_batch_encode(infer_requests, strict=strict)

    def summarize(self, photos: list) -> list[Summary]:
        """PreparedPhotos (or (messages, PIL image) pairs) -> one Summary each, in order. A batch that
        fails as a whole is retried photo by photo, so one bad photo costs its own group only. Pairs
        are encoded by ms-swift inside the call, on its own threads."""
        photos = [p if isinstance(p, PreparedPhoto) else PreparedPhoto(self._request(*p)) for p in photos]
        out: list[Summary | None] = [Summary(None, None, p.error) if p.error else None for p in photos]
        todo = [k for k, p in enumerate(photos) if p.error is None]
        for k, response in zip(todo, self._infer([photos[k] for k in todo])):
            if isinstance(response, Exception):
                out[k] = Summary(None, None, f"{type(response).__name__}: {response}")
            else:
                choice = response.choices[0]
                out[k] = Summary(choice.message.content, choice.finish_reason)
        # every photo has one now: its error, or the engine's reply (ms-swift answers each request it is given)
        return cast(list[Summary], out)

    def _infer(self, photos: list[PreparedPhoto]) -> list:
        if not photos:
            return []
        with self.our_changes():
            return self._infer_batch_or_one_by_one(photos)

    @contextmanager
    def our_changes(self):
        """Our changes to ms-swift's engine on for the engine calls made inside: HostStopWords and window batches
        (each where switched on). Bare `self.engine.infer` outside it is ms-swift's own."""
        self._inside_infer = True
        try:
            with self._windows if self.window_batches and self._windows else nullcontext(), \
                    self.compiled_decode or nullcontext():
                yield
        finally:
            self._inside_infer = False

    def _infer_batch_or_one_by_one(self, photos: list[PreparedPhoto]) -> list:
        requests = [p.request for p in photos]
        self._handover = {id(p.request): p.encoded for p in photos if p.encoded is not None}
        try:
            return self.engine.infer(requests, self.request_config, use_tqdm=False)
        except Exception as exc:  # noqa: BLE001 - one photo alone in its batch fails alone, as in a larger batch
            if len(requests) == 1:
                return [exc]
        finally:
            self._handover = {}
        responses = []
        for request in requests:
            try:
                responses.extend(self.engine.infer([request], self.request_config, use_tqdm=False))
            except Exception as exc:  # noqa: BLE001 - reported per photo, the run goes on
                responses.append(exc)
        return responses
