"""stage_b.monitoring.monitor: the escape rate's confidence sequence, monitor.json built from verdict folders and
labels (the
inspection state, the detectors, the next audit share) and read back checked; days, labels and hand edits. The rules
themselves: tests/test_inspection.py and tests/test_detector.py."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from qc_core.missions import load_registry
from stage_b.monitoring import monitor as mon
from stage_b.stats import confidence_sequence as cs
from stage_b.stats import drift as dr
from stage_b.rules.operating_point import MissionPoint, OperatingPoint
from stage_b.rules.calibrate import build_operating_point
from tests.helpers import run_monitor, write_day, write_labels
from stage_b.monitoring import days as monitor_days
from stage_b.monitoring import monitor_file
from stage_b.contract.verdict import FAIL
from stage_b.rules.point_identity import PointKeys

M, N = "BBU接地线检查", "挡风板安装检查"


# --------------------------------------------------------------------------------------------------------------
# The escape rate's confidence sequence (what `holds` rests on)
# --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("k, n, promise, delta, upper", [
    (0, 30, 0.1, 0.2, 0.1181),    # 2/δ: at 1/δ it would be 0.097, and a 10% promise would hold too early
    (0, 40, 0.05, 0.2, 0.0823),   # the prior Beta(1, 19): swapped, 0.200
    (0, 40, 0.05, 0.1, 0.0981),
    (3, 40, 0.1, 0.2, None),
])
def test_the_confidence_sequence_pins_its_bounds(k, n, promise, delta, upper):
    """Values of the beta-binomial mixture sequence at δ/2 (module doc), pinned: a wrong level or prior moves them."""
    lower, high = cs.cs_bounds(k, n, cs.prior_for(promise), delta)
    if upper is not None:
        assert high == pytest.approx(upper, abs=5e-4)
    assert cs.prior_for(promise) == (1.0, pytest.approx((1 - promise) / promise))


def test_over_60_daily_looks_the_upper_bound_falls_below_the_truth_in_at_most_half_delta_of_runs():
    """The confidence sequence's guarantee, simulated: 400 runs of 60 days of 8 audits at exactly the promised rate;
    the share of runs whose running upper bound ever falls below the truth (a promise that `holds` too early) stays
    under δ/2 plus two standard errors."""
    rng = random.Random(0)
    promise, delta, runs, wrong = 0.1, 0.2, 400, 0
    prior = cs.prior_for(promise)
    for _ in range(runs):
        k = n = 0
        upper = 1.0
        for _ in range(60):
            escapes = sum(rng.random() < promise for _ in range(8))
            k, n = k + escapes, n + 8
            upper = min(upper, cs.cs_bounds(k, n, prior, delta)[1])
            if upper < promise:
                wrong += 1
                break
    assert wrong / runs <= delta / 2 + 2 * math.sqrt(delta / 2 * (1 - delta / 2) / runs), wrong


@pytest.mark.parametrize("k, n", [(0, 0), (0, 10), (3, 10), (10, 10), (40, 200)])
def test_the_bounds_are_the_edges_of_the_set_the_martingale_leaves_in(k, n):
    prior, delta = cs.prior_for(0.1), 0.2
    lower, upper = cs.cs_bounds(k, n, prior, delta)
    assert lower <= (k / n if n else 0) <= upper
    for p, inside in ((lower + 1e-6, True), (upper - 1e-6, True), (upper + 1e-4, False), (lower - 1e-4, False)):
        if 0 < p < 1:
            assert cs.excludes(k, n, p, prior, delta) != inside, (p, inside)


# --------------------------------------------------------------------------------------------------------------
# monitor.json from verdict folders and labels
# --------------------------------------------------------------------------------------------------------------
def make_op(tmp_path, name="op.json"):
    preds = ([{"group_id": f"v{i}", "mission": m, "p_fail": 0.9, "expected": "不通过",
               "grounding": {"defect_photos": [1]}} for m in (M, N) for i in range(30)]
             + [{"group_id": f"w{i}", "mission": m, "p_fail": 0.05, "expected": "通过",
                 "grounding": {"defect_photos": []}}
                for m in (M, N) for i in range(30)])
    op = build_operating_point(preds, [M, N], {"default": 0.1, "per_mission": {}}, review_share=0.8,
                               model={"path": "m", "fingerprint": "f"}, adapters=[], data=None, confidence=0.8)
    path = tmp_path / name
    path.write_text(json.dumps(op, ensure_ascii=False), encoding="utf-8")
    from stage_b.rules.operating_point import point_keys
    point = OperatingPoint.from_json(op, path)
    return point, path, point_keys(path, point)


def normal_day(prefix, n=20):
    half = n // 2
    return ([(f"{prefix}f{i}", "不通过", 0.9, "auto", True) for i in range(half)]
            + [(f"{prefix}p{i}", "通过", 0.05, "audit" if i % 2 else "auto", False) for i in range(half)])


def _gold_answers(labels_dir: Path, reviewer: str, right: int, wrong: int) -> None:
    """`reviewer` answered right + wrong known-answer groups (stage_b.labels.gold), appended to the labels' log."""
    from stage_b.labels.decisions_log import append_log, read_log
    _, chain = read_log(labels_dir / "decisions.jsonl")
    append_log(labels_dir / "decisions.jsonl", [
        {"group_id": f"gold{i}", "mission": N, "decision": "通过" if i < right else "不通过", "note": "",
         "reviewer": reviewer, "decided_at": "2026-11-27T09:00:00+00:00", "verdict": None, "p_fail": None,
         "source": {"file": "x", "sha256": "y"}, "record": {"gold": {"label": "pass"}}} for i in range(right + wrong)],
        chain)


