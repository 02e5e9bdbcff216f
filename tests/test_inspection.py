"""stage_b.monitoring.inspection: each switching rule of the live guard, as a table; label-free signals and a first
escape only
tighten, label evidence about the signed miss rate alone withdraws, a clean tightened run returns to normal; the
tightened share sees a tenfold rise within a day, and its audit draw holds the normal one."""
from __future__ import annotations

import math
import random

import pytest

from stage_b.monitoring import inspection as ins
from stage_b.stats.detector import alarm_level
from stage_b.rules.routes import audit_draw

PROMISE = ins.Promise(miss_rate=0.2, escape_rate=0.05, alarm_level=alarm_level(10))


def day(name="d", escapes=0, audited=10, autofail_defects=3, reviewed_defects=5, share=0.2, drift=False,
        may_end=True) -> ins.DayEvidence:
    return ins.DayEvidence(day=name, judged=100, auto_passed=60, audit_share=share, audited_auto_passed=audited,
                           escapes=escapes, audited_auto_failed_defects=autofail_defects,
                           reviewed_defects=reviewed_defects, drift_fired=drift,
                           drift_why="the defect share moved" if drift else None, may_end_tightening=may_end)


def run(days, promise=PROMISE, start=ins.Inspection()) -> list[ins.Inspection]:
    out, state = [], start
    for d in days:
        state = ins.step(state, d, promise)
        out.append(state)
    return out


@pytest.mark.parametrize("what, days, states", [
    ("a quiet day stays normal", [day()], [ins.NORMAL]),
    ("drift alone tightens, never withdraws", [day(drift=True)], [ins.TIGHTENED]),
    ("one escape in 10 audits at a 5% promise is what the promise allows", [day(escapes=1)], [ins.NORMAL]),
    ("3 escapes in 10 give the escape detector 9.7:1, not yet 10:1", [day(escapes=3)], [ins.NORMAL]),
    ("4 escapes in 10 give it 77:1: tightened", [day(escapes=4)], [ins.TIGHTENED]),
    ("five clean tightened days go back to normal",
     [day(drift=True)] + [day() for _ in range(5)], [ins.TIGHTENED] * 5 + [ins.NORMAL]),
    ("drift every day (the mix changed for good) still goes back to normal on clean audits",
     [day(drift=True)] * 6, [ins.TIGHTENED] * 5 + [ins.NORMAL]),
    ("a day without labelled audits breaks the clean run",
     [day(drift=True), day(), day(audited=0)] + [day()] * 5, [ins.TIGHTENED] * 7 + [ins.NORMAL]),
    ("a day judged below the asked share breaks the clean run",
     [day(drift=True), day(), day(), day(may_end=False)] + [day()] * 5, [ins.TIGHTENED] * 8 + [ins.NORMAL]),
    ("every audited auto-pass failed: the miss rate broke, withdrawn the same day",
     [day(escapes=10, autofail_defects=0, reviewed_defects=0)], [ins.WITHDRAWN]),
    ("a withdrawal stands on the clean days after it",
     [day(escapes=10, autofail_defects=0, reviewed_defects=0)] + [day()] * 3, [ins.WITHDRAWN] * 4),
])
def test_the_switching_rules(what, days, states):
    assert [s.state for s in run(days)] == states, what


