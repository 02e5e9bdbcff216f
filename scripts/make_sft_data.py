#!/usr/bin/env python
"""SFT rows (ms-swift `messages` + `images` JSONL) for the offline demo's two starting points.

    python scripts/make_sft_data.py stage_a --photos DIR --out rows.jsonl
        photo -> ground-truth summary, with exactly the prompt Stage-A uses at inference
    python scripts/make_sft_data.py stage_b --photos DIR --out rows.jsonl [--shuffle_verdicts] [--seed S]
        Stage-B prompt over a group's ground-truth summaries -> "通过|不通过\\n理由: …"; with
        --shuffle_verdicts the verdicts are permuted across rows, so the format is learnt but the verdict
        carries no signal (the GRPO starting point the demo needs)

DIR is a folder written by scripts/make_synthetic_qc.py (it reads DIR/ground_truth.jsonl).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import OrderedDict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stage_a.missions import load_registry  # noqa: E402
from stage_a.prompts import stage_a_messages  # noqa: E402
from stage_b.prompts import stage_b_messages  # noqa: E402


def read_truth(photos: Path) -> list[dict]:
    path = photos / "ground_truth.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found; generate photos with scripts/make_synthetic_qc.py first")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def stage_a_rows(photos: Path) -> list[dict]:
    registry = load_registry()
    return [{"messages": stage_a_messages(registry.resolve(t["mission"])) +
             [{"role": "assistant", "content": t["summary"]}],
             "images": [str((photos / t["image"]).resolve())]} for t in read_truth(photos)]


def reason_for(summaries: list[str]) -> str:
    """A short reason grounded in the summaries, whatever the verdict: the first photo whose summary
    carries a remark (备注) and the remark itself, else the photos all meet the requirements.

    Reasons never depend on the verdict, so a start point trained with --shuffle_verdicts still learns
    to read its input (which photo is flagged, and why) while its verdicts carry no signal."""
    for i, s in enumerate(summaries, start=1):
        if "备注" in s:
            remark = s.split("备注", 1)[1].lstrip("：: ")
            return f"图片_{i} {remark}"
    return f"图片_1至图片_{len(summaries)} 均符合要求" if len(summaries) > 1 else "图片_1 符合要求"


def stage_b_rows(photos: Path, shuffle_verdicts: bool, seed: int) -> list[dict]:
    registry = load_registry()
    groups: OrderedDict = OrderedDict()
    for t in read_truth(photos):
        g = groups.setdefault(t["group_id"], {"mission": t["mission"], "label": t["label"], "summaries": []})
        g["summaries"].append(t["summary"])
    verdicts = ["通过" if g["label"] == "pass" else "不通过" for g in groups.values()]
    if shuffle_verdicts:
        random.Random(seed).shuffle(verdicts)
    return [{"messages": stage_b_messages(registry.resolve(g["mission"]), g["summaries"]) +
             [{"role": "assistant", "content": f"{v}\n理由: {reason_for(g['summaries'])}"}]}
            for g, v in zip(groups.values(), verdicts)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["stage_a", "stage_b"])
    p.add_argument("--photos", required=True, help="folder written by make_synthetic_qc.py")
    p.add_argument("--out", required=True, help="JSONL for swift sft --dataset")
    p.add_argument("--shuffle_verdicts", action="store_true", help="stage_b: verdicts carry no signal")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    photos = Path(args.photos)
    rows = stage_a_rows(photos) if args.kind == "stage_a" else stage_b_rows(photos, args.shuffle_verdicts, args.seed)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} {args.kind} SFT rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
