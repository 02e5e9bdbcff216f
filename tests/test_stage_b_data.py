"""Stage-B prompts, split and rows, read from JSONL written by Stage-A's writer (all four missions)."""
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from group_qc_dev.photos import jpeg
from qc_core.jsonl import JsonlAppender
from qc_core.missions import load_registry
from qc_core.records import make_record
from stage_a.discovery import discover_mission, mission_folders
from stage_b.data.dataset import DatasetError, balance_by_label, build_rows, load_records
from stage_b.data.settings import Selection, SettingError, selection_from
from stage_b.data.prompts import stage_b_messages
from stage_b.data.split import split_of
from tests.helpers import ALL_MISSIONS, centre, nearest, write_stage_a_all_missions

REGISTRY = load_registry()


def test_prompt_is_byte_identical_and_lists_summaries_in_order():
    mission = REGISTRY.resolve("BBU接地线检查")
    a = stage_b_messages(mission, ["接地线×1/已捆扎", "接地排×1"])
    b = stage_b_messages(mission, ["接地线×1/已捆扎", "接地排×1"])
    assert a == b and [m["role"] for m in a] == ["system", "user"]
    assert a[1]["content"].endswith("图片_1: 接地线×1/已捆扎\n图片_2: 接地排×1\n请给出判定。")
    for checkpoint in mission.checkpoints:
        assert checkpoint in a[0]["content"]
    assert "第一行：通过 或 不通过" in a[0]["content"] and "理由:" in a[0]["content"]


@pytest.mark.parametrize("name", ALL_MISSIONS)
def test_each_mission_has_its_own_prompt(name):
    content = stage_b_messages(REGISTRY.resolve(name), ["x"])[0]["content"]
    assert name in content
    others = [n for n in ALL_MISSIONS if n != name]
    assert not any(o in content for o in others)


def test_split_is_deterministic_disjoint_and_follows_the_ratio():
    ids = [f"QC-A-20250101-{i}" for i in range(4000)]
    first = [split_of(i, 0.25) for i in ids]
    assert first == [split_of(i, 0.25) for i in ids]
    assert 0.22 < first.count("val") / len(ids) < 0.28
    assert [split_of(i, 0.25, seed=1) for i in ids] != first


@pytest.mark.parametrize("ratio", ["-0.1", "1.0", "2"])
def test_bad_ratio(ratio):
    with pytest.raises(SettingError, match="out of range"):
        selection_from({"val_ratio": ratio}, {})


def test_rows_for_all_four_missions_groups_in_equal_rows_out(tmp_path, caplog):
    folder = write_stage_a_all_missions(tmp_path / "sa")
    source = Selection(stage_a_dir=str(folder), val_ratio=0.3)
    with caplog.at_level(logging.INFO, logger="group_qc.stage_b"):
        train, counts = build_rows(source, "train")
        val, _ = build_rows(source, "val")
        everything, _ = build_rows(source, "all")
    assert set(counts) == set(ALL_MISSIONS) and all(c["groups"] == 10 for c in counts.values())
    assert len(train) + len(val) == len(everything) == 40
    assert not {(r["mission"], r["group_id"]) for r in train} & {(r["mission"], r["group_id"]) for r in val}
    assert all(f"{m}: 10 Stage-A groups -> " in caplog.text for m in ALL_MISSIONS)
    row = everything[1]
    assert set(row) == {"messages", "solution", "mission", "group_id", "summaries"}
    assert row["solution"] == "不通过" and everything[0]["solution"] == "通过"
    assert row["messages"][1]["content"].count("图片_") == len(row["summaries"])


def test_one_mission_by_alias_and_explicit_globs(tmp_path):
    folder = write_stage_a_all_missions(tmp_path / "sa")
    rows, counts = build_rows(Selection(stage_a_dir=str(folder), missions="BBU线缆布放"), "all")
    assert set(counts) == {"BBU线缆布放要求"} and len(rows) == 10
    rows, counts = build_rows(Selection(files=(str(folder / "BBU*_stage_a.jsonl"),)), "all")
    assert set(counts) == {"BBU安装方式检查（正装）", "BBU接地线检查", "BBU线缆布放要求"}