def test_twice_the_defective_work_at_the_same_miss_rate_tightens_and_never_withdraws():
    """The mix doubles (more escapes AND more caught defects, miss rate unchanged at 10% < 20%): 200 days, seeded;
    the mission is tightened on some days, never withdrawn, and normal again within a week of each tightening."""
    rng = random.Random(5)
    days = []
    for i in range(200):
        defects = sum(rng.random() < 0.4 for _ in range(150))
        missed = sum(rng.random() < 0.1 for _ in range(defects))
        share = 0.3
        escapes = sum(rng.random() < share for _ in range(missed))
        caught = defects - missed
        autofail = sum(rng.random() < share for _ in range(caught // 2))
        days.append(day(f"d{i}", escapes=escapes, audited=int(share * (150 - defects)) + escapes,
                        autofail_defects=autofail, reviewed_defects=caught - caught // 2, share=share, drift=i < 30))
    states = [s.state for s in run(days)]
    assert ins.WITHDRAWN not in states and ins.TIGHTENED in states and ins.NORMAL in states
    runs, current = [], 0
    for s in states:
        current = current + 1 if s == ins.TIGHTENED else 0
        runs.append(current)
    assert max(runs) <= 12, max(runs)


def test_label_evidence_withdraws_through_either_detector_and_says_which():
    """Without a signed miss rate, escapes far beyond the (mix-adjusted) escape rate still withdraw; with one, the
    miss-rate detector names itself."""
    bad = day(escapes=10, autofail_defects=0, reviewed_defects=0)
    no_miss = ins.Promise(miss_rate=None, escape_rate=0.05, alarm_level=alarm_level(10))
    assert "escapes beyond what the day's mix of work explains" in run([bad] * 3, no_miss)[-1].why
    assert run([bad])[-1].state == ins.WITHDRAWN and "miss rate" in run([bad])[-1].why


MIXED = ins.Promise(miss_rate=0.2, escape_rate=0.05, alarm_level=3650, caught_share=0.2, auto_pass_share=0.6)


@pytest.mark.parametrize("what, recent, expected", [
    ("no day yet: the promise", [], 0.05),
    ("the validation mix: the promise",
     [ins.DayEvidence("d", 100, 60, 0.5, 30, 1, 5, 10)], 0.05),
    ("twice the caught defects per group: twice the rate",
     [ins.DayEvidence("d", 100, 60, 0.5, 30, 1, 10, 20)], 0.10),
    ("fewer caught defects: never below the promise",
     [ins.DayEvidence("d", 100, 60, 0.5, 30, 1, 2, 2)], 0.05),
    ("half the auto-passed work: twice the rate",
     [ins.DayEvidence("d", 100, 30, 0.5, 15, 1, 5, 10)], 0.10),
    ("at most MAX_ESCAPE_NULL", [ins.DayEvidence("d", 100, 5, 1.0, 5, 1, 90, 5)], ins.MAX_ESCAPE_NULL),
])
def test_the_escape_rate_a_promise_allows_follows_the_mix(what, recent, expected):
    """mix_adjusted_escape: r x (caught defects per group / validation's) x (validation auto-pass share / today's)."""
    assert ins.mix_adjusted_escape(MIXED, recent) == pytest.approx(expected), what


def test_a_mission_not_certified_is_never_inspected():
    out = run([day(escapes=10)], ins.Promise(miss_rate=None, escape_rate=None, alarm_level=3650, certified=False))
    assert out[-1].state == ins.NOT_CERTIFIED


@pytest.mark.parametrize("rate, volume, normal, expected", [
    (0.025, 100, 0.05, 0.27), (0.05, 100, 0.05, 0.12), (0.025, 10, 0.05, 1.0), (0.2, 1000, 0.05, 0.05),
    (None, 100, 0.05, 1.0), (0.025, 0, 0.05, 1.0)])
def test_the_tightened_share_sees_a_tenfold_rise_within_a_day(rate, volume, normal, expected):
    """Audits for the median day to alarm on ten times the escape rate, over the day's auto-passed volume; never
    below the normal share, at most 1 (everything audited)."""
    assert ins.tightened_share(rate, volume, alarm_level(10), normal) == pytest.approx(expected)


def test_a_tightened_draw_audits_every_group_the_normal_draw_would():
    """The draw is nested: a group audited at 5% is audited at 27% (the same per-group number, stage_b.rules.routes)."""
    groups = [f"QC-{i}" for i in range(2000)]
    normal = {g for g in groups if audit_draw(1, "BBU接地线检查", g) < 0.05}
    tight = {g for g in groups if audit_draw(1, "BBU接地线检查", g) < 0.27}
    assert normal and normal <= tight and len(tight) > 4 * len(normal)


# -- numbers pinned by an independent calculation (each planted bug below passed every earlier fast test) ----------
def _day(**counts) -> "ins.DayEvidence":
    base = dict(day="d", judged=100, auto_passed=60, audit_share=0.1, audited_auto_passed=6, escapes=2,
                audited_auto_failed_defects=1, reviewed_defects=10)
    return ins.DayEvidence(**{**base, **counts})


def test_the_miss_rate_bets_scale_reviewed_defects_by_the_audit_share():
    """Horvitz-Thompson scaled by a: an audited escape bets 1 - m, an audited auto-failed defect -m, a reviewed
    defect -m a. By hand for m = 0.2, a = 0.1: the day's e-value is the grid's mean of (1 + l 0.8)^2 (1 - 0.2 l)
    (1 - 0.02 l)^10 (planted: reviewed defects not scaled by a -> (1 - 0.2 l)^10, the miss detector 7,696 -> 0.117 on
    the field's days)."""
    from stage_b.stats.detector import bets, day_evalue, day_log_evalues
    assert ins.miss_observations(_day(), 0.2) == [(0.8, 2), (-0.2, 1), (pytest.approx(-0.02), 10)]
    by_hand = sum((1 + lam * 0.8) ** 2 * (1 - 0.2 * lam) * (1 - 0.02 * lam) ** 10 for lam in bets(0.2)) / 6
    assert day_evalue(day_log_evalues(0.2, ins.miss_observations(_day(), 0.2))) == pytest.approx(by_hand, rel=1e-9)
    assert by_hand == pytest.approx(1.80098, abs=5e-5)


def test_the_same_day_tightened_share_is_planned_for_todays_auto_passed_groups():
    """A normal day drifting already is judged at the tightened share for today's volume of auto-passed groups:
    200 groups x a validation auto-pass share of 0.5 = 100 (planted: all 200 of today's groups -> half the share)."""
    promise = ins.Promise(miss_rate=0.2, escape_rate=0.028, alarm_level=3650.0, auto_pass_share=0.5)
    n = ins.audits_to_alarm(0.028, ins.tenfold_rise(0.028), 3650.0)
    assert n == 24   # pinned: audits that see a tenfold rise (28%) within one day at A = 3,650
    share, why = ins.share_for_day(0.05, "normal", None, drift_today=True, promise=promise, groups_today=200)
    assert share == pytest.approx(math.ceil(n / 100 * 1000) / 1000) == 0.24 and "drifts" in why
