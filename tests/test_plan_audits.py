"""stage_b.monitoring.plan_audits: the share each mission needs to see a rise within the days allowed, by simulation
through
the live guard's own code, what it costs, and every setting it cannot plan for refused by name;
stage_b.monitoring.day_shares:
`--audit_share plan` routing and the inspection state raising a day's share."""
from __future__ import annotations

import json
import random
import re

import pytest

from stage_b.monitoring import plan_audits as plan
from stage_b.monitoring.day_shares import PLAN, check_share_setting, day_shares
from stage_b.rules.operating_point import OperatingPoint
from stage_b.rules.calibrate import build_operating_point
from stage_b.rules.point_identity import PointKeys

M, N = "BBU接地线检查", "挡风板安装检查"


@pytest.fixture(scope="module")
def op_file(tmp_path_factory):
    """Two certified missions: 200 validation groups each, 40 defective, 3 escapes in 163 auto-passed."""
    rng = random.Random(0)
    preds = []
    for m in (M, N):
        for i in range(200):
            bad = i < 40
            p = 0.02 if bad and i < 2 else (rng.betavariate(5, 1.5) if bad else rng.betavariate(1, 12))
            preds.append({"group_id": f"v{i}", "mission": m, "p_fail": p, "expected": "不通过" if bad else "通过",
                          "grounding": {"defect_photos": [1] if bad and i % 10 else []}})
    op = build_operating_point(preds, [M, N], {"default": 0.2, "per_mission": {}}, review_share=0.1,
                               model={"path": "m", "fingerprint": "f"}, adapters=[], data=None, confidence=0.9)
    path = tmp_path_factory.mktemp("plan") / "operating_point.json"
    path.write_text(json.dumps(op, ensure_ascii=False), encoding="utf-8")
    return path


def test_the_plan_withdraws_within_the_days_at_the_quantile_asked(op_file):
    """The planned share's median days (the default) or 90th percentile (--quantile 0.9) are within --within_days;
    a surer plan costs a larger share; more work a day needs a smaller share; the rest of the row follows."""
    op = OperatingPoint.from_json(json.loads(op_file.read_text(encoding="utf-8")), op_file)
    p = plan.plan_mission(M, op.missions[M], 150, None, 2, 10.0, 30.0, 0.1)
    assert p.share is not None and p.median_days <= 2 < p.p90_days
    sure = plan.plan_mission(M, op.missions[M], 150, None, 2, 10.0, 30.0, 0.1, quantile=0.9)
    assert sure.p90_days <= 2 and sure.share > p.share
    assert p.false_withdrawals_per_year == pytest.approx(0.1)
    assert p.reviewer_hours_per_day == pytest.approx(p.share * 150 * 0.9 * 30 / 3600, rel=0.15)
    assert p.clean_days_to_hold > 0
    more = plan.plan_mission(M, op.missions[M], 600, None, 2, 10.0, 30.0, 0.1)
    assert more.share < p.share   # more work a day: the same audits are a smaller share


def test_a_rise_to_r_is_the_escape_rate_of_the_simulated_work(op_file):
    op = OperatingPoint.from_json(json.loads(op_file.read_text(encoding="utf-8")), op_file)
    mix = plan.mix_of(op.missions[M])
    assert mix.escape_rate == pytest.approx(3 / 163, abs=0.003)
    assert plan.rise_to(mix, 0.15).escape_rate == pytest.approx(0.15)


def test_the_command_prints_one_row_per_mission(op_file, capsys):
    assert plan.main(["--operating_point", str(op_file), "--groups_per_day", "150", f"{N}=500"]) == 0
    out = capsys.readouterr().out
    assert f"| {M} | 150 |" in out and f"| {N} | 500 |" in out and "false withdrawals/year" in out


@pytest.mark.parametrize("promised, rise", [
    (0.025, 0.15),   # six times the promise
    (0.1, 0.5),      # six times would be 60%: half of the auto-passed work is the most planned for by default
    (0.2, 0.5),      # not "90%", a sixfold rise capped (planted: min(0.9, 6r))
    (0.3, 0.6),      # at least twice the promise
    (0.6, 0.99),
])
def test_the_default_rise_is_a_rate_that_can_happen(promised, rise):
    assert plan.default_detect(promised) == pytest.approx(rise)


