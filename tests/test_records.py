"""The Stage-A record contract, shared by writer, merger and Stage-B reader."""
import pytest

from stage_a.discovery import Group
from qc_core.records import RecordError, make_record, normalize_summary, summaries_of, validate_record

G = Group("QC-AB-20250101-1", "BBU接地线检查", "fail", ("m/审核不通过/g/1.jpg", "m/审核不通过/g/2.jpg"))


@pytest.mark.parametrize("raw, clean", [
    ("BBU×1，螺丝×4/齐全", "BBU×1，螺丝×4/齐全"),
    ("  接地线×1/已捆扎 \n", "接地线×1/已捆扎"),
    ("接地排×1\n备注：未拧紧", "接地排×1 备注：未拧紧"),           # one line by contract
    ("<think>先看螺丝</think>螺丝×3/缺失", "螺丝×3/缺失"),
    ("无关图片", "无关图片"),
])
def test_normalize_summary(raw, clean):
    assert normalize_summary(raw) == clean


@pytest.mark.parametrize("raw", ["", "   \n\t", "<think>...</think>", None, 3])
def test_empty_or_non_text_summary_is_invalid(raw):
    with pytest.raises(RecordError):
        normalize_summary(raw)


def test_make_record_fields_and_order():
    rec = make_record(G, ["a", "b"], model="/models/qwen", created_at="2026-01-01T00:00:00+00:00")
    assert list(rec) == ["group_id", "mission", "label", "images", "per_image", "model", "created_at"]
    assert rec["per_image"] == {"图片_1": "a", "图片_2": "b"}
    assert summaries_of(rec) == ["a", "b"]


def good():
    return make_record(G, ["a", "b"], model="m")


@pytest.mark.parametrize("mutate, message", [
    (lambda r: r.pop("label"), "missing field"),
    (lambda r: r.update(label="ok"), "label must be 'pass', 'fail' or null"),
    (lambda r: r.update(label="null"), "label must be"),     # the word, not JSON null
    (lambda r: r.update(label=""), "label must be"),
    (lambda r: r.update(label=False), "label must be"),
    (lambda r: r.update(per_image={"图片_2": "b", "图片_1": "a"}), "in order"),
    (lambda r: r.update(per_image={"图片_1": "a"}), "one per image"),
    (lambda r: r.update(per_image={"图片_1": "a", "图片_2": "x\ny"}), "single line"),
    (lambda r: r.update(per_image={"图片_1": "a", "图片_2": " "}), "non-empty"),
    (lambda r: r.update(images=[]), "non-empty list"),
    (lambda r: r.update(mission="BBU接地线"), "unknown mission"),
])
def test_validate_record_names_the_broken_rule(mutate, message):
    rec = good()
    mutate(rec)
    with pytest.raises(RecordError, match=message):
        validate_record(rec, known_missions=["BBU接地线检查"])


def test_summary_count_must_match_photos():
    with pytest.raises(RecordError, match="1 summaries for 2 photos"):
        make_record(G, ["a"], model="m")


@pytest.mark.parametrize("label", ["pass", "fail", None])   # None: an unreviewed group (Stage-A --unlabeled)
def test_label_is_pass_fail_or_null_and_null_survives_the_jsonl_round_trip(label):
    import json
    from dataclasses import replace
    rec = make_record(replace(G, label=label), ["a", "b"], model="m")
    line = json.dumps(rec, ensure_ascii=False)
    assert ('"label": null' in line) == (label is None)
    assert validate_record(json.loads(line), known_missions=["BBU接地线检查"])["label"] == label


def test_merge_keeps_unreviewed_records_in_discovery_order(tmp_path):
    """Shards of an --unlabeled run: parts of <mission>/<group>/ records merge like labelled ones."""
    from qc_core.jsonl import JsonlAppender, iter_jsonl
    from stage_a.merge import merge_mission
    from stage_a.outputs import MissionOutputs
    stem = "BBU接地线检查_stage_a"
    for index, folders in enumerate([["g10", "g1"], ["g2"]]):
        with JsonlAppender(MissionOutputs(tmp_path, stem, 2, index).main) as part:
            for name in folders:
                part.write(make_record(Group(name, "BBU接地线检查", None,
                                             (f"BBU接地线检查/{name}/10.jpg", f"BBU接地线检查/{name}/9.jpg")),
                                       ["a", "b"], "m"))
    assert merge_mission(tmp_path, stem, ["BBU接地线检查"]) == (3, 0)
    merged = [r for _, r in iter_jsonl(tmp_path / f"{stem}.jsonl")]
    assert [(r["group_id"], r["label"]) for r in merged] == [("g1", None), ("g2", None), ("g10", None)]