def test_alias_in_older_records_is_canonicalised(tmp_path):
    folder = write_stage_a_all_missions(tmp_path / "sa", mission_field="BBU线缆布放")
    rows, counts = build_rows(Selection(files=(str(folder / "挡风板安装检查_stage_a.jsonl"),)), "all")
    assert set(counts) == {"BBU线缆布放要求"}


@pytest.mark.parametrize("setup, missions, message", [
    (lambda d: Selection(stage_a_dir=str(d / "nope")), "all", "does not exist"),
    (lambda d: Selection(), "all", "no Stage-A input"),
    (lambda d: Selection(files=(str(d / "*.jsonlx"),)), "all", "matches nothing"),
    (lambda d: Selection(stage_a_dir=str(d)), "RRU安装检查", "unknown mission 'RRU安装检查'; known missions"),
    (lambda d: Selection(stage_a_dir=str(d)), "BBU接地线检查", "missing Stage-A output: .*BBU接地线检查_stage_a.jsonl"),
])
def test_wrong_selection_is_a_clear_error(tmp_path, setup, missions, message):
    with pytest.raises(ValueError, match=message):
        build_rows(replace(setup(tmp_path), missions=missions), "all")


@pytest.mark.parametrize("names, read, refusal", [
    # a file named after an alias is read, for 'all' and by name
    (["BBU安装方式检查(正装)"], "BBU安装方式检查(正装)_stage_a.jsonl", None),
    (["BBU安装方式检查"], "BBU安装方式检查_stage_a.jsonl", None),
    # under two of its names: which one is meant cannot be told
    (["BBU安装方式检查（正装）", "BBU安装方式检查(正装)"], None, "under 2 of its names"),
])
def test_a_stage_a_file_named_after_an_alias_is_read_or_refused_naming_both(tmp_path, names, read, refusal):
    source = write_stage_a_all_missions(tmp_path / "src", groups_per_mission=4)
    folder = tmp_path / "sa"
    folder.mkdir()
    for name in names:
        (folder / f"{name}_stage_a.jsonl").write_bytes((source / "BBU安装方式检查（正装）_stage_a.jsonl").read_bytes())
    for missions in ("all", "BBU安装方式检查（正装）"):
        selection = Selection(stage_a_dir=str(folder), missions=missions)
        if refusal:
            with pytest.raises(DatasetError, match=refusal) as err:
                build_rows(selection, "all")
            assert all(f"{n}_stage_a.jsonl" in str(err.value) for n in names)
        else:
            rows, counts = build_rows(selection, "all")
            assert counts["BBU安装方式检查（正装）"]["rows"] == 4 == len(rows)


def test_a_stage_a_file_naming_no_mission_is_named_in_a_warning(tmp_path, caplog):
    folder = write_stage_a_all_missions(tmp_path / "sa", groups_per_mission=2)
    (folder / "RRU安装检查_stage_a.jsonl").write_text("")
    with caplog.at_level(logging.WARNING, logger="group_qc.stage_b"):
        build_rows(Selection(stage_a_dir=str(folder)), "all")
    assert "RRU安装检查_stage_a.jsonl names no known mission" in caplog.text


def test_unmerged_shards_are_pointed_out(tmp_path):
    (tmp_path / "BBU接地线检查_stage_a.shard-00000-of-00002.jsonl").write_text("")
    with pytest.raises(DatasetError, match="run group-qc stage-a-merge first"):
        build_rows(Selection(stage_a_dir=str(tmp_path), missions="BBU接地线检查"), "all")


