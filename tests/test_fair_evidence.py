"""Certification only on fair evidence (stage_b.rules.routes, stage_b.rules.calibrate.fair_points_of): groups
reviewed
because of their own score never count in a bound as if random; audits count with weight 1 / their probability, and
the weighted bound (stage_b.stats.certify.upper_bound_weighted, Korn-Graubard effective counts) keeps its confidence."""
from __future__ import annotations

import random

import pytest

from stage_b.stats.certify import upper_bound, upper_bound_weighted
from stage_b.rules.calibrate import build_operating_point, fair_points_of
from stage_b.rules.routes import AUDIT, GROUP, MISSION, REVIEW, evidence_weight, why_not_fair

M = "BBU接地线检查"
IDS = {"model": {"path": "m", "fingerprint": "f"}, "adapters": []}


def prediction(i, p, expected, review=None):
    return {"group_id": f"g{i}", "mission": M, "p_fail": p, "expected": expected,
            "evidence": {"weight": evidence_weight(review), "why_not": why_not_fair(review),
                         "route": (review or {}).get("route")}}


def validation(n_fail=60, n_pass=60, seed=0):
    """Defective groups score high, good ones low: the threshold certifies miss <= 10% at 90%."""
    rng = random.Random(seed)
    return ([prediction(i, 0.6 + 0.4 * rng.random(), "不通过") for i in range(n_fail)]
            + [prediction(1000 + i, 0.4 * rng.random(), "通过") for i in range(n_pass)])


def promise(predictions):
    op = build_operating_point(predictions, [M], {"default": 0.1, "per_mission": {}}, review_share=0.8, **IDS,
                               data=None, confidence=0.9)
    e = op["missions"][M]
    return {k: e[k] for k in ("certified", "threshold", "miss_rate_upper", "n_fail", "misses")}, e


def test_a_planted_biased_band_does_not_move_the_promise():
    """Every group the model chose for review (just under the threshold, all defective: the worst case for a miss
    rate) is labelled, and every other group is fine: the promise is the validation's own, and the report names them."""
    base = validation()
    before, entry = promise(base)
    assert before["certified"]
    t = entry["threshold"]
    band = [prediction(5000 + i, t - 0.001 * (i + 1), "不通过", {"route": REVIEW, "review_scope": GROUP})
            for i in range(30)]
    fine = [prediction(6000 + i, 0.05, "通过", {"route": AUDIT, "audit_probability": 0.5}) for i in range(10)]
    after, entry = promise(base + band + fine)
    assert after == before
    assert entry["left_out"] == {"reviewed because of its own p_fail or reply": 30}


def test_a_mission_reviewed_whole_counts_as_a_random_sample():
    base = validation()
    extra = [prediction(7000 + i, 0.3, "不通过", {"route": REVIEW, "review_scope": MISSION}) for i in range(20)]
    after, entry = promise(base + extra)
    assert after["n_fail"] == 80 and after["threshold"] <= 0.3 and entry["left_out"] == {}   # they count: t moves


def test_audits_weigh_one_over_their_probability():
    points, left_out = fair_points_of([prediction(1, 0.9, "不通过", {"route": AUDIT, "audit_probability": 0.25}),
                                       prediction(2, 0.1, "通过")])
    assert points == {M: [(0.9, "不通过", 4.0), (0.1, "通过", 1.0)]} and left_out == {}


@pytest.mark.parametrize("k, n", [(0, 8), (2, 30), (5, 5), (0, 0)])
def test_with_every_weight_one_the_bound_is_the_exact_clopper_pearson(k, n):
    assert upper_bound_weighted([1.0] * k, [1.0] * n, 0.9) == upper_bound(k, n, 0.9)


@pytest.mark.parametrize("validation_n, audits, probability", [(30, 10, 0.2), (60, 20, 0.1), (10, 30, 0.5)])
def test_the_weighted_bound_keeps_its_confidence_in_simulation(validation_n, audits, probability):
    """Validation groups (weight 1) and audits (weight 1 / probability) drawn at a true miss rate of 10% and 20%: the
    share of simulated evidence sets whose 90% bound falls below the truth stays under 10% (1,000 sets each)."""
    rng = random.Random(1)
    for truth in (0.1, 0.2):
        failures = 0
        for _ in range(1000):
            errors_v = sum(rng.random() < truth for _ in range(validation_n))
            errors_a = sum(rng.random() < truth for _ in range(audits))
            weights = [1.0] * validation_n + [1 / probability] * audits
            errors = [1.0] * errors_v + [1 / probability] * errors_a
            failures += upper_bound_weighted(errors, weights, 0.9) < truth
        assert failures / 1000 <= 0.1 + 0.02, (truth, failures)   # 0.02: two standard errors of 1,000 draws


