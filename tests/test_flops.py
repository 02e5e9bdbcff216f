"""group_qc_dev.flops: model FLOPs per Stage-A photo and MFU, read against hand counts of the real sizes."""
from __future__ import annotations

import pytest

from group_qc_dev import flops, tiny_model


def preset_sizes(preset: str) -> flops.ModelSizes:
    dims = dict(tiny_model.PRESETS[preset])
    arch = dims.pop("arch")
    config = tiny_model.build_config(arch, dims.pop("layers"), dims.pop("hidden"), dims.pop("vision_depth"),
                                     dims.pop("vision_hidden"), dims.pop("init_std"), dtype="bfloat16", **dims)
    return flops.sizes_from_config(config)


def test_the_3b_presets_parameters_are_counted_where_each_token_goes():
    """Qwen2.5-VL-3B by hand: a vision block is qkv, proj and a gated MLP (with biases) and two norms; the patch
    embedding is 2x14x14x3 -> 1280; a decoder layer is q/k/v (biases), o, the gated MLP and two norms."""
    s = preset_sizes("qwen2_5_vl-3b")
    h, i = 1280, 3420
    block = (h * 3 * h + 3 * h) + (h * h + h) + 2 * (h * i + i) + (i * h + h) + 2 * h
    assert s.vision_per_patch == 32 * block + 2 * 14 * 14 * 3 * h
    d, ff, kv = 2048, 11008, 2 * 128
    layer = (d * d + d) + 2 * (d * kv + kv) + d * d + 3 * d * ff + 2 * d
    assert s.llm_per_token == 36 * layer
    assert s.lm_head == 151936 * d and s.llm_attention_width == d and s.llm_layers == 36
    # 28 windowed blocks of 8x8 patches, 4 blocks over the whole photo
    assert sorted(set(s.vision_window_patches)) == [0, 64] and s.vision_window_patches.count(0) == 4


def test_a_3b_photo_of_768_visual_tokens_costs_about_9_4_tflop():
    """The README's limit paragraph: 4.3 in the tower, 4.9 in the prefill, 0.2 in 32 decode steps."""
    s = preset_sizes("qwen2_5_vl-3b")
    patches = flops.photo_patches(896, 672, s, 602112)
    assert patches == 3072   # 768 visual tokens
    f = flops.photo_flops(s, patches, prompt_tokens=890, new_tokens=32)
    assert f["vision"] == pytest.approx(4.2e12, rel=0.05) and f["prefill"] == pytest.approx(5.0e12, rel=0.05)
    assert f["decode"] == pytest.approx(0.2e12, rel=0.1) and f["total"] == pytest.approx(9.4e12, rel=0.02)


@pytest.mark.parametrize("width, height, max_pixels", [
    (896, 672, 602112),        # already on the 28-pixel grid and at the bound
    (4000, 3000, 602112),      # scaled down under the bound
    (3000, 1000, 401408), (1000, 3000, 602112), (1001, 777, 602112),
    (20, 20, 602112),          # scaled up to 4 merged tokens
    (224, 168, 37632),
])
def test_photos_are_resized_as_qwen_vl_utils_resizes_them(width, height, max_pixels):
    from qwen_vl_utils import smart_resize
    s = preset_sizes("qwen2_5_vl-3b")
    h, w = smart_resize(height, width, factor=28, min_pixels=4 * 28 * 28, max_pixels=max_pixels)
    assert flops.photo_patches(width, height, s, max_pixels) == (h // 14) * (w // 14)


@pytest.mark.parametrize("device, peak", [("NVIDIA H100 PCIe", 756e12), ("NVIDIA H100 80GB HBM3", 989e12),
                                          ("NVIDIA H200", 989e12), ("NVIDIA A100-SXM4-80GB", 312e12),
                                          ("CPU (2 cores, 2 threads)", None)])
def test_the_peak_is_the_cards_dense_bf16_rate_by_name(device, peak):
    assert flops.peak_flops(device) == peak
    assert flops.peak_flops(device, peak_tflops=100) == 100e12


def test_mfu_of_the_h200_run():
    """docs/gpu/h200_gpu_check_engine_changes.json: ours 16.68 photos/s at batch auto, 9.42 TFLOP per photo."""
    assert flops.mfu(9.42e12, 16.68, 989e12) == pytest.approx(0.159, abs=0.001)
    assert flops.mfu(9.42e12, 16.68, None) is None


def test_qwen3_vl_attends_every_photo_whole_and_uses_16_pixel_patches():
    s = preset_sizes("qwen3_vl-2b")
    assert set(s.vision_window_patches) == {0} and s.patch_size == 16
    assert flops.photo_patches(896, 672, s, 602112) == 56 * 42


def test_an_unknown_architecture_is_refused_by_name():
    from transformers import Qwen2Config
    with pytest.raises(ValueError, match="not model_type 'qwen2'"):
        flops.sizes_from_config(Qwen2Config())