@pytest.mark.parametrize("groups, share, says", [
    (150, None, "gold at 5% of 150 groups a day is 8 known-answer check(s) a day; a reviewer right on 11 in a row "
                "meets the bar at 90% confidence: about 2 days"),
    (20, None, "is 1 known-answer check(s) a day; a reviewer right on 11 in a row meets the bar at 90% confidence: "
               "about 11 days"),
    (150, 0.0, "no gold a day at this share"),
])
def test_the_planner_says_how_soon_gold_measures_a_reviewer(groups, share, says):
    assert says in plan.gold_days(groups, share)


def test_a_withdrawn_mission_is_marked_and_not_planned(op_file, tmp_path, capsys):
    """A withdrawal recorded beside the operating point: the planner names it and plans nothing for it."""
    from stage_b.rules.operating_point import load_operating_point, point_keys
    copy = tmp_path / "operating_point.json"
    copy.write_text(op_file.read_text(encoding="utf-8"), encoding="utf-8")
    keys = point_keys(copy, load_operating_point(copy))
    (tmp_path / "operating_point.withdrawals.jsonl").write_text(json.dumps(
        {"mission": M, "operating_point": keys.identity, "operating_point_sha256": keys.file_sha256,
         "why": "the miss rate is above the promised 20%", "withdrawn_day": "day4",
         "withdrawn_at": "2026-11-28T10:00:00+00:00", "monitor": "m.json",
         "recorded_at": "2026-11-28T10:00:01+00:00"}, ensure_ascii=False) + "\n",
        encoding="utf-8")
    assert plan.main(["--operating_point", str(copy), "--groups_per_day", "150"]) == 0
    out = capsys.readouterr().out
    assert f"{M}: WITHDRAWN (the miss rate is above the promised 20%)" in out and f"| {M} |" not in out
    assert f"| {N} | 150 |" in out and "escape rate rise to see" in out and "x) |" in out


@pytest.mark.parametrize("flags, message", [
    (["--groups_per_day", "0"], "at least 1 group"),
    (["--groups_per_day", "-5"], "at least 1 group"),
    (["--groups_per_day", "x"], "not a whole number"),
    (["--groups_per_day", "150", "不存在的任务=10"], "has no mission '不存在的任务'"),
    (["--groups_per_day", "150", "--within_days", "0"], "--within_days '0' is out of range"),
    (["--groups_per_day", "150", "--detect", "0.001"], "at or below .* promised escape rate .*nothing to detect"),
    (["--groups_per_day", "150", "--false_alarm_years", "-1"], "--false_alarm_years '-1' is out of range"),
    (["--groups_per_day", "150", "--quantile", "0.2"], "--quantile '0.2' is out of range"),
])
def test_settings_it_cannot_plan_for_are_named(op_file, capsys, flags, message):
    code = plan.main(["--operating_point", str(op_file), *flags])
    captured = capsys.readouterr()
    assert re.search(message, captured.err + captured.out), captured
    assert code == (0 if "nothing to detect" in message else 2)   # a mission it cannot plan is named, the rest go on


@pytest.mark.parametrize("value, expected", [("plan", PLAN), (" PLAN ", PLAN), ("0.05", 0.05), ("1", 1.0)])
def test_an_audit_share_is_a_share_or_plan(value, expected):
    assert check_share_setting(value) == expected


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "planned", ""])
def test_anything_else_is_refused(value):
    with pytest.raises(ValueError, match="audit_share"):
        check_share_setting(value)


def records(n, defect_every=0):
    return [{"group_id": f"g{i}", "mission": M,
             "per_image": {"图片_1": "接地线松动" if defect_every and i % defect_every == 0 else "接地线连接牢固"}}
            for i in range(n)]


def monitor_with(state, asked, digest="d"):
    return {"operating_point": {"sha256": digest}, "false_alarm_years": 10, "drift_alpha": 0.001,
            "missions": {M: {"state": state, "next_audit_share": asked, "drift_against": None}}}


