#!/usr/bin/env python
"""Procedural BBU-installation photo groups with ground-truth summaries (offline demos and tests).

    python -m group_qc_dev.synthetic --out DIR --seed 0 --groups_per_label 8 [--missions all] [--unlabeled]
                                     [--shift MISSION]

Writes <out>/<mission>/<审核通过|审核不通过>/<QC-id>/<QC-id>_<k>.jpg (with --unlabeled: <out>/<mission>/<QC-id>/…,
unreviewed work orders) and <out>/ground_truth.jsonl (one line per photo: image path relative to <out>,
mission, label, group_id, summary).
Pass groups meet the mission's requirement in every photo; fail groups carry the mission's defect in
one or more photos. Every visual fact a summary states is drawn large enough for a tiny VLM to see.
--shift MISSION plants a shift in what the camera sees: that mission's defective groups are drawn as the good ones
look (a new cabinet type where the defect does not show), their truth still 审核不通过 and their summaries what the
photo shows, so Stage-A summaries hide the defect and a judge passes them (the monitor's test case).
"""
from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from PIL import Image, ImageDraw

from group_qc_dev import underscored
from qc_core.jsonl import iter_jsonl, write_jsonl_atomic
from qc_core.missions import load_registry

SIZE = (224, 168)
IRRELEVANT = "无关图片"


def _canvas(rng):
    bg = tuple(rng.randint(200, 235) for _ in range(3))
    im = Image.new("RGB", SIZE, bg)
    d = ImageDraw.Draw(im)
    # rack rails: every relevant photo is taken inside a cabinet
    d.rectangle([8, 4, 20, 164], fill=(90, 90, 95))
    d.rectangle([204, 4, 216, 164], fill=(90, 90, 95))
    return im, d


def _jit(rng, n=4):
    return rng.randint(-n, n)


def draw_bbu(d, rng, y=56, screws=4):
    x0, x1, y1 = 34 + _jit(rng), 190 + _jit(rng), y + 44
    d.rectangle([x0, y, x1, y1], fill=(40, 44, 52), outline=(10, 10, 10), width=2)
    for i in range(6):  # ports
        px = x0 + 40 + i * 18
        d.rectangle([px, y + 16, px + 10, y + 26], fill=(150, 160, 170))
    corners = [(x0 - 8, y + 6), (x0 - 8, y1 - 6), (x1 + 8, y + 6), (x1 + 8, y1 - 6)]
    for k, (cx, cy) in enumerate(corners):
        if k < screws:
            d.ellipse([cx - 8, cy - 8, cx + 8, cy + 8], fill=(230, 200, 40), outline=(0, 0, 0))
        else:  # an empty mounting hole where the screw is missing
            d.ellipse([cx - 4, cy - 4, cx + 4, cy + 4], fill=(15, 15, 15))


def view_mount(rng, defect):
    im, d = _canvas(rng)
    missing = rng.choice([1, 2]) if defect else 0
    draw_bbu(d, rng, screws=4 - missing)
    if defect:
        return im, f"机柜×1，BBU×1/正装，安装螺丝×{4 - missing}/缺失{missing}颗 备注：螺丝缺失"
    return im, "机柜×1，BBU×1/正装，安装螺丝×4/齐全"


def view_ground(rng, defect, end):
    im, d = _canvas(rng)
    if end == "cabinet":
        d.rectangle([40, 30, 110, 138], fill=(70, 72, 80))            # cabinet side panel
        sx, sy = 75, 60
        where = "机柜侧接地螺丝×1"
    else:
        d.rectangle([34, 40, 190, 62], fill=(196, 120, 60))           # copper ground bar
        sx, sy = 70, 51
        where = "接地排×1，接地排侧接地螺丝×1"
    d.ellipse([sx - 7, sy - 7, sx + 7, sy + 7], fill=(230, 200, 40), outline=(0, 0, 0))
    if defect:  # loose wire: a wandering path, no ties
        pts = [(sx, sy)] + [(sx + 18 * k + _jit(rng, 10), sy + 20 + 14 * k + _jit(rng, 14)) for k in range(1, 8)]
        d.line(pts, fill=(40, 170, 60), width=5)
        # The status word must differ from the fine one at its last token ("散乱" vs "已捆扎"): with
        # "未捆扎 备注：…散乱未捆扎" a tiny model had to look two tokens back to choose between the
        # remark and the end, and stopped after the status on every defect photo (measured)
        return im, f"{where}，接地线×1/散乱 备注：接地线散乱未捆扎"
    d.line([(sx, sy), (sx, 150), (200, 150)], fill=(40, 170, 60), width=5)
    for ty in (80, 105, 130):
        d.rectangle([sx - 7, ty, sx + 7, ty + 4], fill=(20, 20, 20))   # cable ties
    return im, f"{where}，接地线×1/已捆扎"


