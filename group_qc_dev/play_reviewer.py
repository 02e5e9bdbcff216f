#!/usr/bin/env python
"""The demo's reviewer: decides the judge's flagged and audited groups from the generator's truth and writes
decisions.jsonl exactly as a review page exports it (stage_b.labels.decisions.decision_line), for
`group-qc decisions`.

    python -m group_qc_dev.play_reviewer --photos DIR --verdicts_dir DIR --out decisions.jsonl [--all]
        [--reviewer demo] [--wrong_share 0.3] [--confirm_escapes_of decisions.jsonl]

DIR (--photos) is a folder written by group_qc_dev/synthetic.py (its ground_truth.jsonl knows each group's label);
--verdicts_dir holds `<mission>_verdicts.jsonl` from stage_b.judging.judge. Groups that need review are decided (--all:
every judged group), and so are the blind audits (route audit), each 通过 or 不通过 as the truth says (a gold check
as its known answer says). A day split among reviewers (judge --reviewers): each decides the groups assigned to them.
--wrong_share S: this reviewer answers a share S of their groups wrongly, drawn by a hash of the reviewer and group
(a careless reviewer, for the reviewer table).
--confirm_escapes_of FILE: a second person (a reviewer lead) decides only the escapes FILE found (blind audits of
auto-passed groups decided 不通过): stage_b.monitoring.monitor counts an escape one reviewer alone found once a second
person
confirms it.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from group_qc_dev.synthetic import groups_of, read_truth
from qc_core.stable_hash import unit_draw
from qc_core.jsonl import file_sha256, iter_jsonl, record_digest, write_jsonl_atomic
from qc_core.missions import load_registry
from stage_b.labels.decision_lines import decision_line
from stage_b.judging.verdict_file import verdicts_path
from stage_b.contract.verdict import FAIL, PASS


def wrong(reviewer: str, group_id: str, share: float) -> bool:
    return unit_draw("wrong", reviewer, group_id) < share


def escapes_in(decisions_file: Path) -> set[tuple[str, str]]:
    """(mission, group id) of each blind audit that `decisions_file` decided 不通过 (its line never shows the model's
    verdict: decide() keeps the auto-passed ones)."""
    return {(d["mission"], d["group_id"]) for _, d in iter_jsonl(decisions_file)
            if d["decision"] == FAIL and d.get("route") == "audit"}


def decide(photos: Path, verdicts_dir: Path, everything: bool = False, reviewer: str = "demo",
           wrong_share: float = 0.0, only: set | None = None) -> list[dict]:
    truth = {(g["mission"], g["group_id"]): g["label"] for g in groups_of(read_truth(photos))}
    lines = []
    for mission in load_registry().names:
        path = verdicts_path(verdicts_dir, mission)
        if not path.exists():
            continue
        source = {"file": str(path.resolve()), "sha256": file_sha256(path)}
        for _, v in iter_jsonl(path):
            if v.get("assigned_to") and reviewer not in v["assigned_to"] and only is None:
                continue   # another reviewer's group
            if only is not None and ((v["mission"], v["group_id"]) not in only or v["verdict"] != PASS):
                continue
            if everything or v["needs_review"] or v.get("route") == "audit":
                label = (v.get("gold") or {}).get("label") or truth[(v["mission"], v["group_id"])]
                if wrong(reviewer, v["group_id"], wrong_share):
                    label = "pass" if label == "fail" else "fail"
                decision = FAIL if label == "fail" else PASS
                lines.append(decision_line(v, decision, reviewer, source, seen=record_digest(v)))
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--photos", required=True)
    p.add_argument("--verdicts_dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--all", action="store_true", help="decide every judged group, not only those flagged for review")
    p.add_argument("--reviewer", default="demo")
    p.add_argument("--wrong_share", type=float, default=0.0, help="share of this reviewer's answers that are wrong")
    p.add_argument("--confirm_escapes_of", default=None,
                   help="decide only the escapes this decisions file found, as a second person")
    args = p.parse_args(argv)
    only = escapes_in(Path(args.confirm_escapes_of)) if args.confirm_escapes_of else None
    lines = decide(Path(args.photos), Path(args.verdicts_dir), args.all, args.reviewer, args.wrong_share, only)
    write_jsonl_atomic(Path(args.out), lines)
    print(f"{len(lines)} decisions -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
