"""The day's workload and its price (stage_b.rules.workload): what goes to people, how many decisions that is, the
person-hours at the measured or stated pace, and why groups went to review."""
from __future__ import annotations

import pytest

from stage_b.rules.workload import (DEFAULT_SECONDS_PER_DECISION, MIN_MEASURED, day_workload, measured_pace,
                                    reason_class, stated_pace)

M = "BBU接地线检查"


def line(route, why=(), assigned=("王工",), gold=False, mission=M):
    return {"mission": mission, "route": route, "review_why": list(why), "assigned_to": list(assigned),
            **({"gold": {"label": "pass"}} if gold else {})}


DAY = [line("auto", assigned=()), line("auto", assigned=()), line("auto", assigned=()),
       line("audit", ["drawn for a blind audit (5% …)"]),
       line("audit", ["drawn for a blind audit"], assigned=("王工", "李工")),        # an overlap: two decisions
       line("review", ["p_fail 0.41 is in the review band: …"]),
       line("review", ["the reason contradicts 不通过: …"]),
       line("audit", ["drawn for a blind audit"], gold=True),                        # gold: work, not the day's groups
       line("review", ["promise withdrawn: 8 escapes …"], mission="挡风板安装检查"),
       line("review", ["promise withdrawn: 8 escapes …", "p_fail …"], mission="挡风板安装检查")]


@pytest.mark.parametrize("mission, expected", [
    (M, {"groups": 7, "without_person": 3, "to_people": 5, "review": 2, "audits": 2, "gold": 1, "decisions": 6,
         "why_review": {"p_fail in the review band": 1, "reason not grounded": 1}}),
    ("挡风板安装检查", {"groups": 2, "without_person": 0, "to_people": 2, "review": 2, "audits": 0, "gold": 0,
                  "decisions": 2, "why_review": {"promise withdrawn": 2}}),
])
def test_a_days_work_per_mission(mission, expected):
    """Planted: overlap groups counted once, or gold counted as the day's groups -> the counts differ."""
    c = day_workload(DAY, stated_pace(36.0))["per_mission"][mission]
    assert {k: c[k] for k in expected} == expected
    assert c["person_hours"] == pytest.approx(expected["decisions"] * 36 / 3600)


def test_the_day_adds_its_missions_and_the_audits_part_is_priced_apart():
    w = day_workload(DAY, stated_pace(36.0))
    assert (w["overall"]["groups"], w["overall"]["decisions"]) == (9, 8)
    assert w["overall"]["audit_hours"] == pytest.approx(3 * 36 / 3600)   # two audits, one of them decided twice
    assert w["overall"]["automation_share"] == pytest.approx(5 / 9)      # audited groups were decided by the rule
    assert w["pace_source"] == "36 s a decision (given)"


def history(*ms):
    return {"history": [{"on_screen_ms": m} for m in ms]}


@pytest.mark.parametrize("log, seconds, says", [
    ([], DEFAULT_SECONDS_PER_DECISION, "a stated default"),
    ([history(4000)] * (MIN_MEASURED - 1), DEFAULT_SECONDS_PER_DECISION, "a stated default"),   # too few
    ([history(4000)] * MIN_MEASURED, 4.0, f"median on-screen time of {MIN_MEASURED} decisions"),
    ([history(2000, 3000)] * MIN_MEASURED + [history(None, True, -5, "x")] * 5, 5.0, "of 20 decisions"),  # junk out
    ([history(2500)] * 15 + [history(3_600_000)] * 10, 2.5, "of 25 decisions"),   # a reviewer away: the median holds
    # a reviewer pressing a key every 0.3 s: those decisions are not a pace (planted: no floor -> 0.3 s)
    ([history(300)] * 64 + [history(4000)] * MIN_MEASURED, 4.0, "64 decision(s) under 2 s on screen left out"),
    ([history(300)] * 64, DEFAULT_SECONDS_PER_DECISION, "a stated default: no measured pace yet; 64 decision(s) under"),
])
def test_the_pace_is_measured_when_enough_decisions_carry_it(log, seconds, says):
    pace = measured_pace(log)
    assert pace.seconds == pytest.approx(seconds) and says in pace.source


def test_a_reviewer_deciding_faster_than_the_floor_is_named_on_the_reviewer_table():
    """64 groups at 0.3 s a card: the reviewer table names the reviewer ("not looked at"); one at 6 s is not named."""
    from stage_b.labels.resolve import resolve
    from stage_b.labels.reviewer_quality import format_table, reviewer_table
    log = [{"group_id": f"g{i}", "mission": M, "decision": "通过", "reviewer": who, "decided_at": "2026-11-27T10:00Z",
            "record": {}, "history": [{"on_screen_ms": ms}]}
           for who, ms in (("快工", 300), ("王工", 6000)) for i in range(64)]
    rows = {r["reviewer"]: r for r in reviewer_table(resolve(log, gold=True), log, 0.2)}
    assert rows["快工"]["pace_note"].startswith("decided 64 groups at a median 0.3 s: not looked at")
    assert rows["王工"]["pace_note"] is None and rows["王工"]["median_seconds"] == 6.0
    assert "not looked at" in format_table(list(rows.values()))


@pytest.mark.parametrize("why, cls", [
    ("promise withdrawn: x", "promise withdrawn"), ("promise not monitored: x", "promise not monitored"),
    ("weaker promise not accepted: x", "weaker promise not accepted"), ("not certified: x", "mission not certified"),
    ("no threshold for this mission (x)", "no threshold"),
    ("p_fail 0.5 is within 0.01 of", "p_fail in the review band"),
    ("the reply is not the two-line contract", "reply not the two-line contract"),
    ("the reason cites 图片_2", "reason not grounded"), ("something new", "other"),
])
def test_each_reason_has_its_class(why, cls):
    assert reason_class(why) == cls
