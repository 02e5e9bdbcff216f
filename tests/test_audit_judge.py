"""The judge's routes on the tiny model: blind audits drawn from a recorded seed (the same groups on a rerun and a
resume), lines edited by hand refused on resume, and a withdrawn promise (by the monitor, or by a Stage-A model the
promise was not certified on) sending every group of its mission to review."""
from __future__ import annotations

import json
import time

import pytest

from stage_b.rules.routes import AUDIT, AUTO, REVIEW, audit_draw
from tests.helpers import SEED, M, certified_op, judge_args, read_lines, run_judge, stage_a_folder
from stage_b.judging import verdict_file

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(98)







@pytest.fixture(scope="module")
def judged(tmp_path_factory, tiny_qwen2_5_vl):
    root = tmp_path_factory.mktemp("audit")
    stage_a = stage_a_folder(root / "sa", n=16)
    op = certified_op(tiny_qwen2_5_vl, root / "op.json")
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, root / "v", "--audit_share", "0.5", "--audit_seed",
                                str(SEED)))
    assert result.returncode == 0, result.stderr[-3000:]
    return root, stage_a, op, read_lines(verdict_file.verdicts_path(root / "v", M)), result.stdout


@pytest.mark.slow
def test_every_verdict_records_its_route_and_the_audit_is_the_seeds_draw(judged):
    _, _, _, lines, stdout = judged
    routes = {r["route"] for r in lines}
    assert routes == {AUTO, AUDIT, REVIEW}, routes   # the fixture's summaries split them
    for r in lines:
        assert r["audit_seed"] == SEED and r["audit_share"] == 0.5
        if r["route"] == REVIEW:
            assert r["needs_review"] and r["review_scope"] == "group" and r["audit_probability"] is None
        else:   # decided without review; audited exactly when the seed's draw says so
            assert not r["needs_review"] and r["audit_probability"] == 0.5
            assert (r["route"] == AUDIT) == (audit_draw(SEED, M, r["group_id"]) < 0.5)
            assert (r["route"] == AUDIT) == bool(r["review_why"])
    assert "of them drawn for a blind audit" in stdout


@pytest.mark.slow
def test_a_resume_without_the_seed_draws_the_same_groups(judged, tiny_qwen2_5_vl, tmp_path):
    root, stage_a, op, lines, _ = judged
    out = tmp_path / "v"
    out.mkdir()
    path = verdict_file.verdicts_path(out, M)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines[:5]), encoding="utf-8")
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, out, "--audit_share", "0.5"))   # no --audit_seed
    assert result.returncode == 0, result.stderr[-3000:]
    again = {r["group_id"]: (r["route"], r["audit_seed"]) for r in read_lines(path)}
    assert again == {r["group_id"]: (r["route"], SEED) for r in lines}


@pytest.mark.slow
@pytest.mark.parametrize("edit", [{"needs_review": False, "route": AUTO}, {"needs_review": None},
                                  {"route": AUTO, "review_why": []}])
def test_a_verdict_line_edited_by_hand_is_refused_on_resume(judged, tiny_qwen2_5_vl, tmp_path, edit):
    root, stage_a, op, lines, _ = judged
    out = tmp_path / "v"
    out.mkdir()
    target = next(i for i, r in enumerate(lines) if r["route"] != AUTO)
    edited = [dict(r, **edit) if i == target else r for i, r in enumerate(lines)]
    verdict_file.verdicts_path(out, M).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in edited),
                                           encoding="utf-8")
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, out, "--audit_share", "0.5"), timeout=300)
    assert result.returncode == 2 and f":{target + 1}: its " in result.stderr
    assert "do not follow from its p_fail" in result.stderr


@pytest.mark.parametrize("value, message", [("-0.1", "is out of range"), ("1.5", "is out of range"),
                                            ("nan", "is out of range"), ("abc", "is not a number")])
def test_an_audit_share_out_of_range_is_refused_before_the_model_loads(tiny_qwen2_5_vl, tmp_path, value, message):
    stage_a = stage_a_folder(tmp_path / "sa", n=2)
    op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
    started = time.monotonic()
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, tmp_path / "o", "--audit_share", value), timeout=120)
    assert result.returncode == 2 and f"--audit_share {value!r} {message}" in result.stderr, result.stderr[-2000:]
    assert time.monotonic() - started < 30 and "Loading" not in result.stderr


def withdrawing_monitor(tmp_path, op_path):
    """A monitor.json that withdrew M at this operating point (every audited auto-passed group failed)."""
    from tests.helpers import run_monitor, write_day, write_labels
    from stage_b.rules.operating_point import load_operating_point, point_keys
    op = load_operating_point(op_path)
    digest = point_keys(op_path, op)
    write_day(tmp_path / "day1", digest, [(f"x{i}", "通过", 0.05, "audit", False) for i in range(12)])
    write_labels(tmp_path / "labels", {(M, f"x{i}"): "不通过" for i in range(12)})
    monitor = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"], tmp_path / "labels")
    assert monitor["missions"][M]["status"] == "withdrawn"
    (tmp_path / "monitor.json").write_text(json.dumps(monitor, ensure_ascii=False), encoding="utf-8")
    return tmp_path / "monitor.json"