@pytest.mark.parametrize("who_found_the_escapes, confirmed, gold, counted", [
    ("one reviewer alone, never measured", False, None, False),
    ("one reviewer, and a second confirmed each", True, None, True),
    ("one reviewer right on 12 of 12 gold answers (error <= 17.5% < 20%)", False, (12, 0), True),
    ("one reviewer right on 12 of 14 gold answers (not enough to meet the bar)", False, (12, 2), False),
    ("one reviewer wrong on 7 of 14 gold answers (below the bar)", False, (7, 7), False),
])
def test_an_escape_moves_a_bound_only_when_a_second_person_or_a_measured_reviewer_confirms_it(
        tmp_path, who_found_the_escapes, confirmed, gold, counted):
    """Issue 45 item 4: one reviewer's slip must not withdraw a promise; an escape found by one reviewer alone waits
    (it is named, the day is not clean and the promise is not said to hold) until a second person or a reviewer whose
    measured error meets the bar confirms it."""
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, normal_day("a"))
    shifted = [(f"bf{i}", "通过", 0.05, "audit" if i % 2 else "auto", False) for i in range(10)] + \
        [(f"bp{i}", "通过", 0.05, "audit" if i % 2 else "auto", False) for i in range(10)]
    write_day(tmp_path / "day2", digest, shifted)
    labels = {(M, g): ("不通过" if "f" in g else "通过") for g, *_ in normal_day("a") + shifted}
    write_labels(tmp_path / "labels", labels, confirmed=confirmed)
    if gold:
        _gold_answers(tmp_path / "labels", "r", *gold)
    result = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1", tmp_path / "day2"], tmp_path / "labels")
    m = result["missions"][M]
    day2 = m["days"][1]
    if counted:
        assert (day2["escapes"], day2["escapes_unconfirmed"], m["status"]) == (5, 0, mon.WITHDRAWN)
    else:
        assert (day2["escapes"], day2["escapes_unconfirmed"], m["status"]) == (0, 5, mon.UNVERIFIED)
        assert [w["group_id"] for w in day2["unconfirmed"]] == [f"bf{i}" for i in (1, 3, 5, 7, 9)]
        assert {w["reviewer"] for w in day2["unconfirmed"]} == {"r"} and "wait for a second person" in m["why"]
    # the check replays the waiting count: the file reads back, and an edit of it is refused
    monitor_file.check_monitor(json.loads(json.dumps(result)), "m.json")
    edited = json.loads(json.dumps(result))
    edited["missions"][M]["days"][1]["escapes_unconfirmed"] = 0 if not counted else 3
    with pytest.raises(monitor_days.MonitorError, match="the number of escapes it lists as waiting"):
        monitor_file.check_monitor(edited, "m.json")


def _log(folder: Path, decisions: list[tuple]) -> None:
    """decisions: [(group id, reviewer, decision[, extra fields])] of mission M, appended in order and chained as the
    import and the review app chain them."""
    from stage_b.labels.decisions_log import append_log, read_log
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "decisions.jsonl"
    chain = read_log(log)[1] if log.is_file() else ""
    append_log(log, [
        {"group_id": gid, "mission": M, "decision": decision, "note": "", "reviewer": who,
         "decided_at": "2026-11-27T10:00:00+00:00", "verdict": None, "p_fail": None,
         "source": {"file": "x", "sha256": "y"}, "record": {}, **(extra[0] if extra else {})}
        for gid, who, decision, *extra in decisions], chain)


