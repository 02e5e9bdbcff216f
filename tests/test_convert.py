"""Stage-A files of the project's public origin (github Pein2017/Qwen3-VL): read directly by Stage-B
(qc_core.records.from_origin in stage_b.data.dataset.load_records) and rewritten by `group-qc stage-a-convert`.

The records below are the origin's own, copied from the file named above each (commit in @).
"""
import copy
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from stage_a.convert import main, unknown_model
from stage_a.convert import main as convert_main
from stage_a.discovery import Group
from qc_core.jsonl import iter_jsonl
from qc_core.records import RecordError, from_origin, make_record, summaries_of, validate_record
from review.page import find_photo
from stage_b.data.dataset import DatasetError, build_rows, load_records
from stage_b.data.settings import Selection

# src/stage_a/README.md @2201f48 ("Each line:"): what src/stage_a/inference.py @2201f48 (process_group) writes,
# timestamp instead of created_at, no model, absolute image paths (str(p.resolve())).
ORIGIN_2201F48 = {
    "group_id": "QC-20250118-0001",
    "mission": "挡风板安装检查",
    "label": "pass",
    "images": ["/abs/path/img1.jpeg", "/abs/path/img2.jpeg"],
    "per_image": {
        "图片_1": "BBU设备/华为/显示完整/...",
        "图片_2": "螺丝、光纤插头/BBU安装螺丝/..."
    },
    "raw_texts": ["...", "..."],
    "clean_texts": ["...", "..."],
    "timestamp": "2025-01-18T10:30:00.000000Z"
}
# docs/reference/stage-B-knowledge-Chinese.md @be06f05 ("对应的 Stage-A 输出示例"): the later writer
# (src/stage_a/inference.py @2226699 onwards): per_image keys image_k, bare file names, no time, no model.
ORIGIN_IMAGE_K = json.loads(
    r'''{"group_id": "QC-TEMP-20241206-0015502", "mission": "挡风板安装检查", "label": "fail", '''
    r'''"images": ["QC-TEMP-20241206-0015502_4348975.jpeg"], '''
    r'''"per_image": {"image_1": "{\"统计\": [{\"类别\": \"BBU设备\", \"品牌\": {\"华为\": 2}, '''
    r'''\"可见性\": {\"完整\": 2}, \"挡风板需求\": {\"未按要求配备\": 2}}, {\"类别\": \"BBU安装螺丝\", '''
    r'''\"符合性\": {\"符合\": 3}}, {\"类别\": \"光纤\", \"保护措施\": {\"有保护\": 2}}, {\"类别\": \"挡风板\", '''
    r'''\"安装方向\": {\"正确\": 1}}], \"备注\": [\"无法判断品牌和是否足够空间安装挡风板\"]}"}}''')
# tests/test_stage_a_record_validation.py @be06f05: the origin's valid two-photo record and its misaligned one
# (mission "some_mission" there, a registered mission here).
ORIGIN_TWO_PHOTOS = {"group_id": "QC-TEST-20250101-1", "mission": "BBU接地线检查", "label": "pass",
                     "images": ["a.jpg", "b.jpg"], "per_image": {"image_1": "ok", "image_2": '{"统计": []}'}}
ORIGIN_MISALIGNED = {"group_id": "g", "mission": "BBU接地线检查", "label": "pass",
                     "images": ["a.jpg", "b.jpg", "c.jpg"], "per_image": {"image_1": "ok", "image_2": "ok"}}
MISMATCH = "group g: per_image has 2 image_k summaries for 3 images"