def test_family_wise_certifies_each_claim_at_the_bonferroni_level():
    missions = ["BBU安装方式检查（正装）", M, "BBU线缆布放要求", "挡风板安装检查"]
    preds = [dict(prediction(i, 0.9 if i % 2 else 0.1, "不通过" if i % 2 else "通过"), mission=m, group_id=f"{m}{i}")
             for m in missions for i in range(400)]
    targets = {"default": 0.1, "per_mission": {}}
    op = build_operating_point(preds, missions, targets, review_share=0.8, **IDS, data=None, confidence=0.9,
                               overkill_targets={"default": 0.1, "per_mission": {}}, family_wise=True)
    fam = op["family"]
    assert fam["claims"] == 8 and fam["per_claim_confidence"] == pytest.approx(1 - 0.1 / 8)
    assert all(e["confidence"] == pytest.approx(0.9875) for e in op["missions"].values())
    assert fam["certified_claims"] == 8 and fam["certified_claims_hold_together"] >= 0.9 - 1e-12
    plain = build_operating_point(preds, missions, targets, review_share=0.8, **IDS, data=None, confidence=0.9,
                                  overkill_targets={"default": 0.1, "per_mission": {}})["family"]
    assert plain["per_claim_confidence"] == 0.9 and plain["certified_claims_hold_together"] == pytest.approx(0.2)


def test_the_operating_point_states_the_escape_rate_of_auto_passed_groups():
    """Of the groups the rule passes without review (p_fail below the threshold and outside the margin), the defective
    share and its bound; an audited one weighs 1 / its probability."""
    from stage_b.rules.calibrate import escape_rate
    entry = {"threshold": 0.5, "threshold_fail": 0.5, "review_margin": 0.1}
    points = ([(0.1, "通过")] * 40 + [(0.2, "不通过")] * 2   # passed without review: 2 escapes in 42
              + [(0.45, "不通过")] * 5                       # within the margin: reviewed, not escapes
              + [(0.9, "不通过")] * 30)                      # failed
    escape = escape_rate(points, entry, 0.9)
    assert (escape["auto_passed"], escape["escapes"]) == (42, 2)
    assert escape["rate"] == pytest.approx(2 / 42) and escape["upper"] == pytest.approx(upper_bound(2, 42, 0.9))
    weighted = escape_rate(points + [(0.1, "不通过", 4.0)], entry, 0.9)
    assert weighted["rate"] == pytest.approx(6 / 46)
    assert "escape" in promise(validation())[1]


def test_a_band_decided_whole_counts_with_weight_one_and_moves_the_promise():
    """The same 30 defective groups just under the threshold, now with their band decided whole (band_census): they
    are a census of the stratum the rule chose by p_fail alone, so they count (weight 1) and the promise moves."""
    base = validation()
    before, entry = promise(base)
    t = entry["threshold"]
    band = [prediction(5000 + i, t - 0.001 * (i + 1), "不通过", {"route": REVIEW, "review_scope": GROUP,
                                                               "band": {"id": "b", "groups": 30}, "band_census": True})
            for i in range(30)]
    after, entry = promise(base + band)
    assert after != before and after["n_fail"] == before["n_fail"] + 30 and entry["left_out"] == {}


@pytest.mark.parametrize("offset", [-0.3, 0.0, 0.1])
def test_the_weighted_miss_bound_with_the_band_in_keeps_its_confidence(offset):
    """Live days of 1,000 groups: p_fail uniform, a group defective with probability rising with p_fail; the rule
    auto-passes below 0.3, reviews 0.3-0.7 (the band, decided whole: weight 1), auto-fails above; 10% of the
    automatically decided groups audited (weight 10). At a threshold below the band (0.2), at its centre (0.5) and
    inside it (0.6), the 90% weighted upper bound of the miss rate falls below the truth in at most 10% of 400
    simulated days (plus two standard errors). Audits weighted 1 instead of 10 fail it."""
    rng = random.Random(3)
    t = 0.5 + offset

    def defective(p):
        return rng.random() < 0.3 + 0.4 * p

    truth_fail, truth_miss = 0.0, 0.0   # the true miss rate at t, by a large sample
    for _ in range(200_000):
        p = rng.random()
        if defective(p):
            truth_fail += 1
            truth_miss += p < t
    truth = truth_miss / truth_fail
    below, days = 0, 400
    for _ in range(days):
        errors, weights = [], []
        for _ in range(1000):
            p = rng.random()
            in_band = 0.3 <= p <= 0.7
            if not in_band and rng.random() >= 0.1:
                continue   # decided without review and not audited: no label
            if defective(p):   # the weight stage_b.rules.routes gives each label
                w = evidence_weight({"route": REVIEW, "review_scope": GROUP, "band_census": True} if in_band
                                    else {"route": AUDIT, "audit_probability": 0.1})
                weights.append(w)
                if p < t:
                    errors.append(w)
        below += upper_bound_weighted(errors, weights, 0.9) < truth
    assert below / days <= 0.1 + 2 * (0.1 * 0.9 / days) ** 0.5, (truth, below)