@pytest.mark.parametrize("how_the_label_is_missing, decisions, listed_why, disputed, escapes_after_settling", [
    ("two reviewers disagree (conflict)", [("r", "通过"), ("r2", "不通过")], "conflict", True, 1),
    ("the reviewer was unsure", [("r", "unsure")], "unsure", True, 1),
    ("one reviewer alone failed it, unmeasured", [("r", "不通过")], None, False, 1),
    ("nobody has decided it yet", [], "not decided yet", False, 0),
])
def test_an_audited_auto_passed_group_without_a_label_is_listed_never_dropped(
        tmp_path, how_the_label_is_missing, decisions, listed_why, disputed, escapes_after_settling):
    """Every audited auto-passed group is accounted for on its day: in dispute (conflict, unsure) it is listed as
    unresolved and keeps the promise unverified while open, however many clean audits beside it; an escape one
    reviewer alone found waits for a second person (listed as waiting); one not decided yet is listed as such. Once
    settled as a fail (here: the lead's adjudication, a second reviewer) it counts as an escape. Planted: resolve's
    open statuses not carried (disputed = {}) -> the conflict reads as not decided and the promise holds."""
    op, op_path, digest = make_op(tmp_path)
    audited = [("x0", "通过", 0.05, "audit", False)] + [(f"c{i}", "通过", 0.05, "audit", False) for i in range(80)]
    write_day(tmp_path / "day1", digest, audited)
    labels = tmp_path / "labels"
    _log(labels, [(f"c{i}", "r", "通过") for i in range(80)] + [("x0", who, d) for who, d in decisions])
    result = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"], labels)
    m = result["missions"][M]
    day = m["days"][0]
    if listed_why is None:
        assert day["escapes_unconfirmed"] == 1 and day["unresolved"] == []
    else:
        assert day["unresolved"] == [{"group_id": "x0", "why": listed_why}]
    assert day["audits_disputed"] == int(disputed)
    assert (day["escapes"], day["audited_auto_passed"]) == (0, 80)
    if disputed or listed_why is None:
        assert m["status"] == mon.UNVERIFIED, m["why"]
    else:   # not decided yet: the promise rests on the 80 decided audits, the open one listed
        assert m["status"] == mon.HOLDS, m["why"]
    monitor_file.check_monitor(json.loads(json.dumps(result)), "m.json")
    if disputed:   # the file's count of disputed audits is replayed: an edit is refused
        edited = json.loads(json.dumps(result))
        edited["missions"][M]["days"][0]["audits_disputed"] = 0
        with pytest.raises(monitor_days.MonitorError, match="audits it lists in dispute"):
            monitor_file.check_monitor(edited, "m.json")
    # settled as a fail: a lead's adjudication (conflict, unsure) or a second reviewer (one alone)
    settle = {"conflict": [("x0", "lead", "不通过", {"adjudication": {"reason": "图片_2 接地线松动"}})],
              "unsure": [("x0", "r2", "不通过"), ("x0", "r3", "不通过")], None: [("x0", "r2", "不通过")],
              "not decided yet": []}[listed_why]
    _log(labels, settle)
    after = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"], labels)["missions"][M]["days"][0]
    assert after["escapes"] == escapes_after_settling, after


def test_a_day_with_an_escape_waiting_is_not_a_clean_tightened_day():
    from stage_b.monitoring.monitor_replay import evidence_of
    row = {"day": "d", "judged": 10, "auto_passed": 5, "audit_share": 0.5, "audited_auto_passed": 3, "escapes": 0,
           "audited_auto_failed_defects": 0, "reviewed_defects": 0}
    assert evidence_of(row, {}).may_end_tightening
    assert evidence_of({**row, "escapes_unconfirmed": 0}, {}).may_end_tightening
    assert not evidence_of({**row, "escapes_unconfirmed": 1}, {}).may_end_tightening


def test_a_normal_day_then_a_shifted_one_withdraws_the_shifted_mission_only(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, normal_day("a"))
    write_day(tmp_path / "day1", digest, normal_day("a"), mission=N)
    # day 2: every defective group of M now looks fine to the model (auto-passed, p_fail low, no defect summary)
    shifted = [(f"bf{i}", "通过", 0.05, "audit" if i % 2 else "auto", False) for i in range(10)] + \
        [(f"bp{i}", "通过", 0.05, "audit" if i % 2 else "auto", False) for i in range(10)]
    write_day(tmp_path / "day2", digest, shifted)
    write_day(tmp_path / "day2", digest, normal_day("b"), mission=N)
    labels = {(m, g): ("不通过" if "f" in g else "通过") for d in ("a", "b") for m in (M, N)
              for g, *_ in normal_day(d)}
    labels.update({(M, f"bf{i}"): "不通过" for i in range(10)})
    write_labels(tmp_path / "labels", labels)
    result = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1", tmp_path / "day2"], tmp_path / "labels")
    m, n = result["missions"][M], result["missions"][N]
    assert [d["status"] for d in m["days"]][0] != mon.WITHDRAWN and m["status"] == mon.WITHDRAWN
    assert m["days"][1]["escapes"] == 5 and m["days"][1]["withdrawn_here"]
    assert n["status"] != mon.WITHDRAWN
    checked = monitor_file.check_monitor(json.loads(json.dumps(result)), "m.json")
    assert checked["missions"][M]["status"] == mon.WITHDRAWN
    # the judge reads the withdrawal back
    withdrawn = monitor_file.withdrawals(result, "m.json", op, digest)
    assert M in withdrawn and N not in withdrawn


def test_a_status_edited_by_hand_is_refused_naming_the_mission_and_day(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    shifted = [(f"f{i}", "通过", 0.05, "audit", False) for i in range(12)]
    write_day(tmp_path / "day1", digest, shifted)
    write_labels(tmp_path / "labels", {(M, f"f{i}"): "不通过" for i in range(12)})
    result = json.loads(json.dumps(run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"],
                                               tmp_path / "labels")))
    assert result["missions"][M]["status"] == mon.WITHDRAWN
    edited = json.loads(json.dumps(result))
    edited["missions"][M]["days"][0]["status"] = edited["missions"][M]["status"] = mon.HOLDS
    with pytest.raises(monitor_days.MonitorError,
                       match=f"{M}, day folder 'day1': status 'holds' does not follow from the day's counts"):
        monitor_file.check_monitor(edited, "monitor.json")
    edited = json.loads(json.dumps(result))
    edited["missions"][M]["days"][0]["escapes"] = 0
    with pytest.raises(monitor_days.MonitorError, match="cum_escapes 12 does not follow"):
        monitor_file.check_monitor(edited, "monitor.json")
    with pytest.raises(monitor_days.MonitorError, match="not a monitor.json of format"):
        monitor_file.check_monitor({"format": 99}, "monitor.json")


