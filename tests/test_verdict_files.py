"""Verdict files that stay true (issue 26): each verdict records what it rests on, a rerun judges again the groups
whose Stage-A record changed, and a file edited by hand is refused line by line. Through `group-qc judge`
in process, with the stand-in engine of tests/helpers.py (the model is not what is tested)."""
from __future__ import annotations


import pytest

from stage_a.discovery import Group
from qc_core.jsonl import write_jsonl_atomic
from qc_core.missions import load_registry
from qc_core.records import make_record
from stage_b.judging import judge
from tests.helpers import A, B, jsonl_records, write_stage_a_groups
from stage_b.judging import verdict_file
from stage_b.judging.verdict_file import VerdictLine

pytestmark = pytest.mark.usefixtures("no_group_qc_environment")

IDS = [f"QC-VF-20251127-{k}" for k in range(4)]


def _setup(tmp_path, engine):
    stage_a = write_stage_a_groups(tmp_path / "sa", {A: [(g, None) for g in IDS]})
    for k, gid in enumerate(IDS):
        engine.P_FAIL[(A, gid)] = 0.1 + 0.25 * k
    args = ["--model", str(tmp_path / "model"), "--stage_a_dir", str(stage_a), "--mission", A, "--threshold", "0.5",
            "--no_review", "--output_dir", str(tmp_path / "out")]
    return stage_a, args


def test_a_group_whose_stage_a_record_changed_is_judged_again_and_the_others_kept(tmp_path, engine, model, capsys):
    stage_a, args = _setup(tmp_path, engine)
    assert judge.main(args) == 0
    path = verdict_file.verdicts_path(tmp_path / "out", A)
    before = {r["group_id"]: r for r in jsonl_records(path)}
    # Stage-A redone for two groups: new summaries (and a new Stage-A model for one)
    file = stage_a / f"{load_registry().resolve(A).stage_a_stem}.jsonl"
    records = jsonl_records(file)
    records[1] = make_record(Group(IDS[1], A, None, ("1.jpg",)), ["接地线×1/散乱"], model="m")
    records[2] = make_record(Group(IDS[2], A, None, ("1.jpg", "2.jpg")), ["接地线×1/已捆扎", "接地排×1"], model="m2")
    write_jsonl_atomic(file, records)
    engine.asked.clear()
    capsys.readouterr()
    assert judge.main(args) == 0
    assert "2 to judge (2 again: their Stage-A record changed since they were judged)" in capsys.readouterr().out
    assert sorted(g for method, _, g in engine.asked if method == "verdict_logprobs") == sorted(IDS[1:3])
    after = {r["group_id"]: r for r in jsonl_records(path)}
    assert sorted(after) == sorted(IDS) and len(jsonl_records(path)) == 4                      # each group once
    assert after[IDS[0]] == before[IDS[0]] and after[IDS[3]] == before[IDS[3]]        # the others kept as they were
    assert after[IDS[2]]["summaries"] == ["接地线×1/已捆扎", "接地排×1"]
    assert after[IDS[2]]["rests_on"]["stage_a_model"] == "m2" != before[IDS[2]]["rests_on"]["stage_a_model"]


@pytest.mark.parametrize("edit, message", [
    (lambda rs: rs + [rs[1]], "already judged at line 2 (a duplicated line)"),
    (lambda rs: rs + [{**rs[0], "group_id": "QC-ELSEWHERE-1"}], "QC-ELSEWHERE-1 is not among the Stage-A groups"),
    (lambda rs: [{**rs[0], "mission": B}] + rs[1:], f"a verdict of mission '{B}' in {A}'s file"),
    (lambda rs: [{**rs[0], "verdict": "不通过" if rs[0]["verdict"] == "通过" else "通过"}] + rs[1:],
     "does not follow from p_fail"),
    (lambda rs: [{**rs[0], "p_fail": 7.5}] + rs[1:], "p_fail 7.5 is not a probability"),
    (lambda rs: [{**rs[0], "p_fail": True}] + rs[1:], "p_fail True is not a probability"),
])
def test_a_verdicts_file_edited_by_hand_is_refused_naming_the_line(tmp_path, engine, model, capsys, edit, message):
    _, args = _setup(tmp_path, engine)
    assert judge.main(args) == 0
    path = verdict_file.verdicts_path(tmp_path / "out", A)
    write_jsonl_atomic(path, edit(jsonl_records(path)))
    edited = path.read_bytes()
    capsys.readouterr()
    assert judge.main(args) == 2
    err = capsys.readouterr().err
    assert f"{path}:" in err and message in err and "--overwrite" in err, err
    assert path.read_bytes() == edited   # nothing rewritten, nothing appended


def _provenance_keys_the_judge_writes() -> set[str]:
    """The keys of the dict stage_b.judging.judge.provenance_of returns, read from its source (it needs a whole judging
    day to call)."""
    import ast
    import inspect
    tree = ast.parse(inspect.getsource(judge.provenance_of))
    returned = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Return))
    return {key.value for key in returned.keys}


@pytest.mark.parametrize("gold", [False, True])
def test_a_written_line_has_the_declared_fields_and_no_other(gold):
    """VerdictLine declares the line; the writer (verdict_record with the judge's provenance) writes exactly its keys,
    so a field added on one side only (a writer and a reader disagreeing on the format) fails here."""
    from stage_b.rules.operating_point import manual_point
    declared = VerdictLine.__required_keys__ | VerdictLine.__optional_keys__
    provenance = {key: None for key in _provenance_keys_the_judge_writes()}
    record = make_record(Group(IDS[0], A, None, ("1.jpg",)), ["接地线×1/已捆扎"], model="m")
    if gold:
        record |= {"gold_label": "fail", "gold_from": "labels"}
    line = verdict_file.verdict_record(record, 0.2, manual_point(0.5), "通过\n理由: 图片_1 接地线已捆扎", provenance)
    assert set(line) <= declared, set(line) - declared
    assert VerdictLine.__required_keys__ <= set(line)
    assert ("gold" in line) == gold


def test_what_a_resume_compares_is_declared():
    declared = VerdictLine.__required_keys__ | VerdictLine.__optional_keys__
    assert set(verdict_file.PROVENANCE) <= declared and set(verdict_file.RECOMPUTED_FIELDS) <= declared
    assert _provenance_keys_the_judge_writes() <= declared