@pytest.mark.parametrize("what, setting, monitor, digest, defect_every, share, state", [
    ("no monitor: the judge's own share", 0.05, None, "d", 5, 0.05, "unmonitored"),
    ("normal: the judge's own share", 0.05, "normal", "d", 5, 0.05, "normal"),
    ("tightened: the share it asked for", 0.05, "tightened", "d", 5, 0.3, "tightened"),
    ("tightened never lowers a larger own share", 0.5, "tightened", "d", 5, 0.5, "tightened"),
    ("a tightened state of another operating point applies all the same", 0.05, "tightened", "other", 5, 0.3,
     "tightened"),
    ("a normal state of another operating point is not read", 0.05, "normal", "other", 5, 0.05, "unmonitored?"),
    ("today's summaries drift (every group a defect): tightened the same day", 0.05, "normal", "d", 1, None,
     "tightened"),
])
def test_the_day_share_follows_the_inspection_state(op_file, what, setting, monitor, digest, defect_every, share,
                                                    state):
    op = OperatingPoint.from_json(json.loads(op_file.read_text(encoding="utf-8")), op_file)
    mon = monitor_with(monitor, 0.3, digest) if monitor else None
    got = day_shares(setting, op, PointKeys("d", "d"), mon, "monitor.json", {M: records(150, defect_every)}, [M])[M]
    if share is None:
        assert got["share"] > setting, what
    else:
        assert got["share"] == pytest.approx(share), what
    assert got["state"] == state.rstrip("?") or (state.endswith("?") and got["state"] in ("normal", "unmonitored"))
    if "another" in what and state == "tightened":
        assert "another operating point" in got["why"]


def test_plan_routing_gives_each_mission_its_planned_share(op_file):
    op = OperatingPoint.from_json(json.loads(op_file.read_text(encoding="utf-8")), op_file)
    got = day_shares(PLAN, op, None, None, None, {M: records(150, 5), N: records(600, 5)}, [M, N])
    assert got[M]["share"] >= got[N]["share"] and "planned" in got[M]["why"]


def test_the_day_a_quantile_of_runs_had_withdrawn_by_is_read_at_its_rank():
    """Ten runs withdrawing on days 1..10: half had withdrawn by day 5, 90% by day 9 (planted: read one run late ->
    6 and 10)."""
    days = list(range(1, 11))
    assert (plan.at_quantile(days, 0.5), plan.at_quantile(days, 0.9), plan.at_quantile([3], 0.9)) == (5, 9, 3)


def test_the_reviewer_hours_price_every_audited_group_decided_without_review(op_file):
    """The audits are drawn from every group decided without review, auto-failed ones too: by hand, share x groups x
    (the validation groups auto-passed + auto-failed: p_fail at or above t_fail and not within the review margin of t)
    / n x 30 s (planted: auto-passed groups only -> 18% lower on the field's mission)."""
    op = OperatingPoint.from_json(json.loads(op_file.read_text(encoding="utf-8")), op_file)
    entry = op.missions[M]
    p = plan.plan_mission(M, entry, 150, None, 5, 10.0, 30.0, 0.2)
    t, t_fail, margin = entry.threshold, entry.threshold_fail, entry.review_margin
    auto_failed = sum(1 for x in entry.profile["p_fail"] if t_fail is not None and x >= t_fail and abs(x - t) > margin)
    assert auto_failed > 0   # the case the planted bug misprices
    by_hand = p.share * 150 * (entry.escape["auto_passed"] + auto_failed) / entry.extra["n"] * 30 / 3600
    assert p.reviewer_hours_per_day == pytest.approx(by_hand, rel=1e-9)


def test_a_mission_named_twice_in_groups_per_day_is_refused():
    """The last of two numbers won without a word (planted: no check -> {M: 300})."""
    with pytest.raises(plan.PlanError, match="names BBU接地线检查 twice"):
        plan.parse_groups(["150", f"{M}=150", f"{M}=300"], [M, N])


def test_a_plan_at_the_smallest_share_says_it_is_the_floor(op_file):
    """At a huge volume the smallest share planned already sees the rise: the plan says so and what it audits, not
    a price as if it were the need (planted: no word)."""
    op = OperatingPoint.from_json(json.loads(op_file.read_text(encoding="utf-8")), op_file)
    p = plan.plan_mission(M, op.missions[M], 20000, None, 2, 10.0, 30.0, 0.2)
    assert p.share == plan.SHARES[0] and "the smallest share planned and already enough" in p.why
