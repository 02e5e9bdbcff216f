"""Photo-aware Stage-B rows (GROUP_QC_STAGE_B_IMAGES=1), built from Stage-A JSONL and real photo files: each
summary line after its photo's `<image>`, the photos upright and within the budget, every missing or unreadable
photo named before any model loads, and the mode carried from training to evaluation and judging."""
from __future__ import annotations


import pytest
from PIL import Image

from stage_a.discovery import Group
from qc_core.images import load_photo
from qc_core.jsonl import JsonlAppender
from qc_core.missions import load_registry
from qc_core.records import make_record
from stage_b.data.dataset import DatasetError, build_rows, row_mode
from stage_b.judging.judge import judging_selection
from stage_b.judging.settings import JudgeError, JudgeSettings, build_parser
from stage_b.rules.operating_point import OperatingPoint
from stage_b.data.settings import Selection, SettingError, selection_from
from group_qc_dev.photos import broken, jpeg

REGISTRY = load_registry()
M = "BBU接地线检查"
# one colour per photo position, so a copy can be traced back to its photo
COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200)]


def write_groups(root, groups=6, exif_orientation=None, input_dir_in_record=True):
    """Photos under root/photos/<mission>/<label>/<group>/ and Stage-A records naming them, written by Stage-A's own
    record builder and appender (k-th group has 1 + k % 3 photos, 120x60: wider than tall)."""
    photos, stage_a = root / "photos", root / "stage_a"
    stage_a.mkdir(parents=True, exist_ok=True)
    with JsonlAppender(stage_a / f"{REGISTRY.resolve(M).stage_a_stem}.jsonl") as out:
        for k in range(groups):
            label = "fail" if k % 2 else "pass"
            rels = [f"{M}/{label}/g{k}/{i}.jpg" for i in range(1 + k % 3)]
            for i, rel in enumerate(rels):
                (photos / rel).parent.mkdir(parents=True, exist_ok=True)
                jpeg(photos / rel, size=(120, 60), color=COLOURS[i], exif_orientation=exif_orientation)
            group = Group(f"QC-P-20250101-{k}", M, label, tuple(rels))
            out.write(make_record(group, [f"接地线×1/摘要{i}" for i in range(len(rels))], model="m",
                                  input_dir=photos if input_dir_in_record else None))
    return photos, stage_a


def selection(stage_a, **settings):
    return selection_from({"stage_a_dir": str(stage_a), "val_ratio": "0.5", **settings}, environ={})


def all_rows(sel):
    return [r for split in ("train", "val") for r in build_rows(sel, split, allow_empty=True)[0]]


