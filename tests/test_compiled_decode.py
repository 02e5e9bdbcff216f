"""stage_a.compiled_decode: a static cache per run, batches padded to one shape, the decode step compiled once.

On CPU the compile runs with torch.compile's "eager" backend (dynamo traces the decode step into a graph and runs it
without code generation): the path a GPU compiles, minus the kernels. The summaries must be ms-swift's own, on both
architectures, for a full batch, a padded one and one small enough to run uncompiled.
"""
from __future__ import annotations

import json
import logging

import pytest
import torch

from stage_a.compiled_decode import CACHE_STEP, CompiledDecode, PaddedRowsDone, cache_length, cut_rows, pad_rows

# measured in make test on a clean clone, 2026-11-28 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(45)

M = "BBU接地线检查"


# ---------------------------------------------------------------------------------------------------------
# The pure parts: padding, cutting, the cache length
# ---------------------------------------------------------------------------------------------------------
def test_padding_rows_attend_to_one_pad_token_and_keep_every_other_input():
    inputs = {"input_ids": torch.tensor([[7, 8, 9], [0, 5, 6]]), "attention_mask": torch.tensor([[1, 1, 1], [0, 1, 1]]),
              "position_ids": torch.arange(24).reshape(4, 2, 3), "pixel_values": torch.ones(5, 2),
              "image_grid_thw": torch.tensor([[1, 2, 2], [1, 2, 2]])}
    padded = pad_rows(inputs, 4, pad_token_id=99)
    assert padded["input_ids"].tolist() == [[7, 8, 9], [0, 5, 6], [99, 99, 99], [99, 99, 99]]
    assert padded["attention_mask"].tolist() == [[1, 1, 1], [0, 1, 1], [0, 0, 1], [0, 0, 1]]
    assert padded["position_ids"].shape == (4, 4, 3) and padded["position_ids"][:, 2:].eq(0).all()
    assert torch.equal(padded["position_ids"][:, :2], inputs["position_ids"])
    # one row per patch or per image, not per photo: never padded (two images here, as two rows would be)
    assert padded["pixel_values"] is inputs["pixel_values"] and padded["image_grid_thw"] is inputs["image_grid_thw"]
    assert pad_rows(inputs, 2, 99) is inputs


@pytest.mark.parametrize("first, rows, done", [(2, 4, [False, False, True, True]), (4, 4, [False] * 4),
                                               (0, 2, [True, True])])
def test_padded_rows_are_finished_from_the_first_step(first, rows, done):
    assert PaddedRowsDone(first)(torch.zeros(rows, 5, dtype=torch.long), None).tolist() == done


def test_output_is_cut_to_the_real_rows():
    from transformers.generation.utils import GenerateDecoderOnlyOutput
    out = GenerateDecoderOnlyOutput(sequences=torch.arange(12).reshape(4, 3),
                                    scores=(torch.zeros(4, 9), torch.ones(4, 9)))
    cut = cut_rows(out, 2)
    assert cut.sequences.tolist() == [[0, 1, 2], [3, 4, 5]] and [s.shape[0] for s in cut.scores] == [2, 2]
    assert cut_rows(torch.arange(8).reshape(4, 2), 3).shape == (3, 2)


@pytest.mark.parametrize("prompt, new, length", [(1, 1, CACHE_STEP), (CACHE_STEP - 32, 32, CACHE_STEP),
                                                 (CACHE_STEP - 31, 32, 2 * CACHE_STEP), (890, 32, 1024)])
def test_the_cache_is_sized_in_steps_so_that_nearby_prompts_share_one_graph(prompt, new, length):
    assert cache_length(prompt, new) == length


def _holder():
    """A model as CompiledDecode sees it before any call: its (real, tiny) text config."""
    from types import SimpleNamespace

    from transformers import Qwen2Config
    return SimpleNamespace(config=Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                              num_attention_heads=2, num_key_value_heads=1))