def test_days_judged_at_another_operating_point_are_refused_never_mixed(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, normal_day("a"))
    write_day(tmp_path / "day2", "another", normal_day("b"))
    write_labels(tmp_path / "labels", {})
    with pytest.raises(monitor_days.MonitorError, match="day .*day2 was judged at another operating point"):
        run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1", tmp_path / "day2"], tmp_path / "labels")
    assert monitor_days.days_under(tmp_path, digest) == [tmp_path / "day1"]   # --days_under takes only this one's


def test_a_missing_day_folder_is_named(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_labels(tmp_path / "labels", {})
    with pytest.raises(monitor_days.MonitorError, match="day folder .*nowhere does not exist"):
        run_monitor(tmp_path, op, op_path, digest, [tmp_path / "nowhere"], tmp_path / "labels")


def test_a_group_judged_on_two_days_counts_on_the_first(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, [("same", "通过", 0.05, "audit", False)])
    write_day(tmp_path / "day2", digest, [("same", "通过", 0.05, "audit", False),
                                          ("other", "通过", 0.05, "auto", False)])
    write_labels(tmp_path / "labels", {(M, "same"): "不通过"})
    days = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1", tmp_path / "day2"],
                       tmp_path / "labels")["missions"][M]["days"]
    assert [(d["judged"], d["escapes"]) for d in days] == [(1, 1), (1, 0)]


def test_without_audits_every_promise_stays_unverified_and_says_why(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, [(f"p{i}", "通过", 0.05, "auto", False) for i in range(10)])
    lines = (tmp_path / "day1" / f"{M}_verdicts.jsonl").read_text(encoding="utf-8").replace(
        '"audit_share": 0.5', '"audit_share": 0.0')
    (tmp_path / "day1" / f"{M}_verdicts.jsonl").write_text(lines, encoding="utf-8")
    write_labels(tmp_path / "labels", {})
    m = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"], tmp_path / "labels")["missions"][M]
    assert m["status"] == mon.UNVERIFIED and "no audit is drawn (--audit_share 0)" in m["why"]


def test_a_withdrawal_lasts_until_an_operating_point_certified_on_later_labels(tmp_path):
    monitor = {"operating_point": {"sha256": "old"}, "false_alarm_years": 10, "tightened_clean_days": 5, "days": [],
               "day_folders": [], "missions": {M: {
        "status": mon.WITHDRAWN, "why": "drift", "withdrawn_at": "2026-11-27T12:00:00+00:00", "certified": True,
        "promise": {"miss_rate": None, "escape_rate": None}, "days": []}}}

    def certified_through(through: str) -> OperatingPoint:
        point = MissionPoint(threshold=0.5, threshold_fail=0.5, review_margin=0.0, certified=True, promise="",
                             stage_a={"evidence_through": through})
        return OperatingPoint(model={}, adapters=[], missions={M: point})
    op = certified_through("2026-11-27T11:00:00+00:00")
    assert M in monitor_file.withdrawals(monitor, "m.json", op, PointKeys("new", "new"))   # on labels from before
    op = certified_through("2026-11-28T09:00:00+00:00")
    assert monitor_file.withdrawals(monitor, "m.json", op, PointKeys("new", "new")) == {}
    assert M in monitor_file.withdrawals(monitor, "m.json", op, PointKeys("x", "old"))   # the same point: withdrawn


@pytest.mark.parametrize("value, message", [("0", "out of range"), ("0.7", "out of range"), ("0.4999", "out of range"),
                                            ("0.11", "out of range"), ("nan", "out of range"), ("x", "not a number")])
def test_a_drift_level_out_of_range_is_refused(value, message):
    with pytest.raises(monitor_days.MonitorError, match=message):
        mon.check_alpha(value)