def test_each_summary_line_follows_its_own_photo_and_text_mode_is_unchanged(tmp_path):
    _, stage_a = write_groups(tmp_path)
    text = {r["group_id"]: r for r in all_rows(selection(stage_a))}
    photo = {r["group_id"]: r for r in all_rows(selection(stage_a, images="1"))}
    assert text.keys() == photo.keys() and len(text) == 6
    for gid, row in photo.items():
        n = len(row["summaries"])
        assert "images" not in text[gid] and row_mode(text[gid]) == "summaries"
        assert row_mode(row) == "summaries+photos" and len(row["images"]) == n
        user = row["messages"][1]["content"]
        assert [line.split(":")[0] for line in user.splitlines() if line.startswith("<image>")] == \
               [f"<image>图片_{i}" for i in range(1, n + 1)]
        assert user.replace("<image>", "") != text[gid]["messages"][1]["content"]   # says photos are shown
        assert "你看不到照片" in text[gid]["messages"][0]["content"]
        assert "你看不到照片" not in row["messages"][0]["content"]
        for i, path in enumerate(row["images"]):   # the i-th copy is the i-th photo (its colour), readable
            with Image.open(path) as im:
                centre = im.convert("RGB").getpixel((im.width // 2, im.height // 2))
            assert max(abs(a - b) for a, b in zip(centre, COLOURS[i])) < 24, (path, centre)
        assert {k: v for k, v in row.items() if k not in ("messages", "images")} == \
               {k: v for k, v in text[gid].items() if k != "messages"}   # same label, ids, summaries: same rewards


def test_a_sideways_phone_photo_reaches_the_model_upright_and_within_the_budget(tmp_path):
    """ms-swift's loader ignores EXIF orientation: the copy must already be upright, as Stage-A saw the photo."""
    photos, stage_a = write_groups(tmp_path, groups=1, exif_orientation=6)   # stored 120x60, shown 60x120
    (row,) = all_rows(selection(stage_a, images="1", max_pixels="3600"))
    with Image.open(row["images"][0]) as copy:
        assert copy.height > copy.width and copy.width * copy.height <= 3600
        assert copy.size == load_photo(photos / f"{M}/pass/g0/0.jpg", max_pixels=3600).size


def test_copies_are_reused_and_a_replaced_photo_gets_a_new_one(tmp_path):
    photos, stage_a = write_groups(tmp_path, groups=1)
    (first,) = all_rows(selection(stage_a, images="1"))
    (again,) = all_rows(selection(stage_a, images="1"))
    assert again["images"] == first["images"]
    jpeg(photos / f"{M}/pass/g0/0.jpg", size=(90, 90), color=(0, 0, 0))
    (replaced,) = all_rows(selection(stage_a, images="1"))
    assert replaced["images"] != first["images"]


def test_another_budget_gets_its_own_copies_within_it(tmp_path):
    """The copy's name includes its size rule: a smaller max_pixels must never reuse the larger copies."""
    _, stage_a = write_groups(tmp_path, groups=1)
    (large,) = all_rows(selection(stage_a, images="1", max_pixels="7200"))
    (small,) = all_rows(selection(stage_a, images="1", max_pixels="3600"))
    assert small["images"] != large["images"]
    for path, budget in ((large["images"][0], 7200), (small["images"][0], 3600)):
        with Image.open(path) as im:
            assert budget / 2 < im.width * im.height <= budget


def test_copies_live_beside_the_stage_a_files_whichever_way_they_are_named(tmp_path):
    _, stage_a = write_groups(tmp_path, groups=1)
    by_folder = all_rows(selection(stage_a, images="1"))
    by_files = all_rows(selection_from({"stage_a_files": str(stage_a / "*.jsonl"), "val_ratio": "0.5",
                                        "images": "1"}, environ={}))
    assert by_folder[0]["images"] == by_files[0]["images"]
    assert by_folder[0]["images"][0].startswith(str((stage_a / "stage_b_photos").resolve()))


@pytest.mark.parametrize("damage, message", [
    ("missing", "photo not found"),
    ("garbage", "unreadable photo"),
    ("no_input_dir", "names no input_dir"),
    ("moved", "photo not found"),
])
def test_a_photo_that_cannot_be_read_stops_the_build_naming_it(tmp_path, damage, message):
    photos, stage_a = write_groups(tmp_path, groups=4, input_dir_in_record=damage != "no_input_dir")
    victim = photos / f"{M}/fail/g1/1.jpg"
    if damage == "missing":
        victim.unlink()
    elif damage == "garbage":
        broken(victim, "text")
    elif damage == "moved":
        photos.rename(tmp_path / "elsewhere")
    with pytest.raises(DatasetError) as exc:
        all_rows(selection(stage_a, images="1"))
    text = str(exc.value)
    assert message in text and "--input_dir" in text
    if damage in ("missing", "garbage"):
        assert str(victim) in text and "QC-P-20250101-1" in text and "1 cannot be read" in text
    all_rows(selection(stage_a))   # summaries-only rows do not need the photos


def test_input_dir_setting_finds_photos_that_moved(tmp_path):
    photos, stage_a = write_groups(tmp_path, groups=2)
    photos.rename(tmp_path / "moved")
    rows = all_rows(selection(stage_a, images="1", input_dir=str(tmp_path / "moved")))
    assert len(rows) == 2
    env = selection_from({"stage_a_dir": str(stage_a)}, environ={"GROUP_QC_STAGE_B_IMAGES": "1",
                                                                 "GROUP_QC_INPUT_DIR": str(tmp_path / "moved")})
    assert env.images and env.input_dir == str(tmp_path / "moved") and len(all_rows(env)) == 2


@pytest.mark.parametrize("environ, message", [
    ({"GROUP_QC_STAGE_B_IMAGES": "yes"}, "GROUP_QC_STAGE_B_IMAGES='yes': use 1 (on) or 0 (off)"),
    ({"GROUP_QC_STAGE_B_MAX_PIXELS": "lots"}, "GROUP_QC_STAGE_B_MAX_PIXELS='lots' is not an integer"),
    ({"GROUP_QC_STAGE_B_MAX_PIXELS": "100"}, "GROUP_QC_STAGE_B_MAX_PIXELS='100' is out of range"),
    ({"GROUP_QC_STAGE_B_MAX_PIXELS": "99999999"}, "is out of range"),
])
def test_bad_photo_settings_name_their_variable(environ, message):
    with pytest.raises(SettingError, match=message.replace("(", r"\(").replace(")", r"\)")):
        selection_from(environ=environ)


def test_the_mode_is_recorded_with_the_selection_and_read_back():
    sel = selection_from({"images": "1", "max_pixels": "50176"}, environ={})
    back = Selection.from_record(sel.to_record(), "group_qc_run.json")
    assert (back.images, back.max_pixels, back.mode) == (True, 50176, "summaries+photos")
    assert Selection.from_record({"val_ratio": 0.2}, "an older run").mode == "summaries"   # before the mode existed
    assert sel.to_env()["GROUP_QC_STAGE_B_IMAGES"] == "1" and sel.to_env()["GROUP_QC_STAGE_B_MAX_PIXELS"] == "50176"


def _op(images, max_pixels=200704):
    return OperatingPoint(model={}, adapters=[], missions={},
                          data={"selection": {"stage_a_dir": "/val", "images": images, "max_pixels": max_pixels}})


def _judge_args(*flags):
    return JudgeSettings.from_args(build_parser().parse_args(["--model", "m", "--output_dir", "o", "--stage_a_dir",
                                                              "/today", "--operating_point", "op.json", *flags]))


@pytest.mark.parametrize("op, flags, environ, expected", [
    (_op(True), [], {}, ("summaries+photos", 200704)),                   # the calibrated mode is the default
    (_op(False), [], {}, ("summaries", 200704)),
    (_op(True, 50176), ["--images", "1"], {}, ("summaries+photos", 50176)),
    (_op(False), [], {"GROUP_QC_STAGE_B_IMAGES": "1"}, JudgeError),      # calibrated on text, judged on photos
    (_op(True), ["--images", "0"], {}, JudgeError),
    (_op(True), ["--max_pixels", "50176"], {}, JudgeError),              # other photos, other probabilities
    (_op(False), ["--max_pixels", "50176"], {}, ("summaries", 50176)),   # no photos: their budget is moot
    # nothing recorded: the flags decide
    (OperatingPoint(model={}, adapters=[], missions={}), ["--images", "1"], {}, ("summaries+photos", 200704)),
])
def test_judging_keeps_the_mode_its_operating_point_was_calibrated_in(monkeypatch, op, flags, environ, expected):
    for name in ("GROUP_QC_STAGE_B_IMAGES", "GROUP_QC_STAGE_B_MAX_PIXELS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    if expected is JudgeError:
        with pytest.raises(JudgeError, match="was calibrated on"):
            judging_selection(_judge_args(*flags), op)
    else:
        sel = judging_selection(_judge_args(*flags), op)
        assert (sel.mode, sel.max_pixels) == expected and sel.stage_a_dir == "/today"


def test_launcher_carries_the_mode_into_the_run_environment(tmp_path, tiny_qwen2_5_vl):
    from stage_b.train.launch import build_command
    from stage_b.train.launch_settings import LaunchSettings
    env, argv, _ = build_command(LaunchSettings(str(tiny_qwen2_5_vl), stage_a_dir=str(tmp_path), images="1",
                                                max_pixels="50176", input_dir=str(tmp_path / "p")), environ={})
    assert (env["GROUP_QC_STAGE_B_IMAGES"], env["GROUP_QC_STAGE_B_MAX_PIXELS"]) == ("1", "50176")
    assert env["GROUP_QC_INPUT_DIR"] == str(tmp_path / "p")
    env, _, _ = build_command(LaunchSettings(str(tiny_qwen2_5_vl), stage_a_dir=str(tmp_path)), environ={})
    assert env["GROUP_QC_STAGE_B_IMAGES"] == "0"   # the YAML's default: summaries only
