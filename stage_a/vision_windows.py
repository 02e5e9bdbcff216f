"""Qwen-VL's vision tower without flash-attn: one attention call per window length, not one per window (an adapter:
imports torch and transformers).

transformers' Qwen2.5-VL and Qwen3-VL vision attention, with any attention but flash-attention (no flash-attn
package: every CPU, and the GPU image we were lent), cuts the batch's patches at `cu_seqlens` and attends each piece
in its own call. Qwen2.5-VL attends within 8x8-patch windows in 28 of its 32 blocks: a photo of 768 visual tokens is
48 windows, so a batch of 16 such photos costs 28 x 768 + 4 x 16 = 21,568 attention calls per forward, each a few
kernel launches. On the H200 Stage-A spent 55-144 ms per photo outside the decode steps (batch 8 against 16,
docs/gpu/h200_bench_stage_a.json; docs/gpu.md), where its FLOPs need ~10 ms at peak. Counted on the 3B
model's skeleton (group_qc_dev/count_ops.py): 1,348 attention calls and ~2,900 torch ops per photo in the tower, 37-54
ms at the 13-19 us per op the H200's decode steps imply; with this module 190 ops per photo at batch 16, 69 at 64
(measured on the H200: Stage-A 1.14-1.71x faster with this module than with a call per window at batch 16-128, and the
time per photo outside the decode steps 54 ms; docs/gpu/h200_gpu_check_engine_changes.json).

Here the pieces of one length are gathered into one batch and attended in one call of transformers' own sdpa
function: the same arithmetic per piece, a few calls per block. transformers hands `cu_seqlens` to the attention
function only when the implementation's name contains "flash" (`is_flash_attention_requested`), hence the name
under which this one is registered; it is set on the vision config alone, never on the language model's.
"""
from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "sdpa_by_window_length_flash_api"
VISION_ATTENTION = ("Qwen2_5_VLVisionAttention", "Qwen3VLVisionAttention")


_GROUPS: dict = {}   # (cu_seqlens values, device) -> _groups' answer, for the last few seen


def _groups(cu_seqlens: torch.Tensor) -> list[tuple[int, int, torch.Tensor]]:
    """[(pieces, length, positions (pieces * length,))] per piece length; the same for every windowed block of one
    forward (and for every full-attention block), so built once per forward and kept for the last few seen."""
    bounds = (tuple(cu_seqlens.tolist()), str(cu_seqlens.device))   # one device-to-host copy per block
    if bounds not in _GROUPS:
        starts: dict[int, list[int]] = {}
        for start, end in zip(bounds[0], bounds[0][1:]):
            if end > start:
                starts.setdefault(end - start, []).append(start)
        _GROUPS[bounds] = [(len(s), n, (torch.tensor(s)[:, None] + torch.arange(n)).reshape(-1).to(cu_seqlens.device))
                           for n, s in starts.items()]
        while len(_GROUPS) > 4:
            _GROUPS.pop(next(iter(_GROUPS)))
    return _GROUPS[bounds]


def attention_by_window_length(module, query, key, value, attention_mask=None, *, scaling=None, dropout=0.0,
                               cu_seq_lens_q=None, **kwargs):
    """query, key, value: (1, heads, patches, head_dim), the pieces back to back as `cu_seq_lens_q` cuts them.
    Returns (1, patches, heads, head_dim), as transformers' flash functions do."""
    heads, length, dim = query.shape[1], query.shape[2], query.shape[3]
    if cu_seq_lens_q is None:   # one piece: plain sdpa
        return sdpa_attention_forward(module, query, key, value, None, dropout=dropout, scaling=scaling,
                                      is_causal=False)
    out = query.new_empty(length, heads, dim)
    for pieces, n, positions in _groups(cu_seq_lens_q):
        def take(t):   # (1, heads, patches, dim) -> (pieces, heads, n, dim)
            return t[0][:, positions].reshape(heads, pieces, n, dim).transpose(0, 1)
        attended, _ = sdpa_attention_forward(module, take(query), take(key), take(value), None, dropout=dropout,
                                             scaling=scaling, is_causal=False)   # (pieces, n, heads, dim)
        out[positions] = attended.reshape(pieces * n, heads, dim)
    return out.unsqueeze(0), None


AttentionInterface.register(NAME, attention_by_window_length)


def vision_configs(model) -> list:
    """The vision configs whose attention modules cut their input into pieces (Qwen2.5-VL, Qwen3-VL) and run sdpa
    (the configs this module can switch; flash-attention and eager are left as they are)."""
    found = {}
    for module in model.modules():
        if type(module).__name__ in VISION_ATTENTION and module.config._attn_implementation in ("sdpa", NAME):
            found[id(module.config)] = module.config
    return list(found.values())


def use_window_batches(model) -> int:
    """Switch the model's vision attention to one call per window length for good; the number of configs switched."""
    return len(WindowBatches(model).__enter__().configs)


class WindowBatches:
    """`with WindowBatches(model):` the model's vision attention attends its pieces by length; sdpa again after."""

    def __init__(self, model):
        self.configs = vision_configs(model)

    def __enter__(self):
        for config in self.configs:
            config._attn_implementation = NAME
        return self

    def __exit__(self, *exc):
        for config in self.configs:
            config._attn_implementation = "sdpa"
