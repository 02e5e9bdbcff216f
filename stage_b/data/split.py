"""Deterministic train/validation split by group id. Pure.

A group's split depends only on its id, the ratio and the seed (SHA-1, not Python's salted hash), so
training, preflight and evaluation agree on every machine and no group ever leaks across."""
from __future__ import annotations

from qc_core.errors import UserError
from qc_core.stable_hash import stable_u64

DEFAULT_VAL_RATIO = 0.2
SPLITS = ("train", "val", "all")


def split_of(group_id: str, val_ratio: float = DEFAULT_VAL_RATIO, seed: int = 0) -> str:
    position = stable_u64(f"{seed}:{group_id}") / 2**64   # uniform in [0, 1)
    return "val" if position < val_ratio else "train"


def in_split(group_id: str, split: str, val_ratio: float = DEFAULT_VAL_RATIO, seed: int = 0) -> bool:
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; use one of {', '.join(SPLITS)}")
    return split == "all" or split_of(group_id, val_ratio, seed) == split
