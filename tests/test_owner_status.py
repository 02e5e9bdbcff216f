"""stage_b.monitoring.owner_status: the one line a QC owner repeats per mission, from its monitor.json entry."""
from __future__ import annotations

import pytest

from stage_b.monitoring.owner_status import days_to_verify, owner_status, tightened_since

PROMISE = {"escape_rate": 0.1, "prior": [1.0, 9.0], "confidence": 0.8}


def day(name, state="normal", status="unverified", **counts):
    return {"day": name, "state": state, "status": status, "cum_escapes": 0, "cum_audited": 10, "auto_passed": 40,
            "judged": 50,
            "next_audit_share": 0.05, "state_why": "", **counts}


@pytest.mark.parametrize("mission, says", [
    ({"status": "not certified", "state": "not certified", "days": []}, "not certified: people decide every group"),
    ({"status": "holds", "state": "normal", "why": "escape rate <= 10% at 80% confidence: 0 escapes in 40",
      "days": [day("d1", status="holds")]}, "holding: escape rate <= 10% at 80% confidence: 0 escapes in 40"),
    # 10 clean audits so far: 28 more (the confidence sequence's count); 40 auto-passed a day at 5% draw 2 a day
    ({"status": "unverified", "state": "normal", "promise": PROMISE, "days": [day("d1")]},
     "not yet verified: 28 more clean audits (about 14 days at today's volume)"),
    ({"status": "unverified", "state": "normal", "promise": PROMISE,
      "days": [day("d1", audits_disputed=1), day("d2", escapes_unconfirmed=2)]},
     "not yet verified: 1 audit(s) in dispute for the lead to settle; 2 escape(s) waiting for a second person"),
    ({"status": "unverified", "state": "tightened", "next_audit_share": 0.3,
      "days": [day("d1"), day("d2", state="tightened"), day("d3", state="tightened")]},
     "tightened since d2: audits at 30% of the groups passed without a person until the tightened days come back "
     "clean"),
    ({"status": "holds", "state": "tightened", "next_audit_share": 0.3, "days": [day("d1", state="tightened")]},
     "tightened since d1: audits at 30% of the groups passed without a person until the tightened days come back "
     "clean; the promise holds so far"),
    ({"status": "withdrawn", "state": "withdrawn", "withdrawn_day": "d4",
      "days": [day("d4", state="withdrawn", withdrawn_here=True,
                   state_why="the miss rate is above the promised 10%: the detector reached 12 >= 10 on d4"),
               day("d5", state="withdrawn", state_why="withdrawn since d4")]},
     "withdrawn on d4 because the miss rate is above the promised 10%: the detector reached 12 >= 10 on d4: every "
     "group goes to people; "
     "to restore, run group-qc evaluate --replaces op.json"),
])
def test_each_state_has_the_line_an_owner_repeats(mission, says):
    assert owner_status(mission, "group-qc evaluate --replaces op.json") == says


def test_no_status_line_promises_nothing():
    """No "at most 100%" or "at least 0%" in any line (the words an owner cannot repeat)."""
    for m in ({"status": "unverified", "state": "normal", "promise": PROMISE, "days": [day("d1", cum_audited=0)]},
              {"status": "unverified", "state": "normal", "promise": PROMISE, "days": [day("d1", auto_passed=0)]}):
        line = owner_status(m)
        assert "100%" not in line and "0%" not in line.replace("10%", "")


@pytest.mark.parametrize("states, since", [
    (["normal", "tightened", "tightened"], "d1"), (["tightened", "normal", "tightened"], "d2"),
    (["tightened", "normal"], None), ([], None)])
def test_tightened_since_is_the_first_day_of_the_run_it_is_in(states, since):
    assert tightened_since([day(f"d{i}", state=s) for i, s in enumerate(states)]) == since


def test_todays_volume_is_the_last_day_the_mission_had_work():
    """A day judged for other missions only (the mission's row has no groups) does not make the volume 0."""
    m = {"status": "unverified", "state": "normal", "promise": PROMISE,
         "days": [day("d1"), day("d2", judged=0, auto_passed=0)]}
    assert owner_status(m).endswith("(about 14 days at today's volume)")


def test_a_promise_without_an_escape_rate_says_there_is_nothing_to_check():
    m = {"status": "unverified", "state": "normal", "promise": {**PROMISE, "escape_rate": None}, "days": [day("d1")]}
    assert owner_status(m).startswith("not yet verified: nothing to check on live work")


@pytest.mark.parametrize("more, last, says", [
    (6, day("d", auto_passed=40, next_audit_share=0.05), "about 3 days at today's volume"),
    (1, day("d", auto_passed=40, next_audit_share=0.05), "about 1 day at today's volume"),
    (6, day("d", auto_passed=0), "no audit is drawn at today's volume"),
])
def test_days_to_verify_divides_by_the_audits_a_day_draws(more, last, says):
    assert days_to_verify(more, last) == says
