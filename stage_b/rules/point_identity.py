"""What an operating point is, whatever its file's bytes: the identity every record of it keys on (the days judged at
it, its withdrawals, the owner's acceptances, its monitor). Pure (stdlib).

A QC owner signs a promise, not a file: the same point reformatted by an editor (a final newline, CRLF line ends,
keys in another order, 0.10 for 0.1), copied, renamed or reached through a symlink is the same point, with the same
earlier days and the same withdrawal; a point whose promise changed in any way is another, which must be certified
(and, if weaker, accepted). The identity is the SHA-256 of the canonical JSON (sorted keys, no spaces) of what the
promise is:

- the model and each adapter by content (their fingerprints, never their paths: a moved checkpoint is the same one);
- every mission's entry as the file holds it (targets, confidence, thresholds, bounds, the validation profile and
  counts it rests on, the Stage-A model and how recent its evidence is) and the pooled `overall`;
- the point's own settings (format, rule, review share, confidence, family statement, evidence, automation) and what
  its evaluation read, without paths (`data`: split, mode, the groups per mission, the train overlap, citations).

Left out: where the file was written (`written_in`), the paths `data` names, and `replaces` (what a point replaced
is history, not part of the promise; the judge recomputes it from the replaced file: stage_b.rules.replacement).
A record written before identities (a verdict line, a withdrawal) names the file's sha256: PointKeys matches either.
"""
from __future__ import annotations

import hashlib
import json
from typing import NamedTuple
from qc_core.jsonl import file_sha256

PREFIX = "point-"
DATA_KEYS = ("split", "mode", "groups", "train_overlap", "reason_citations")
LEFT_OUT = ("written_in", "replaces", "data", "model", "adapters")


def _checkpoint(entry) -> object:
    """A checkpoint as the identity knows it: its fingerprint (content), or the entry without its path."""
    if isinstance(entry, dict):
        if entry.get("fingerprint"):
            return {"fingerprint": entry["fingerprint"]}
        return {k: v for k, v in entry.items() if k != "path"}
    return entry


def promise_content(op: dict) -> dict:
    """The part of an operating point file's content its identity covers (module doc)."""
    given_data, given_adapters = op.get("data"), op.get("adapters")
    data: dict = given_data if isinstance(given_data, dict) else {}
    adapters: list = given_adapters if isinstance(given_adapters, list) else []
    return {**{k: v for k, v in op.items() if k not in LEFT_OUT},
            "model": _checkpoint(op.get("model")), "adapters": [_checkpoint(a) for a in adapters],
            "data": {k: data[k] for k in DATA_KEYS if k in data}}


def point_identity(op: dict) -> str:
    """`point-<sha256>` of the canonical JSON of promise_content(op)."""
    text = json.dumps(promise_content(op), ensure_ascii=False, sort_keys=True, separators=(",", ":"),
                      allow_nan=True)
    return PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()


class PointKeys(NamedTuple):
    """The names a record may give an operating point: its identity, and (records written before identities) the
    sha256 of the file's bytes as they are now."""
    identity: str
    file_sha256: str

    def names(self, recorded) -> bool:
        return recorded in (self.identity, self.file_sha256)




def same_point(keys: PointKeys | None, block) -> bool:
    """Whether a record's `{"identity", "sha256"}` block (monitor.json's operating_point, an operating point's
    `replaces`) names the point `keys` names; a block written before identities names it by the file's sha256."""
    if keys is None or not isinstance(block, dict):
        return False
    return keys.names(block.get("identity")) or keys.names(block.get("sha256"))


def keys_of(path, content: dict) -> PointKeys:
    """The point's keys from its file and the content read from it (stage_b.rules.operating_point)."""
    return PointKeys(point_identity(content), file_sha256(path))


__all__ = ["PREFIX", "PointKeys", "point_identity", "promise_content", "same_point", "keys_of"]
