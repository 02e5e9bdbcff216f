"""Certified operating points, pinned against scipy's own exact binomial test (scipy.stats.binomtest), on hand-made
validation sets: the threshold, miss_rate_upper and fail_groups_needed; the three-way band and the automation share;
the bad inputs the issue names."""
from __future__ import annotations

import pytest
from scipy.stats import binomtest

from stage_b.stats.certify import CertificationError, check_confidence, groups_needed, upper_bound
from stage_b.rules.operating_point import MissionPoint
from stage_b.rules.calibrate import automation, build_operating_point, mission_point
from stage_b.stats.thresholds import P_FAIL_TIE, certified_fail_threshold, certified_threshold

F, P = "不通过", "通过"


def candidates(points) -> set[float]:
    """Just below every validation p_fail (these tables hold no two values within the tie tolerance), and 1.0."""
    return {p - P_FAIL_TIE for p, _ in points} | {1.0}


def scipy_upper(k: int, n: int, c: float) -> float:
    """The one-sided exact (Clopper-Pearson) upper bound as scipy's binomial test reports it."""
    return binomtest(k, n, alternative="less").proportion_ci(confidence_level=c).high


def direct_threshold(points, rate, c):
    """The rule, recomputed the slow way: every candidate, misses counted by hand, bounded by scipy's binomtest."""
    fails = [p for p, e in points if e == F]
    ok = [t for t in candidates(points) if scipy_upper(sum(p < t for p in fails), len(fails), c) <= rate]
    return max(ok) if ok else None


@pytest.mark.parametrize("k, n, c", [(0, 1, 0.9), (0, 8, 0.8), (0, 59, 0.95), (1, 10, 0.9), (3, 12, 0.95),
                                     (5, 20, 0.5), (9, 10, 0.99), (0, 22, 0.9)])
def test_the_upper_bound_is_scipys_exact_one_sided_clopper_pearson(k, n, c):
    assert upper_bound(k, n, c) == pytest.approx(scipy_upper(k, n, c), abs=1e-12)


def test_no_groups_or_all_wrong_bound_nothing():
    assert upper_bound(0, 0, 0.9) == 1.0 and upper_bound(4, 4, 0.9) == 1.0


@pytest.mark.parametrize("rate, c, needed", [
    (0.05, 0.95, 59), (0.05, 0.9, 45), (0.10, 0.9, 22), (0.20, 0.8, 8),   # the arithmetic
    (0.5, 0.75, 2),                                                       # bound exactly 0.5 at n = 2: <= holds
    (0.0, 0.9, None),                                                     # no number of groups promises 0%
])
def test_fail_groups_needed_is_the_smallest_count_scipy_certifies_with_no_miss(rate, c, needed):
    assert groups_needed(rate, c) == needed
    if needed is not None:
        assert scipy_upper(0, needed, c) <= rate + 1e-12 and (needed == 1 or scipy_upper(0, needed - 1, c) > rate)


# hand-made validation sets: (p_fail, expected)
TEN_FAILS = [(0.95, F), (0.9, F), (0.85, F), (0.8, F), (0.7, F), (0.6, F), (0.55, F), (0.5, F), (0.3, F), (0.2, F),
             (0.4, P), (0.25, P), (0.1, P), (0.05, P)]
TIES = [(0.5, F), (0.5, P), (0.5, F), (0.9, F), (0.1, P)]


@pytest.mark.parametrize("points, rate, c", [
    (TEN_FAILS, 0.3, 0.9), (TEN_FAILS, 0.5, 0.8), (TEN_FAILS, 0.2, 0.9), (TEN_FAILS, 0.5, 0.5),
    (TIES, 0.7, 0.75), (TIES, 0.5, 0.5),
    ([(0.3, F), (0.6, F), (0.2, P)], 0.5, 0.75),   # 2 fails, bound of 0 misses exactly 0.5
])
def test_the_certified_threshold_is_the_largest_candidate_scipy_certifies(points, rate, c):
    t = certified_threshold(points, rate, c)
    assert t == direct_threshold(points, rate, c)
    entry = mission_point(points, rate, 0.8, c)
    assert entry["certified"] is (t is not None) and entry["confidence"] == c
    if t is not None:
        fails = [p for p, e in points if e == F]
        assert entry["threshold"] == t
        assert entry["miss_rate_upper"] == pytest.approx(scipy_upper(sum(p < t for p in fails), len(fails), c))
        assert entry["miss_rate_upper"] <= rate and "fail_groups_needed" not in entry


def test_a_bound_exactly_at_the_target_certifies():
    """Two defective groups, none missed, 75% confidence: the bound is exactly 50%. `<=` certifies; `<` would not."""
    entry = mission_point([(0.3, F), (0.6, F), (0.2, P)], 0.5, 0.8, 0.75)
    assert entry["certified"] and entry["miss_rate_upper"] == 0.5 and entry["threshold"] == 0.3 - P_FAIL_TIE


def test_ties_at_the_threshold_are_failed_not_missed():
    """Groups whose p_fail equals the threshold are 不通过 (p_fail >= t), so a tie is never counted as a miss."""
    t = certified_threshold(TIES, 0.7, 0.75)
    assert t == 0.5 - P_FAIL_TIE and mission_point(TIES, 0.7, 0.8, 0.75)["misses"] == 0


