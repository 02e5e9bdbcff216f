"""FLOPs per Stage-A photo and model FLOPs utilisation (MFU), so that photos/s on any card reads against its limit.

Method: the model FLOPs of a forward pass are 2 per parameter per token for every weight matrix the token passes
through (Kaplan et al. 2020, "Scaling Laws for Neural Language Models", sec. 2.1), plus attention's score and value
products, 2 x 2 x (keys attended) x (attention width) per token per layer; MFU is those FLOPs per second over the
card's peak dense bf16 rate (Chowdhery et al. 2022, "PaLM", appendix B: recomputation and padding do not count). For
one Stage-A photo:

- vision tower: every patch through the blocks and the patch embedding; every merged token (4 patches) through the
  merger (and Qwen3-VL's deepstack mergers); attention over the patch's window (Qwen2.5-VL's windowed blocks: 8x8
  patches) or over the whole photo (its full-attention blocks, every Qwen3-VL block);
- language model prefill: every prompt token (text and visual) through the decoder layers, causal attention (half of
  the prompt squared), the LM head on the last token only (what `generate` computes);
- decode: each new token through the layers and the LM head, attending to everything before it.

The parameter counts come from the checkpoint's own architecture built on torch's meta device (no memory, no
weights), so a real checkpoint and the random-weight preset of its size give the same numbers. For the 3B preset at
768 visual tokens and 32 new tokens this is about 9.4 TFLOP per photo (docs/gpu.md): 4.3 in the tower, 4.9 in
the prefill, 0.2 in the decode steps.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

# Peak dense bf16 tensor FLOP/s by card name (NVIDIA datasheets; the first name contained in the device's wins, so the
# more specific come first). A card not named here has no MFU unless --peak_tflops says its peak.
PEAK_BF16_DENSE = (
    ("H100 PCIe", 756e12), ("H100 NVL", 835e12), ("H100", 989e12), ("H200", 989e12), ("H800", 989e12),
    ("H20", 148e12), ("A100", 312e12), ("A800", 312e12), ("L40S", 362e12), ("L40", 181e12), ("L4", 121e12),
    ("A10", 125e12),
)


@dataclass(frozen=True)
class ModelSizes:
    """What a photo's FLOPs depend on, read from a checkpoint's architecture."""
    vision_per_patch: int          # parameters every patch passes through (patch embedding, blocks)
    vision_per_merged: int         # parameters every merged token passes through (merger, deepstack mergers)
    vision_width: int              # the tower's attention width (hidden size)
    vision_blocks: int
    vision_window_patches: tuple   # per block: patches attended per patch (0 = the whole photo)
    patch_size: int
    merge: int                     # spatial merge size: merge x merge patches make one visual token
    llm_per_token: int             # parameters every language-model token passes through (decoder layers)
    llm_attention_width: int       # heads x head_dim
    llm_layers: int
    lm_head: int                   # vocab x hidden


def sizes_from_config(config) -> ModelSizes:
    """ModelSizes of a transformers Qwen2.5-VL / Qwen3-VL config, counted on the meta device."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration
    cls = {"qwen2_5_vl": Qwen2_5_VLForConditionalGeneration, "qwen3_vl": Qwen3VLForConditionalGeneration}.get(
        config.model_type)
    if cls is None:
        raise ValueError(f"FLOPs are counted for Qwen2.5-VL and Qwen3-VL, not model_type {config.model_type!r}")
    with torch.device("meta"):
        model = cls(config)

    def count(*prefixes):
        return sum(p.numel() for n, p in model.named_parameters() if n.startswith(prefixes))
    vision, text = config.vision_config, config.text_config
    full = set(getattr(vision, "fullatt_block_indexes", None) or range(vision.depth))
    window = (getattr(vision, "window_size", 0) // vision.patch_size) ** 2 if len(full) < vision.depth else 0
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return ModelSizes(
        vision_per_patch=count("model.visual.patch_embed.", "model.visual.blocks.", "model.visual.pos_embed."),
        vision_per_merged=count("model.visual.merger.", "model.visual.deepstack_merger_list."),
        vision_width=vision.hidden_size, vision_blocks=vision.depth,
        vision_window_patches=tuple(0 if k in full else window for k in range(vision.depth)),
        patch_size=vision.patch_size, merge=vision.spatial_merge_size,
        llm_per_token=count("model.language_model.layers."), llm_attention_width=text.num_attention_heads * head_dim,
        llm_layers=text.num_hidden_layers, lm_head=text.vocab_size * text.hidden_size)


def sizes_of(model_dir: str | Path) -> ModelSizes:
    from transformers import AutoConfig
    return sizes_from_config(AutoConfig.from_pretrained(str(model_dir)))


def photo_patches(width: int, height: int, sizes: ModelSizes, max_pixels: int) -> int:
    """Patches of one photo after Qwen-VL's resize (qwen_vl_utils.smart_resize: sides rounded to the patch x merge
    factor, scaled down to max_pixels, up to 4 merged tokens at least)."""
    factor = sizes.patch_size * sizes.merge
    min_pixels = 4 * factor * factor
    h, w = max(factor, round(height / factor) * factor), max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return (h // sizes.patch_size) * (w // sizes.patch_size)


def photo_flops(sizes: ModelSizes, patches: int, prompt_tokens: float, new_tokens: float) -> dict:
    """Model FLOPs of one photo: its `patches` through the tower, a prompt of `prompt_tokens` (visual tokens
    included) through the prefill, `new_tokens` generated. Returns the parts and their total."""
    merged = patches / sizes.merge ** 2
    attended = sum(patches if w == 0 else min(w, patches) for w in sizes.vision_window_patches)
    vision = 2 * patches * sizes.vision_per_patch + 2 * merged * sizes.vision_per_merged + \
        4 * patches * attended * sizes.vision_width
    prefill = 2 * prompt_tokens * sizes.llm_per_token + 2 * prompt_tokens ** 2 * sizes.llm_attention_width * \
        sizes.llm_layers + 2 * sizes.lm_head
    steps = max(new_tokens - 1, 0)   # the first new token comes out of the prefill
    decode = steps * (2 * sizes.llm_per_token + 2 * sizes.lm_head) + \
        4 * sizes.llm_attention_width * sizes.llm_layers * (steps * prompt_tokens + steps * (steps + 1) / 2)
    return {"vision": vision, "prefill": prefill, "decode": decode, "total": vision + prefill + decode}


def peak_flops(device: str, peak_tflops: float | None = None) -> float | None:
    """The card's peak dense bf16 FLOP/s: `peak_tflops` when given, else by name; None for a card not known (a CPU)."""
    if peak_tflops:
        return peak_tflops * 1e12
    return next((peak for name, peak in PEAK_BF16_DENSE if name in device), None)


def mfu(flops_per_photo: float, photos_per_s: float, peak: float | None) -> float | None:
    return flops_per_photo * photos_per_s / peak if peak else None


def config_of(model_dir: str | Path) -> dict:
    return json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))