def test_torn_last_line_is_skipped_but_a_bad_line_or_duplicate_is_refused(tmp_path):
    folder = write_stage_a_all_missions(tmp_path / "sa")
    path = folder / "BBU接地线检查_stage_a.jsonl"
    one = Selection(stage_a_dir=str(folder), missions="BBU接地线检查")
    with path.open("a", encoding="utf-8") as f:
        f.write('{"group_id": "torn", "mission": "BBU接')
    rows, _ = build_rows(one, "all")
    assert len(rows) == 10
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines[:3] + [lines[3].replace('"label": "fail"', '"label": "bad"')] + lines[4:10]) + "\n",
                    encoding="utf-8")
    with pytest.raises(DatasetError, match=r"BBU接地线检查_stage_a.jsonl:4: .*label must be"):
        build_rows(one, "all")
    path.write_text("\n".join(lines[:10] + lines[:1]) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="appears twice"):
        build_rows(one, "all")


# ------------------------------------------------------------------ unreviewed records (issue 14)
def _preflight(selection):
    """stage_b.train.preflight as a user runs it; it stops at the data, before any model is loaded."""
    from stage_b.train import preflight
    return preflight.main(["--model", "/nonexistent-model", "--stage_a_dir", selection.stage_a_dir,
                           "--mission", selection.missions, "--split", "all"])


@pytest.mark.parametrize("use", [
    lambda one: build_rows(one, "train"),                     # training (swift_plugins/qc_plugin.py, launch)
    lambda one: build_rows(one, "val", allow_empty=True),     # evaluation and the validation callback
    lambda one: build_rows(one, "all"),
    lambda one: load_records(one),                            # require_label is the default
], ids=["train", "val", "all", "load_records"])
def test_an_unreviewed_record_is_never_a_target_nor_scored_and_its_line_is_named(tmp_path, use):
    """A null label would otherwise become 不通过 (`PASS if pass else FAIL`): the whole selection is refused."""
    folder = write_stage_a_all_missions(tmp_path / "sa", unreviewed={3})
    one = Selection(stage_a_dir=str(folder), missions="BBU接地线检查")
    with pytest.raises(DatasetError, match=r"BBU接地线检查_stage_a.jsonl:4: group QC-T-20250101-3 is unreviewed "
                                           r"\(label null: Stage-A ran with --unlabeled\), so it cannot be a "
                                           r"training target or be scored; .*group-qc judge"):
        use(one)


def test_preflight_refuses_unreviewed_records_naming_the_line(tmp_path, capsys):
    folder = write_stage_a_all_missions(tmp_path / "sa", unreviewed={0})
    assert _preflight(Selection(stage_a_dir=str(folder), missions="BBU接地线检查")) == 2
    assert "BBU接地线检查_stage_a.jsonl:1: group QC-T-20250101-0 is unreviewed" in capsys.readouterr().err


def test_judging_reads_unreviewed_records_with_require_label_false(tmp_path):
    folder = write_stage_a_all_missions(tmp_path / "sa", unreviewed={3})
    records = load_records(Selection(stage_a_dir=str(folder), missions="BBU接地线检查"), require_label=False)
    assert [r["label"] for r in records][2:5] == ["pass", None, "pass"]


def _labelled_rows(fails, passes):
    return ([{"group_id": f"F{k}", "solution": "不通过"} for k in range(fails)] +
            [{"group_id": f"P{k}", "solution": "通过"} for k in range(passes)])


@pytest.mark.parametrize("fails, passes, expected_rows", [
    (61, 198, 396),  # the rarer verdict is cycled up to the other's count
    (5, 5, 10),
    (7, 2, 14),
    (0, 9, 9),       # one verdict only: nothing to balance, returned as is
])
def test_balanced_order_alternates_verdicts_so_every_even_window_is_half_fails(fails, passes, expected_rows):
    rows = _labelled_rows(fails, passes)
    out = balance_by_label(rows, seed=3)
    assert len(out) == expected_rows
    if fails and passes:
        for start in range(0, len(out) - 3, 4):  # 4 prompts per step, as in the demo
            assert [r["solution"] for r in out[start:start + 4]].count("不通过") == 2
        assert {r["group_id"] for r in out} == {r["group_id"] for r in rows}  # nobody dropped
    assert balance_by_label(rows, seed=3) == out  # deterministic for a seed
    if fails > 2 and passes > 2:
        assert balance_by_label(rows, seed=4) != out


