"""`group-qc stage-a-convert --input FILE [--input FILE ...] --output_dir DIR [--overwrite]`: Stage-A files of the
project's public origin (github Pein2017/Qwen3-VL) rewritten in group-qc's format, one
<output_dir>/<mission>_stage_a.jsonl per mission (canonical name).

Stage-B reads origin files directly; converting gives files in the form group-qc itself writes, provenance
included, so every tool (and a Stage-A run resuming into the folder) treats them as its own. Each record goes
through qc_core.records.from_origin (timestamp -> created_at, image_k -> 图片_k with a count check, the origin's
label spellings -> pass/fail); its mission resolves through the registry (aliases -> canonical name); `model`
is set to "unknown (converted from FILE)" when absent and `created_at` to now when the record has neither it
nor a timestamp; the result must pass the writer's check. Image paths are kept as written: an absolute path stays
absolute when joined onto any input folder, so review pages find those photos (with `stage_a.audit`, any
--input_dir does). Other fields are kept as they are (readers ignore fields they do not know).

All or nothing: a record that cannot be converted (named FILE:LINE, with why: text that is not valid Unicode
included), a group twice in one mission (group ids compared NFC-normalised, as discovery has them), or an
existing output without --overwrite is refused with exit status 2 before anything is written, and each
output appears whole (temp file + rename).
"""
from __future__ import annotations

import argparse
import sys
import unicodedata
from contextlib import ExitStack
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import run_cli
from qc_core.jsonl import JsonlError, dumps_line, iter_jsonl, output_lock, write_jsonl_atomic
from qc_core.missions import Registry, load_registry
from .outputs import MissionOutputs
from qc_core.records import PROVENANCE_FIELDS, REQUIRED_FIELDS, from_origin, utc_now, validate_record

MAX_LISTED = 20   # problems listed in one refusal; the count says how many more


class ConvertError(UserError):
    """Input that cannot be converted, or an output that must not be replaced (names each file and line)."""


def unknown_model(source) -> str:
    """What `model` says for a record whose file never named the model that wrote it."""
    return f"unknown (converted from {source})"


def convert_record(record: dict, source, registry: Registry, now: str) -> dict:
    """One origin (or group-qc) record in group-qc's written form: our fields first, in order, then the rest.

    Raises RecordError or MissionError (both ValueError) saying why it cannot be converted."""
    out = from_origin(record)
    out.setdefault("model", unknown_model(source))
    out.setdefault("created_at", now)
    validate_record(out, provenance=True)
    out["mission"] = registry.resolve(out["mission"]).name
    # one group id however its characters are composed (NFC and NFD twins are one group, as discovery has them)
    out["group_id"] = unicodedata.normalize("NFC", out["group_id"])
    try:
        dumps_line(out).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(f"holds text that is not valid Unicode ({exc.reason}: a lone surrogate from a damaged "
                         f"file); fix or drop the record") from None
    ours = REQUIRED_FIELDS + PROVENANCE_FIELDS
    return {**{k: out[k] for k in ours}, **{k: v for k, v in out.items() if k not in ours}}


def convert_files(paths: list[Path], registry: Registry, now: str) -> tuple[dict[str, list[dict]], list[str]]:
    """({mission: records in input order}, one report line per file), or ConvertError listing every problem."""
    by_mission: dict[str, list[dict]] = {}
    seen: dict[tuple[str, str], str] = {}
    problems, reports = [], []
    for path in paths:
        if not path.is_file():
            problems.append(f"{path}: input file does not exist")
            continue
        counts: dict[str, int] = {}
        try:
            # A torn last line (a killed writer) is refused like any bad line: the group it held is incomplete.
            for line_no, raw in iter_jsonl(path, allow_torn_tail=False):
                where = f"{path}:{line_no}"
                try:
                    record = convert_record(raw, path, registry, now)
                except ValueError as exc:
                    problems.append(f"{where}: {exc}")
                    continue
                key = (record["mission"], record["group_id"])
                if key in seen:
                    problems.append(f"{where}: group {key[1]} of {key[0]} is also at {seen[key]}; keep one")
                    continue
                seen[key] = where
                by_mission.setdefault(record["mission"], []).append(record)
                counts[record["mission"]] = counts.get(record["mission"], 0) + 1
        except JsonlError as exc:
            problems.append(str(exc))
        missions = ", ".join(f"{m}: {n}" for m, n in counts.items())
        reports.append(f"{path}: {sum(counts.values())} record(s) converted" + (f" ({missions})" if missions else ""))
    if problems:
        more = f"\n  ... and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
        raise ConvertError(f"{len(problems)} problem(s), nothing written:\n  "
                           + "\n  ".join(problems[:MAX_LISTED]) + more)
    if not by_mission:
        raise ConvertError(f"no records in {', '.join(map(str, paths))}: nothing to convert")
    return by_mission, reports


def write_outputs(by_mission: dict[str, list[dict]], output_dir: Path, registry: Registry,
                  overwrite: bool) -> list[str]:
    """Each mission's records to its own file, atomically, under the mission's lock (a Stage-A run or merge
    of that mission is never overwritten mid-write). One report line per file."""
    outputs = [MissionOutputs(output_dir, registry.resolve(m).stage_a_stem) for m in by_mission]
    existing = [str(o.merged_main) for o in outputs if o.merged_main.exists()]
    if existing and not overwrite:
        raise ConvertError(f"output exists: {', '.join(existing)}; pass --overwrite to replace it, or choose "
                           f"another --output_dir")
    output_dir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as locks:
        for o in outputs:
            locks.enter_context(output_lock(o.mission_lock))
        return [f"{o.merged_main}: {write_jsonl_atomic(o.merged_main, records)} group(s)"
                for o, records in zip(outputs, by_mission.values())]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc stage-a-convert", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", action="append", required=True, metavar="FILE",
                   help="an origin Stage-A JSONL file; repeat for more")
    p.add_argument("--output_dir", required=True, help="where <mission>_stage_a.jsonl files are written")
    p.add_argument("--overwrite", action="store_true", help="replace output files that exist")
    p.add_argument("--missions_config", default=None, help="mission registry YAML")
    args = p.parse_args(argv)
    return run_cli(lambda: _convert([Path(f) for f in args.input], Path(args.output_dir), args.overwrite,
                                    args.missions_config))


def _convert(inputs: list[Path], output_dir: Path, overwrite: bool, missions_config) -> int:
    registry = load_registry(missions_config)
    by_mission, reports = convert_files(inputs, registry, utc_now())
    for line in reports + write_outputs(by_mission, output_dir, registry, overwrite):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
