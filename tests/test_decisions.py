"""Reviewers' decisions imported as labels (stage_b.labels.decisions), on real verdict files: the labelled Stage-A files
the rest of group-qc reads, the append-only log, conflicts, and every hand-edited line named."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.records import summaries_of
from stage_b.data.dataset import load_records
from qc_core.jsonl import file_sha256, write_jsonl_atomic
from stage_b.labels.decisions import LOG, import_decisions
from stage_b.labels.resolve import resolve
from stage_b.labels.decision_lines import DecisionsError
from stage_b.data.settings import Selection
from stage_b.contract.verdict import FAIL, PASS

REPO = Path(__file__).resolve().parent.parent
M = "BBU接地线检查"
GROUPS = {"QC-D-1": ("不通过", 0.91), "QC-D-2": ("通过", 0.08), "QC-D-3": ("不通过", 0.66), "QC-D-4": ("通过", 0.31)}


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def verdicts(tmp_path) -> Path:
    """A judge's verdicts file: each group with its summaries, photos and input folder."""
    return _jsonl(tmp_path / f"{M}_verdicts.jsonl", [
        {"group_id": gid, "mission": M, "verdict": v, "p_fail": p, "threshold": 0.5, "needs_review": True,
         "review_why": [], "reply": f"{v}\n理由: 图片_1", "label": None, "images": [f"{gid}/1.jpg", f"{gid}/2.jpg"],
         "summaries": ["接地线×1/已捆扎", "接地排×1，接地线×1/散乱"], "input_dir": "/photos/today",
         "rests_on": {"sha256": "x", "stage_a_model": "/models/stage-a"}} for gid, (v, p) in GROUPS.items()])


def _decision(source: Path, gid: str, decision: str, reviewer="王工", at="2026-11-27T08:00:00.000Z", **extra):
    verdict, p = GROUPS.get(gid, (None, None))
    return {"group_id": gid, "mission": M, "decision": decision, "note": "", "reviewer": reviewer, "decided_at": at,
            "verdict": verdict, "p_fail": p, "source": {"file": str(source), "sha256": file_sha256(source)}, **extra}


def test_decisions_become_a_labelled_stage_a_file_that_evaluation_reads(verdicts, tmp_path):
    decisions = _jsonl(tmp_path / "decisions.jsonl", [
        _decision(verdicts, "QC-D-1", "不通过"), _decision(verdicts, "QC-D-2", "不通过"),   # the model missed QC-D-2
        _decision(verdicts, "QC-D-3", "通过", note="螺丝其实齐全"), _decision(verdicts, "QC-D-4", "unsure")])
    out = tmp_path / "labels"
    result = import_decisions([decisions], out)
    assert (result["added"], result["already"]) == (4, 0)
    s = result["summary"][M]
    assert (s["decided"], s["labelled"], s["agreed"], s["unsure"], s["conflicts"]) == (4, 3, 1, 1, 0)
    assert (s["missed"], s["fail"], s["overkilled"], s["pass"]) == (1, 2, 1, 1)
    records = load_records(Selection(stage_a_dir=str(out)))
    assert {r["group_id"]: r["label"] for r in records} == {"QC-D-1": "fail", "QC-D-2": "fail", "QC-D-3": "pass"}
    r = next(r for r in records if r["group_id"] == "QC-D-1")
    assert (summaries_of(r) == ["接地线×1/已捆扎", "接地排×1，接地线×1/散乱"]
            and r["images"] == ["QC-D-1/1.jpg", "QC-D-1/2.jpg"])
    assert r["input_dir"] == "/photos/today" and r["model"] == "/models/stage-a"
    again = import_decisions([decisions], out)   # the same file again adds nothing
    assert (again["added"], again["already"]) == (0, 4)
    assert len((out / LOG).read_text(encoding="utf-8").splitlines()) == 4


def test_two_reviewers_who_disagree_are_both_kept_and_the_group_is_not_labelled(verdicts, tmp_path):
    out = tmp_path / "labels"
    import_decisions([_jsonl(tmp_path / "a.jsonl", [_decision(verdicts, "QC-D-1", "不通过", reviewer="王工")])], out)
    result = import_decisions([_jsonl(tmp_path / "b.jsonl", [_decision(verdicts, "QC-D-1", "通过", reviewer="李工")])],
                              out)
    assert result["groups"][(M, "QC-D-1")]["status"] == "conflict" and result["summary"][M]["conflicts"] == 1
    assert len((out / LOG).read_text(encoding="utf-8").splitlines()) == 2
    assert load_records(Selection(stage_a_dir=str(out)), require_label=False) == []
    # the same reviewer changing their mind: the latest decision counts, no conflict
    later = _decision(verdicts, "QC-D-1", "不通过", reviewer="李工", at="2026-11-27T09:00:00.000Z")
    result = import_decisions([_jsonl(tmp_path / "c.jsonl", [later])], out)
    assert result["groups"][(M, "QC-D-1")]["status"] == FAIL


