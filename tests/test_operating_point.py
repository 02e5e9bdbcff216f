"""The operating point rule on hand-made cases (stage_b.rules.operating_point; pure, no model), and the operating point
as `group-qc evaluate --predictions` writes it and the judge reads it back."""
from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from stage_b import evaluate
from stage_b.judging.verdict_file import verdict_record
from stage_b.contract.numbers import fmt_p
from stage_b.rules.operating_point import (load_operating_point, manual_point, MissionPoint, OperatingPoint, p_fail,
                                           thresholds_for)
from stage_b.rules.calibrate import build_operating_point, mission_point, parse_targets
from stage_b.rules.point_check import OperatingPointError, check_rate
from stage_b.stats.thresholds import (certified_fail_threshold, curve, P_FAIL_TIE, pick_threshold, rates_at,
                                      review_margin, verdict_at)
from stage_b.contract.verdict import FAIL, PASS

F, P = "不通过", "通过"


def at(p: float) -> float:
    """The candidate threshold the rule places at validation p_fail p: just below it, by the tie tolerance."""
    return p - P_FAIL_TIE


@pytest.mark.parametrize("lp_fail, lp_pass, expected", [
    (math.log(0.3), math.log(0.1), 0.75),          # normalised over the two lines: 0.3 / (0.3 + 0.1)
    (-2.0, -2.0, 0.5),
    (-1e4, 0.0, 0.0),                               # no overflow at either extreme
    (0.0, -1e4, 1.0),
])
def test_p_fail_is_the_fail_line_probability_normalised_over_both_lines(lp_fail, lp_pass, expected):
    assert p_fail({F: lp_fail, P: lp_pass}) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("points, target, threshold", [
    # separable: the largest threshold that still catches every fail
    ([(0.9, F), (0.8, F), (0.3, P), (0.2, P)], 0.0, at(0.8)),
    # a fail below a pass: miss 0 costs an overkill ...
    ([(0.9, F), (0.4, F), (0.6, P), (0.1, P)], 0.0, at(0.4)),
    # ... and a 50% miss budget lets the threshold rise to the higher fail
    ([(0.9, F), (0.4, F), (0.6, P), (0.1, P)], 0.5, at(0.9)),
    # a budget of 100% misses: 1.0, which fails nothing below p_fail 1
    ([(0.9, F), (0.4, F), (0.6, P)], 1.0, 1.0),
    # p_fail exactly 1: 1.0 itself is no candidate (it lies on a validation p_fail); just below it is
    ([(1.0, F), (0.2, P)], 0.0, at(1.0)),
    # ties go to 不通过: a pass sharing the fail's p_fail is overkilled
    ([(0.5, F), (0.5, P)], 0.0, at(0.5)),
    # p_fails within the tie tolerance are one value: no threshold between them
    ([(0.5, F), (0.5 - 1e-8, P), (0.2, P)], 0.0, at(0.5 - 1e-8)),
    # no fail group: no miss rate to hold, no threshold
    ([(0.5, P), (0.7, P)], 0.05, None),
    ([], 0.05, None),
])
def test_the_threshold_is_the_largest_candidate_within_the_target_miss_rate(points, target, threshold):
    assert pick_threshold(points, target) == threshold
    if threshold is not None:   # and it holds: miss rate within the target, by the stated verdict rule
        misses = sum(e == F and verdict_at(p, threshold) == P for p, e in points)
        assert misses / sum(e == F for _, e in points) <= target


def test_the_curve_runs_from_never_fail_to_always_fail():
    points = [(0.9, F), (0.4, F), (0.6, P), (0.1, P)]
    got = [(c["threshold"], c["miss_rate"], c["overkill_rate"]) for c in curve(points)]
    assert got == [(1.0, 1.0, 0.0), (at(0.9), 0.5, 0.0), (at(0.6), 0.5, 0.5), (at(0.4), 0.0, 0.5), (at(0.1), 0.0, 1.0)]
    for c in curve(points):   # every point agrees with the direct count at that threshold
        direct = rates_at(points, c["threshold"])
        assert (direct["miss_rate"], direct["overkill_rate"]) == (c["miss_rate"], c["overkill_rate"])


@pytest.mark.parametrize("points, threshold, share, margin", [
    ([(0.9, F), (0.8, F), (0.3, P)], 0.8, 0.8, 0.0),                 # nothing wrong: no band
    # errors at distance 0.05 and 0.2: cover both (and the tie tolerance, so noise cannot move one out)
    ([(0.9, F), (0.45, P), (0.2, F), (0.1, P)], 0.4, 1.0, 0.2 + P_FAIL_TIE),
    ([(0.9, F), (0.45, P), (0.2, F), (0.1, P)], 0.4, 0.5, 0.05 + P_FAIL_TIE),     # half of them: the nearer one
])
def test_the_review_margin_covers_a_share_of_the_validation_errors(points, threshold, share, margin):
    assert review_margin(points, threshold, share) == pytest.approx(margin)


def test_a_mission_point_reports_rates_with_wilson_intervals_and_the_band():
    entry = mission_point([(0.9, F), (0.45, P), (0.2, F), (0.1, P)], 0.0, share=1.0)
    # a 0% target can never be certified: the point rule's threshold keeps the file usable
    assert entry["certified"] is False and entry["fail_groups_needed"] is None
    assert (entry["threshold"], entry["misses"], entry["overkills"]) == (at(0.2), 0, 1)
    assert entry["overkill_rate"] == 0.5 and entry["overkill_rate_ci95"][0] < 0.5 < entry["overkill_rate_ci95"][1]
    assert entry["review_margin"] == pytest.approx(0.25, abs=3 * P_FAIL_TIE)   # the one error, the pass at 0.45
    assert (entry["validation_needs_review"], entry["validation_errors_in_review"]) == (3, 1)
    assert mission_point([(0.3, P)], 0.05, 0.8)["threshold"] is None


@pytest.mark.parametrize("values, expected", [
    (["0.05"], {"default": 0.05, "per_mission": {}}),
    (["0.05", "BBU接地线检查=0.02"], {"default": 0.05, "per_mission": {"BBU接地线检查": 0.02}}),
    (["BBU接地线检查=0"], {"default": None, "per_mission": {"BBU接地线检查": 0.0}}),
    (None, None),
])
def test_target_miss_rates_parse(values, expected):
    assert parse_targets(values) == expected


@pytest.mark.parametrize("value, message", [
    ("-0.1", "out of range"), ("1.5", "out of range"), ("abc", "not a number"), ("nan", "out of range"),
])
def test_rates_and_thresholds_outside_0_1_are_refused_naming_the_value(value, message):
    with pytest.raises(OperatingPointError, match=message) as err:
        check_rate(value, "--threshold")
    assert "--threshold" in str(err.value) and value in str(err.value)
    with pytest.raises(OperatingPointError, match="second plain value"):
        parse_targets(["0.1", "0.2"])


