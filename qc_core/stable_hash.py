"""A stable 64-bit number for a text, the same on every machine and every run (Python's hash() is salted per
process): Stage-A's shards and Stage-B's train/validation split both draw on it. Pure (stdlib only)."""
from __future__ import annotations

import hashlib


def stable_u64(text: str) -> int:
    """The first 8 bytes of the text's SHA-1, big-endian: uniform in [0, 2**64)."""
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")
