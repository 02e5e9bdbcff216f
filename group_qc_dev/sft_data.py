#!/usr/bin/env python
"""SFT rows (ms-swift `messages` + `images` JSONL) for the offline demo's two starting points.

    python -m group_qc_dev.sft_data stage_a --photos DIR --out rows.jsonl
        photo -> ground-truth summary, with exactly the prompt Stage-A uses at inference
    python -m group_qc_dev.sft_data stage_b --photos DIR --out rows.jsonl [--verdicts true|shuffled|both]
                                        [--reading] [--seed S]
        Stage-B prompt over a group's ground-truth summaries -> "通过|不通过\\n理由: <grounded reason>";
        with --verdicts both every group appears with each verdict, so the format and the reasons are
        learnt but the verdict carries no signal; --reading adds rows that ask which photos carry a
        备注 remark. Both together make the demo's GRPO starting point: it reads, it has no verdict rule.

DIR is a folder written by group_qc_dev/synthetic.py (it reads DIR/ground_truth.jsonl).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from group_qc_dev.synthetic import groups_of, read_truth  # the ground truth's writer and reader
from qc_core.jsonl import write_jsonl_atomic
from qc_core.missions import load_registry
from stage_a.prompts import stage_a_messages
from qc_core.records import image_key
from stage_b.data.prompts import stage_b_messages
from stage_b.data.sft import every_photo, photo_defects, two_line_reply
from stage_b.contract.verdict import FAIL, PASS


def stage_a_rows(photos: Path, defect_repeats: int = 1) -> list[dict]:
    """photo -> summary rows with the inference prompt. Photos whose summary carries a remark (备注, a
    defect) appear `defect_repeats` times. Measured on the demo's tiny model (vision tower frozen, 200
    SFT steps, 853 held-out photos): the natural mix gave 90.0% exact summaries, 2 repeats 95.2%.
    (With the vision tower trained, 3 repeats had flipped two missions to calling fine photos defective.)"""
    registry = load_registry()
    rows = []
    for t in read_truth(photos):
        row = {"messages": stage_a_messages(registry.resolve(t["mission"])) +
               [{"role": "assistant", "content": t["summary"]}],
               "images": [str((photos / t["image"]).resolve())]}
        rows += [row] * (defect_repeats if "备注" in t["summary"] else 1)
    return rows


def reason_for(mission, summaries: list[str]) -> str:
    """A short reason grounded in the summaries, whatever the verdict: every photo whose summary shows a defect
    (stage_b.data.sft.photo_defects, the rule the grounding metrics use) and what the first of them says, else the
    photos
    all meet the requirements: `图片_2、图片_5 接地线散乱未捆扎` / `图片_1至图片_3 均符合要求`.

    Reasons never depend on the verdict (unlike group_qc_sft's, which explain the reviewer's verdict), so a start
    point trained with --verdicts both still learns to read its input (which photos are flagged, and why) while
    its verdicts carry no signal. Listing every flagged photo (not the first alone, as before) is what the judge's
    guided citations write (`理由: 图片_2、图片_5` and the model goes on): measured on the demo's validation groups,
    the first-photo-only reasons cited 图片_1 alone in 21 of 44 replies and reached a citation recall of 47.6%."""
    defects = photo_defects(mission, summaries)
    if defects:
        return f"{'、'.join(image_key(i) for i, _ in defects)} {defects[0][1]}"
    return f"{every_photo(len(summaries))} {'均' if len(summaries) > 1 else ''}符合要求"


# The reading task of the Stage-B start point: the same system prompt and summaries, but the question
# asks which photos carry a remark, so the model learns to find 备注 at the first reply token (where
# the verdict is later decided) without ever being shown a verdict rule.
READING_REQUEST = "请只指出带“备注”的照片编号，没有则回答“无”。"
VERDICT_MODES = ("true", "shuffled", "both")


def reading_answer(summaries: list[str]) -> str:
    flagged = [image_key(i) for i, s in enumerate(summaries, start=1) if "备注" in s]
    return "有：" + "、".join(flagged) if flagged else "无"


def stage_b_rows(photos: Path, verdicts: str = "true", seed: int = 0, reading: bool = False) -> list[dict]:
    """Two-line Stage-B replies over each group's ground-truth summaries.

    verdicts: `true` (the group's label), `shuffled` (labels permuted across groups) or `both` (every
    group twice, once with each verdict: the verdict carries no signal and the model stays at 50/50,
    where GRPO's samples disagree most). Reasons are grounded in the summaries either way.
    reading: also one reading-task row per distinct group (READING_REQUEST -> "有：图片_2" / "无")."""
    if verdicts not in VERDICT_MODES:
        raise ValueError(f"verdicts must be one of {VERDICT_MODES}, got {verdicts!r}")
    registry = load_registry()
    groups = groups_of(read_truth(photos))
    labels = [PASS if g["label"] == "pass" else FAIL for g in groups]
    if verdicts == "shuffled":
        random.Random(seed).shuffle(labels)
    rows = []
    for g, label in zip(groups, labels):
        mission = registry.resolve(g["mission"])
        prompt = stage_b_messages(mission, g["summaries"])
        for v in ((PASS, FAIL) if verdicts == "both" else (label,)):
            rows.append({"messages": prompt + [{"role": "assistant",
                                                "content": two_line_reply(v, reason_for(mission, g["summaries"]))}]})
    if reading:
        seen = set()
        for g in groups:
            mission = registry.resolve(g["mission"])
            key = (mission.name, tuple(g["summaries"]))
            if key in seen:
                continue
            seen.add(key)
            rows.append({"messages": stage_b_messages(mission, g["summaries"], READING_REQUEST) +
                         [{"role": "assistant", "content": reading_answer(g["summaries"])}]})
    random.Random(f"rows:{seed}").shuffle(rows)
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kind", choices=["stage_a", "stage_b"])
    p.add_argument("--photos", required=True, help="folder written by python -m group_qc_dev.synthetic")
    p.add_argument("--out", required=True, help="JSONL for swift sft --dataset")
    p.add_argument("--verdicts", choices=VERDICT_MODES, default="true",
                   help="stage_b: true labels; shuffled across groups; or both verdicts for every group "
                        "(no signal, 50/50: the demo's GRPO start point)")
    p.add_argument("--defect_repeats", type=int, default=1,
                   help="stage_a: repeat photos whose summary carries a 备注 defect remark this many times")
    p.add_argument("--reading", action="store_true",
                   help="stage_b: add reading-task rows (which photos carry a 备注 remark)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    photos = Path(args.photos)
    rows = (stage_a_rows(photos, args.defect_repeats) if args.kind == "stage_a"
            else stage_b_rows(photos, args.verdicts, args.seed, args.reading))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_jsonl_atomic(Path(args.out), rows)
    print(f"{len(rows)} {args.kind} SFT rows -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