@pytest.mark.parametrize("points, rate, c, needed", [
    ([(0.9, P), (0.2, P)], 0.1, 0.9, 22),               # no defective validation group at all
    (TEN_FAILS, 0.1, 0.9, 22),                          # 10 defective groups, 22 needed for 10% at 90%
    (TEN_FAILS, 0.2, 0.8, 8),                           # 8 needed: certified (10 >= 8)
])
def test_an_uncertified_mission_says_how_many_defective_groups_would_certify_it(points, rate, c, needed):
    entry = mission_point(points, rate, 0.8, c)
    n_fail = sum(e == F for _, e in points)
    assert entry["certified"] is (n_fail >= needed)
    if not entry["certified"]:
        assert entry["fail_groups_needed"] == needed
        assert f"{n_fail} defective validation group" in entry["promise"] and f"{needed} needed" in entry["promise"]
        if n_fail:   # the point rule keeps the file usable
            assert entry["threshold"] is not None
        assert not MissionPoint.of(entry).decide(0.99).automatic   # and no group of it is decided without review
    else:
        # TEN_FAILS passes no group without a person: the sentence says so instead of "at most 100% are defective"
        assert entry["promise"].startswith(f"of defective work orders at most {100 * rate:.3g}% pass without a "
                                           f"person; it passes no work order without a person")
        assert f"; {100 * c:.3g}% sure (" in entry["promise"]


def test_the_overkill_side_is_certified_the_same_way_and_never_below_the_pass_threshold():
    passes = [(0.01 * k, P) for k in range(1, 31)] + [(0.55, P), (0.6, P), (0.65, P)]   # 33 good groups
    fails = [(0.5 + 0.01 * k, F) for k in range(30)]          # 30 defective groups, p_fail 0.50 .. 0.79
    points = passes + fails
    t_fail = certified_fail_threshold(points, 0.1, 0.9)
    good = [p for p, e in points if e == P]
    direct = min(t for t in candidates(points) if scipy_upper(sum(p >= t for p in good), 33, 0.9) <= 0.1)
    assert t_fail == direct == 0.66 - P_FAIL_TIE
    entry = mission_point(points, 0.1, 0.8, 0.9, target_overkill=0.1)
    assert entry["certified"] and entry["overkill_certified"] and entry["threshold_fail"] >= entry["threshold"]
    # between the two thresholds: review; outside: decided
    point = MissionPoint.of(entry)
    assert point.decide(entry["threshold"]).why and point.decide(0.99).automatic and point.decide(0.0).automatic


def test_an_overkill_target_no_threshold_reaches_auto_fails_nothing():
    entry = mission_point(TEN_FAILS, 0.5, 0.8, 0.8, target_overkill=0.0)
    assert entry["overkill_certified"] is False and entry["threshold_fail"] is None
    assert entry["pass_groups_needed"] is None and "nothing is auto-failed" in entry["overkill_promise"]
    point = MissionPoint.of(entry)
    assert not point.decide(0.99).automatic and point.decide(0.0).automatic


def test_the_automation_share_counts_what_the_rule_decides_without_review():
    points = [(0.01 * k, P) for k in range(1, 31)] + [(0.5 + 0.01 * k, F) for k in range(30)]
    entry = mission_point(points, 0.1, 0.0, 0.9, target_overkill=0.1)
    share = automation(points, entry)
    by_hand = sum(p < entry["threshold"] or p >= entry["threshold_fail"] for p, _ in points)
    assert share["validation_auto_decided"] == by_hand and share["automation_share"] == by_hand / 60
    lo, hi = share["automation_share_ci95"]
    assert lo < share["automation_share"] < hi or share["automation_share"] in (0.0, 1.0)


def test_each_mission_keeps_its_own_target_whatever_the_order():
    preds = [{"mission": m, "p_fail": p, "expected": e} for m in ("A", "B") for p, e in TEN_FAILS]
    for values in ([0.5, {"A": 0.2}], [0.2, {"B": 0.5}]):
        default, own = values
        op = build_operating_point(preds, ["A", "B"], {"default": default, "per_mission": own}, review_share=0.8,
                                   model={}, adapters=[], data=None, confidence=0.8)
        for m in ("A", "B"):
            assert op["missions"][m]["target_miss_rate"] == own.get(m, default)
    assert op["format"] == 2 and op["confidence"] == 0.8 and op["automation"]["validation_groups"] == 28


@pytest.mark.parametrize("value", ["0", "1", "1.5", "abc", "nan", "-0.2", None])
def test_a_confidence_outside_zero_to_one_is_refused_naming_it(value):
    with pytest.raises(CertificationError, match="--confidence") as err:
        check_confidence(value)
    assert repr(value) in str(err.value)


@pytest.mark.parametrize("value, meant", [("0.05", "0.95"), ("0.1", "0.9"), ("0.2", "0.8")])
def test_an_alpha_typed_for_a_confidence_is_refused_naming_the_confidence_meant(value, meant):
    with pytest.raises(CertificationError, match=f"Did you mean {meant}"):
        check_confidence(value)
    assert check_confidence("0.5") == 0.5


@pytest.mark.parametrize("rate", [1e-300, 5e-324, 1e-12])
def test_a_vanishing_target_needs_no_number_of_groups_and_raises_nothing(rate):
    assert groups_needed(rate, 0.9) is None


@pytest.mark.parametrize("confidence", [0.5, 0.8, 0.9, 0.95, 0.99, 1 - 0.2 / 12])
def test_the_bound_is_scipys_beta_quantile_exactly(confidence):
    """certify computes Beta.ppf through scipy.special.betaincinv (a lighter import): the same floats, whole counts
    and effective (Kish) ones alike."""
    from scipy.stats import beta
    from stage_b.stats.certify import beta_upper
    counts = [(k, n) for n in range(1, 120) for k in range(n)] + [(0.5, 10.3), (2.7, 33.1), (0.0, 1.5)]
    assert all(beta_upper(k, n, confidence) == float(beta.ppf(confidence, k + 1, n - k)) for k, n in counts)
