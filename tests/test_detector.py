"""stage_b.stats.detector: the CUSUM e-detector waits at least its alarm level in days on average while a promise holds
(by simulation, seeded), sees a rise within the audits it promises, and refuses false-alarm settings it cannot use."""
from __future__ import annotations

import math
import random

import pytest

from stage_b.stats import detector as det
from stage_b.monitoring.inspection import audits_to_alarm, tenfold_rise


def run_length(rate: float, true_rate: float, audits_per_day: int, level: float, cap: int, rng) -> int:
    """Days until the escape detector alarms (cap if it never does), audited groups drawn at `true_rate`."""
    d = det.Detector()
    for day in range(1, cap + 1):
        k = sum(rng.random() < true_rate for _ in range(audits_per_day))
        d = d.after(det.day_log_evalues(rate, det.escape_observations(k, audits_per_day, rate)))
        if d.alarmed(level):
            return day
    return cap


@pytest.mark.parametrize("rate, audits_per_day", [(0.1, 5), (0.025, 20), (0.3, 2)])
def test_while_the_promise_holds_the_mean_run_length_is_at_least_the_alarm_level(rate, audits_per_day):
    """The guarantee (Shin, Ramdas & Rinaldo): E[days to a false alarm] >= A. 150 runs at the promised rate exactly,
    A = 40 days, each run capped at 400 days (a cap only shortens the mean, so a capped mean >= A shows it)."""
    rng, level = random.Random(7), 40.0
    runs = [run_length(rate, rate, audits_per_day, level, 400, rng) for _ in range(150)]
    assert sum(runs) / len(runs) >= level, sorted(runs)[:10]


def test_a_tenfold_rise_is_seen_within_the_audits_the_planner_counts():
    """2.5% -> 25% against a ten-year alarm level: the median count of audits (audits_to_alarm) alarms in at least
    half of the runs in one day, the 90th-percentile count in at least 85%."""
    rate, level = 0.025, det.alarm_level(10)
    rng = random.Random(3)
    for quantile, share in ((0.5, 0.5), (0.9, 0.85)):
        n = audits_to_alarm(rate, tenfold_rise(rate), level, quantile)
        hits = sum(run_length(rate, tenfold_rise(rate), n, level, 1, rng) == 1 for _ in range(200))
        assert hits / 200 >= share - 0.1, (quantile, n, hits)
    assert audits_to_alarm(rate, rate, level) is None   # nothing to detect at or below the promise


def test_evidence_against_the_rate_restarts_the_bet_instead_of_burying_it():
    """CUSUM: 100 clean days then a bad one; the statistic after the bad day is what a fresh start would give."""
    rate = 0.05
    bad = det.day_log_evalues(rate, det.escape_observations(6, 10, rate))
    d = det.Detector()
    for _ in range(100):
        d = d.after(det.day_log_evalues(rate, det.escape_observations(0, 10, rate)))
    assert math.isclose(d.after(bad).value, det.Detector().after(bad).value)


def test_a_bet_outside_its_fair_range_is_refused():
    with pytest.raises(det.DetectorError, match="outside"):
        det.day_log_evalues(0.1, [(0.95, 1)])


@pytest.mark.parametrize("value, message", [("0", "out of range"), ("-1", "out of range"), ("nan", "out of range"),
                                            ("x", "not a number"), (None, "not a number"), ("inf", "out of range")])
def test_false_alarm_years_out_of_range_are_refused_naming_the_value(value, message):
    with pytest.raises(det.DetectorError, match=f"--false_alarm_years {value!r} .*{message}"):
        det.check_false_alarm_years(value)


def test_the_alarm_level_is_a_year_of_days_per_year():
    assert det.alarm_level(det.check_false_alarm_years("10")) == 3650


@pytest.mark.parametrize("statistic, alarmed", [(3649.9, False), (3650.0, True), (1e6, True), (1.0, False)])
def test_it_alarms_when_the_mean_of_the_bets_reaches_the_level(statistic, alarmed):
    """The rule itself: alarm iff mean over the grid of M_d >= A (here every bet at the same value)."""
    d = det.Detector((math.log(statistic),) * len(det.BET_FRACTIONS))
    assert d.alarmed(det.alarm_level(10)) is alarmed


def test_the_simulated_run_length_is_not_far_above_the_level_either():
    """The bound is conservative by about tenfold here (measured 420 days at A = 40, 0.1 with 5 audits a day); a
    detector ten times too quick (or ten times too slow) leaves this window."""
    rng = random.Random(11)
    runs = [run_length(0.1, 0.1, 5, 40.0, 4000, rng) for _ in range(120)]
    assert 150 <= sum(runs) / len(runs) <= 2000
