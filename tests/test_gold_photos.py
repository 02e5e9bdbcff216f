"""Gold cards show their photos like any audit card (stage_b.labels.gold): the judge copies each drawn gold group's
photos
from the folder its record was reviewed from (checked: inside it, found, decodable) into the day's output folder; a
gold group whose photos cannot be found is not mixed in, and the judge says which and why."""
from __future__ import annotations

import os
import re
from dataclasses import replace

import pytest

from group_qc_dev.photos import jpeg
from stage_b.judging import judge
from stage_b.labels.gold import PHOTOS_DIR, photo_problem, with_photo_copies
from stage_b.rules.operating_point import manual_point
from tests.helpers import SEED, M
from qc_core.jsonl import write_jsonl_atomic
from stage_b.judging import day_review
from stage_b.judging import verdict_file


def gold_record(folder, gid="QC-OLD-1", images=("1.jpg", "2.jpg"), make=True, label="fail"):
    for rel in images if make else ():
        jpeg(folder / gid / rel)
    return {"group_id": gid, "mission": M, "label": label, "input_dir": str(folder),
            "images": [f"{gid}/{rel}" for rel in images],
            "per_image": {f"图片_{k}": "接地线×1/未捆扎" for k in range(1, len(images) + 1)}}


@pytest.mark.parametrize("case, change, problem", [
    ("photos found", {}, None),
    ("no input_dir", {"input_dir": None}, "names no input_dir"),
    ("the filesystem root", {"input_dir": "/"}, "filesystem root"),
    ("a folder that moved", {"input_dir": "/nonexistent/day2"}, "does not exist (moved or deleted?)"),
    ("a photo outside its folder", {"images": ["../outside.jpg"]}, "lies outside its folder"),
    ("a photo not found", {"images": ["QC-OLD-1/9.jpg"]}, "is not found under"),
    ("no photo", {"images": []}, "names no photo"),
])
def test_a_gold_groups_photos_are_checked_inside_the_folder_it_was_reviewed_from(tmp_path, case, change, problem):
    """Planted: photo_problem following `../` (no inside check) -> the outside photo is taken."""
    jpeg(tmp_path / "outside.jpg")
    rec = {**gold_record(tmp_path / "day2"), **change}
    why = photo_problem(rec)
    assert (why is None) if problem is None else (problem in why), (case, why)


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    rec = gold_record(tmp_path / "day2")
    jpeg(tmp_path / "secret.jpg")
    os.symlink(tmp_path / "secret.jpg", tmp_path / "day2" / "QC-OLD-1" / "3.jpg")
    assert "lies outside its folder" in photo_problem({**rec, "images": [*rec["images"], "QC-OLD-1/3.jpg"]})


def test_the_copies_are_the_photos_and_the_record_points_at_them(tmp_path):
    good = gold_record(tmp_path / "day2")
    torn = gold_record(tmp_path / "day2", gid="QC-OLD-2")
    (tmp_path / "day2" / "QC-OLD-2" / "2.jpg").write_bytes(b"\xff\xd8\xff\xe0 torn")
    odd = gold_record(tmp_path / "day2", gid="QC/ODD")   # a group id that is no plain path part
    kept, left_out = with_photo_copies([good, torn, odd], tmp_path / "out" / PHOTOS_DIR)
    assert [r["group_id"] for r in kept] == ["QC-OLD-1", "QC/ODD"]
    assert len(left_out) == 1 and left_out[0].startswith(f"gold group QC-OLD-2 of {M} not mixed in: ")
    copy = kept[0]
    assert copy["input_dir"] == str(tmp_path / "out" / PHOTOS_DIR)
    assert copy["images"] == [f"{M}/QC-OLD-1/1.jpg", f"{M}/QC-OLD-1/2.jpg"]
    assert all((tmp_path / "out" / PHOTOS_DIR / rel).read_bytes() == (tmp_path / "day2" / src).read_bytes()
               for rel, src in zip(copy["images"], good["images"]))
    assert all(rel.count("/") == 2 for rel in kept[1]["images"])   # the odd id is a digest on disk
    assert (copy["per_image"], copy["label"]) == (good["per_image"], good["label"])
    again, _ = with_photo_copies([good], tmp_path / "out" / PHOTOS_DIR)   # a resume: the same copies, whole
    assert again == [copy] and not list((tmp_path / "out" / PHOTOS_DIR).rglob(".*tmp-*"))


