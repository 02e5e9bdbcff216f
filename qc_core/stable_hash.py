"""A stable 64-bit number for a text, the same on every machine and every run (Python's hash() is salted per
process): Stage-A's shards and Stage-B's train/validation split both draw on it. Pure (stdlib only)."""
from __future__ import annotations

import hashlib


def unit_draw(*parts) -> float:
    """A number in [0, 1) fixed by `parts` (the first 8 bytes of the SHA-256 of the parts joined by NUL, over 2**64):
    the seeded draws of blind audits (stage_b.rules.routes), reviewer assignment (stage_b.labels.assign) and the
    demo's careless reviewer."""
    digest = hashlib.sha256("\0".join(str(p) for p in parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def stable_u64(text: str) -> int:
    """The first 8 bytes of the text's SHA-1, big-endian: uniform in [0, 2**64)."""
    return int.from_bytes(hashlib.sha1(text.encode("utf-8")).digest()[:8], "big")