def write_lines(path: Path, lines) -> Path:
    """A JSONL file: a dict is a record (one line), a str is written as it is (last, without "\\n": torn)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(ln if isinstance(ln, str) else json.dumps(ln, ensure_ascii=False) + "\n"
                            for ln in lines), encoding="utf-8")
    return path


# --- from_origin: the mapping, one row per origin shape ---------------------------------------------------------

@pytest.mark.parametrize("record, expected", [
    pytest.param(ORIGIN_2201F48, {"created_at": "2025-01-18T10:30:00.000000Z",        # timestamp, kept as written
                                  "images": ["/abs/path/img1.jpeg", "/abs/path/img2.jpeg"],   # absolute, unchanged
                                  "per_image": ORIGIN_2201F48["per_image"],
                                  "raw_texts": ["...", "..."]}, id="2201f48"),
    pytest.param(ORIGIN_IMAGE_K, {"per_image": {"图片_1": ORIGIN_IMAGE_K["per_image"]["image_1"]},
                                  "images": ["QC-TEMP-20241206-0015502_4348975.jpeg"], "label": "fail"},
                 id="image_k"),
    pytest.param(ORIGIN_TWO_PHOTOS, {"per_image": {"图片_1": "ok", "图片_2": '{"统计": []}'}}, id="image_k-2"),
    pytest.param(dict(ORIGIN_TWO_PHOTOS, per_image={"image_2": "b", "image_1": "a"}),   # ordered by k, like the
                 {"per_image": {"图片_1": "a", "图片_2": "b"}}, id="image_k-unordered"),       # origin's reader
])
def test_from_origin_maps_origin_shapes_and_readers_accept_them(record, expected):
    before = copy.deepcopy(record)
    out = from_origin(record)
    assert record == before                                   # pure: the input is left alone
    assert {k: out[k] for k in expected} == expected
    assert list(out["per_image"]) == list(expected.get("per_image", out["per_image"]))
    assert "timestamp" not in out and "model" not in out      # renamed; never invented
    assert validate_record(out) is out                        # a reader needs no model / created_at
    with pytest.raises(RecordError, match="missing field.*model"):
        validate_record(out, provenance=True)                 # a writer does


@pytest.mark.parametrize("spelling, label", [
    ("pass", "pass"), ("fail", "fail"),
    ("PASS", "pass"), (" Fail ", "fail"),                     # src/stage_b/ingest/stage_a.py: strip().lower()
    ("通过", "pass"), ("不通过", "fail"), ("1", "pass"), (2, "fail"),   # scripts/add_gt_fail_reason_to_stage_a.py
    ("审核通过", "pass"), ("审核不通过", "fail"),               # the label folders (LABEL_DIR_MAP)
    (None, None),                                             # ours: unreviewed
])
def test_origin_label_spellings(spelling, label):
    assert from_origin(dict(ORIGIN_TWO_PHOTOS, label=spelling))["label"] == label


@pytest.mark.parametrize("record, message", [
    (ORIGIN_MISALIGNED, MISMATCH),                                                   # count check
    (dict(ORIGIN_TWO_PHOTOS, per_image={"image_1": "a", "image_3": "c"}), "one per image"),   # a gap
    (dict(ORIGIN_TWO_PHOTOS, per_image={"图片_1": "a", "image_2": "b"}), "one per image"),    # mixed keys
    (dict(ORIGIN_TWO_PHOTOS, label="ok"), "label must be"),
    (dict(ORIGIN_TWO_PHOTOS, label=True), "label must be"),    # JSON true is not the origin's 1
    (dict(ORIGIN_TWO_PHOTOS, label="3"), "label must be"),
])
def test_what_cannot_be_mapped_is_refused(record, message):
    with pytest.raises(RecordError, match=re.escape(message)):
        validate_record(from_origin(record))


def test_our_records_pass_through_unchanged():
    ours = make_record(Group("QC-AB-20250101-1", "BBU接地线检查", "fail", ("m/1.jpg", "m/2.jpg")), ["a", "b"],
                       model="m", created_at="2026-01-01T00:00:00+00:00", input_dir="/data")
    assert from_origin(ours) == ours and list(from_origin(ours)) == list(ours)


def test_absolute_image_paths_are_found_whatever_the_input_folder(tmp_path):
    photo = tmp_path / "abs" / "img1.jpeg"
    photo.parent.mkdir()
    photo.write_bytes(b"\xff\xd8")
    record = from_origin(dict(ORIGIN_2201F48, images=[str(photo), str(photo)]))
    assert record["images"][0] == str(photo)
    assert Path(tmp_path / "elsewhere") / record["images"][0] == photo
    assert find_photo(record["images"][0], [tmp_path / "elsewhere"]) == photo   # what review pages do


# --- Stage-B reads origin files as they are -----------------------------------------------------------------------

def test_load_records_reads_origin_files_directly(tmp_path):
    write_lines(tmp_path / "挡风板安装检查_stage_a.jsonl", [ORIGIN_2201F48, ORIGIN_IMAGE_K])
    write_lines(tmp_path / "BBU接地线检查_stage_a.jsonl", [dict(ORIGIN_TWO_PHOTOS, label="PASS")])
    selection = Selection(stage_a_dir=str(tmp_path), missions="挡风板安装检查,BBU接地线检查")
    records = load_records(selection)
    assert [(r["group_id"], r["label"], list(r["per_image"]), r.get("created_at")) for r in records] == [
        ("QC-TEST-20250101-1", "pass", ["图片_1", "图片_2"], None),
        ("QC-20250118-0001", "pass", ["图片_1", "图片_2"], "2025-01-18T10:30:00.000000Z"),
        ("QC-TEMP-20241206-0015502", "fail", ["图片_1"], None)]
    rows, _ = build_rows(selection, "all")
    assert [(r["group_id"], r["solution"]) for r in rows] == [
        ("QC-TEST-20250101-1", "通过"), ("QC-20250118-0001", "通过"), ("QC-TEMP-20241206-0015502", "不通过")]


def test_load_records_names_the_line_of_a_count_mismatch(tmp_path):
    path = write_lines(tmp_path / "BBU接地线检查_stage_a.jsonl", [ORIGIN_TWO_PHOTOS, ORIGIN_MISALIGNED])
    with pytest.raises(DatasetError, match=re.escape(f"{path}:2: {MISMATCH}")):
        load_records(Selection(stage_a_dir=str(tmp_path), missions="BBU接地线检查"))


# --- group-qc stage-a-convert ------------------------------------------------------------------------------------

def test_convert_writes_our_format_one_file_per_mission(tmp_path, capsys):
    first = write_lines(tmp_path / "in" / "挡风板安装检查_stage_a.jsonl", [ORIGIN_2201F48, ORIGIN_IMAGE_K])
    second = write_lines(tmp_path / "in" / "ground.jsonl",
                         [dict(ORIGIN_TWO_PHOTOS, mission="BBU接地检查")])   # an alias
    out = tmp_path / "out"
    before = datetime.now(timezone.utc).replace(microsecond=0)
    assert main(["--input", str(first), "--input", str(second), "--output_dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{first}: 2 record(s) converted (挡风板安装检查: 2)" in printed
    assert f"{second}: 1 record(s) converted (BBU接地线检查: 1)" in printed
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["BBU接地线检查_stage_a.jsonl",
                                                          "挡风板安装检查_stage_a.jsonl"]
    shield = [r for _, r in iter_jsonl(out / "挡风板安装检查_stage_a.jsonl")]
    (ground,) = [r for _, r in iter_jsonl(out / "BBU接地线检查_stage_a.jsonl")]
    for record in shield + [ground]:
        validate_record(record, provenance=True)
        assert list(record)[:7] == ["group_id", "mission", "label", "images", "per_image", "model", "created_at"]
    assert [r["model"] for r in shield] == [unknown_model(first)] * 2 == [f"unknown (converted from {first})"] * 2
    assert shield[0]["created_at"] == "2025-01-18T10:30:00.000000Z" and "timestamp" not in shield[0]
    assert datetime.fromisoformat(shield[1]["created_at"]) >= before       # no timestamp: the time of conversion
    assert shield[0]["images"] == ORIGIN_2201F48["images"] and shield[0]["raw_texts"] == ["...", "..."]
    assert shield[1]["per_image"] == {"图片_1": ORIGIN_IMAGE_K["per_image"]["image_1"]}
    assert ground["mission"] == "BBU接地线检查" and ground["model"] == unknown_model(second)
    # Our own format converts to itself.
    again = tmp_path / "again"
    assert main(["--input", str(out / "BBU接地线检查_stage_a.jsonl"), "--output_dir", str(again)]) == 0
    assert [r for _, r in iter_jsonl(again / "BBU接地线检查_stage_a.jsonl")] == [ground]


@pytest.mark.parametrize("lines, message", [
    pytest.param([ORIGIN_TWO_PHOTOS, ORIGIN_MISALIGNED], rf"in\.jsonl:2: {MISMATCH}", id="count"),
    pytest.param([dict(ORIGIN_IMAGE_K, mission="RRU安装检查")], r"in\.jsonl:1: unknown mission 'RRU安装检查'",
                 id="mission"),   # the origin's RRU missions are not registered here
    pytest.param([ORIGIN_IMAGE_K, ORIGIN_IMAGE_K], r"in\.jsonl:2: group QC-TEMP-20241206-0015502 of 挡风板安装检查 "
                                                   r"is also at \S*in\.jsonl:1", id="twice"),
    pytest.param([dict(ORIGIN_TWO_PHOTOS, label="ok")], r"in\.jsonl:1: QC-TEST-20250101-1: label must be",
                 id="label"),
    pytest.param([dict(ORIGIN_IMAGE_K, model=None)], r"in\.jsonl:1: .*model must be a non-empty string",
                 id="model"),
    pytest.param([ORIGIN_IMAGE_K, '{"group_id": "QC-'], r"in\.jsonl:2: torn last line", id="torn"),
    pytest.param(['{"group_id": "QC-\n', ORIGIN_IMAGE_K], r"in\.jsonl:1: malformed line", id="malformed"),
    pytest.param([dict(ORIGIN_IMAGE_K, per_image={})], r"in\.jsonl:1: .*one per image", id="no-summaries"),
])
def test_convert_refuses_what_it_cannot_convert_and_writes_nothing(tmp_path, capsys, lines, message):
    good = write_lines(tmp_path / "good.jsonl", [ORIGIN_2201F48])     # a good file alongside changes nothing
    bad = write_lines(tmp_path / "in.jsonl", lines)
    out = tmp_path / "out"
    assert main(["--input", str(good), "--input", str(bad), "--output_dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
    assert "nothing written" in err and not out.exists()


def test_convert_refuses_a_missing_input(tmp_path, capsys):
    assert main(["--input", str(tmp_path / "nope.jsonl"), "--output_dir", str(tmp_path / "out")]) == 2
    assert f"{tmp_path / 'nope.jsonl'}: input file does not exist" in capsys.readouterr().err


def test_convert_replaces_an_existing_output_only_with_overwrite(tmp_path, capsys):
    source = write_lines(tmp_path / "in.jsonl", [ORIGIN_IMAGE_K])
    target = tmp_path / "out" / "挡风板安装检查_stage_a.jsonl"
    target.parent.mkdir()
    target.write_text("old\n", encoding="utf-8")
    argv = ["--input", str(source), "--output_dir", str(target.parent)]
    assert main(argv) == 2
    assert f"output exists: {target}; pass --overwrite" in capsys.readouterr().err
    assert target.read_text(encoding="utf-8") == "old\n"
    assert main(argv + ["--overwrite"]) == 0
    assert [r["group_id"] for _, r in iter_jsonl(target)] == ["QC-TEMP-20241206-0015502"]


def test_a_record_that_cannot_be_encoded_is_named_and_nothing_is_written(tmp_path, capsys):
    """A later mission's record holding a lone surrogate (\\ud800, from a damaged file) used to leave the first
    mission's file and a temp file behind, naming no file or line."""
    from stage_a.convert import main
    good = {"group_id": "QC-A-1", "mission": "BBU接地线检查", "label": "pass", "images": ["a.jpg"],
            "per_image": {"图片_1": "接地线×1/已捆扎"}}
    bad = {**good, "group_id": "QC-B-1", "mission": "挡风板安装检查", "per_image": {"图片_1": "挡风板\ud800"}}
    src = tmp_path / "origin.jsonl"
    src.write_text(json.dumps(good, ensure_ascii=False) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["--input", str(src), "--output_dir", str(out)]) == 2
    assert f"{src}:2: holds text that is not valid Unicode" in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_nfc_and_nfd_twins_of_one_group_id_are_one_group(tmp_path, capsys):
    import unicodedata
    from stage_a.convert import main
    gid = "QC-é-1"
    rows = [{"group_id": unicodedata.normalize(form, gid), "mission": "BBU接地线检查", "label": "pass",
             "images": ["a.jpg"], "per_image": {"图片_1": "接地线×1/已捆扎"}} for form in ("NFC", "NFD")]
    src = tmp_path / "origin.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    assert main(["--input", str(src), "--output_dir", str(tmp_path / "out")]) == 2
    assert f"{src}:2: group {unicodedata.normalize('NFC', gid)} of BBU接地线检查 is also at {src}:1" in \
        capsys.readouterr().err


# planted-bug test (issue 27, class 8): the origin's image_k keys, in k order
A = "BBU接地线检查"
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
    the wrong pictures. Twelve photos tell the orders apart; checked in the file `group-qc stage-a-convert` writes
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
