"""Silent bugs in what the files and pages say (issue 27, classes 7-10): the review page's escaping and photo identity
(parsed without a browser, so these run on every machine; the browser test stays for what only a browser shows),
the origin converter's photo order, the format reward's verdict line, and the photo order of photo-aware rows.

Everything runs on real files: photos written with PIL in natural-order names (2.jpg before 10.jpg), photos of the
same name in different group folders with different colours, Stage-A records from Stage-A's own record builder,
origin files as the project's public origin writes them.
"""
from __future__ import annotations

from urllib.parse import unquote

import json
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from group_qc_dev.photos import jpeg
from stage_a.convert import main as convert_main
from stage_a.discovery import discover_mission, mission_folders
from qc_core.jsonl import JsonlAppender, iter_jsonl
from qc_core.missions import load_registry
from qc_core.records import make_record, summaries_of
from stage_b import evaluate, judge
from stage_b.dataset import build_rows, load_records
from stage_b.evaluate import predictions_from_rows
from stage_b.operating_point import manual_point
from stage_b.rewards import qc_consistency, qc_format, qc_label
from stage_b.settings import Selection, selection_from
from stage_b.verdict import FAIL, PASS, parse

REGISTRY = load_registry()
A = "BBU接地线检查"
# 12 colours far apart (each channel steps by at least 20 between neighbours), one per photo position
COLOURS = [(20 * k, 255 - 20 * k, (70 * k) % 256) for k in range(1, 13)]


