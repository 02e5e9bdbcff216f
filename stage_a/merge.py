"""`group-qc stage-a-merge --output_dir DIR [--mission all]`: join shard part files into
<mission>_stage_a.jsonl (and .errors.jsonl) in discovery order, each group once.

Refuses while any run of the mission holds its lock, or when a shard of the set is missing.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from qc_core.errors import UserError
from .discovery import path_order_key
from qc_core.exits import run_cli
from qc_core.jsonl import iter_jsonl, output_lock, write_jsonl_atomic
from qc_core.missions import load_registry
from .outputs import MissionOutputs
from qc_core.records import RecordError, validate_record

log = logging.getLogger("group_qc.stage_a.merge")


def merge_mission(output_dir: Path, stem: str, known_missions=None) -> tuple[int, int] | None:
    """Merge one mission's parts; returns (groups, errors) written, or None when it has no parts."""
    outputs = MissionOutputs(output_dir, stem)
    parts = outputs.part_files()
    if not parts:
        return None
    counts = {n for _, n, _ in parts}
    if len(counts) != 1:
        raise UserError(f"{stem}: shard parts from different --num_shards runs {sorted(counts)} in "
                         f"{output_dir}; remove the stale ones")
    (n,) = counts
    missing = sorted(set(range(n)) - {i for i, _, _ in parts})
    if missing:
        raise UserError(f"{stem}: shard(s) {missing} of {n} have no part file yet; run them first")
    with output_lock(outputs.mission_lock):  # refused (LockedError) while any shard or unsharded run writes
        records: dict[str, dict] = {}   # group id: its record
        # Parts first: they are newer than a merged file (a shard rerun with --overwrite redoes its groups).
        sources = [p for _, _, p in parts] + ([outputs.merged_main] if outputs.merged_main.exists() else [])
        for source in sources:
            for line_no, rec in iter_jsonl(source, on_torn=log.warning):   # finished parts: say what is skipped
                try:
                    validate_record(rec, known_missions)
                except RecordError as exc:
                    raise RecordError(f"{source}:{line_no}: {exc}") from None
                records.setdefault(rec["group_id"], rec)  # first wins: never a group twice
        ordered = sorted(records.values(), key=lambda r: (path_order_key(r["images"][0]), r["group_id"]))
        written = write_jsonl_atomic(outputs.merged_main, ordered)
        errors, seen = [], set()
        error_sources = [outputs.merged_errors] if outputs.merged_errors.exists() else []
        for source in error_sources + [MissionOutputs(output_dir, stem, n, i).errors for i in range(n)]:
            if source.exists():
                for _, rec in iter_jsonl(source, on_torn=log.warning):
                    key = (rec.get("group_id"), rec.get("path"), rec.get("error"))
                    if key not in seen and rec.get("group_id") not in records:
                        seen.add(key)
                        errors.append(rec)
        write_jsonl_atomic(outputs.merged_errors, errors)
    return written, len(errors)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc stage-a-merge", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output_dir", required=True, help="the Stage-A --output_dir the shards wrote to")
    p.add_argument("--mission", default="all", help="a mission name or alias, a list, or 'all'")
    p.add_argument("--missions_config", default=None, help="mission registry YAML")
    args = p.parse_args(argv)
    return run_cli(lambda: _merge(Path(args.output_dir), args.mission, args.missions_config))


def _merge(output_dir: Path, mission_spec: str, missions_config) -> int:
    registry = load_registry(missions_config)
    merged_any = False
    for mission in registry.select(mission_spec):
        result = merge_mission(output_dir, mission.stage_a_stem, registry.names)
        if result is not None:
            merged_any = True
            print(f"{mission.name}: {result[0]} groups, {result[1]} errors -> "
                  f"{output_dir / (mission.stage_a_stem + '.jsonl')}")
    if not merged_any:
        raise UserError(f"no shard part files under {output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