def test_the_command_writes_the_json_the_plot_and_the_page(tmp_path, capsys):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "days" / "2026-11-27", digest, normal_day("a"))
    write_day(tmp_path / "days" / "2026-11-28", digest, [(f"f{i}", "通过", 0.05, "audit", False) for i in range(12)])
    write_day(tmp_path / "days" / "old", "another", normal_day("z"))       # another operating point's day: skipped
    write_labels(tmp_path / "labels", {(M, f"f{i}"): "不通过" for i in range(12)})
    assert mon.main(["--operating_point", str(op_path), "--days_under", str(tmp_path / "days"), "--labels",
                     str(tmp_path / "labels"), "--output_dir", str(tmp_path / "m")]) == 0
    captured = capsys.readouterr()
    assert "old was judged at another operating point" in captured.err
    result = monitor_file.load_monitor(tmp_path / "m" / "monitor.json")
    assert result["days"] == ["2026-11-27", "2026-11-28"] and result["missions"][M]["status"] == mon.WITHDRAWN
    from stage_b.monitoring.monitor_format import MonitorFile
    assert set(result) == _keys(MonitorFile)   # the file the command writes, as declared
    page = (tmp_path / "m" / "index.html").read_text(encoding="utf-8")
    assert f"{M}: withdrawn" in page and "monitor.png" in page
    # the days' work, priced (stage_b.rules.workload): day 2's 12 audits are 12 decisions, 0.1 h at the stated 30 s
    assert "The days' work, priced at 30 s a decision (a stated default" in page
    assert "<td>2026-11-28</td><td>" + M + "</td><td>12</td><td>0</td><td>12</td><td>0</td><td>12</td>" in page
    assert result["workload"]["2026-11-28"]["per_mission"][M]["audit_hours"] == 0.1
    from PIL import Image
    with Image.open(tmp_path / "m" / "monitor.png") as im:
        assert im.width > 600 and im.getextrema() != ((255, 255), (255, 255), (255, 255))
    assert "2026-11-28: 12 judged" in captured.out and "-> withdrawn" in captured.out


# --------------------------------------------------------------------------------------------------------------
# The guard fails closed
# --------------------------------------------------------------------------------------------------------------
def test_a_day_folder_mixing_two_operating_points_is_refused_not_skipped(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "days" / "day1", digest, normal_day("a"))
    write_day(tmp_path / "days" / "day1", "another", [("x", "通过", 0.05, "auto", False)], mission=N)
    with pytest.raises(monitor_days.MonitorError, match="day1 holds verdicts of this operating point and of another"):
        monitor_days.days_under(tmp_path / "days", digest)


@pytest.mark.parametrize("edit, problem", [
    (lambda m: m["missions"].pop(M), "does not hold this certified mission"),
    (lambda m: m["missions"].clear(), "does not hold this certified mission"),
    (lambda m: m["missions"][M].update(certified=False), "calls this certified mission not certified"),
    (lambda m: m["missions"][M]["promise"].update(miss_rate=0.9), "another promise"),
    (lambda m: m["missions"][M].update(days=[]), "holds 0 of its 1 days"),
])
def test_a_monitor_that_does_not_account_for_a_certified_promise_sends_it_to_review(tmp_path, edit, problem):
    """Self-consistent edits (a mission dropped, called uncertified, held to another promise, its days emptied): the
    file passes its own replay, and the judge still sends the mission to review, saying why."""
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, normal_day("a"))
    write_labels(tmp_path / "labels", {})
    result = json.loads(json.dumps(run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"],
                                               tmp_path / "labels")))
    assert monitor_file.withdrawals(result, "m.json", op, digest) == {}
    edit(result)
    if result["missions"].get(M, {}).get("days") == []:
        result["missions"][M].update(status=mon.UNVERIFIED)
    why = monitor_file.withdrawals(result, "m.json", op, digest)
    assert M in why and problem in why[M] and "fails closed" in why[M]


@pytest.mark.parametrize("key, value", [("escape_upper", float("nan")), ("miss_detector", float("nan")),
                                        ("state", "normal"), ("next_audit_share", 0.0)])
def test_a_day_edited_to_nan_or_another_state_is_refused(tmp_path, key, value):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, [(f"f{i}", "通过", 0.05, "audit", False) for i in range(12)])
    write_labels(tmp_path / "labels", {(M, f"f{i}"): "不通过" for i in range(12)})
    result = json.loads(json.dumps(run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"],
                                               tmp_path / "labels")))
    result["missions"][M]["days"][0][key] = value
    with pytest.raises(monitor_days.MonitorError, match=f"{M}, day folder 'day1': {key}"):
        monitor_file.check_monitor(result, "monitor.json")


@pytest.mark.parametrize("value, message", [("0", "out of range"), ("61", "out of range"), ("x", "not a whole")])
def test_a_clean_run_out_of_range_is_refused(value, message):
    with pytest.raises(monitor_days.MonitorError, match=f"--tightened_clean_days '{value}' .*{message}"):
        mon.check_clean_days(value)


@pytest.mark.parametrize("edit, message", [
    (lambda line: line.update(p_fail=None), "p_fail None is not a probability"),
    (lambda line: line.pop("verdict"), "verdict None is neither"),
    (lambda line: line.update(route="somewhere"), "route 'somewhere'"),
])
def test_a_verdict_line_the_guard_cannot_read_stops_it_naming_the_line(tmp_path, edit, message):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, normal_day("a"))
    path = tmp_path / "day1" / f"{M}_verdicts.jsonl"
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    edit(lines[2])
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    write_labels(tmp_path / "labels", {})
    with pytest.raises(monitor_days.MonitorError, match=f"_verdicts.jsonl:3: {message}"):
        run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"], tmp_path / "labels")