def centre(path) -> tuple[int, int, int]:
    with Image.open(path) as im:
        return im.convert("RGB").getpixel((im.width // 2, im.height // 2))


def nearest(colour, palette) -> int:
    """Index of the palette colour nearest to `colour` (JPEG moves a flat colour by a few units only)."""
    return min(range(len(palette)), key=lambda i: sum((a - b) ** 2 for a, b in zip(colour, palette[i])))


class Page(HTMLParser):
    """A rendered review page as a browser's parser sees it: every element, all text, and per group card its text,
    thumbnails and photo links."""

    def __init__(self, path: Path):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.cards: list[dict] = []
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag == "div" and attrs.get("class") == "card":
            self.cards.append({"text": "", "thumbs": [], "links": []})
        elif self.cards and tag == "img":
            self.cards[-1]["thumbs"].append(attrs.get("src"))
        elif self.cards and tag == "a" and attrs.get("href", "").startswith(".."):
            self.cards[-1]["links"].append(attrs["href"])

    def handle_data(self, data):
        self.text.append(data)
        if self.cards:
            self.cards[-1]["text"] += data

    def card(self, group_id: str) -> dict:
        (card,) = [c for c in self.cards if group_id in c["text"]]
        return card


# ---------------------------------------------------------------- class 7: the review page, without a browser
MARKUP_REASON = '图片_1 <script>alert("reason")</script>接地线<marquee>未捆扎</marquee> & 散乱'
MARKUP_REPLY = '<iframe src="https://example.invalid/"></iframe>乱码 <b onclick="steal()">?</b>'
MARKUP_SUMMARY = '接地线×1/<img src=x onerror="alert(1)">未捆扎'
SHOWN = [MARKUP_REASON, MARKUP_REPLY, MARKUP_SUMMARY]
GROUPS = {   # two groups whose photos share file names, in different folders, with different colours
    "QC-ID-20250101-1": ("审核不通过", "fail", [(255, 0, 0), (0, 160, 0)]),
    "QC-ID-20250101-2": ("审核通过", "pass", [(0, 0, 255), (240, 240, 0)]),
}


def _photos(root: Path) -> dict[str, list[str]]:
    """root/<mission>/<label folder>/<group>/{1,2}.jpg; both groups' photos get the same modification time."""
    images = {}
    for gid, (folder, _, colours) in GROUPS.items():
        rels = [f"{A}/{folder}/{gid}/{i}.jpg" for i in (1, 2)]
        for rel, colour in zip(rels, colours):
            jpeg(root / rel, size=(96, 64), color=colour)
            os.utime(root / rel, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        images[gid] = rels
    return images


def _evaluation_page(tmp_path: Path, photos: Path, images: dict) -> Path:
    """stage_b.evaluate's outputs with its review page (--review_all), from predictions scored from replies."""
    (g1, g2) = GROUPS
    rows = [{"group_id": g1, "mission": A, "solution": FAIL, "summaries": [MARKUP_SUMMARY, "接地排×1"]},
            {"group_id": g2, "mission": A, "solution": PASS, "summaries": ["接地线×1/已捆扎", "接地排×1"]}]
    predictions = predictions_from_rows(rows, [f"{FAIL}\n理由: {MARKUP_REASON}", MARKUP_REPLY])
    records = {(A, gid): {"images": rels} for gid, rels in images.items()}
    out = tmp_path / "eval"
    out.mkdir()
    evaluate.write_outputs(out, predictions, [A], "escaping", review={"records": records, "input_dirs": [photos],
                                                                       "all": True})
    return out / "review" / "index.html"


def _judge_page(tmp_path: Path, photos: Path, images: dict) -> Path:
    """stage_b.judge's review page over a verdicts file of records the judge writes (stage_b.judge.verdict_record)."""
    (g1, g2) = GROUPS
    out = tmp_path / "judged"
    out.mkdir()
    point = manual_point(0.5)
    with JsonlAppender(judge.verdicts_path(out, A)) as f:
        for gid, p, reply, summaries in [(g1, 0.9, f"{FAIL}\n理由: {MARKUP_REASON}", [MARKUP_SUMMARY, "接地排×1"]),
                                         (g2, 0.1, MARKUP_REPLY, ["接地线×1/已捆扎", "接地排×1"])]:
            record = {"group_id": gid, "mission": A, "label": GROUPS[gid][1], "images": images[gid],
                      "per_image": {f"图片_{i}": s for i, s in enumerate(summaries, start=1)}, "input_dir": str(photos)}
            f.write(judge.verdict_record(record, p, point, reply, provenance={}))
    judge.write_review(out, [A], [photos])
    return out / "review" / "index.html"


PAGES = {"evaluation": _evaluation_page, "judge": _judge_page}


@pytest.mark.parametrize("page", list(PAGES))
def test_markup_in_a_reason_reply_or_summary_is_shown_as_text(tmp_path, page):
    """Silent bug: the review page rendered with autoescape off (review.page._environment), so a reply,
    reason or summary holding markup becomes part of the page: a model's `<script>` runs in the reviewer's browser,
    an `<iframe>` loads, and the reviewer reads something other than what the model wrote. No test rendered such
    text before. Parsed as a browser's parser would: the text must be there, character for character, and none of
    it may have become an element or an attribute."""
    photos = tmp_path / "photos"
    index = PAGES[page](tmp_path, photos, _photos(photos))
    parsed = Page(index)
    text = "".join(parsed.text)
    for shown in SHOWN:
        assert shown in text, shown
    tags = [tag for tag, _ in parsed.elements]
    # the page's own scripts (its group index and its filter/decision script), nothing else
    assert [attrs.get("src") for tag, attrs in parsed.elements if tag == "script"] == ["groups.js", "review.js"]
    index_js = (index.parent / "groups.js").read_text(encoding="utf-8")
    assert "<" not in index_js and ">" not in index_js   # data in the index cannot close a script either
    assert "iframe" not in tags and "marquee" not in tags
    handlers = [(tag, name) for tag, attrs in parsed.elements for name in attrs if name.startswith("on")]
    assert handlers == []
    assert not [attrs for tag, attrs in parsed.elements if tag == "img" and attrs.get("src") == "x"]


@pytest.mark.parametrize("page", list(PAGES))
def test_each_group_shows_its_own_photos_when_file_names_repeat(tmp_path, page):
    """Silent bug: photos keyed by file name on the review page, so two groups' `1.jpg` (different folders, same
    name, here even the same modification time) show the same photo, and a reviewer signs a verdict looking at
    another group's picture. Each card's thumbnails must be its own photos (by colour, in 图片_k order) and its
    links must open its own files."""
    photos = tmp_path / "photos"
    images = _photos(photos)
    index = PAGES[page](tmp_path, photos, images)
    parsed = Page(index)
    palette = [c for _, _, colours in GROUPS.values() for c in colours]
    thumbs = []
    for gid, (_, _, colours) in GROUPS.items():
        card = parsed.card(gid)
        assert len(card["thumbs"]) == 2, card
        for src, colour in zip(card["thumbs"], colours):
            assert palette[nearest(centre(index.parent / src), palette)] == colour, (gid, src)
        opened = [(index.parent / unquote(href)).resolve() for href in card["links"]]   # links are URL-encoded
        assert opened == [(photos / rel).resolve() for rel in images[gid]]
        thumbs += card["thumbs"]
    assert len(set(thumbs)) == 4


# ---------------------------------------------------------------- class 8: the origin's image_k keys, in k order
N_PHOTOS = 12


def _origin_record(key_order) -> dict:
    """A record as the origin's later writer makes it (image_k keys, bare file names, no time, no model)."""
    return {"group_id": "QC-ORG-20250101-1", "mission": A, "label": "fail",
            "images": [f"QC-ORG-20250101-1_{k}.jpeg" for k in range(1, N_PHOTOS + 1)],
            "per_image": {f"image_{k}": f"接地线×1/照片{k}" for k in key_order}}


@pytest.mark.parametrize("key_order", [
    list(range(1, N_PHOTOS + 1)),            # as the origin writes them: image_1, image_2, ..., image_12
    list(range(N_PHOTOS, 0, -1)),            # any order: k decides
])
def test_the_origin_converter_orders_image_k_by_k_not_as_text(tmp_path, capsys, key_order):
    """Silent bug: the origin's image_k keys ordered as strings (image_1, image_10, image_11, image_12, image_2, ...),
    so from the third photo on every 图片_k summary belongs to another photo, and the reason's citations point at
    the wrong pictures. Twelve photos tell the orders apart; checked in the file `python -m stage_a.convert` writes
    and in the rows Stage-B builds from the origin file directly."""
    origin = tmp_path / "in" / f"{A}_stage_a.jsonl"
    origin.parent.mkdir()
    origin.write_text(json.dumps(_origin_record(key_order), ensure_ascii=False) + "\n", encoding="utf-8")
    expected = [f"接地线×1/照片{k}" for k in range(1, N_PHOTOS + 1)]

    assert convert_main(["--input", str(origin), "--output_dir", str(tmp_path / "out")]) == 0
    (converted,) = [r for _, r in iter_jsonl(tmp_path / "out" / f"{A}_stage_a.jsonl")]
    assert list(converted["per_image"]) == [f"图片_{k}" for k in range(1, N_PHOTOS + 1)]
    assert summaries_of(converted) == expected

    for folder in (tmp_path / "in", tmp_path / "out"):   # read directly, and after converting
        (record,) = load_records(Selection(stage_a_dir=str(folder), missions=A))
        assert summaries_of(record) == expected
        (row,), _ = build_rows(Selection(stage_a_dir=str(folder), missions=A), "all")
        lines = [ln for ln in row["messages"][1]["content"].splitlines() if ln.startswith("图片_")]
        assert lines == [f"图片_{k}: 接地线×1/照片{k}" for k in range(1, N_PHOTOS + 1)]


# ---------------------------------------------------------------- class 9: a hedged first line is no verdict
@pytest.mark.parametrize("first_line", [
    "通过/不通过", "不通过/通过", "通过 / 不通过", "通过|不通过", "通过、不通过", "通过或不通过", "通过 不通过",
    "通过/", "不通过（通过）",
])
def test_a_first_line_naming_both_verdicts_is_no_verdict(first_line):
    """Silent bug: the format reward (and the verdict parser under it) scoring a first line like `通过/不通过` as a
    valid verdict line: a policy that learns to hedge collects the format reward, and half the label reward, for a
    reply no one can act on. Every reward must give 0 for such a reply, whichever verdict was expected, and the
    parser must find no verdict (evaluation counts it unparseable, a miss when the group is defective)."""
    summaries = ["接地线×1/已捆扎"]
    reply = f"{first_line}\n理由: 图片_1 接地线已捆扎"
    parsed = parse(reply)
    assert (parsed.verdict, parsed.two_lines) == (None, False)
    assert qc_format([reply]) == [0.0]
    assert qc_label([reply, reply], solution=[PASS, FAIL]) == [0.0, 0.0]
    assert qc_consistency([reply], summaries=[summaries], mission=[A]) == [0.0]
    (scored,) = predictions_from_rows([{"group_id": "QC-H-20250101-1", "mission": A, "solution": FAIL,
                                        "summaries": summaries}], [reply])
    assert scored["predicted"] is None and set(scored["rewards"].values()) == {0.0}


# ---------------------------------------------------------------- class 10: photo-aware rows, photos in k order
def test_photo_aware_rows_keep_a_groups_photos_in_natural_order(tmp_path):
    """Silent bug: photo-aware Stage-B rows (GROUP_QC_STAGE_B_IMAGES=1) ordering a group's photos as strings (1.jpg,
    10.jpg, 11.jpg, 12.jpg, 2.jpg, ...), so the k-th `<image>` in the prompt is not the photo the k-th summary
    describes. Twelve photos 1.jpg .. 12.jpg, each its own colour, found by Stage-A's discovery and recorded by
    Stage-A's record builder: the k-th copy the row carries must be k.jpg, next to the k-th summary."""
    photos, stage_a = tmp_path / "photos", tmp_path / "stage_a"
    gid = "QC-NAT-20250101-1"
    for k in range(1, N_PHOTOS + 1):
        jpeg(photos / A / "审核不通过" / gid / f"{k}.jpg", size=(64, 48), color=COLOURS[k - 1])
    mission = REGISTRY.resolve(A)
    (group,), issues = discover_mission(photos, mission, mission_folders(photos, REGISTRY, [mission], False)[A],
                                        REGISTRY)
    assert not issues and [Path(p).name for p in group.images] == [f"{k}.jpg" for k in range(1, N_PHOTOS + 1)]
    stage_a.mkdir()
    with JsonlAppender(stage_a / f"{mission.stage_a_stem}.jsonl") as out:
        out.write(make_record(group, [f"接地线×1/照片{k}" for k in range(1, N_PHOTOS + 1)], model="m",
                              input_dir=photos))
    (row,), _ = build_rows(selection_from({"stage_a_dir": str(stage_a), "images": "1"}, environ={}), "all")
    assert len(row["images"]) == N_PHOTOS
    assert [nearest(centre(path), COLOURS) + 1 for path in row["images"]] == list(range(1, N_PHOTOS + 1))
    lines = [ln for ln in row["messages"][1]["content"].splitlines() if ln.startswith("<image>")]
    assert lines == [f"<image>图片_{k}: 接地线×1/照片{k}" for k in range(1, N_PHOTOS + 1)]
