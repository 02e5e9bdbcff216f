"""The engine factory both stages load checkpoints through: ms-swift's TransformersEngine or VllmEngine for a resolved
checkpoint (qc_core.checkpoints). An adapter, but a light one to import: ms-swift and vLLM are imported only when an
engine is built.
"""
from __future__ import annotations

import logging

from .errors import UserError
from .checkpoints import BACKENDS, ModelPathError, ModelSpec
from .library_logs import route_library_logs

log = logging.getLogger("group_qc.engines")


def quiet_libraries() -> None:
    """ms-swift's and transformers' lines (and the weight-loading bar) to the library log, when one is set."""
    if route_library_logs() is None:
        return
    import sys
    if "transformers" in sys.modules:   # its bars are not log lines
        from transformers.utils import logging as hf_logging
        hf_logging.disable_progress_bar()


def supported_engine_kwargs(engine_kwargs: dict) -> dict:
    """The engine_kwargs the installed vLLM's EngineArgs accepts; any other is left out with a warning."""
    import inspect

    from vllm import EngineArgs
    known = inspect.signature(EngineArgs).parameters
    for key in set(engine_kwargs) - set(known):
        log.warning("vLLM %s has no engine argument %s: left out", getattr(__import__("vllm"), "__version__", "?"),
                    key)
    return {k: v for k, v in engine_kwargs.items() if k in known}


def build_swift_engine(spec: ModelSpec, backend: str = "transformers", batch_size: int = 8, **vllm_kwargs):
    """ms-swift's TransformersEngine or VllmEngine for a resolved checkpoint (Stage-A and Stage-B share it). With
    $GROUP_QC_LIBRARY_LOG set, the libraries' own lines go to that file (qc_core.library_logs)."""
    quiet_libraries()
    if backend == "transformers":
        from swift.infer_engine import TransformersEngine
        quiet_libraries()
        return TransformersEngine(spec.path, model_type=spec.model_type, template_type=spec.template,
                                  adapters=list(spec.adapters) or None, max_batch_size=batch_size)
    if backend == "vllm":
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise ModelPathError("--infer_backend vllm needs vLLM (pip install vllm on a GPU machine); "
                                 "use --infer_backend transformers otherwise") from None
        from swift.infer_engine import VllmEngine
        quiet_libraries()
        if "engine_kwargs" in vllm_kwargs:
            vllm_kwargs["engine_kwargs"] = supported_engine_kwargs(vllm_kwargs["engine_kwargs"])
        return VllmEngine(spec.path, model_type=spec.model_type, template_type=spec.template,
                          adapters=list(spec.adapters) or None, max_num_seqs=max(batch_size, 1), **vllm_kwargs)
    raise UserError(f"unknown --infer_backend {backend!r}; choose one of {', '.join(BACKENDS)}")