def test_a_prompt_that_fills_the_cache_exactly_reuses_it_and_one_longer_makes_a_larger_one():
    """Planted: the cache remade when prompt + new tokens equal its length (`>=`) -> a compile per such batch."""
    run = CompiledDecode(_holder(), 4, backend="eager")
    calls = [((100, 32), 1, CACHE_STEP), ((CACHE_STEP - 32, 32), 1, CACHE_STEP),
             ((CACHE_STEP - 31, 32), 2, 2 * CACHE_STEP), ((10, 32), 2, 2 * CACHE_STEP)]
    first = None
    for (prompt, new), compiles, length in calls:
        cache = run._cache_for(prompt, new)
        first = first or cache
        assert (run.compiles, run.cache_len) == (compiles, length), (prompt, new)
        assert (cache is first) == (compiles == 1)


@pytest.mark.parametrize("rows, padded_to, eager", [(2, 2, True), (1, 1, True), (3, 4, False), (4, 4, False)])
def test_half_a_batch_or_less_runs_as_ms_swift_runs_it_and_more_is_padded_to_the_batch(rows, padded_to, eager):
    """A call of at most half the batch goes to generate untouched (dynamic cache, no padding); a larger one is padded
    to the batch, gets the static cache and a stop for its padding rows, and comes back cut to its own rows.
    Planted: `2 * n < batch` -> a half batch padded to the full one (twice the prefill)."""
    from transformers import GenerationConfig
    seen = {}

    def generate(generation_config=None, stopping_criteria=None, past_key_values=None, **inputs):
        seen.update(rows=inputs["input_ids"].shape[0], cache=past_key_values, stops=list(stopping_criteria or []))
        return torch.zeros(inputs["input_ids"].shape[0], 9, dtype=torch.long)

    run = CompiledDecode(_holder(), 4, backend="eager")
    ones = torch.ones(rows, 5, dtype=torch.long)
    inputs = {"input_ids": ones, "attention_mask": ones}
    out = run.generate(generate, generation_config=GenerationConfig(max_new_tokens=8, pad_token_id=0), **inputs)
    assert out.shape[0] == rows and seen["rows"] == padded_to
    assert (seen["cache"] is None, run.eager_calls, run.compiles) == ((True, 1, 0) if eager else (False, 0, 1))
    pads = [c for c in seen["stops"] if isinstance(c, PaddedRowsDone)]
    assert [c.first for c in pads] == ([rows] if padded_to > rows and not eager else [])


def test_an_unknown_backend_is_refused_by_name():
    with pytest.raises(ValueError, match="'tensorrt'.*inductor, cudagraphs, eager"):
        CompiledDecode(torch.nn.Linear(1, 1), 4, backend="tensorrt")


# ---------------------------------------------------------------------------------------------------------
# Through ms-swift's engine: the same summaries, compiled once
# ---------------------------------------------------------------------------------------------------------
def _engine_and_pairs(model, synthetic, tmp_path, n_photos):
    from qc_core.checkpoints import resolve_model
    from stage_a.engine import SwiftSummaryEngine
    from qc_core.images import load_photo
    from qc_core.missions import load_registry
    from stage_a.prompts import stage_a_messages
    synthetic.generate(tmp_path, seed=5, groups_per_label=2, missions=M)
    photos = sorted(tmp_path.rglob("*.jpg"))[:n_photos]
    assert len(photos) == n_photos
    engine = SwiftSummaryEngine(resolve_model(str(model)), batch_size=4, max_pixels=12_544, max_new_tokens=10)
    messages = stage_a_messages(load_registry().resolve(M))
    return engine, messages, [(messages, load_photo(p, max_pixels=12_544)) for p in photos]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