MODEL = {"path": "/m", "fingerprint": "aaa"}
ADAPTER = {"path": "/a/checkpoint-5", "fingerprint": "bbb"}
OP = {"format": 2, "model": MODEL, "adapters": [ADAPTER], "confidence": 0.9, "missions": {
    "BBU接地线检查": {"threshold": 0.4, "threshold_fail": 0.4, "review_margin": 0.1, "certified": True,
                     "promise": "miss rate <= 10%", "confidence": 0.9, "target_miss_rate": 0.1, "n_fail": 22,
                     "misses": 0, "miss_rate_upper": 0.0996,
                     "profile": {"p_fail": [0.9] * 22, "defect_groups": 22, "groups": 22}},
    "挡风板安装检查": {"threshold": None, "threshold_fail": None, "review_margin": 0.0, "certified": False,
                   "promise": "no promise", "why_none": "no fail group in validation"}}}


@pytest.mark.parametrize("model, adapters, missions, fallback, refusal", [
    (MODEL, [ADAPTER], ["BBU接地线检查"], None, None),
    ({"path": "/elsewhere/m", "fingerprint": "aaa"}, [{"path": "/x", "fingerprint": "bbb"}], ["BBU接地线检查"],
     None, None),                                                          # moved, same content: fine
    ({"path": "/other", "fingerprint": "zzz"}, [ADAPTER], ["BBU接地线检查"], None, "model /m and this is /other"),
    (MODEL, [], ["BBU接地线检查"], None, "adapters ['/a/checkpoint-5'] and these are none"),
    # a mission without an entry or a threshold is judged all the same, every group to review (never stops the day)
    (MODEL, [ADAPTER], ["BBU线缆布放要求", "BBU接地线检查"], None, None),
    (MODEL, [ADAPTER], ["挡风板安装检查"], None, None),
    (MODEL, [ADAPTER], ["挡风板安装检查", "BBU线缆布放要求"], 0.3, None),   # --threshold fills the gaps
])
def test_an_operating_point_is_used_only_for_its_model_and_judges_every_mission(model, adapters, missions, fallback,
                                                                                refusal):
    if refusal:
        with pytest.raises(OperatingPointError, match="cannot be used") as err:
            thresholds_for(OperatingPoint.from_json(OP, "op.json"), "op.json", missions, model=model,
                           adapters=adapters, fallback=fallback)
        assert refusal in str(err.value)
        return
    got = thresholds_for(OperatingPoint.from_json(OP, "op.json"), "op.json", missions, model=model, adapters=adapters,
                         fallback=fallback)
    assert set(got) == set(missions)
    for m in missions:
        calibrated = m == "BBU接地线检查"
        assert got[m].threshold == (0.4 if calibrated else fallback) and got[m].certified is calibrated
        decision = got[m].decide(0.95)
        assert decision.automatic is calibrated   # an uncalibrated mission: every group goes to review, saying why
        if not calibrated:
            assert m in ("挡风板安装检查", "BBU线缆布放要求") and any(
                ("no fail group" in w or "no entry" in w or "--threshold" in w) for w in decision.why), decision.why


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"), ("{not json", "cannot read"), (json.dumps({"format": 99}), "format"),
    (json.dumps({**OP, "format": 1}), "format 1 predates certified promises"),   # never misread
    (json.dumps({**OP, "missions": {"BBU接地线检查": {"threshold": 1.4, "certified": True}}}), "out of range"),
    (json.dumps({**OP, "missions": {"BBU接地线检查": {"threshold": "0.4", "certified": True}}}), "not a number"),
    (json.dumps({**OP, "missions": {"BBU接地线检查": {"threshold": 0.4, "review_margin": "0.1",
                                                     "certified": True}}}), "not a number"),
    (json.dumps({**OP, "missions": {"BBU接地线检查": {"threshold": 0.4}}}), "certified is None"),
    (json.dumps({**OP, "missions": {"BBU接地线检查": None}}), "not an object"),
    (json.dumps({**OP, "model": None}), "`model` must be an object"),
    (json.dumps({**OP, "missions": []}), "`missions` must be an object"),
])
def test_a_bad_operating_point_file_is_refused_naming_it(tmp_path, content, message):
    path = tmp_path / "operating_point.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(OperatingPointError, match=message) as err:
        load_operating_point(path)
    assert str(path) in str(err.value)


RECORD = {"group_id": "QC-A-20250101-1", "mission": "BBU接地线检查", "label": None, "images": ["a/1.jpg", "a/2.jpg"],
          "per_image": {"图片_1": "接地线×1/散乱 备注：接地线散乱未捆扎", "图片_2": "接地线×1/已捆扎"}}
POINT = MissionPoint(threshold=0.4, threshold_fail=0.4, review_margin=0.1, certified=True, promise="miss <= 10%")
BAND = replace(POINT, threshold_fail=0.8, review_margin=0.0)


@pytest.mark.parametrize("p, point, reply, verdict, why", [
    (0.9, POINT, "不通过\n理由: 图片_1 接地线散乱", F, []),
    # 图片_1's summary shows a defect: a 通过 goes to review whatever its reason says
    (0.1, POINT, "通过\n理由: 图片_2 符合要求", P, ["the verdict is 通过 and the summaries show a defect on 图片_1"]),
    (0.45, POINT, "不通过\n理由: 图片_1 接地线散乱", F, ["within 0.1 of the threshold 0.4"]),
    (0.35, POINT, "通过\n理由: 图片_2 符合要求", P, ["within 0.1 of the threshold 0.4", "the verdict is 通过"]),
    (0.9, POINT, "不通过\n图片_1 ...\n还有一行", F, ["not the two-line contract"]),        # kept as written, flagged
    (0.9, POINT, "不通过\n", F, ["not the two-line contract"]),
    # the reason against the verdict, naming the photos
    (0.9, POINT, "不通过\n理由: 图片_2 符合要求", F,
     ["contradicts 不通过", "cites 图片_2, whose summary shows no defect"]),
    (0.1, POINT, "通过\n理由: 图片_1 符合要求", P, ["contradicts 通过: it cites 图片_1"]),
    (0.9, POINT, "不通过\n理由: 图片_2 接地线散乱", F, ["cites 图片_2, whose summary shows no defect"]),
    (0.9, POINT, "不通过\n理由: 图片_9 接地线散乱", F, ["cites 图片_9, which the group does not have"]),
    # three-way: between the auto-pass and auto-fail thresholds, always reviewed
    (0.5, BAND, "不通过\n理由: 图片_1 接地线散乱", F, ["in the review band"]),
    (0.85, BAND, "不通过\n理由: 图片_1 接地线散乱", F, []),
    (0.5, replace(BAND, threshold_fail=None), "不通过\n理由: 图片_1 接地线散乱", F, ["nothing is auto-failed"]),
    # a mission without a certified promise is never decided without review
    (0.9, replace(POINT, certified=False, promise="cannot promise 10%: 3 defective validation groups, 22 needed"),
     "不通过\n理由: 图片_1 接地线散乱", F, ["not certified: cannot promise 10%"]),
    (0.9, manual_point(0.4), "不通过\n理由: 图片_1 接地线散乱", F, ["not certified", "--threshold"]),
])
def test_a_verdict_record_follows_the_rule_and_says_why_a_person_must_look(p, point, reply, verdict, why):
    rec = verdict_record(RECORD, p, point, reply, {"model": "/m"})
    assert rec["verdict"] == verdict and rec["reply"] == reply and rec["label"] is None
    assert rec["summaries"] == ["接地线×1/散乱 备注：接地线散乱未捆扎", "接地线×1/已捆扎"]
    assert rec["needs_review"] == bool(why) == bool(rec["review_why"]), rec["review_why"]
    for fragment in why:
        assert any(fragment in w for w in rec["review_why"]), (fragment, rec["review_why"])


