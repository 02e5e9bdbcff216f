"""Stage-A's vLLM settings (set for speed, unmeasured: no vLLM here): what is built, and that ms-swift's VllmEngine
takes every one of them. vLLM itself is not needed."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from stage_a.engine import PROMPT_TOKEN_ALLOWANCE, stage_a_vllm_settings


@pytest.mark.parametrize("max_pixels, new_tokens, max_model_len", [
    (602112, 32, 2048),                 # 768 visual tokens: 1024 + 770 + 32 = 1826, in steps of 256
    (1024 * 28 * 28, 128, 2304),        # Stage-A's default photo: 1024 + 1026 + 128 = 2178
    (56 * 56, 1, 1280),                 # the smallest photo --max_pixels allows
])
def test_one_photo_no_video_no_processor_cache_and_a_length_that_fits_one_photo(max_pixels, new_tokens, max_model_len):
    settings = stage_a_vllm_settings(max_pixels, new_tokens)
    assert settings["limit_mm_per_prompt"] == {"image": 1, "video": 0}
    assert settings["mm_processor_cache_gb"] == 0 and settings["max_model_len"] == max_model_len
    assert settings["engine_kwargs"] == {"mm_encoder_tp_mode": "data"}


def vllm_engine_parameters() -> set[str]:
    """ms-swift's VllmEngine.__init__ parameters, read from its source (importing it needs vLLM)."""
    spec = importlib.util.find_spec("swift.infer_engine.vllm_engine")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "VllmEngine")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return {a.arg for a in init.args.args + init.args.kwonlyargs}


def test_ms_swifts_vllm_engine_takes_every_setting_by_name():
    """A renamed argument in an ms-swift upgrade would be a TypeError on the GPU machine; here it fails at once."""
    assert set(stage_a_vllm_settings(602112, 32)) | {"max_num_seqs", "adapters"} <= vllm_engine_parameters()


def test_stage_a_hands_its_settings_to_the_vllm_engine(monkeypatch):
    """SwiftSummaryEngine(backend='vllm') asks build_swift_engine for exactly these settings (the call is caught
    before vLLM would be needed)."""
    import stage_a.engine as engine
    from qc_core.checkpoints import ModelSpec
    asked = {}

    def caught(spec, backend, batch_size, **kwargs):
        asked.update(backend=backend, batch_size=batch_size, **kwargs)
        raise RuntimeError("caught")
    monkeypatch.setattr(engine, "build_swift_engine", caught)
    with pytest.raises(RuntimeError, match="caught"):
        engine.SwiftSummaryEngine(ModelSpec("m", "qwen2_5_vl", "qwen2_5_vl", ()), backend="vllm", batch_size=64,
                                  max_pixels=602112, max_new_tokens=32)
    assert asked == {"backend": "vllm", "batch_size": 64, **stage_a_vllm_settings(602112, 32)}


@pytest.mark.slow
def test_every_missions_prompt_fits_the_allowance_with_room_to_spare(tiny_qwen2_5_vl):
    """The real Qwen tokenizer (the tiny model's) on each mission's Stage-A prompt, chat template included."""
    from transformers import AutoTokenizer

    from qc_core.missions import load_registry
    from stage_a.prompts import stage_a_messages
    tokenizer = AutoTokenizer.from_pretrained(str(tiny_qwen2_5_vl))
    registry = load_registry()
    for mission in registry.missions:
        messages = [{"role": m["role"], "content": m["content"].replace("<image>", "")}
                    for m in stage_a_messages(mission)]
        tokens = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        n = len(tokens["input_ids"] if isinstance(tokens, dict) else tokens)
        assert n < PROMPT_TOKEN_ALLOWANCE / 2, (mission.name, n)