@pytest.mark.parametrize("key", ["record", "decision", "group_id"])
def test_a_decisions_log_line_without_what_a_label_needs_is_named(tmp_path, key):
    write_labels(tmp_path / "labels", {(M, "g1"): "通过", (M, "g2"): "不通过"})
    path = tmp_path / "labels" / "decisions.jsonl"
    lines = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
    lines[1].pop(key)
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    from qc_core.missions import load_registry
    with pytest.raises(monitor_days.MonitorError, match=f"decisions.jsonl:2: a decision without {key}"):
        monitor_days.read_labels(tmp_path / "labels", load_registry())


# --------------------------------------------------------------------------------------------------------------
# What each day counts (planted bugs that changed a number without a test noticing)
# --------------------------------------------------------------------------------------------------------------
def test_the_drift_tests_pin_their_p_values():
    """Fisher's exact two-sided test on the 2x2 table [[k, n - k], [v_k, v_n - v_k]]: a table built wrong (rows or
    columns swapped into another table) moves the value."""
    assert dr.fisher_p(10, 20, 5, 40) == pytest.approx(0.0033547, rel=1e-4)
    assert dr.fisher_p(3, 20, 10, 40) == pytest.approx(0.5128299, rel=1e-4)
    d = dr.drift([0.1] * 20, 10, {"groups": 40, "defect_groups": 5, "p_fail": [0.1] * 40}, 0.001)
    assert d["defect_p"] == pytest.approx(0.0033547, rel=1e-4) and not d["fired"]
    assert dr.drift([0.1] * 20, 10, {"groups": 40, "defect_groups": 5, "p_fail": [0.1] * 40}, 0.01)["fired"]


def test_an_audited_auto_fail_a_person_failed_is_a_caught_defect_not_an_escape():
    verdicts = [{"group_id": "a", "verdict": "不通过", "p_fail": 0.9, "route": "audit", "audit_probability": 0.5},
                {"group_id": "b", "verdict": "通过", "p_fail": 0.1, "route": "audit", "audit_probability": 0.5},
                {"group_id": "c", "verdict": "通过", "p_fail": 0.1, "route": "review", "review_scope": "group"},
                {"group_id": "d", "verdict": "通过", "p_fail": 0.1, "route": "auto", "audit_probability": 0.5}]
    labels = {(M, "a"): FAIL, (M, "b"): FAIL, (M, "c"): FAIL}   # a label is the verdict it asserts
    row = monitor_days.day_counts("d1", verdicts, labels, M)
    assert (row["escapes"], row["audited_auto_passed"], row["audited_auto_failed_defects"],
            row["reviewed_defects"], row["auto_passed"], row["audit_share"]) == (1, 1, 1, 1, 2, 0.5)


def test_the_monitor_holds_promises_at_the_family_wise_per_claim_confidence(tmp_path):
    from dataclasses import replace
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, normal_day("a"))
    write_labels(tmp_path / "labels", {})
    family = {"claims": 2, "per_claim_confidence": 0.9, "family_confidence": 0.8, "family_wise": True, "sides": 1,
              "certified_claims": 2, "certified_claims_hold_together": 0.8}
    result = run_monitor(tmp_path, replace(op, family=family), op_path, digest, [tmp_path / "day1"],
                         tmp_path / "labels")
    assert result["confidence"] == pytest.approx(0.9) and result["missions"][M]["promise"]["confidence"] == \
        pytest.approx(0.9)


def test_an_edited_lower_bound_is_refused(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, [(f"f{i}", "通过", 0.05, "audit", False) for i in range(12)])
    write_labels(tmp_path / "labels", {(M, f"f{i}"): "不通过" for i in range(12)})
    result = json.loads(json.dumps(run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"],
                                               tmp_path / "labels")))
    result["missions"][M]["days"][0]["escape_lower"] = 0.0
    with pytest.raises(monitor_days.MonitorError, match="escape_lower"):
        monitor_file.check_monitor(result, "monitor.json")


def test_the_same_day_given_twice_or_through_a_link_is_refused(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, normal_day("a"))
    (tmp_path / "link").symlink_to(tmp_path / "day1")
    write_labels(tmp_path / "labels", {})
    for second in (tmp_path / "day1", tmp_path / "link"):
        with pytest.raises(monitor_days.MonitorError, match="given again"):
            run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1", second], tmp_path / "labels")


def test_days_out_of_order_are_refused_naming_both(tmp_path):
    op, op_path, digest = make_op(tmp_path)
    for name, at in (("day1", "2026-11-27T09:00:00+00:00"), ("day2", "2026-11-28T09:00:00+00:00")):
        write_day(tmp_path / name, digest, normal_day(name))
        path = tmp_path / name / f"{M}_verdicts.jsonl"
        lines = [{**json.loads(x), "created_at": at} for x in path.read_text(encoding="utf-8").splitlines()]
        path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    write_labels(tmp_path / "labels", {})
    run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1", tmp_path / "day2"], tmp_path / "labels")
    with pytest.raises(monitor_days.MonitorError,
                       match="days out of order: .*day1 was first judged at 2026-11-27.*day2"):
        run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day2", tmp_path / "day1"], tmp_path / "labels")