def view_fibre(rng, defect, end):
    im, d = _canvas(rng)
    if end == "bbu":
        draw_bbu(d, rng, y=20)
        where, y0 = "BBU端光纤接头×2", 64
    else:
        d.rectangle([34, 20, 190, 60], fill=(225, 225, 240), outline=(60, 60, 60), width=2)  # ODF panel
        where, y0 = "ODF端光纤接头×2", 60
    for x in (90, 130):
        d.rectangle([x - 5, y0, x + 5, y0 + 8], fill=(30, 90, 200))  # connectors
        if defect:
            d.line([(x, y0 + 8), (x + _jit(rng, 12), 160)], fill=(240, 220, 0), width=3)
        else:
            d.rectangle([x - 9, y0 + 14, x + 9, 160], fill=(235, 120, 30))  # protective tubing
            d.line([(x, y0 + 8), (x, y0 + 14)], fill=(240, 220, 0), width=3)
    if defect:
        return im, f"{where}，光纤×2/未套保护管 备注：光纤裸露无保护"
    return im, f"{where}，光纤×2/已套保护管/弯曲半径正常"


def view_baffle(rng, defect):
    im, d = _canvas(rng)
    draw_bbu(d, rng, y=78)
    if defect:
        return im, "机柜×1，BBU×1，挡风板/缺失 备注：需要挡风板但未安装"
    d.rectangle([30, 30, 194, 66], fill=(245, 245, 245), outline=(120, 120, 120), width=2)
    for x in range(44, 190, 14):
        d.line([(x, 36), (x, 60)], fill=(180, 180, 180), width=2)  # vents
    return im, "机柜×1，BBU×1，挡风板×1/已安装到位"


def view_irrelevant(rng):
    im = Image.new("RGB", SIZE, (rng.randint(60, 120), rng.randint(140, 200), rng.randint(60, 110)))
    d = ImageDraw.Draw(im)
    d.rectangle([0, 0, SIZE[0], 60], fill=(120, 180, 240))  # sky over grass: not a cabinet
    d.ellipse([150, 10, 190, 50], fill=(250, 230, 120))
    return im, IRRELEVANT


# mission -> the photo views a complete group must show (each can carry the defect)
VIEWS = {
    "BBU安装方式检查（正装）": [lambda r, dfx: view_mount(r, dfx)],
    "BBU接地线检查": [lambda r, dfx: view_ground(r, dfx, "cabinet"), lambda r, dfx: view_ground(r, dfx, "bar")],
    "BBU线缆布放要求": [lambda r, dfx: view_fibre(r, dfx, "bbu"), lambda r, dfx: view_fibre(r, dfx, "odf")],
    "挡风板安装检查": [lambda r, dfx: view_baffle(r, dfx)],
}


def make_group(rng, mission: str, fail: bool, hidden: bool = False):
    """1-6 photos: each required view once, optional repeats and an irrelevant photo; `hidden`: the defect is
    planned but not drawn (--shift)."""
    views = list(VIEWS[mission])
    extra = rng.randint(0, max(0, 5 - len(views)))
    plan = [(v, False) for v in views] + [(rng.choice(views), False) for _ in range(extra)]
    rng.shuffle(plan)
    if fail:
        k = rng.randint(1, max(1, min(2, len(plan))))
        for idx in rng.sample(range(len(plan)), k):
            plan[idx] = (plan[idx][0], True)
    photos = [v(rng, dfx and not hidden) for v, dfx in plan]
    if len(photos) < 6 and rng.random() < 0.2:
        photos.insert(rng.randint(0, len(photos)), view_irrelevant(rng))
    return photos


