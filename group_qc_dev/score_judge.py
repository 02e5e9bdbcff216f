#!/usr/bin/env python
"""The judge on synthetic work orders, scored against the generator's truth, next to what validation promised.

    python -m group_qc_dev.score_judge --photos DIR --verdicts_dir DIR --operating_point operating_point.json \
        [--json scores.json]

Per mission (and all missions): whether the operating point certifies it (else how many defective validation groups
would), the groups judged, the share decided without review, the miss rate the QC owner gets (defective groups
decided 通过 without review, over defective groups: a reviewer is assumed to catch what is sent to review), the
overkill rate (good groups decided 不通过 without review, over good groups), the verdict line's own miss rate (as if
nothing were reviewed), and how many groups went to review for an ungrounded reason. DIR is a folder written by
group_qc_dev/synthetic.py (its ground_truth.jsonl knows each group's label); --verdicts_dir holds
`<mission>_verdicts.jsonl` from stage_b.judging.judge.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from group_qc_dev.synthetic import groups_of, read_truth
from qc_core.jsonl import iter_jsonl
from stage_b.judging.verdict_file import verdicts_path
from stage_b.contract.verdict import FAIL, PASS


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def score_rows(rows: list[dict], truth: dict[tuple[str, str], str]) -> dict:
    """The numbers of the module doc over verdict records (`truth`: (mission, group id) -> "pass" | "fail")."""
    labelled = [(r, truth[(r["mission"], r["group_id"])]) for r in rows]
    fails = [r for r, t in labelled if t == "fail"]
    passes = [r for r, t in labelled if t == "pass"]
    auto = [r for r, _ in labelled if not r["needs_review"]]
    return {"judged": len(rows), "auto_decided": len(auto), "automation_share": _rate(len(auto), len(rows)),
            "fail": len(fails), "pass": len(passes),
            "miss_rate": _rate(sum(not r["needs_review"] and r["verdict"] == PASS for r in fails), len(fails)),
            "overkill_rate": _rate(sum(not r["needs_review"] and r["verdict"] == FAIL for r in passes), len(passes)),
            "verdict_miss_rate": _rate(sum(r["verdict"] == PASS for r in fails), len(fails)),
            "verdict_overkill_rate": _rate(sum(r["verdict"] == FAIL for r in passes), len(passes)),
            "reviewed_for_the_reason": sum(any(w.startswith("the reason") for w in r["review_why"]) for r in rows)}


def score(photos: Path, verdicts_dir: Path, operating_point: Path) -> dict:
    truth = {(g["mission"], g["group_id"]): g["label"] for g in groups_of(read_truth(photos))}
    op = json.loads(operating_point.read_text(encoding="utf-8"))
    per_mission, everything = {}, []
    for mission, promise in op["missions"].items():
        path = verdicts_path(verdicts_dir, mission)
        rows = [r for _, r in iter_jsonl(path)] if path.exists() else []
        everything += rows
        per_mission[mission] = {**score_rows(rows, truth), "certified": promise["certified"],
                                "fail_groups_needed": promise.get("fail_groups_needed"),
                                "promise": promise["promise"],
                                "validation_automation_share": promise.get("automation_share")}
    return {"per_mission": per_mission,
            "overall": {**score_rows(everything, truth),
                        "validation_automation_share": op["automation"]["automation_share"]},
            "confidence": op["confidence"]}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def print_table(scores: dict) -> None:
    print(f"  {'certified':>17} {'n':>3} {'auto':>5} {'(val)':>5} {'miss':>5} {'overkill':>8} | "
          f"{'verdict miss':>12} {'overkill':>8} | {'reason':>6} | mission")
    for name, s in [*scores["per_mission"].items(), ("all missions", scores["overall"])]:
        if "certified" in s:
            cert = "yes" if s["certified"] else f"no, {s['fail_groups_needed'] or '∞'} needed"
        else:
            cert = ""
        print(f"  {cert:>17} {s['judged']:>3} {_pct(s['automation_share']):>5} "
              f"{_pct(s['validation_automation_share']):>5} {_pct(s['miss_rate']):>5} {_pct(s['overkill_rate']):>8} | "
              f"{_pct(s['verdict_miss_rate']):>12} {_pct(s['verdict_overkill_rate']):>8} | "
              f"{s['reviewed_for_the_reason']:>6} | {name}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--photos", required=True, help="folder written by python -m group_qc_dev.synthetic")
    p.add_argument("--verdicts_dir", required=True, help="stage_b.judging.judge --output_dir")
    p.add_argument("--operating_point", required=True)
    p.add_argument("--json", help="also write the scores here")
    args = p.parse_args(argv)
    scores = score(Path(args.photos), Path(args.verdicts_dir), Path(args.operating_point))
    print_table(scores)
    if args.json:
        Path(args.json).write_text(json.dumps(scores, ensure_ascii=False, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