@pytest.mark.parametrize("edit, message", [
    (lambda d, v: {**d, "group_id": "QC-NOT-THERE"}, "group QC-NOT-THERE of BBU接地线检查 is not in"),
    (lambda d, v: {**d, "mission": "屋顶检查"}, "屋顶检查"),
    (lambda d, v: {**d, "decision": "pass"}, "decision 'pass' is not one of 通过, 不通过, unsure"),
    (lambda d, v: {**d, "decided_at": "yesterday"}, "is not an ISO time"),
    (lambda d, v: {k: x for k, x in d.items() if k != "source"}, "missing source"),
    (lambda d, v: {**d, "source": {"file": str(v) + ".gone", "sha256": "x"}}, "does not exist"),
])
def test_a_hand_edited_line_is_named_and_nothing_is_imported(verdicts, tmp_path, edit, message):
    good = _decision(verdicts, "QC-D-2", "不通过")
    path = _jsonl(tmp_path / "decisions.jsonl", [good, edit(_decision(verdicts, "QC-D-1", "不通过"), verdicts)])
    with pytest.raises(DecisionsError, match="nothing was imported") as err:
        import_decisions([path], tmp_path / "labels")
    assert f"{path}:2:" in str(err.value) and message in str(err.value)
    assert not (tmp_path / "labels" / LOG).exists()


def test_a_torn_or_duplicated_line_is_named(verdicts, tmp_path):
    line = json.dumps(_decision(verdicts, "QC-D-1", "不通过"), ensure_ascii=False)
    torn = tmp_path / "torn.jsonl"
    torn.write_text(line + "\n" + line[:40], encoding="utf-8")
    with pytest.raises(DecisionsError, match=f"{torn}:2"):
        import_decisions([torn], tmp_path / "labels")
    twice = _jsonl(tmp_path / "twice.jsonl", [_decision(verdicts, "QC-D-1", "不通过"),
                                              _decision(verdicts, "QC-D-1", "通过")])
    with pytest.raises(DecisionsError, match=f"{twice}:2: 王工 decided group QC-D-1 of {M} already at line 1"):
        import_decisions([twice], tmp_path / "labels")


def test_decisions_from_a_page_whose_verdicts_changed_since_are_refused(verdicts, tmp_path):
    path = _jsonl(tmp_path / "decisions.jsonl", [_decision(verdicts, "QC-D-1", "不通过")])
    with verdicts.open("a", encoding="utf-8") as f:   # the judge resumed and appended after the page was made
        f.write(json.dumps({"group_id": "QC-D-9", "mission": M}, ensure_ascii=False) + "\n")
    with pytest.raises(DecisionsError, match="has changed since the review page was made") as err:
        import_decisions([path], tmp_path / "labels")
    assert f"{path}:1" in str(err.value) and "render the page again" in str(err.value)


