"""Where Stage-A writes, and which records already exist there. Pure (stdlib only).

Single process: <output_dir>/<mission>_stage_a.jsonl and <mission>_stage_a.errors.jsonl.
Shard i of n:   <mission>_stage_a.shard-0000i-of-0000n.jsonl (+ .errors.jsonl), merged later by
stage_a.merge into the single-process names.
"""
from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass
from pathlib import Path

from qc_core.errors import UserError
from qc_core.jsonl import OUTPUT_REMEDY, iter_jsonl
from qc_core.stable_hash import stable_u64

_SHARD_RE = re.compile(r"\.shard-(\d{5})-of-(\d{5})\.jsonl$")


def shard_of(key: str, num_shards: int) -> int:
    """Stable shard of a group id (or folder path): the same on every machine and every run,
    and unchanged for old groups when new groups arrive."""
    if num_shards <= 1:
        return 0
    return stable_u64(key) % num_shards


def _env_int(name: str, default: str) -> int:
    raw = os.environ.get(name, default)
    try:
        return int(raw)
    except ValueError:
        raise UserError(f"environment variable {name}={raw!r} is not a whole number (torchrun sets it): unset it, "
                         f"or pass --num_shards and --shard_index") from None


def shard_from_env(num_shards: int | None, shard_index: int | None) -> tuple[int, int]:
    """Explicit flags win; else torchrun's WORLD_SIZE/RANK; else a single shard."""
    if num_shards is None:
        num_shards = _env_int("WORLD_SIZE", "1")
    if shard_index is None:
        shard_index = _env_int("RANK", "0") if num_shards > 1 else 0
    return num_shards, shard_index


@dataclass(frozen=True)
class MissionOutputs:
    output_dir: Path
    stem: str              # "<mission>_stage_a"
    num_shards: int = 1
    shard_index: int = 0

    @property
    def sharded(self) -> bool:
        return self.num_shards > 1

    @property
    def mission_lock(self) -> Path:
        """One lock per mission over all its files: shards hold it shared, an unsharded run and a merge
        exclusively, so no run removes or rewrites a file another run may hold."""
        return self.output_dir / self.stem

    @property
    def merged_main(self) -> Path:
        return self.output_dir / f"{self.stem}.jsonl"

    @property
    def merged_errors(self) -> Path:
        return self.output_dir / f"{self.stem}.errors.jsonl"

    @property
    def main(self) -> Path:
        if not self.sharded:
            return self.merged_main
        return self.output_dir / f"{self.stem}.shard-{self.shard_index:05d}-of-{self.num_shards:05d}.jsonl"

    @property
    def errors(self) -> Path:
        return errors_of(self.main)

    def every_file(self) -> list[Path]:
        """All files of this mission's output: merged and shard parts, main and errors."""
        mains = [self.merged_main, *(p for _, _, p in self.part_files())]
        return [f for m in mains for f in (m, errors_of(m))]

    def part_files(self) -> list[tuple[int, int, Path]]:
        """Existing shard part files of this mission: (shard index, num shards, path)."""
        parts = []
        for path in sorted(self.output_dir.glob(f"{glob.escape(self.stem)}.shard-*-of-*.jsonl")):
            m = _SHARD_RE.search(path.name)
            if m and path.name.startswith(self.stem + ".shard-"):
                parts.append((int(m.group(1)), int(m.group(2)), path))
        return parts


def errors_of(main: Path) -> Path:
    """`<x>.jsonl` -> `<x>.errors.jsonl`: each main file's errors file beside it."""
    return main.with_name(main.name[: -len(".jsonl")] + ".errors.jsonl")


def existing_group_ids(path: Path) -> set[str]:
    """Group ids already recorded in a JSONL file (missing file: none)."""
    if not path.exists():
        return set()
    return {obj["group_id"] for _, obj in iter_jsonl(path, remedy=OUTPUT_REMEDY) if obj.get("group_id")}


def existing_error_keys(path: Path) -> tuple[set[str], set[tuple]]:
    """(group ids that failed, (path, error) keys of discovery issues) in an errors file."""
    failed, issues = set(), set()
    if path.exists():
        for _, obj in iter_jsonl(path, remedy=OUTPUT_REMEDY):
            if obj.get("stage") == "discovery":
                issues.add((obj.get("path"), obj.get("error")))
            elif obj.get("group_id"):
                failed.add(obj["group_id"])
    return failed, issues