def test_a_group_whose_photos_are_gone_is_not_drawn_and_the_next_takes_its_place(tmp_path, capsys):
    folder = tmp_path / "day2"
    gold = {M: [{**gold_record(folder, gid=f"QC-OLD-{k}", make=k % 2 == 0), "_gold_from": "g.jsonl"}
                for k in range(10)]}
    today = {M: [{"group_id": f"QC-NEW-{k}", "mission": M} for k in range(8)]}
    judge.mix_gold(gold, today, [M], 0.25, SEED, tmp_path / "out" / PHOTOS_DIR)
    mixed = [r for r in today[M] if "gold_label" in r]
    assert len(mixed) == 2 and all(int(r["group_id"].rsplit("-", 1)[1]) % 2 == 0 for r in mixed)
    assert all(r["input_dir"] == str(tmp_path / "out" / PHOTOS_DIR) for r in mixed)
    err = capsys.readouterr().err
    assert err.count("not mixed in: photo QC-OLD-") == 5 and "is not found under" in err


def test_a_gold_card_shows_its_photos_like_an_audit_card(tmp_path):
    """The field report: 27 of 27 gold cards said "photo not found" (the page looked under today's folder only).
    Planted: page_photo_dirs without the copies' folder -> every gold photo is a placeholder."""
    today_dir, out = tmp_path / "today", tmp_path / "day"
    point = replace(manual_point(0.5), certified=True, promise="a test's", threshold_fail=0.5, review_margin=0)
    provenance = {"audit_share": 1.0, "audit_seed": SEED, "gold_share": 0.3}
    today = []
    for k in range(3):
        jpeg(today_dir / M / f"QC-NEW-{k}" / "1.jpg")
        today.append({"group_id": f"QC-NEW-{k}", "mission": M, "label": None, "input_dir": str(today_dir),
                      "images": [f"{M}/QC-NEW-{k}/1.jpg"], "per_image": {"图片_1": "接地线×1/已捆扎"}})
    gold, _ = with_photo_copies([gold_record(tmp_path / "day2", gid=f"QC-OLD-{k}", images=("1.jpg",))
                                 for k in range(2)], out / PHOTOS_DIR)
    gold = [{**g, "label": None, "gold_label": "fail", "gold_from": "g.jsonl"} for g in gold]
    lines = [verdict_file.verdict_record(r, 0.2, point, "通过\n理由: 图片_1 接地线已捆扎", provenance)
             for r in today + gold]
    write_jsonl_atomic(verdict_file.verdicts_path(out, M), lines)
    day_review.write_day_review(out, [M], day_review.page_photo_dirs(out, str(today_dir)))
    html = (out / "review" / "index.html").read_text(encoding="utf-8")
    assert 'data-missing="1"' not in html
    thumbs = re.findall(r'data-group-id="(QC-(?:NEW|OLD)-\d)".*?<img[^>]+src="thumbs/', html, re.S)
    assert sorted(thumbs) == sorted(v["group_id"] for v in lines)
    assert "gold" not in html.replace(str(tmp_path), "TMP").lower()


@pytest.mark.slow
def test_the_judge_copies_the_drawn_gold_photos_into_the_day(tiny_qwen2_5_vl, tmp_path):
    """The documented `--gold <labels>/<mission>_stage_a.jsonl` with the day's --input_dir, through the real judge:
    the drawn gold groups' photos are copied into the day, a gold group whose folder moved is named and not drawn."""
    from tests.helpers import certified_op, judge_args, read_lines, run_judge, stage_a_folder
    stage_a = stage_a_folder(tmp_path / "sa", n=8)
    (tmp_path / "photos").mkdir()
    records = [gold_record(tmp_path / "day2", gid=f"QC-OLD-{k}", label="fail" if k % 2 else "pass")
               for k in range(4)] + [{**gold_record(tmp_path / "gone", gid="QC-GONE", make=False)}]
    write_jsonl_atomic(tmp_path / "gold.jsonl", records)
    op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
    out = tmp_path / "v"
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, out, "--input_dir", str(tmp_path / "photos"),
                                   "--gold", str(tmp_path / "gold.jsonl"), "--gold_share", "0.25", review=True))
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"gold group QC-GONE of {M} not mixed in: its photo folder" in result.stderr
    gold = [v for v in read_lines(verdict_file.verdicts_path(out, M)) if v.get("gold")]
    # the copies' folder named relative to the verdict file (qc_core.paths): a copied day reads its own copies
    assert len(gold) == 2 and all(v["input_dir"] == PHOTOS_DIR for v in gold)
    assert all((out / PHOTOS_DIR / rel).is_file() for v in gold for rel in v["images"])
    html = (out / "review" / "index.html").read_text(encoding="utf-8")
    for v in gold:   # each gold card shows its photos
        card = re.search(rf'data-group-id="{v["group_id"]}".*?(?=<div class="card" |\Z)', html, re.S).group(0)
        assert 'data-missing="1"' not in card and card.count('src="thumbs/') == 2
