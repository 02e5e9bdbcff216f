"""The vision tower attends its windows one call per window length (stage_a/vision_windows.py), with the same
arithmetic as transformers' call per window: equal tower outputs for both architectures, far fewer attention calls,
the language model's attention untouched, and the same Stage-A summaries as bare ms-swift (slow); which positions
share a window length (not slow)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch.overrides import TorchFunctionMode  # noqa: E402

from stage_a.vision_windows import NAME, WindowBatches  # noqa: E402


class AttentionCalls(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.count += func is torch.nn.functional.scaled_dot_product_attention
        return func(*args, **(kwargs or {}))


@pytest.fixture(scope="module")
def models(tiny_qwen2_5_vl, tiny_qwen3_vl):
    from transformers import AutoModelForImageTextToText, AutoProcessor
    out = {}
    for arch, path in (("qwen2_5_vl", tiny_qwen2_5_vl), ("qwen3_vl", tiny_qwen3_vl)):
        model = AutoModelForImageTextToText.from_pretrained(str(path), attn_implementation="sdpa").eval()
        out[arch] = (model, AutoProcessor.from_pretrained(str(path)))
    return out


def tower(model, processor, images):
    """The vision tower's output for the photos, as the model's forward computes it, and the attention calls made."""
    inputs = processor.image_processor(images=images, return_tensors="pt")
    with torch.inference_mode(), AttentionCalls() as calls:
        features = model.model.get_image_features(inputs["pixel_values"], inputs["image_grid_thw"])
    features = getattr(features, "pooler_output", features)
    return torch.cat(list(features)), calls.count


# (width, height) per photo; then whether fewer attention calls are expected on (Qwen2.5-VL, Qwen3-VL). Qwen2.5-VL
# cuts each photo into 8x8-patch windows, edge windows shorter; Qwen3-VL attends each photo whole, so only photos of
# equal size share a call.
SIZES = {
    "one small photo": ([(56, 56)], (False, False)),
    "a photo with edge windows": ([(364, 252)], (True, False)),
    "a batch of mixed sizes": ([(364, 252), (112, 112), (252, 476), (56, 84)], (True, False)),
    "a batch of equal sizes": ([(364, 252)] * 3, (True, True)),
}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
@pytest.mark.parametrize("case", list(SIZES))
def test_the_tower_gives_the_same_output_with_fewer_attention_calls(models, arch, case):
    from PIL import Image
    model, processor = models[arch]
    sizes, fewer = SIZES[case]
    images = [Image.new("RGB", size, (7 * k, 90, 160)) for k, size in enumerate(sizes)]
    images = [im.point(lambda v, k=k: (v * 31 + k * 17) % 256) for k, im in enumerate(images)]
    per_window, loop_calls = tower(model, processor, images)
    with WindowBatches(model) as windows:
        assert windows.configs and all(c._attn_implementation == NAME for c in windows.configs)
        assert model.config.text_config._attn_implementation == "sdpa"   # the language model keeps its own
        by_length, batched_calls = tower(model, processor, images)
    assert torch.equal(by_length, per_window)
    assert batched_calls < loop_calls if fewer[arch == "qwen3_vl"] else batched_calls == loop_calls
    assert all(c._attn_implementation == "sdpa" for c in windows.configs)   # back after the block


@pytest.mark.slow
@pytest.mark.parametrize("cuts", [None, [0, 5, 12, 17, 20]])
def test_the_attention_function_attends_each_piece_alone(cuts):
    """Called directly: without cut points (a call transformers 5.19 does not make for these towers) the whole input
    is one piece; with them each piece attends only itself, as one sdpa call per piece would."""
    from stage_a.vision_windows import attention_by_window_length
    torch.manual_seed(0)
    query, key, value = (torch.randn(1, 2, 20, 8) for _ in range(3))
    bounds = cuts or [0, 20]
    expected = torch.cat([torch.nn.functional.scaled_dot_product_attention(
        query[:, :, a:b], key[:, :, a:b], value[:, :, a:b]) for a, b in zip(bounds, bounds[1:])], dim=2).transpose(1, 2)
    got, _ = attention_by_window_length(None, query, key, value, scaling=8 ** -0.5,
                                        cu_seq_lens_q=None if cuts is None else torch.tensor(cuts))
    assert got.shape == (1, 20, 2, 8)
    torch.testing.assert_close(got, expected)


@pytest.mark.slow
def test_stage_a_summaries_equal_bare_ms_swift_with_many_windows(tiny_qwen2_5_vl):
    """Our engine calls (window batches on) and bare engine.infer (transformers' call per window) on photos of
    dozens of windows: the same replies."""
    from PIL import Image
    from swift.infer_engine import InferRequest

    from qc_core.checkpoints import resolve_model
    from stage_a.engine import SwiftSummaryEngine
    from qc_core.missions import load_registry
    from stage_a.prompts import stage_a_messages

    engine = SwiftSummaryEngine(resolve_model(str(tiny_qwen2_5_vl)), batch_size=4, max_new_tokens=8,
                                max_pixels=448 * 336)
    messages = stage_a_messages(load_registry().resolve("BBU接地线检查"))
    images = [Image.new("RGB", (448 - 28 * k, 336), (40 * k, 90, 160)).point(lambda v, k=k: (v * 13 + k) % 256)
              for k in range(4)]
    with AttentionCalls() as ours_calls:
        ours = engine.summarize([(messages, im) for im in images])
    with AttentionCalls() as bare_calls:
        bare = engine.engine.infer([InferRequest(messages=messages, images=[im]) for im in images],
                                   engine.request_config, use_tqdm=False)
    assert [s.text for s in ours] == [r.choices[0].message.content for r in bare]
    assert ours_calls.count < bare_calls.count


# planted-bug test (issue 36); not slow
def test_the_window_grouping_is_keyed_by_the_windows_in_their_order():
    """A landscape batch then a portrait one: the same window lengths in another order group other positions."""
    from stage_a.vision_windows import _groups
    first = {n: positions.tolist() for _, n, positions in _groups(torch.tensor([0, 4, 12]))}
    second = {n: positions.tolist() for _, n, positions in _groups(torch.tensor([0, 8, 12]))}
    assert first == {4: [0, 1, 2, 3], 8: list(range(4, 12))}
    assert second == {8: list(range(0, 8)), 4: [8, 9, 10, 11]}