def test_a_day_judged_below_the_share_the_tightened_state_asked_for_is_named_and_not_clean(tmp_path):
    """Day 1 drifts (every summary a defect): tightened, the state asks for a larger share; day 2 is judged at the
    normal share all the same: the monitor names it, and the day does not end the tightened run."""
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, [(f"a{i}", "不通过", 0.9, "auto", True) for i in range(40)])
    write_day(tmp_path / "day2", digest, normal_day("b"))
    write_labels(tmp_path / "labels", {(M, f"bp{i}"): "通过" for i in range(10)})
    days = monitor_days.read_days([tmp_path / "day1", tmp_path / "day2"], digest, load_registry())
    labels = monitor_days.read_labels(tmp_path / "labels", load_registry())
    result = mon.build_monitor(op, op_path, digest, days, labels,
                               0.001, tmp_path / "labels", clean_days=1)
    d1, d2 = result["missions"][M]["days"]
    assert d1["state"] == "tightened" and d1["next_audit_share"] > 0.5
    assert "judged at audit share 0.5, and the tightened state asked for" in d2["share_note"]
    assert d2["state"] == "tightened"   # one clean day would have ended the run (clean_days=1); this one is not clean


def test_a_day_folder_not_named_in_utf8_is_refused_naming_it(tmp_path):
    """A day folder named on a GBK system: its name could go into no monitor.json or page. Planted: no check -> a
    UnicodeEncodeError from the JSON writer, the day's name lost from the message."""
    import os
    op, op_path, digest = make_op(tmp_path)
    gbk = Path(os.fsdecode(os.fsencode(tmp_path / "days") + b"/" + "第1天".encode("gbk")))
    write_day(gbk, digest, normal_day("a"))
    write_labels(tmp_path / "labels", {})
    with pytest.raises(monitor_days.MonitorError, match=r"days/\\xb5\\xda1\\xcc\\xec is not named in UTF-8"):
        monitor_days.read_days(monitor_days.days_under(tmp_path / "days", digest), digest, load_registry())


def test_a_full_disk_leaves_the_last_runs_files_whole_and_names_the_file(tmp_path, capsys, monkeypatch):
    """monitor.json, its plot and its page are written together or not at all. Planted: monitor.json written first
    in place -> a new monitor.json beside the old page (and a torn one on a real full disk)."""
    import errno
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "days" / "2026-11-27", digest, normal_day("a"))
    write_labels(tmp_path / "labels", {})
    argv = ["--operating_point", str(op_path), "--days_under", str(tmp_path / "days"), "--labels",
            str(tmp_path / "labels"), "--output_dir", str(tmp_path / "m")]
    assert mon.main(argv) == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()}
    write_day(tmp_path / "days" / "2026-11-28", digest, normal_day("b"))   # a new day: every file would change
    real = Path.write_text

    def full(self, *args, **kwargs):
        if self.name.startswith(".monitor.json"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)
    monkeypatch.setattr(Path, "write_text", full)
    capsys.readouterr()
    assert mon.main(argv) == 2
    err = capsys.readouterr().err
    assert f"cannot write {tmp_path / 'm' / 'monitor.json'} (No space left on device)" in err
    assert {p.name: p.read_bytes() for p in (tmp_path / "m").iterdir()} == before   # no temp file left either


def test_a_withdrawal_is_dated_by_its_evidence_not_by_when_the_monitor_ran(tmp_path):
    """Re-running the monitor an hour (or a week) later must not move the withdrawal: labels decided after the
    evidence broke the promise are new evidence a re-certification may rest on. Planted: withdrawn_at = the monitor's
    own run time -> '2026-11-27T10:00:00+00:00' became now."""
    op, op_path, digest = make_op(tmp_path)
    write_day(tmp_path / "day1", digest, [(f"f{i}", "通过", 0.05, "audit", False) for i in range(12)])
    write_labels(tmp_path / "labels", {(M, f"f{i}"): "不通过" for i in range(12)})   # decided 2026-11-27T10:00Z
    result = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1"], tmp_path / "labels")
    m = result["missions"][M]
    assert m["status"] == mon.WITHDRAWN and m["withdrawn_at"] == "2026-11-27T10:00:00+00:00"
    assert result["created_at"] > m["withdrawn_at"]


def _keys(record_type) -> set[str]:
    return set(record_type.__required_keys__) | set(record_type.__optional_keys__)


def test_a_built_monitor_has_the_declared_records_and_no_other_key(tmp_path):
    """monitor.json as declared (stage_b.monitoring.monitor_format): the file, each mission and each day hold exactly
    the declared keys, withdrawn or not (a field the builder adds and the declaration, so the readers, do not know
    fails here)."""
    from stage_b.monitoring.monitor_format import DayDrift, MonitorDay, MonitorFile, MonitorMission
    test_a_normal_day_then_a_shifted_one_withdraws_the_shifted_mission_only(tmp_path)   # M withdrawn, N not
    op, op_path, digest = make_op(tmp_path)
    result = run_monitor(tmp_path, op, op_path, digest, [tmp_path / "day1", tmp_path / "day2"], tmp_path / "labels")
    # the command adds the day's work and the timeline (next test; tests/test_timeline.py)
    assert set(result) == _keys(MonitorFile) - {"workload", "replaced", "timeline"}
    assert {m["status"] for m in result["missions"].values()} >= {mon.WITHDRAWN}
    for mission in result["missions"].values():
        withdrawn = {"withdrawn_at"} if mission["status"] == mon.WITHDRAWN else set()
        assert set(mission) == set(MonitorMission.__required_keys__) | withdrawn
        for day in mission["days"]:
            assert set(day) == _keys(MonitorDay) and set(day["drift"]) == _keys(DayDrift)