@pytest.mark.slow
@pytest.mark.parametrize("how", ["monitor", "stage_a_model"])
def test_a_withdrawn_promise_sends_every_group_of_its_mission_to_review(tiny_qwen2_5_vl, tmp_path, how):
    stage_a = stage_a_folder(tmp_path / "sa", n=6)
    if how == "monitor":
        op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
        extra = ["--monitor", str(withdrawing_monitor(tmp_path, op))]
        why = "promise withdrawn: the miss rate is above the promised"
    else:   # certified on summaries of another Stage-A model than these records'
        op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json", stage_a={"models": ["another-stage-a"]})
        extra = []
        why = "promise withdrawn: its summaries come from Stage-A model path:m"
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, tmp_path / "v", "--audit_share", "1", *extra,
                                review=True))
    assert result.returncode == 0, result.stderr[-3000:]
    page = (tmp_path / "v" / "review" / "index.html").read_text(encoding="utf-8")
    assert f"PROMISE WITHDRAWN for {M}" in page   # never silent: the page's header names it
    lines = read_lines(verdict_file.verdicts_path(tmp_path / "v", M))
    assert all(r["route"] == REVIEW and r["review_scope"] == "mission" and r["review_why"][0].startswith(why)
               for r in lines), lines[0]["review_why"]
    assert "PROMISE WITHDRAWN" in result.stdout and f"{M}: promise withdrawn" in result.stdout
    if how == "monitor":   # the owner's status line, first in the summary, with the command that restores it
        line = f"{M}: withdrawn on day1 because the miss rate is above the promised"
        assert line in result.stdout and "to restore, run group-qc evaluate" in result.stdout
        assert result.stdout.index(line) < result.stdout.index("decided without review")


def test_a_monitor_file_edited_by_hand_stops_the_judge_before_the_model_loads(tiny_qwen2_5_vl, tmp_path):
    stage_a = stage_a_folder(tmp_path / "sa", n=2)
    op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
    monitor = withdrawing_monitor(tmp_path, op)
    edited = json.loads(monitor.read_text(encoding="utf-8"))
    edited["missions"][M]["status"] = edited["missions"][M]["days"][0]["status"] = "holds"
    monitor.write_text(json.dumps(edited, ensure_ascii=False), encoding="utf-8")
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, tmp_path / "v", "--monitor", str(monitor)),
                    timeout=120)
    assert result.returncode == 2 and "status 'holds' does not follow from the day's counts" in result.stderr
    assert "Loading" not in result.stderr


@pytest.mark.slow
def test_named_reviewers_split_the_groups_sent_to_people_and_each_page_queue_is_its_reviewers(
        browser, tiny_qwen2_5_vl, tmp_path):
    """Issue 35 item 4: --reviewers 王工,李工 --overlap_share 0.5: each review or audit line is assigned by the seed's
    draw (stage_b.labels.assign), automatic lines to nobody; on the page, each reviewer's queue (left to review, the
    next
    undecided group) holds only their groups."""
    from stage_b.labels.assign import assignees
    from tests.helpers import fresh_page
    stage_a = stage_a_folder(tmp_path / "sa", n=16)
    op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, tmp_path / "v", "--audit_share", "0.5", "--audit_seed",
                                str(SEED), "--reviewers", "王工,李工", "--overlap_share", "0.5", review=True))
    assert result.returncode == 0, result.stderr[-3000:]
    lines = read_lines(verdict_file.verdicts_path(tmp_path / "v", M))
    for r in lines:
        expected = assignees(["王工", "李工"], 0.5, SEED, M, r["group_id"]) if r["route"] != AUTO else []
        assert r["assigned_to"] == expected and r["reviewers"] == ["王工", "李工"] and r["overlap_share"] == 0.5
    who, other = sorted(["王工", "李工"], key=lambda name: sum(name in r["assigned_to"] for r in lines))
    mine = [r for r in lines if who in r["assigned_to"]]
    assert 0 < len(mine) < sum(r["route"] != AUTO for r in lines)   # the seed fixes it: some groups are not theirs
    fresh_page(browser, tmp_path / "v" / "review" / "index.html", reviewer=who)
    assert browser.find_element("id", "to-review-count").text == str(len(mine))
    page = browser.execute_script("return document.body.innerText")
    assert other not in page   # who else decides a group is not shown on its card


@pytest.mark.parametrize("flags, message", [
    (["--reviewers", "a,b", "--overlap_share", "x"], "--overlap_share 'x' is not a number"),
    (["--reviewers", "a,b", "--overlap_share", "-1"], "--overlap_share '-1' is out of range"),
    (["--reviewers", "a", "--overlap_share", "0.1"], "needs two reviewers at least"),
    (["--reviewers", "a,a"], "names a twice"),
])
def test_a_reviewers_setting_that_cannot_work_is_refused_before_the_model_loads(tiny_qwen2_5_vl, tmp_path, flags,
                                                                                message):
    stage_a = stage_a_folder(tmp_path / "sa", n=2)
    op = certified_op(tiny_qwen2_5_vl, tmp_path / "op.json")
    result = run_judge(*judge_args(tiny_qwen2_5_vl, stage_a, op, tmp_path / "o", *flags), timeout=120)
    assert result.returncode == 2 and message in result.stderr and "Loading" not in result.stderr, result.stderr[-2000:]