def test_balance_applies_to_the_train_split_only_and_bad_setting_is_refused(tmp_path):
    folder = write_stage_a_all_missions(tmp_path / "sa", groups_per_mission=12)
    source = selection_from(environ={"GROUP_QC_STAGE_A_DIR": str(folder), "GROUP_QC_BALANCE_LABELS": "1"})
    assert source.balance_labels
    train, _ = build_rows(source, "train")
    val, _ = build_rows(source, "val")
    plain_val, _ = build_rows(Selection(stage_a_dir=str(folder)), "val")
    assert [r["solution"] for r in train[:6]] == ["不通过", "通过"] * 3
    assert val == plain_val  # evaluation sees every held-out group once, in file order
    with pytest.raises(SettingError, match="GROUP_QC_BALANCE_LABELS='yes please'"):
        selection_from(environ={"GROUP_QC_BALANCE_LABELS": "yes please"})


# ------------------------------------------------------------------ a reader that skips anything says so (issue 13)
def _one_mission(folder):
    return Selection(stage_a_dir=str(folder), missions="BBU接地线检查")


@pytest.mark.parametrize("damage, rows, warning", [
    # a killed Stage-A's torn last line: skipped, with the file and line
    (lambda p: p.write_bytes(p.read_bytes() + b'{"group_id": "torn", "mission": "BBU'), 10,
     "BBU接地线检查_stage_a.jsonl:11: torn last line skipped"),
    # a complete but unparseable last line without its newline: the same
    (lambda p: p.write_bytes(p.read_bytes() + b'{"group_id": oops}'), 10,
     "BBU接地线检查_stage_a.jsonl:11: torn last line"),
    # one record, an editor's BOM and no final newline: read, not dropped
    (lambda p: p.write_bytes(b"\xef\xbb\xbf" + p.read_bytes().split(b"\n")[0]), 1, None),
    # a zero-byte mission file: no rows, and a warning naming it
    (lambda p: p.write_bytes(b""), 0,
     "BBU接地线检查_stage_a.jsonl holds no group of the selected missions (an empty file)"),
])
def test_partial_stage_a_files_are_read_or_reported(tmp_path, caplog, damage, rows, warning):
    folder = write_stage_a_all_missions(tmp_path / "sa")
    damage(folder / "BBU接地线检查_stage_a.jsonl")
    with caplog.at_level(logging.WARNING, logger="group_qc.stage_b"):
        got, _ = build_rows(_one_mission(folder), "all", allow_empty=True)
    assert len(got) == rows
    if warning:
        assert warning in caplog.text
    else:
        assert not caplog.text


def test_shard_parts_beside_a_merged_file_must_be_merged(tmp_path):
    folder = write_stage_a_all_missions(tmp_path / "sa")
    merged = folder / "BBU接地线检查_stage_a.jsonl"
    lines = merged.read_text(encoding="utf-8").splitlines(keepends=True)
    part = folder / "BBU接地线检查_stage_a.shard-00001-of-00002.jsonl"
    part.write_text("".join(lines[5:]), encoding="utf-8")   # every group of this part is in the merged file
    assert len(build_rows(_one_mission(folder), "all")[0]) == 10
    merged.write_text("".join(lines[:8]), encoding="utf-8")  # a merge older than the part
    with pytest.raises(DatasetError, match=r"shard parts hold groups that .*BBU接地线检查_stage_a.jsonl lacks "
                                           r"\(.*shard-00001-of-00002.jsonl: 2\): run group-qc stage-a-merge"):
        build_rows(_one_mission(folder), "all")


# planted-bug test (issue 27, class 10): photo-aware rows, photos in k order
A = "BBU接地线检查"
N_PHOTOS = 12
# 12 colours far apart (each channel steps by at least 20 between neighbours), one per photo position
COLOURS = [(20 * k, 255 - 20 * k, (70 * k) % 256) for k in range(1, 13)]


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