# -- the replay's numbers, pinned by an independent calculation --------------------------------------------------
def _replay_row(day: str, **counts) -> dict:
    base = dict(day=day, judged=100, auto_passed=60, audit_share=0.1, audited_auto_passed=6, escapes=0,
                audited_auto_failed_defects=0, reviewed_defects=9, escapes_unconfirmed=0)
    return {**base, **counts}


def _replay(rows):
    from stage_b.monitoring.inspection import Promise
    from stage_b.monitoring.monitor_replay import replay
    promise = Promise(miss_rate=0.2, escape_rate=0.028, alarm_level=3650.0)
    return replay(rows, promise, mon.bounds_for(0.028, 0.2), lambda i, ref: {"fired": False}, 0.1)


def test_the_live_miss_rate_weighs_audited_escapes_by_one_over_the_share():
    """Stratified Horvitz-Thompson by hand: 1 audited escape at share 0.1 stands for 10 missed defects, beside 9
    reviewed defects: 10 / (10 + 9) (planted: escapes not weighted -> 1 / 10)."""
    (row,) = _replay([_replay_row("d1", escapes=1)])
    assert row["miss_rate_estimate"] == pytest.approx(10 / 19)


def test_an_escape_waiting_for_a_second_person_keeps_every_later_day_open():
    """An escape one reviewer found on day 1 is not confirmed on day 2: nothing holds while it waits (planted: the
    waiting count not carried over days -> day 2 says nothing of it)."""
    rows = _replay([_replay_row("d1", escapes_unconfirmed=1), _replay_row("d2", audited_auto_passed=60)])
    assert [r["status"] for r in rows] == ["unverified", "unverified"]
    assert "1 escape(s) found by one reviewer alone wait for a second person" in rows[1]["why"]


def test_the_tightened_share_is_planned_for_the_mean_daily_volume():
    """The next tightened share sees a tenfold rise within one day at the mean auto-passed volume of the last 7 days:
    days of 50..110 auto-passed groups, the last 7 averaging 80 -> ceil(24 / 80, 3 decimals) = 0.3 (planted: their
    sum, 560 -> the normal share 0.1)."""
    from stage_b.monitoring.inspection import TIGHTENED, Inspection, Promise
    from stage_b.monitoring.monitor_replay import next_share
    rows = [_replay_row(f"d{k}", auto_passed=a) for k, a in enumerate((200, 200, 50, 60, 70, 80, 90, 100, 110))]
    promise = Promise(miss_rate=0.2, escape_rate=0.028, alarm_level=3650.0)
    assert next_share(Inspection(state=TIGHTENED), promise, rows, 0.1) == pytest.approx(0.3)


def test_a_withdrawal_is_dated_by_the_latest_label_of_its_evidence():
    """Labels decided at 09:00 and 17:30 on the day that broke the promise: the withdrawal is dated 17:30 (planted:
    the earliest -> a re-certification on labels from 10:00 would lift it)."""
    from stage_b.monitoring.days import Day, Labels
    days = [Day("d1", Path("d1"), verdicts={M: [{"group_id": "a"}, {"group_id": "b"}]})]
    labels = Labels({(M, "a"): "不通过", (M, "b"): "通过"},
                    {(M, "a"): "2026-11-28T09:00:00+00:00", (M, "b"): "2026-11-28T17:30:00+00:00"})
    assert mon.withdrawal_time(M, "d1", days, labels) == "2026-11-28T17:30:00+00:00"


def test_the_restore_command_names_the_points_own_checkpoints_and_data(tmp_path):
    """A withdrawn mission's status line ends with the command that re-certifies its point: the model as the point
    names it (read back resolved against the point's file, not joined to it twice), its Stage-A files (stored
    relative to the point) plus the labels, --replaces the point."""
    import shlex
    from stage_b.rules.operating_point import load_operating_point
    _, op_path, _ = make_op(tmp_path)
    raw = json.loads(op_path.read_text(encoding="utf-8"))
    raw["model"]["path"] = "../models/start"
    raw["data"] = {"selection": {"files": ["../stage_a/*_stage_a.jsonl"]}}
    (tmp_path / "eval").mkdir()
    moved = tmp_path / "eval" / "op.json"
    moved.write_text(json.dumps(raw, ensure_ascii=False), encoding="utf-8")
    words = shlex.split(mon.restore_command(load_operating_point(moved), moved, tmp_path / "labels"))
    assert words[words.index("--model") + 1] == str(tmp_path / "models" / "start")
    assert words[words.index("--stage_a_files") + 1] == (f"{tmp_path / 'stage_a' / '*_stage_a.jsonl'},"
                                                        f"{tmp_path / 'labels' / '*_stage_a.jsonl'}")
    assert words[words.index("--replaces") + 1] == str(moved) and "held_out" in words