def test_the_command_prints_per_mission_and_exits_2_on_bad_input(verdicts, tmp_path):
    path = _jsonl(tmp_path / "decisions.jsonl", [_decision(verdicts, "QC-D-2", "不通过")])
    ok = subprocess.run([sys.executable, "-m", "group_qc", "decisions", "--decisions", str(path), "--output_dir",
                         str(tmp_path / "labels")], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert f"{M}: 1 decided in all imports so far, 0 unsure, 0 conflict(s)" in ok.stdout
    assert ("reviewed (sent to a person by the rule, so not a sample of the work decided without review): the verdict "
            "line agreed on 0 of 1, passed 1 of 1 the reviewer failed, failed 0 of 0 the reviewer passed") in ok.stdout
    assert "blind audits" not in ok.stdout   # none of these groups was audited
    bad = subprocess.run([sys.executable, "-m", "group_qc", "decisions", "--decisions", str(tmp_path / "nope.jsonl"),
                          "--output_dir", str(tmp_path / "labels")], cwd=REPO, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "nope.jsonl: no such decisions file" in bad.stderr and "Traceback" not in bad.stderr


def _logged(reviewer, decision, at, record, history=()):
    return {"mission": "m", "group_id": "g", "reviewer": reviewer, "decision": decision, "decided_at": at,
            "record": record, "verdict": record.get("verdict"), "route": record.get("route"), "history": list(history)}


def _change(to, at, frm=None):
    return {"from": frm, "to": to, "at": at, "by": "r", "on_screen_ms": 1200}


FIRST = _change("通过", "2026-11-27T10:04:00+00:00")                     # stamped ahead (within the 5-minute slack)
CORRECTED = [FIRST, _change("不通过", "2026-11-27T10:01:00+00:00", "通过")]   # the correction, by a clock set back


@pytest.mark.parametrize("what, log, status, record_id", [
    ("of two decisions in the same second, the later logged wins",
     [_logged("r", "通过", "2026-11-27T10:00:00+00:00", {"id": 1}),
      _logged("r", "不通过", "2026-11-27T10:00:00+00:00", {"id": 2})], FAIL, 2),
    ("the label takes the newest decision's record, whoever decided it",
     [_logged("a", "不通过", "2026-11-27T11:00:00+00:00", {"id": 2, "verdict": "不通过", "route": "audit"}),
      _logged("b", "不通过", "2026-11-27T10:00:00+00:00", {"id": 1, "verdict": "通过", "route": "review"})],
     FAIL, 2),
    ("times compare in UTC: 18:00 at +08:00 is before 11:00 UTC",
     [_logged("r", "不通过", "2026-11-27T11:00:00+00:00", {"id": 1}),
      _logged("r", "通过", "2026-11-27T18:00:00+08:00", {"id": 2})], FAIL, 1),
    # planted: decided_at alone -> the correction, stamped three minutes earlier, lost and the label stayed 通过
    ("a correction on the page wins whatever the clocks said (its history continues the first decision's)",
     [_logged("r", "通过", "2026-11-27T10:04:00+00:00", {"id": 1}, [FIRST]),
      _logged("r", "不通过", "2026-11-27T10:01:00+00:00", {"id": 2}, CORRECTED)], FAIL, 2),
    ("and the first decision imported again after it does not undo it",
     [_logged("r", "不通过", "2026-11-27T10:01:00+00:00", {"id": 2}, CORRECTED),
      _logged("r", "通过", "2026-11-27T10:04:00+00:00", {"id": 1}, [FIRST])], FAIL, 2),
    # two browsers: the first stamped minutes ahead (its clock within the slack) must not beat the correction
    # (planted: decided_at alone -> the 10:05 decision wins)
    ("two pages' histories within the clocks' slack: the line logged later, the correction, decides",
     [_logged("r", "不通过", "2026-11-27T10:05:00+00:00", {"id": 1}, [_change("不通过", "2026-11-27T10:05:00+00:00")]),
      _logged("r", "通过", "2026-11-27T10:01:00+00:00", {"id": 2}, [_change("通过", "2026-11-27T10:01:00+00:00")])],
     PASS, 2),
    ("two pages' histories further apart than a clock can be: the clock decides",
     [_logged("r", "不通过", "2026-11-27T10:30:00+00:00", {"id": 1}, [_change("不通过", "2026-11-27T10:30:00+00:00")]),
      _logged("r", "通过", "2026-11-27T10:01:00+00:00", {"id": 2}, [_change("通过", "2026-11-27T10:01:00+00:00")])],
     FAIL, 1),
])
def test_which_decision_labels_a_group(what, log, status, record_id):
    from stage_b.labels.resolve import resolve
    g = resolve(log)[("m", "g")]
    assert (g["status"], g["record"]["id"]) == (status, record_id), what


def test_a_decision_time_is_kept_in_utc_so_that_times_compare_as_text():
    """evidence_through and a withdrawal's date are compared as ISO text: a time kept in the reviewer's zone would
    sort a decision made after a withdrawal before it."""
    from stage_b.labels.decision_lines import decided_at_time
    assert decided_at_time("2026-11-27T18:00:00+08:00").isoformat(timespec="seconds") == "2026-11-27T10:00:00+00:00"
    assert decided_at_time("2026-11-27T10:00:00Z").isoformat(timespec="seconds") == "2026-11-27T10:00:00+00:00"


# --------------------------------------------------------------------------------------------------------------
# Decisions that would destroy a Stage-A folder or poison a labels folder are refused before anything is written
# --------------------------------------------------------------------------------------------------------------
# hostile input (issue 34)
@pytest.fixture
def day(tmp_path, synthetic):
    from tests.helpers import audited_day
    return audited_day(tmp_path, synthetic)


def one_decision(tmp_path, day, name="d.jsonl", **edit):
    from tests.helpers import write_decision_file
    out, verdicts = day
    path = write_decision_file(tmp_path, out, verdicts[0], name=name)
    line = {**json.loads(path.read_text(encoding="utf-8")), **edit}
    for key in [k for k, v in edit.items() if v is ...]:
        del line[key]
    write_jsonl_atomic(path, [line])
    return path


def test_an_import_into_a_stage_a_folder_is_refused_and_its_files_stay(tmp_path, day):
    stage_a = tmp_path / "stage_a"
    stage_a.mkdir()
    (stage_a / f"{M}_stage_a.jsonl").write_text('{"group_id": "x"}\n' * 6, encoding="utf-8")
    before = (stage_a / f"{M}_stage_a.jsonl").read_bytes()
    with pytest.raises(DecisionsError, match="is not a labels folder this import wrote"):
        import_decisions([one_decision(tmp_path, day)], stage_a)
    assert (stage_a / f"{M}_stage_a.jsonl").read_bytes() == before and not (stage_a / "decisions.jsonl").exists()


@pytest.mark.parametrize("decided_at, message", [
    (..., "is missing"), ("", "is missing"), (None, "is missing"),
    ("2026-11-27T09:00:00", "not an ISO time with a time zone"), ("0000-01-01T00:00:00Z", "not an ISO time"),
    ("9999-01-01T00:00:00Z", "is in the future"), ("1970-01-01T00:00:00Z", "before 2000"),
])
def test_a_decision_time_that_cannot_be_ordered_is_refused_and_the_folder_stays_usable(tmp_path, day, decided_at,
                                                                                       message):
    bad = one_decision(tmp_path, day, "bad.jsonl", decided_at=decided_at)
    with pytest.raises(DecisionsError, match=f"bad.jsonl:1: decided_at.*{message}"):
        import_decisions([bad], tmp_path / "labels")
    good = one_decision(tmp_path, day, "good.jsonl")
    assert import_decisions([good], tmp_path / "labels")["added"] == 1   # nothing was poisoned
    line = json.loads((tmp_path / "labels" / "decisions.jsonl").read_text(encoding="utf-8"))
    assert line["decided_at"].endswith("+00:00")   # normalised to UTC


def test_an_export_with_nothing_decided_is_refused(tmp_path):
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DecisionsError, match="no decision in .*empty.jsonl: decide groups on the review page"):
        import_decisions([tmp_path / "empty.jsonl"], tmp_path / "labels")
    assert not (tmp_path / "labels").exists()


def test_a_logged_decision_without_a_reviewer_or_time_resolves_without_a_traceback():
    log = [{"group_id": "g", "mission": M, "decision": "不通过", "record": {}, "verdict": None},
           {"group_id": "g", "mission": M, "decision": "不通过", "reviewer": "b", "decided_at": "2026-11-27T09:00:00Z",
            "record": {}, "verdict": None}]
    assert resolve(log)[(M, "g")]["status"] == FAIL


def test_terminal_escape_codes_in_a_reviewer_name_are_shown_not_run():
    from stage_b.labels.decisions import printable
    assert printable("王工\x1b[31m") == "王工\\x1b[31m"


def test_a_label_keeps_only_the_stage_a_records_own_fields_and_refuses_lines_of_other_files(tmp_path):
    """A decisions file may name any JSONL with its sha256 as its source: only a Stage-A record or a verdict line
    becomes a label, and a Stage-A record gives only its own fields."""
    from qc_core.jsonl import file_sha256
    from stage_b.labels.decision_lines import decision_line
    good = {"group_id": "g", "mission": M, "label": None, "images": ["a.jpg"],
            "per_image": {"图片_1": "接地线×1/已捆扎"},
            "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00", "admin": True, "input_dir": "/photos"}
    other = {"group_id": "h", "mission": M, "anything": "else"}
    src = tmp_path / "src.jsonl"
    write_jsonl_atomic(src, [good, other])
    source = {"file": str(src), "sha256": file_sha256(src)}
    write_jsonl_atomic(tmp_path / "d.jsonl", [decision_line({"group_id": "h", "mission": M}, "通过", "r", source)])
    with pytest.raises(DecisionsError, match="neither a Stage-A record nor a verdict line"):
        import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    write_jsonl_atomic(tmp_path / "d.jsonl", [decision_line({"group_id": "g", "mission": M}, "通过", "r", source)])
    import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    (label,) = [json.loads(x) for x in (tmp_path / "labels" / f"{M}_stage_a.jsonl").read_text(
        encoding="utf-8").splitlines()]
    assert "admin" not in label and label["label"] == "pass" and label["per_image"] == good["per_image"]


def test_a_torn_decisions_file_names_what_to_do_and_never_suggests_a_flag_the_command_lacks(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"group_id": "g", "mission": "x"}\n{"group_id": "tor', encoding="utf-8")
    with pytest.raises(DecisionsError) as err:
        import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    assert "d.jsonl:2" in str(err.value) and "Export the decisions from the review page again" in str(err.value)
    assert "--overwrite" not in str(err.value)


# hostile input (issue 34, case 8): reviewers are named
def _one_group_source(tmp_path):
    from qc_core.jsonl import file_sha256
    record = {"group_id": "g", "mission": M, "label": None, "images": ["a.jpg"],
              "per_image": {"图片_1": "接地线×1/已捆扎"},
              "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00", "input_dir": "/photos"}
    src = tmp_path / "src.jsonl"
    write_jsonl_atomic(src, [record])
    return record, {"file": str(src), "sha256": file_sha256(src)}


@pytest.mark.parametrize("first, second, unnamed, outcome", [
    ("", "", "", "no reviewer name"),                  # two nameless exports: refused, never merged into one
    ("王工", "", "", "no reviewer name"),
    ("王工", "", "李工", "conflict"),                   # --reviewer names the unnamed file: two people, who disagree
    ("王工", "王工\x1b[2J", "", "shows nothing or moves the text"),   # control characters are not a name
    ("王工", "x" * 81, "", "over 80"),
    ("王工", "李工", "", "conflict"),
])
def test_decisions_without_a_name_are_refused_not_merged(tmp_path, first, second, unnamed, outcome):
    from stage_b.labels.decision_lines import decision_line
    record, source = _one_group_source(tmp_path)
    for name, reviewer, decision, at in [("a", first, "通过", "2026-11-27T09:00:00+00:00"),
                                         ("b", second, "不通过", "2026-11-27T10:00:00+00:00")]:
        write_jsonl_atomic(tmp_path / f"{name}.jsonl", [decision_line(record, decision, reviewer, source,
                                                                      decided_at=at)])
    files = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    if outcome == "conflict":
        result = import_decisions(files, tmp_path / "labels", unnamed=unnamed)
        assert result["groups"][(M, "g")]["status"] == "conflict"
        return
    with pytest.raises(DecisionsError, match=outcome) as err:
        import_decisions(files, tmp_path / "labels", unnamed=unnamed)
    assert "b.jsonl:1" in str(err.value) and not (tmp_path / "labels").exists()
    assert "\x1b" not in str(err.value)


# --------------------------------------------------------------------------------------------------------------
# Which decision counts
# --------------------------------------------------------------------------------------------------------------
# planted-bug tests (issue 36)
def decision(reviewer, decision_, at, gid="g1", mission=M):
    return {"group_id": gid, "mission": mission, "decision": decision_, "note": "", "reviewer": reviewer,
            "decided_at": at, "verdict": None, "record": {"group_id": gid}, "source": {"sha256": "s"}}


@pytest.mark.parametrize("log, status", [
    ([decision("a", "通过", "2026-11-27T09:00:00+00:00"), decision("a", "不通过", "2026-11-27T10:00:00+00:00")],
     FAIL),
    ([decision("a", "不通过", "2026-11-27T10:00:00+00:00"), decision("a", "通过", "2026-11-27T09:00:00+00:00")],
     FAIL),
    ([decision("a", "unsure", "2026-11-27T09:00:00+00:00"), decision("b", "不通过", "2026-11-27T09:30:00+00:00")],
     FAIL),
    ([decision("a", "通过", "2026-11-27T09:00:00+00:00"), decision("b", "不通过", "2026-11-27T09:30:00+00:00")],
     "conflict"),
])
def test_each_reviewers_newest_decision_counts_and_unsure_takes_no_side(log, status):
    from stage_b.labels.resolve import resolve
    assert resolve(log)[(M, "g1")]["status"] == status


def test_the_same_decision_in_two_files_of_one_import_is_appended_once(tmp_path, synthetic):
    from stage_b.labels.decisions import import_decisions
    from tests.helpers import audited_day, write_decision_file
    out, verdicts = audited_day(tmp_path, synthetic)
    first = write_decision_file(tmp_path, out, verdicts[0], name="a.jsonl")
    (tmp_path / "b.jsonl").write_bytes(first.read_bytes())
    result = import_decisions([first, tmp_path / "b.jsonl"], tmp_path / "labels")
    assert (result["added"], result["already"]) == (1, 1)
    assert len((tmp_path / "labels" / "decisions.jsonl").read_text(encoding="utf-8").splitlines()) == 1


def test_a_decision_time_in_another_zone_is_logged_in_utc(tmp_path):
    """A reviewer's clock at +08:00: the log holds the same moment in UTC, so that times compare as text (planted: the
    export's own form kept -> 10:00+08:00 sorts after 03:00+00:00 though it is an hour earlier, and a label decided
    before a withdrawal lifts it)."""
    from qc_core.missions import load_registry
    from stage_b.labels.decision_lines import SourceFiles, check_line
    source = tmp_path / "sa.jsonl"
    write_jsonl_atomic(source, [{"group_id": "g1", "mission": M, "images": ["1.jpg"], "label": None,
                                 "per_image": {"图片_1": "接地线×1/已捆扎"}, "model": "/m"}])
    line = {"group_id": "g1", "mission": M, "decision": "通过", "note": "", "reviewer": "王工",
            "decided_at": "2026-11-28T10:00:00+08:00", "verdict": None, "p_fail": None,
            "source": {"file": str(source), "sha256": file_sha256(source)}, "history": []}
    decided, problem = check_line(line, "x:1", load_registry(), SourceFiles(load_registry()))
    assert problem is None and decided["decided_at"] == "2026-11-28T02:00:00+00:00"


@pytest.mark.parametrize("history, says", [
    ([{"from": None, "to": "不通过", "at": "2026-11-28T09:00:00+00:00", "by": "李工", "on_screen_ms": 900}],
     "names 李工 as making changes to 王工's decision"),
    ([{"from": None, "to": "通过", "at": "2026-11-28T09:00:00+00:00", "by": "王工", "on_screen_ms": 900}],
     "ends on '通过', and the line's decision is '不通过'"),
    ([{"from": None, "to": "不通过", "at": "2026-11-28T09:30:00+00:00", "by": "王工", "on_screen_ms": 900}],
     "after the decision itself"),
])
def test_an_exports_history_that_is_not_this_decisions_is_refused(tmp_path, history, says):
    """An export's history naming another reviewer, ending on another decision or stamped after decided_at was
    imported as it was (planted: history_problem returning None -> imported)."""
    from qc_core.missions import load_registry
    from stage_b.labels.decision_lines import SourceFiles, check_line
    source = tmp_path / "sa.jsonl"
    write_jsonl_atomic(source, [{"group_id": "g1", "mission": M, "images": ["1.jpg"], "label": None,
                                 "per_image": {"图片_1": "接地线×1/已捆扎"}, "model": "/m"}])
    line = {"group_id": "g1", "mission": M, "decision": "不通过", "note": "", "reviewer": "王工",
            "decided_at": "2026-11-28T09:00:00+00:00", "verdict": None, "p_fail": None,
            "source": {"file": str(source), "sha256": file_sha256(source)}, "history": history}
    decided, problem = check_line(line, "x:1", load_registry(), SourceFiles(load_registry()))
    assert decided is None and says in problem
    ok = {**line, "history": [{**history[0], "by": "王 工", "to": "不通过", "at": "2026-11-28T09:00:00+00:00"}]}
    assert check_line(ok, "x:1", load_registry(), SourceFiles(load_registry()))[1] is None   # a look-alike: the same


def test_labels_from_a_page_without_a_models_verdict_are_not_counted_as_agreeing_with_none():
    """A Stage-A audit's decisions were reported as 'the verdict line agreed on 0 of 2' though no model judged them
    (planted: such groups counted under reviewed -> agreed 0 of 2)."""
    from stage_b.labels.resolve import summary
    groups = {(M, f"g{k}"): {"status": "通过", "decisions": [], "record": {}, "verdict": None, "route": None}
              for k in range(2)}
    s = summary(groups)[M]
    assert s["reviewed"]["labelled"] == 0 and s["no_verdict"] == 2 and s["labelled"] == 2
