#!/usr/bin/env python
"""How many Stage-A summaries match the synthetic ground truth, per mission (the demo's Stage-A check).

    python -m group_qc_dev.score_stage_a --photos DIR --stage_a_dir OUT [--min_accuracy 0.9] [--json scores.json]

DIR is a folder written by group_qc_dev/synthetic.py (DIR/ground_truth.jsonl, one line per photo);
OUT holds the <mission>_stage_a.jsonl files Stage-A wrote for DIR. A photo counts as correct when its
summary equals the ground truth after Stage-A's own normalisation. Photos of groups that Stage-A did
not write (failed groups are in *.errors.jsonl) count as wrong. Exit status 1 below --min_accuracy.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

from group_qc_dev.synthetic import groups_of, read_truth
from qc_core.jsonl import iter_jsonl  # noqa: E402
from qc_core.missions import load_registry  # noqa: E402
from qc_core.records import normalize_summary, summaries_of  # noqa: E402


def score(photos: Path, stage_a_dir: Path) -> dict:
    registry = load_registry()
    truth: dict[str, dict[str, list[str]]] = defaultdict(dict)  # mission -> group -> summaries
    for g in groups_of(read_truth(photos)):
        truth[g["mission"]][g["group_id"]] = [normalize_summary(s) for s in g["summaries"]]
    result = {}
    for mission, groups in truth.items():
        written = {}
        path = stage_a_dir / f"{registry.resolve(mission).stage_a_stem}.jsonl"
        if path.is_file():
            written = {r["group_id"]: summaries_of(r) for _, r in iter_jsonl(path)}
        photos_total = sum(len(s) for s in groups.values())
        correct = sum(a == b for gid, expected in groups.items()
                      for a, b in zip(expected, written.get(gid, [])))
        examples = [(e, w) for gid, expected in groups.items()
                    for e, w in zip(expected, written.get(gid, [])) if e != w][:3]
        result[mission] = {"photos": photos_total, "correct": correct, "accuracy": correct / photos_total,
                           "groups_missing": sum(gid not in written for gid in groups), "wrong_examples": examples}
    total = sum(r["photos"] for r in result.values())
    correct = sum(r["correct"] for r in result.values())
    return {"missions": result, "photos": total, "correct": correct, "accuracy": correct / total if total else 0.0}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--photos", required=True, type=Path)
    p.add_argument("--stage_a_dir", required=True, type=Path)
    p.add_argument("--min_accuracy", type=float, default=0.0)
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    if not (args.photos / "ground_truth.jsonl").is_file():
        print(f"error: {args.photos / 'ground_truth.jsonl'} not found (group_qc_dev/synthetic.py writes it)",
              file=sys.stderr)
        return 2
    s = score(args.photos, args.stage_a_dir)
    for mission, r in s["missions"].items():
        print(f"  {mission:<24} {r['correct']:>4}/{r['photos']:<4} summaries exact  {r['accuracy']:6.1%}"
              + (f"  ({r['groups_missing']} groups not written)" if r["groups_missing"] else ""))
        for expected, got in r["wrong_examples"]:
            print(f"      expected {expected!r}, got {got!r}")
    print(f"  {'overall':<24} {s['correct']:>4}/{s['photos']:<4} summaries exact  {s['accuracy']:6.1%}")
    if args.json:
        args.json.write_text(json.dumps(s, ensure_ascii=False, indent=2), encoding="utf-8")
    if s["accuracy"] < args.min_accuracy:
        print(f"Stage-A summary accuracy {s['accuracy']:.1%} is below --min_accuracy {args.min_accuracy:.0%}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