def generate(out: Path, seed: int, groups_per_label: int, missions=None, unlabeled: bool = False,
             shift: str | None = None, fail_factor: int = 1) -> list[dict]:
    """Photo groups under out/ and their truth (also written to out/ground_truth.jsonl). With `unlabeled`,
    groups sit directly under their mission folder, as unreviewed work orders do (Stage-A --unlabeled);
    the truth file still says which are defective, for scoring a judge. `fail_factor`: that many times as many
    defective groups as good ones (a change in the mix of work)."""
    registry = load_registry()
    chosen = registry.select(missions or "all")
    shift = registry.resolve(shift).name if shift else None
    rng = random.Random(seed)
    truth = []
    labels = {v: k for k, v in registry.label_folders.items()}
    serial = seed * 100_000
    for mission in chosen:
        if mission.name not in VIEWS:
            raise SystemExit(f"no synthetic views for mission {mission.name!r}; add them to VIEWS")
        letters = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ") for _ in range(2))
        for label in ("pass", "fail"):
            for _ in range(groups_per_label * (fail_factor if label == "fail" else 1)):
                serial += 1
                gid = f"QC-{letters}-2025{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}-{serial}"
                folder = out / mission.name / gid if unlabeled else out / mission.name / labels[label] / gid
                folder.mkdir(parents=True, exist_ok=True)
                photos = make_group(rng, mission.name, label == "fail", hidden=mission.name == shift)
                for k, (im, summary) in enumerate(photos, start=1):
                    path = folder / f"{gid}_{k}.jpg"
                    im.save(path, "JPEG", quality=90)
                    truth.append({"image": path.relative_to(out).as_posix(), "mission": mission.name,
                                  "label": label, "group_id": gid, "summary": summary})
    write_jsonl_atomic(out / "ground_truth.jsonl", truth)
    return truth


def read_truth(photos: Path) -> list[dict]:
    """The rows generate() wrote to photos/ground_truth.jsonl, one per photo."""
    path = photos / "ground_truth.jsonl"
    if not path.is_file():
        raise SystemExit(f"error: {path} not found; generate photos with group_qc_dev/synthetic.py first")
    return [row for _, row in iter_jsonl(path, allow_torn_tail=False)]


def groups_of(truth: list[dict]) -> list[dict]:
    """Ground-truth photo rows -> one dict per group, in the order the groups were made: group_id,
    mission, label, and images and summaries in photo order."""
    groups: dict[str, dict] = {}
    for t in truth:
        g = groups.setdefault(t["group_id"], {"group_id": t["group_id"], "mission": t["mission"],
                                              "label": t["label"], "images": [], "summaries": []})
        g["images"].append(t["image"])
        g["summaries"].append(t["summary"])
    return list(groups.values())


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output root (becomes Stage-A --input_dir)")
    p.add_argument("--seed", type=int, default=0, help="random seed; same seed, same photos")
    p.add_argument("--groups_per_label", type=int, default=8, help="groups per mission and label")
    p.add_argument("--missions", default="all", help="mission names/aliases, comma-separated, or 'all'")
    p.add_argument("--unlabeled", action="store_true",
                   help="unreviewed layout <mission>/<group>/ (no label folder); the truth stays in ground_truth.jsonl")
    p.add_argument("--shift", default=None,
                   help="a mission whose defective groups are drawn as the good ones look (the defect does not show)")
    p.add_argument("--fail_factor", type=int, default=1,
                   help="that many times as many defective groups as good ones per mission (the mix of work)")
    args = p.parse_args(underscored(sys.argv[1:] if argv is None else argv))
    if args.groups_per_label < 1 or args.fail_factor < 1:
        p.error("--groups_per_label and --fail_factor must be at least 1")
    truth = generate(Path(args.out), args.seed, args.groups_per_label, args.missions, args.unlabeled, args.shift,
                     args.fail_factor)
    groups = len({r["group_id"] for r in truth})
    print(f"{groups} groups, {len(truth)} photos -> {args.out} (ground truth: {args.out}/ground_truth.jsonl)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