def test_allow_uncertified_decides_without_review_and_says_so_on_the_record():
    point = replace(POINT, certified=False, promise="cannot promise 10%: 3 defective validation groups, 22 needed")
    rec = verdict_record(RECORD, 0.9, point, "不通过\n理由: 图片_1 接地线散乱", {}, allow_uncertified=True)
    assert rec["needs_review"] is False and rec["certified"] is False
    assert rec["promise"].startswith("NOT CERTIFIED, decided under --allow_uncertified")


@pytest.mark.parametrize("x, other, text", [
    (9.4e-07, None, "9.4e-07"),              # never "0.000"
    (0.123456, None, "0.123"),
    (9.41e-07, 9.4e-07, "9.41e-07"),          # as many digits as it takes to tell p_fail from its threshold
    (0.40001, 0.4, "0.40001"),
    (0.4, 0.4, "0.4"),
    (None, None, "n/a"),
])
def test_probabilities_print_with_enough_digits_to_show_the_decision(x, other, text):
    assert fmt_p(x, other) == text


def _written_op(tmp_path):
    """An operating point file as stage_b.evaluate writes it (build_operating_point), both sides certified."""
    from stage_b.rules.calibrate import build_operating_point
    preds = ([{"group_id": f"f{i}", "mission": "BBU接地线检查", "p_fail": 0.9, "expected": F} for i in range(12)]
             + [{"group_id": f"p{i}", "mission": "BBU接地线检查", "p_fail": 0.1, "expected": P} for i in range(12)]
             + [{"group_id": f"q{i}", "mission": "挡风板安装检查", "p_fail": 0.2, "expected": P} for i in range(5)])
    op = build_operating_point(preds, ["BBU接地线检查", "挡风板安装检查"], {"default": 0.2, "per_mission": {}},
                               review_share=0.8, model=MODEL, adapters=[ADAPTER], data=None, confidence=0.8,
                               overkill_targets={"default": 0.3, "per_mission": {}})
    path = tmp_path / "operating_point.json"
    path.write_text(json.dumps(op, ensure_ascii=False, indent=2), encoding="utf-8")
    return path


def test_an_operating_point_file_reads_back_to_the_same_json(tmp_path):
    path = _written_op(tmp_path)
    text = path.read_text(encoding="utf-8")
    op = load_operating_point(path)
    assert op.missions["BBU接地线检查"].certified and op.missions["挡风板安装检查"].threshold is None
    assert json.dumps(op.to_json(), ensure_ascii=False, indent=2) == text   # the same keys, in the same order


