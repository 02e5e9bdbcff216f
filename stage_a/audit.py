"""`group-qc stage-a-review`: audit Stage-A summaries against the photos before anyone trains on them.

    group-qc stage-a-review --stage_a_dir DIR --output_dir DIR [--input_dir DIR] [--mission all]
                            [--per_mission 20] [--seed 0]

Writes <output_dir>/review/index.html: per mission, every group Stage-A could not write (with its error) first,
then a random sample of --per_mission written groups, each with its photos in 图片_i order and the summary under
each. Photos are shown only from --input_dir (the records' own `input_dir` is data: it is named, not followed).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import run_cli
from qc_core.jsonl import file_sha256, iter_jsonl, record_digest
from qc_core.missions import load_registry
from qc_core.paths import with_input_dir_resolved
from .discovery import _scan_group
from .outputs import MissionOutputs
from qc_core.records import summaries_of
from review.page import LABEL_TEXT, render_review, report

OUTCOMES = [("error", "Stage-A error"), ("sample", "sampled group")]


def _photos_in(folder: Path) -> list[str]:
    """The group folder's photos in discovery's order (none when the folder is gone)."""
    return _scan_group(folder, str(folder))[0] if folder.is_dir() else []


def audit_cards(stage_a_dir: Path, missions, per_mission: int, seed: int,
                sources: list[dict] | None = None) -> tuple[list[dict], list[str | None], list[list]]:
    """(cards, the input folders the records name (None for one that names none), per-mission counts for the summary
    table). Each sampled card names its Stage-A file (appended to `sources`), so a reviewer's decision on it can
    become a label."""
    cards, input_dirs, table = [], [], []
    sources = [] if sources is None else sources
    for mission in missions:
        outputs = MissionOutputs(stage_a_dir, mission.stage_a_stem)
        main, errors = outputs.merged_main, outputs.merged_errors
        records = [r for _, r in iter_jsonl(main)] if main.is_file() else []
        failed = [r for _, r in iter_jsonl(errors)] if errors.is_file() else []
        if not records and not failed:
            continue
        input_dirs += [with_input_dir_resolved(r, main.parent).get("input_dir") for r in records]   # stored relative
        for e in failed:
            folder = e.get("path") or ""
            cards.append({"group_id": e.get("group_id") or folder, "mission": mission.name, "outcome": "error",
                          "facts": [("stage", e.get("stage")), ("reviewer", LABEL_TEXT.get(e.get("label")))],
                          "reason": None,
                          "error": e.get("error"), "images": [], "summaries": [], "folder": folder})
        source = None
        if records:
            sources.append({"file": str(main.resolve()), "sha256": file_sha256(main)})
            source = len(sources) - 1
        sample = random.Random(f"{seed}:{mission.name}").sample(records, min(per_mission, len(records)))
        order = {id(r): k for k, r in enumerate(records)}
        for r in sorted(sample, key=lambda r: order[id(r)]):
            cards.append({"group_id": r["group_id"], "mission": mission.name, "outcome": "sample",
                          "facts": [("reviewer", LABEL_TEXT.get(r.get("label"))), ("photos", len(r["images"])),
                                    ("model", r.get("model"))],
                          "reason": None, "error": None, "images": r["images"], "summaries": summaries_of(r),
                          "source": source, "seen": record_digest(r)})
        table.append([mission.name, len(records), len(failed), len(sample)])
    return cards, input_dirs, table


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc stage-a-review", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--stage_a_dir", required=True, help="Stage-A output folder (<mission>_stage_a.jsonl)")
    p.add_argument("--output_dir", required=True, help="the page goes to <output_dir>/review/index.html")
    p.add_argument("--input_dir", help="where the photos are; without it the page names the folder the records say "
                                       "and shows no photo")
    p.add_argument("--mission", default="all")
    p.add_argument("--per_mission", type=int, default=20, help="groups sampled per mission (errors: all)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    return run_cli(lambda: _review(args))


def _review(args) -> int:
    stage_a_dir = Path(args.stage_a_dir)
    if not stage_a_dir.is_dir():
        raise FileNotFoundError(f"--stage_a_dir {stage_a_dir} does not exist")
    if args.per_mission < 0:
        raise UserError(f"--per_mission {args.per_mission} is out of range: use 0 or more")
    missions = load_registry().select(args.mission)
    sources: list[dict] = []
    cards, named, table = audit_cards(stage_a_dir, missions, args.per_mission, args.seed, sources)
    if not table:
        raise FileNotFoundError(f"no Stage-A output for {args.mission!r} in {stage_a_dir}")
    input_dirs = [Path(args.input_dir)] if args.input_dir else []   # the command's folder only (page_photo_folders)
    for card in cards:   # an error group's photos, where its folder still has them
        if card["outcome"] == "error" and card.get("folder") and input_dirs:
            card["images"] = [f"{card['folder']}/{n}" for n in _photos_in(input_dirs[0] / card["folder"])]
    result = render_review(Path(args.output_dir), title=f"Stage-A audit: {stage_a_dir}", cards=cards,
                           outcomes=OUTCOMES, input_dirs=input_dirs, named_dirs=named, sources=sources,
                           intro=[f"Every group Stage-A could not "
                                  f"write comes first, with its error; then {args.per_mission} sampled groups per "
                                  f"mission. Check that each summary says what its photo shows."],
                           tables=[{"title": "Per mission",
                                    "columns": ["mission", "groups written", "errors", "sampled"],
                                    "rows": table}])
    report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