def test_compiled_decode_gives_ms_swifts_summaries_for_full_padded_and_small_batches(arch, tiny_model_factory,
                                                                                    synthetic, tmp_path):
    """Batches of 4 (full), 3 (padded to 4) and 2 (half: run uncompiled), against the same engine without it. The
    decode step is traced once for all of them (the padding is what keeps one shape), and the warm-up made it."""
    import torch._dynamo
    from torch._dynamo.utils import counters
    engine, messages, pairs = _engine_and_pairs(tiny_model_factory(arch), synthetic, tmp_path, 9)
    calls = [pairs[:4], pairs[4:7], pairs[7:9]]
    eager = [[s.text for s in engine.summarize(c)] for c in calls]
    torch._dynamo.reset()
    counters.clear()
    seconds = engine.start_compiled_decode("eager", 4, messages)
    assert seconds > 0 and engine.compiled_decode.compiles == 1
    traced = counters["stats"]["unique_graphs"]
    assert traced >= 1   # the warm-up compiled the decode step
    compiled = [[s.text for s in engine.summarize(c)] for c in calls]
    assert compiled == eager and all(all(t) for t in eager)
    assert counters["stats"]["unique_graphs"] == traced   # no new shape: nothing traced again
    assert engine.compiled_decode.compiles == 1 and engine.compiled_decode.eager_calls == 1
    assert not counters["graph_break"]   # one graph per step: what a CUDA graph captures whole
    # outside our calls, the engine is ms-swift's own again
    assert "generate" not in vars(engine.engine.model)


@pytest.mark.slow
def test_a_longer_prompt_than_the_cache_holds_gets_a_larger_cache_and_says_so(tiny_qwen2_5_vl, synthetic, tmp_path,
                                                                              caplog):
    engine, messages, pairs = _engine_and_pairs(tiny_qwen2_5_vl, synthetic, tmp_path, 4)
    engine.start_compiled_decode("eager", 4, messages)
    first = engine.compiled_decode.cache_len
    engine.compiled_decode.cache_len = 8   # as if the warm-up's prompt had been short
    with caplog.at_level(logging.WARNING, logger="group_qc.stage_a"):
        texts = [s.text for s in engine.summarize(pairs)]
    assert all(texts) and engine.compiled_decode.compiles == 2 and engine.compiled_decode.cache_len == first
    assert "does not fit the static cache" in caplog.text


# ---------------------------------------------------------------------------------------------------------
# The Stage-A flag: checked before anything runs, and reaching the engine
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"compiled_decode": "fast"}, "--compiled_decode 'fast' is out of range: one of off, cudagraphs, inductor"),
    ({"compiled_decode": "cudagraphs", "infer_backend": "vllm"}, "the transformers engine only"),
])
def test_compiled_decode_settings_out_of_range_are_refused(options, message, tmp_path):
    from stage_a.runner import StageAOptions
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        StageAOptions(input_dir=str(tmp_path), output_dir=str(tmp_path), model="m", **options).validate()


@pytest.mark.slow
def test_the_flag_reaches_the_engine_and_the_jsonl_is_the_same(tiny_qwen2_5_vl, synthetic, tmp_path, caplog):
    """`group-qc stage-a --compiled_decode cudagraphs` on a CPU: warned (transformers does not compile there),
    the warm-up logged with its batch and cache, every call through the static cache, the same records."""
    from stage_a.cli import main
    synthetic.generate(tmp_path / "photos", seed=3, groups_per_label=2, missions=M)
    common = ["--input_dir", str(tmp_path / "photos"), "--model", str(tiny_qwen2_5_vl), "--mission", M,
              "--batch_size", "4", "--max_pixels", "12544", "--max_new_tokens", "8", "--no_progress"]
    assert main([*common, "--output_dir", str(tmp_path / "plain")]) == 0
    with caplog.at_level(logging.INFO, logger="group_qc.stage_a"):
        assert main([*common, "--output_dir", str(tmp_path / "compiled"), "--compiled_decode", "cudagraphs"]) == 0
    assert "--compiled_decode cudagraphs on a CPU" in caplog.text
    assert "compiled and captured for batches of 4" in caplog.text

    def summaries(folder):
        lines = (tmp_path / folder / f"{M}_stage_a.jsonl").read_text(encoding="utf-8").splitlines()
        return {r["group_id"]: r["per_image"] for r in map(json.loads, lines)}
    assert summaries("compiled") == summaries("plain") and summaries("plain")