@pytest.mark.parametrize("key", ["threshold", "threshold_fail", "review_margin", "promise", "why_none"])
def test_a_mission_entry_without_a_key_the_rule_reads_is_refused_naming_file_mission_and_key(tmp_path, key):
    path = _written_op(tmp_path)
    op = json.loads(path.read_text(encoding="utf-8"))
    mission = "挡风板安装检查" if key == "why_none" else "BBU接地线检查"
    op["missions"][mission][key + "_renamed"] = op["missions"][mission].pop(key)
    path.write_text(json.dumps(op, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(OperatingPointError, match=f"{mission}: no {key}[ ,]") as err:
        load_operating_point(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("field, value", [
    ("escape", {"auto_passed": 10, "escapes": 1, "upper": float("nan")}),
    ("escape", {"auto_passed": 10, "escapes": 11, "upper": 0.2}),
    ("escape", {"auto_passed": 10, "escapes": 1, "upper": 1.5}),
    ("escape", {"auto_passed": "10", "escapes": 1, "upper": 0.2}),
    ("escape", "x"),
    ("profile", {"groups": 5, "defect_groups": 6, "p_fail": [0.1]}),
    ("profile", {"groups": 5, "defect_groups": 1, "p_fail": [float("nan")]}),
    ("profile", {"groups": 5, "defect_groups": 1}),
])
def test_fields_the_live_guard_reads_are_checked_at_load(field, value):
    """A NaN escape bound would be a promise that never breaks: refused at load, naming the mission and field."""
    from stage_b.rules.operating_point import MissionPoint
    from stage_b.rules.point_check import OperatingPointError
    entry = {"threshold": 0.5, "threshold_fail": 0.5, "review_margin": 0.0, "certified": False, "promise": "",
             field: value}
    with pytest.raises(OperatingPointError, match=f"F: M: {field}"):
        MissionPoint.from_json(entry, "F: M")


def test_the_escape_bound_weighs_audits():
    """Auto-passed points, 10 validation groups (weight 1) and 4 audits (weight 4), 2 of the audits escapes: the
    escape rate is the weighted share (8 of 26) and its bound the weighted one, not the unweighted 2 of 14."""
    from stage_b.stats.certify import upper_bound, upper_bound_weighted
    from stage_b.rules.calibrate import escape_rate
    points = [(0.1, "通过", 1.0)] * 10 + [(0.1, "通过", 4.0)] * 2 + [(0.1, "不通过", 4.0)] * 2
    entry = {"threshold": 0.5, "threshold_fail": 0.5, "review_margin": 0.0}
    e = escape_rate(points, entry, 0.9)
    assert (e["auto_passed"], e["escapes"]) == (14, 2) and e["rate"] == pytest.approx(8 / 26)
    assert e["upper"] == pytest.approx(upper_bound_weighted([4.0, 4.0], [1.0] * 10 + [4.0] * 4, 0.9))
    assert e["upper"] != pytest.approx(upper_bound(2, 14, 0.9))


def test_an_auto_fail_threshold_below_the_auto_pass_one_is_refused_certified_or_not():
    from stage_b.rules.operating_point import MissionPoint
    from stage_b.rules.point_check import OperatingPointError
    for certified in (True, False):
        entry = {"threshold": 0.5, "threshold_fail": 0.3, "review_margin": 0.0, "certified": certified,
                 "promise": ""}
        with pytest.raises(OperatingPointError, match="threshold_fail 0.3 is below threshold 0.5"):
            MissionPoint.from_json(entry, "F: M")


@pytest.mark.parametrize("above, errors", [(True, 2.0), (False, 20.0)])
def test_the_weighted_overkill_bound_counts_the_groups_at_or_above_the_auto_fail_threshold(above, errors):
    """Good groups (weight 2): ten at p_fail 0.1, one at 0.9; at an auto-fail threshold of 0.8 the overkill counts the
    one at or above it (2 of 22), the miss side counts those below (20 of 22)."""
    from stage_b.stats.certify import upper_bound_weighted
    from stage_b.stats.thresholds import bound_below, weighted_below
    values, weights, running = weighted_below([(0.1, "通过", 2.0)] * 10 + [(0.9, "通过", 2.0)], "通过")
    assert bound_below(values, weights, running, 0.8, 0.9, above=above) == \
        pytest.approx(upper_bound_weighted([errors], weights, 0.9))


@pytest.mark.parametrize("field, value", [("stage_a", ["x"]), ("stage_a", {"models": [1]}),
                                          ("stage_a", {"models": ["m"], "evidence_through": 5})])
def test_a_missions_stage_a_basis_is_checked_at_load(field, value):
    from stage_b.rules.operating_point import MissionPoint
    from stage_b.rules.point_check import OperatingPointError
    entry = {"threshold": 0.5, "threshold_fail": 0.5, "review_margin": 0.0, "certified": False, "promise": "",
             field: value}
    with pytest.raises(OperatingPointError, match=f"F: M: {field}"):
        MissionPoint.from_json(entry, "F: M")


@pytest.mark.parametrize("key, value, what", [("confidence", float("nan"), "confidence"),
                                              ("confidence", 1.5, "confidence"),
                                              ("family", {"per_claim_confidence": float("nan")},
                                               "family.per_claim_confidence"),
                                              ("family", "x", "family")])
def test_the_confidences_the_guard_holds_promises_at_are_checked_at_load(key, value, what):
    from stage_b.rules.operating_point import OperatingPoint
    from stage_b.rules.point_check import OperatingPointError
    op = {"format": 2, "model": {}, "adapters": [], "missions": {}, key: value}
    with pytest.raises(OperatingPointError, match=f"F: {what}"):
        OperatingPoint.from_json(op, "F")


# --------------------------------------------------------------------------------------------------------------
# Self-consistent forgeries: counts the file's own evidence cannot have, a promise sentence that says anything
# --------------------------------------------------------------------------------------------------------------
CERTIFIED = OP["missions"]["BBU接地线检查"]


def _forged(**changes) -> dict:
    entry = {k: v for k, v in {**CERTIFIED, **changes}.items() if v is not _GONE}
    return {**OP, "missions": {"BBU接地线检查": entry}}


_GONE = object()


@pytest.mark.parametrize("changes, refusal", [
    ({"n_fail": 10 ** 9}, "the file's evidence names 22"),                          # 0 of a billion: more than it names
    ({"profile": _GONE}, "certified without the profile"),               # nothing left to check the counts by
    ({"weighted": True, "miss_effective_counts": [0, math.inf]}, "effective counts"),
    ({"weighted": True, "miss_effective_counts": [0, 1e6]}, "not at most its 22 defective groups"),
    ({"miss_rate_upper": _GONE}, "certified without the counts its promise is stated from"),
])
def test_counts_the_evidence_cannot_have_are_refused(changes, refusal):
    with pytest.raises(OperatingPointError, match=refusal):
        OperatingPoint.from_json(_forged(**changes), "F")


@pytest.mark.parametrize("promise", ["miss rate <= 0.1% with 99.99% confidence (hand-written)", 5, None])
def test_the_promise_sentence_is_recomputed_from_the_counts(promise):
    """Planted: the file's text kept -> a verdict line would print whatever was written there."""
    point = OperatingPoint.from_json(_forged(promise=promise), "F").missions["BBU接地线检查"]
    assert point.promise == ("of defective work orders at most 10% pass without a person; 90% sure (0 missed of 22 "
                             "defective validation groups; miss-rate upper bound 9.96%)")
    assert point.to_json()["promise"] == point.promise


def test_an_uncertified_entry_keeps_its_words_but_only_words():
    op = {**OP, "missions": {"挡风板安装检查": {**OP["missions"]["挡风板安装检查"], "promise": 5}}}
    with pytest.raises(OperatingPointError, match="promise is 5, not a sentence"):
        OperatingPoint.from_json(op, "F")


def test_a_pooled_promise_counts_no_more_groups_than_the_missions_name():
    overall = {**CERTIFIED, "n_fail": 23}   # the one mission's profile names 22
    profile_free = {k: v for k, v in overall.items() if k != "profile"}
    with pytest.raises(OperatingPointError, match="overall: certified on 23 defective"):
        OperatingPoint.from_json({**OP, "overall": profile_free}, "F")
    assert OperatingPoint.from_json({**OP, "overall": {**profile_free, "n_fail": 22}}, "F").overall.certified


@pytest.mark.parametrize("entry, sentence", [
    # both numbers of the one rule, in the words the QC owner signs (planted: the miss rate alone, as before)
    ({"escape": {"upper": 0.0903, "auto_passed": 40, "escapes": 1}, "validation_auto_decided": 30},
     "of defective work orders at most 10% pass without a person; of the work orders passed without a person at most "
     "9.03% are defective; 90% sure (0 missed of 22 defective validation groups; miss-rate upper bound 9.96%)"),
    # a rule that auto-fails but passes nothing without a person: no "at most 100% are defective" (planted: said)
    ({"escape": {"upper": 1.0, "auto_passed": 0, "escapes": 0}, "validation_auto_decided": 6},
     "of defective work orders at most 10% pass without a person; it passes no work order without a person (what it "
     "decides without review, it fails); 90% sure (0 missed of 22 defective validation groups; miss-rate upper bound "
     "9.96%)"),
    # an escape bound of 100% promises nothing either (planted: "at most 100% are defective")
    ({"escape": {"upper": 0.99996, "auto_passed": 3, "escapes": 2}, "validation_auto_decided": 6},
     "of defective work orders at most 10% pass without a person; of the work orders passed without a person no "
     "defective share below 100% can be promised yet (2 defective of 3 passed on validation); 90% sure (0 missed of "
     "22 defective validation groups; miss-rate upper bound 9.96%)"),
    # a rule that passes nothing without review is no automation, not "certified" (planted: called certified)
    ({"validation_auto_decided": 0, "n": 40},
     "no automation: people decide every group (the rule certified for a miss rate <= 10% with 90% confidence decides "
     "none of the 40 validation groups without review; 0 missed of 22 defective validation groups; miss-rate upper "
     "bound 9.96%)"),
])
def test_the_promise_is_one_sentence_with_both_numbers(entry, sentence):
    point = OperatingPoint.from_json(_forged(**entry), "F").missions["BBU接地线检查"]
    assert point.promise == sentence


@pytest.mark.parametrize("claims, confidence, family_wise, certified, says", [
    # 8 promises at 80% each: "hold together with confidence at least 0%" said nothing, and is not said
    (8, 0.8, False, 8, "no joint statement: each of the 8 certified promises (each at 80%) holds on its own, not all "
                       "together. For all to hold together at 80%, --family_wise certifies each claim at 97.5%, "
                       "which at a 20% miss-rate target needs 17 defective groups per mission without a miss"),
    (2, 0.9, False, 2, "2 certified promises (each at 90%) hold together with confidence at least 80% (Bonferroni)"),
    (4, 0.8, False, 0, "no promise is certified"),
])
def test_the_family_line_is_a_joint_statement_only_when_it_is_one(claims, confidence, family_wise, certified, says):
    from stage_b.rules.promise_texts import family_text
    from stage_b.stats.thresholds import family
    fam = family([f"m{k}" for k in range(claims)], 1, confidence, family_wise)
    fam.update(certified_claims=certified,
               certified_claims_hold_together=max(0.0, 1 - certified * (1 - fam["per_claim_confidence"])))
    assert family_text(fam, 0.2) == says


M, N = "BBU接地线检查", "挡风板安装检查"


# --------------------------------------------------------------------------------------------------------------
# A promise read from a file is recomputed, not trusted
# --------------------------------------------------------------------------------------------------------------
# hostile input (issue 34)
def real_op(tmp_path, **edit):
    preds = ([{"group_id": f"f{i}", "mission": M, "p_fail": 0.9, "expected": "不通过"} for i in range(12)]
             + [{"group_id": f"p{i}", "mission": M, "p_fail": 0.1, "expected": "通过"} for i in range(12)])
    op = build_operating_point(preds, [M], {"default": 0.2, "per_mission": {}}, review_share=0.8,
                               model={"path": "m", "fingerprint": "f"}, adapters=[], data=None, confidence=0.8,
                               overkill_targets={"default": 0.3, "per_mission": {}})
    assert op["missions"][M]["certified"] and op["missions"][M]["overkill_certified"]
    for key, value in edit.items():
        if key in ("adapters", "data"):
            op[key] = value
        else:
            op["missions"][M][key] = value
    path = tmp_path / "op.json"
    path.write_text(json.dumps(op, ensure_ascii=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("edit, message", [
    # a forged promise: 12 defective groups where 6,905 are needed for 0.1% at 99.9%
    ({"target_miss_rate": 0.001, "confidence": 0.999, "promise": "miss rate <= 0.1% with 99.9% confidence"},
     "certified, but 0 missed of 12 defective groups bound the miss rate at"),
    ({"misses": 3}, "certified, but 3 missed of 12"),
    ({"confidence": 5}, "confidence 5 is out of range"),
    ({"confidence": 0.05}, "Did you mean 0.95"),
    ({"target_miss_rate": -1}, "target_miss_rate -1 is out of range"),
    ({"threshold_fail": 0.05}, "threshold_fail 0.05 is below threshold"),
    ({"n_fail": "12"}, "n_fail is '12', not a count"),
    ({"auto_overkills": 9}, "overkill_certified does not follow from its counts"),
    ({"adapters": ["x"]}, "`adapters` a list of objects"),
    ({"data": "text"}, "`data` must be an object"),
    ({"data": {"selection": "x"}}, "`data` must be an object whose `selection` is an object"),
])
def test_a_promise_that_its_own_counts_do_not_support_is_refused(tmp_path, edit, message):
    assert load_operating_point(real_op(tmp_path))   # as written: it loads
    with pytest.raises(OperatingPointError, match=message.replace("(", r"\(").replace("`", ".")):
        load_operating_point(real_op(tmp_path, **edit))


# --------------------------------------------------------------------------------------------------------------
# Numbers that hang on noise, and figures that say what they measure
# --------------------------------------------------------------------------------------------------------------
# hostile input (issue 34, case 11)
def test_the_same_summaries_scored_twice_give_the_same_promise_and_the_same_verdicts():
    """Two evaluations of the same summaries differ by ~1e-8 (float32, another batch). The issue's case: a defective
    group at p_fail 0.0280751986 one time and 0.0280752246 the next turned "0 missed of 12" into "1 missed of 22".
    Ties are one value and no threshold lies within the tie tolerance of a validation p_fail, so the promise, the
    thresholds' sides and every verdict are the same both times."""
    import random

    from stage_b.rules.operating_point import MissionPoint
    from stage_b.rules.calibrate import mission_point
    from stage_b.stats.thresholds import P_FAIL_TIE
    rng = random.Random(7)
    F, P = "不通过", "通过"
    first = ([(0.0280751986, F)] + [(rng.uniform(0.03, 1.0), F) for _ in range(30)]
             + [(0.0280752246, P)] + [(rng.uniform(0.0, 0.03), P) for _ in range(40)])
    for trial in range(200):
        noise = random.Random(trial)
        second = [(min(1.0, max(0.0, p + noise.uniform(-3e-8, 3e-8))), e) for p, e in first]
        a, b = (mission_point(points, 0.1, 0.8, 0.8, target_overkill=0.2) for points in (first, second))
        for key in ("certified", "overkill_certified", "misses", "n_fail", "auto_overkills", "promise"):
            assert a[key] == b[key], (trial, key, a[key], b[key])
        for entry, points in ((a, first), (b, second)):
            assert min(abs(p - entry["threshold"]) for p, _ in points) >= P_FAIL_TIE - 1e-15
        point = MissionPoint.of(a)
        for (p, _), (q, _) in zip(first, second):   # a group scored once more is decided as before
            assert point.decide(q).verdict == point.decide(p).verdict
            assert point.decide(q).automatic == point.decide(p).automatic


def _two_missions(split: str):
    """Mission M certified (12 defective groups, none missed); mission N with 10 defective groups 1.4e-4 apart, held
    to 5% (32 needed: not certified)."""
    preds = ([{"group_id": f"f{i}", "mission": M, "p_fail": 0.9 + i / 1000, "expected": "不通过"} for i in range(12)]
             + [{"group_id": f"p{i}", "mission": M, "p_fail": 0.1, "expected": "通过"} for i in range(12)]
             + [{"group_id": f"g{i}", "mission": N, "p_fail": 0.98213 + i * 1.4e-4, "expected": "不通过"}
                for i in range(10)]
             + [{"group_id": f"h{i}", "mission": N, "p_fail": 0.2, "expected": "通过"} for i in range(3)])
    op = build_operating_point(preds, [M, N], {"default": 0.2, "per_mission": {N: 0.05}}, review_share=0.8,
                               model={"path": "m", "fingerprint": "f"}, adapters=[], data={"split": split},
                               confidence=0.8)
    return preds, op


# hostile input (issue 34, case 11)
@pytest.mark.parametrize("split, groups", [("val", "defective validation groups"),
                                           ("held_out", "defective held-out (validation and reviewed work orders) "
                                                        "groups")])
def test_every_printed_figure_says_what_it_measures(split, groups):
    """Issue 34 case 11: a re-certified promise named "validation groups" though it counted reviewed work orders; the
    pooled row said "certified: yes" with 1 of 2 missions certified; two thresholds 1.4e-4 apart both printed as
    0.982; the verdict line's rates sat beside the promises without saying they measure something else."""
    from stage_b.evaluate import operating_curves, render_operating, render_promises
    from stage_b.evaluate.report import curve_picks
    preds, op = _two_missions(split)
    assert groups in op["missions"][M]["promise"] and op["missions"][M]["certified"]
    metrics = {"operating_curve": operating_curves(preds, [M, N]), "operating_point": op, "data": {"split": split}}
    text = "\n".join(render_operating(metrics, curve_picks(metrics["operating_curve"])) + render_promises(metrics))
    assert "pooled bound only: yes; missions certified on their own: 1 of 2" in text
    assert f"Decided without review on these {op['evidence']} groups" in text
    row = next(line for line in text.splitlines() if line.startswith(f"| {N} | t="))
    shown = [cell.split(":")[0] for cell in row.split(" | ")[1:]]
    assert len(set(shown)) >= 2 and "t=0.982:" not in row, row   # 0.98213 and 0.98227 never print alike
    assert "miss rate at the threshold (upper)" in text


def test_two_thresholds_apart_never_print_alike():
    from stage_b.contract.numbers import fmt_distinct
    assert fmt_distinct([0.98213, 0.98227]) == ["0.9821", "0.9823"]   # as many figures as it takes, no more
    assert fmt_distinct([0.5, 0.5, None]) == ["0.5", "0.5", "n/a"]


# --------------------------------------------------------------------------------------------------------------
# The whole path a QC owner takes: predictions.jsonl -> `group-qc evaluate --predictions ...
# --target_miss_rate ...` (in process) -> operating_point.json -> the judge's reading of it. The numbers tell the
# right rule from the wrong one: per-mission targets whose thresholds differ, a p_fail of exactly 0.0, binary
# fractions that sit exactly on the review band's edge, a review share that does not divide the errors.
# --------------------------------------------------------------------------------------------------------------
A, B = "BBU接地线检查", "挡风板安装检查"
A_ALIAS = "BBU接地检查"   # an alias of A in the mission registry


def prediction(mission: str, k: int, p: float, expected: str) -> dict:
    """One predictions.jsonl record as stage_b.evaluate writes it (the reply agrees with p_fail at 0.5)."""
    said = FAIL if p >= 0.5 else PASS
    reason = "图片_1 接地线未捆扎" if said == FAIL else "图片_1 接地线已捆扎"
    return {"group_id": f"QC-OP-20250101-{k}", "mission": mission, "expected": expected,
            "completion": f"{said}\n理由: {reason}", "summaries": ["接地线×1/已捆扎"], "p_fail": p}


def rescore(tmp_path: Path, predictions: list[dict], *flags: str) -> tuple[int, dict, dict | None]:
    """`group-qc evaluate --predictions P --output_dir O FLAGS` in process, with the metrics.json an
    earlier evaluation leaves beside P (it names the model, which an operating point needs). Returns (exit status,
    metrics.json, operating_point.json or None)."""
    source = tmp_path / "earlier"
    source.mkdir(exist_ok=True)
    (source / "predictions.jsonl").write_text(
        "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in predictions), encoding="utf-8")
    (source / "metrics.json").write_text(json.dumps({"checkpoints": {"model": MODEL, "adapters": []}}),
                                         encoding="utf-8")
    out = tmp_path / "out"
    rc = evaluate.main(["--predictions", str(source / "predictions.jsonl"), "--output_dir", str(out), "--overwrite",
                        "--no_review", *flags])
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8")) if rc == 0 else {}
    op_file = out / "operating_point.json"
    return rc, metrics, (json.loads(op_file.read_text(encoding="utf-8")) if op_file.exists() else None)


# planted-bug test (issue 27, class 1): a mission's own target wins
# 20 defective groups per mission, p_fail all different: the point rule's threshold at a 5% target is the 2nd lowest
# defective p_fail (one miss allowed), at 10% the 3rd (two misses): the target that reached the entry shows.
def _twenty_fails(mission: str, base: float) -> list[dict]:
    fails = [prediction(mission, k, base + 0.02 * k, FAIL) for k in range(20)]
    passes = [prediction(mission, 100 + k, 0.01 * (k + 1), PASS) for k in range(20)]
    return fails + passes


TARGET_PREDICTIONS = _twenty_fails(A, 0.30) + _twenty_fails(B, 0.40)
# the threshold at a 5% target, and at 10%: just below the p_fail (by the tie tolerance)
SECOND_LOWEST = {A: 0.30 + 0.02 - P_FAIL_TIE, B: 0.40 + 0.02 - P_FAIL_TIE}
THIRD_LOWEST = {A: 0.30 + 0.04 - P_FAIL_TIE, B: 0.40 + 0.04 - P_FAIL_TIE}


@pytest.mark.usefixtures("no_group_qc_environment")
@pytest.mark.parametrize("flag_values, own", [
    (["0.1", f"{A}=0.05"], {A: 0.05, B: 0.1}),           # the default first ...
    ([f"{A}=0.05", "0.1"], {A: 0.05, B: 0.1}),           # ... or last: the mission's own target wins either way
    (["0.1", f"{A_ALIAS}=0.05"], {A: 0.05, B: 0.1}),     # named by an alias
    ([f"{B}=0.05", "0.1", f"{A}=0.05"], {A: 0.05, B: 0.05}),   # every mission its own: the default is unused
])
def test_a_missions_own_target_miss_rate_reaches_its_entry_in_whichever_order(tmp_path, flag_values, own):
    """Silent bug: `--target_miss_rate 0.1 BBU接地线检查=0.05` building the mission's entry at the default 10%
    (the default silently winning over the mission's own target, in one order of the values or both). Checked
    from the strings the command line gives to operating_point.json: each entry's target and the threshold it
    gives (5%: the 2nd lowest defective p_fail, one miss; 10%: the 3rd lowest, two misses)."""
    rc, _, op = rescore(tmp_path, TARGET_PREDICTIONS, "--target_miss_rate", *flag_values)
    assert rc == 0 and op is not None
    for mission, target in own.items():
        entry = op["missions"][mission]
        assert entry["target_miss_rate"] == target, (mission, entry["target_miss_rate"])
        expected = SECOND_LOWEST[mission] if target == 0.05 else THIRD_LOWEST[mission]
        assert entry["threshold"] == pytest.approx(expected, abs=1e-12), (mission, entry["threshold"])
        assert entry["misses"] == (1 if target == 0.05 else 2)
    assert op["overall"]["target_miss_rate"] == 0.1   # the pooled entry is the default's


# planted-bug test (issue 27, class 2): a p_fail of exactly 0.0 is a value
ZERO_PREDICTIONS = [
    prediction(A, 0, 0.0, FAIL),     # a defective group the model is sure about, wrongly: p_fail exactly 0
    prediction(A, 1, 0.6, FAIL), prediction(A, 2, 0.8, FAIL),
    prediction(A, 3, 0.1, PASS), prediction(A, 4, 0.3, PASS), prediction(A, 5, 0.7, PASS),
    prediction(B, 0, 0.0, PASS),     # a good group at exactly 0: an overkill denominator
    prediction(B, 1, 0.2, PASS), prediction(B, 2, 0.5, FAIL), prediction(B, 3, 0.9, FAIL),
]


@pytest.mark.usefixtures("no_group_qc_environment")
def test_a_group_whose_p_fail_is_exactly_zero_stays_on_the_curve_and_in_the_operating_point(tmp_path):
    """Silent bug: `if p.get("p_fail"):` where `is not None` was meant (points_of, operating_curves), so a group
    with p_fail 0.0 (defective or good) vanishes from the curve, the calibration and the operating point. With a 0%
    target A's threshold must be 0.0 (the defective group at 0.0 must be caught); without that group it would be
    0.6 and the promise would rest on 2 defective groups instead of 3."""
    rc, metrics, op = rescore(tmp_path, ZERO_PREDICTIONS, "--target_miss_rate", "0.0")
    assert rc == 0 and op is not None
    curves = metrics["operating_curve"]
    assert curves["groups_without_p_fail"] == 0
    for mission in (A, B):
        mine = [(p["p_fail"], p["expected"]) for p in ZERO_PREDICTIONS if p["mission"] == mission]
        assert sorted(map(tuple, curves["points"][mission])) == sorted(mine)
        assert metrics["calibration"]["per_mission"][mission]["n"] == len(mine)
        assert op["missions"][mission]["n"] == len(mine)
        assert op["missions"][mission]["validation_auto_decided"] <= len(mine)
    a = op["missions"][A]
    assert (a["threshold"], a["n_fail"], a["misses"]) == (0.0, 3, 0)
    assert curves["per_mission"][A][-1]["threshold"] == 0.0          # the curve reaches "fail everything"
    assert (op["missions"][B]["n_pass"], op["automation"]["validation_groups"]) == (2, len(ZERO_PREDICTIONS))
    assert sorted(map(tuple, curves["overall_points"])) == sorted((p["p_fail"], p["expected"])
                                                                  for p in ZERO_PREDICTIONS)


# planted-bug tests (issue 27, class 3): the review band
# Certified at 80% confidence for a 20% target with 10 defective groups and no miss: the threshold is just below the
# lowest defective p_fail, 0.5 - 2^-20. Every value is a binary fraction, so |p_fail - t| is exact.
T = 0.5 - P_FAIL_TIE


def _certified_mission(overkills: list[float], clean_passes: list[float]) -> list[dict]:
    fails = [prediction(A, k, 0.5 + k / 64, FAIL) for k in range(10)]
    bad = [prediction(A, 100 + k, p, PASS) for k, p in enumerate(overkills)]
    good = [prediction(A, 200 + k, p, PASS) for k, p in enumerate(clean_passes)]
    return fails + bad + good


CERTIFY = ("--target_miss_rate", "0.2", "--confidence", "0.8")


def judged_day(op_path: Path, p: float) -> dict:
    """The judge's verdict record for a group at p_fail p, at the operating point as the judge reads it."""
    op = load_operating_point(op_path)
    point = thresholds_for(op, op_path, [A], model=MODEL, adapters=[])[A]
    record = {"group_id": "QC-NEW-20250102-1", "mission": A, "label": None, "images": ["1.jpg"],
              "per_image": {"图片_1": "接地线×1/已捆扎"}}
    said = verdict_at(p, point.threshold)
    reply = f"{said}\n理由: 图片_1 接地线" + ("未捆扎" if said == FAIL else "已捆扎")
    return verdict_record(record, p, point, reply, provenance={})


@pytest.mark.usefixtures("no_group_qc_environment")
@pytest.mark.parametrize("share, overkills, clean_passes, margin", [
    # errors at distances 1/8 and 1/4 (plus the tie tolerance); share 1: the band reaches the overkill at 0.75
    (1.0, [0.625, 0.75], [0.25, 0.125], 0.25),
    # share 0.5: the band reaches the overkill at 0.625
    (0.5, [0.625, 0.75], [0.375, 0.125], 0.125),
])
def test_a_group_exactly_on_the_review_bands_edge_goes_to_review(tmp_path, share, overkills, clean_passes, margin):
    """Silent bug: the band's `|p_fail - t| <= margin` turned into `<` (stage_b.rules.operating_point.decide, and
    mission_point's in_band), so the farthest error the band was sized to cover, and any group as far from the
    threshold, is decided without review. Checked in operating_point.json (errors in review, groups decided
    without review) and in the judge's verdict record for new groups exactly on either edge."""
    rc, _, op = rescore(tmp_path, _certified_mission(overkills, clean_passes), *CERTIFY, "--review_share", str(share))
    assert rc == 0 and op is not None
    entry = op["missions"][A]
    m = margin + 2 * P_FAIL_TIE   # the threshold's tie tolerance, and the band's own
    assert entry["certified"] and entry["threshold"] == T and entry["review_margin"] == m
    points = [(p, e) for p, e in [(0.5 + k / 64, FAIL) for k in range(10)]
              + [(p, PASS) for p in overkills + clean_passes]]
    covered_errors = [p for p in overkills if abs(p - T) <= m]
    assert entry["validation_errors_in_review"] == len(covered_errors) >= math.ceil(share * len(overkills))
    in_band = [p for p, _ in points if abs(p - T) <= m]
    assert entry["validation_needs_review"] == len(in_band)
    assert entry["validation_auto_decided"] == len(points) - len(in_band)
    for p in (T + m, T - m):   # exactly on the edge, above (the farthest covered overkill) and below
        assert abs(p - T) == m
        judged = judged_day(tmp_path / "out" / "operating_point.json", p)
        assert judged["needs_review"], (p, judged["review_why"])
        assert any("within" in why for why in judged["review_why"]), judged["review_why"]
    # and one step beyond the edge, on the side of a clean pass, is decided without review
    beyond = judged_day(tmp_path / "out" / "operating_point.json", T - m - 1 / 1024)
    assert not beyond["needs_review"], beyond["review_why"]


@pytest.mark.usefixtures("no_group_qc_environment")
@pytest.mark.parametrize("share, covered", [
    (0.8, 6),     # 0.8 x 7 = 5.6 errors: the band must cover 6 (5 would be 71%, short of 80%)
    (0.5, 4),     # 3.5 -> 4
    (0.3, 3),     # 2.1 -> 3
])
def test_the_review_band_covers_at_least_the_review_share_of_the_errors(tmp_path, share, covered):
    """Silent bug: the margin's quantile index rounded down (`int(share * n) - 1` for `ceil(share * n) - 1`), so the
    band covers fewer validation errors than --review_share promises. 7 overkills at distances 1/64 .. 7/64 from
    the threshold 0.5: a share that does not divide 7 tells the two roundings apart."""
    overkills = [0.5 + k / 64 for k in range(1, 8)]
    rc, _, op = rescore(tmp_path, _certified_mission(overkills, [0.125, 0.25]), *CERTIFY, "--review_share", str(share))
    assert rc == 0 and op is not None
    entry = op["missions"][A]
    assert entry["certified"] and entry["threshold"] == T
    assert entry["review_margin"] == covered / 64 + 2 * P_FAIL_TIE
    errors = list(overkills)   # every error of the threshold (no defective group is below it)
    in_review = [p for p in errors if abs(p - T) <= entry["review_margin"]]
    assert entry["validation_errors_in_review"] == len(in_review) == covered
    assert len(in_review) / len(errors) >= share > (len(in_review) - 1) / len(errors)   # enough, and no more


# --------------------------------------------------------------------------------------------------------------
# Certified promises
# --------------------------------------------------------------------------------------------------------------
# planted-bug tests (issue 36)
def op_for(points_by_mission: dict, target=0.1, overkill=None, confidence=0.8, adapters=()):
    preds = [{"group_id": f"{m}-{i}", "mission": m, "p_fail": p, "expected": e}
             for m, pts in points_by_mission.items() for i, (p, e) in enumerate(pts)]
    return build_operating_point(preds, list(points_by_mission), {"default": target, "per_mission": {}},
                                 review_share=0.8, model=MODEL, adapters=list(adapters), data=None,
                                 confidence=confidence,
                                 overkill_targets=None if overkill is None else {"default": overkill,
                                                                                 "per_mission": {}})


def separated(n_fail=40, n_pass=40):
    """Defective groups scored 0.6-1.0, good ones 0.0-0.3: a certified threshold near 0.6, and an overkill bound
    that certifies far below it."""
    return ([(0.6 + 0.4 * i / n_fail, "不通过") for i in range(n_fail)]
            + [(0.3 * i / n_pass, "通过") for i in range(n_pass)])


# planted-bug test (issue 36)
def test_the_auto_fail_threshold_is_never_below_the_auto_pass_threshold():
    """Its own bound would certify an auto-fail threshold below t; the groups between the two are passed (p < t),
    so the overkill promise must start at t, never count groups the rule never auto-fails."""
    points = separated()
    entry = op_for({M: points}, overkill=0.2)["missions"][M]
    assert certified_fail_threshold(points, 0.2, 0.8) < entry["threshold"]   # the case the rule exists for
    assert entry["threshold_fail"] >= entry["threshold"]


# planted-bug test (issue 36)
def test_uncertified_missions_decide_nothing_in_the_automation_share_nor_in_the_certified_list():
    op = op_for({M: separated(), N: [(0.9, "不通过"), (0.1, "通过")] * 2})   # N: 2 defective groups, not enough
    assert op["missions"][M]["certified"] and not op["missions"][N]["certified"]
    assert op["missions"][N]["validation_auto_decided"] == 0
    assert op["automation"]["validation_auto_decided"] == op["missions"][M]["validation_auto_decided"]
    assert op["automation"]["certified_missions"] == [M]


# planted-bug test (issue 36)
@pytest.mark.parametrize("made_with, used_with", [([], [{"path": "/a", "fingerprint": "lora"}]),
                                                  ([{"path": "/a", "fingerprint": "lora"}], []),
                                                  ([{"path": "/a", "fingerprint": "lora"}],
                                                   [{"path": "/a", "fingerprint": "other"}])])
def test_an_operating_point_is_refused_for_other_adapters_on_the_same_base(made_with, used_with):
    op = op_for({M: separated()}, adapters=made_with)
    with pytest.raises(OperatingPointError, match="adapters"):
        thresholds_for(OperatingPoint.from_json(op, "op.json"), "op.json", [M], model=MODEL, adapters=used_with)


def test_certified_promises_without_a_confidence_are_refused_on_load_by_every_command():
    """The field case: a point without `confidence` or `family` loaded in the judge, then the monitor and the planner
    stopped on an AssertionError. load_operating_point (every command's reader) refuses it, naming what is missing."""
    with pytest.raises(OperatingPointError, match="certified promises without a `confidence`"):
        OperatingPoint.from_json({k: v for k, v in OP.items() if k != "confidence"}, "F")
    assert OperatingPoint.from_json({**{k: v for k, v in OP.items() if k != "confidence"},
                                     "family": {"per_claim_confidence": 0.9}}, "F").missions


@pytest.mark.parametrize("key, value", [("target_miss_rate", -1), ("target_overkill_rate", 1.5),
                                        ("target_miss_rate", "0.1")])
def test_a_target_is_a_rate_on_an_uncertified_entry_too(key, value):
    """`target_miss_rate: -1` on an uncertified entry loaded (planted: the range checked on certified entries only)."""
    op = {**OP, "missions": {"挡风板安装检查": {**OP["missions"]["挡风板安装检查"], key: value}}}
    with pytest.raises(OperatingPointError, match=key):
        OperatingPoint.from_json(op, "F")
