"""The operating point rule on hand-made cases (stage_b.operating_point; pure, no model)."""
from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from stage_b.judge import verdict_record
from stage_b.numbers import fmt_p
from stage_b.operating_point import (P_FAIL_TIE, MissionPoint, OperatingPoint, OperatingPointError, check_rate, curve,
                                     load_operating_point, manual_point, mission_point, p_fail, parse_targets,
                                     pick_threshold, rates_at, review_margin, thresholds_for, verdict_at)

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
OP = {"format": 2, "model": MODEL, "adapters": [ADAPTER], "missions": {
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
    from stage_b.operating_point import build_operating_point
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
    from stage_b.operating_point import MissionPoint, OperatingPointError
    entry = {"threshold": 0.5, "threshold_fail": 0.5, "review_margin": 0.0, "certified": False, "promise": "",
             field: value}
    with pytest.raises(OperatingPointError, match=f"F: M: {field}"):
        MissionPoint.from_json(entry, "F: M")


def test_the_escape_bound_weighs_audits():
    """Auto-passed points, 10 validation groups (weight 1) and 4 audits (weight 4), 2 of the audits escapes: the
    escape rate is the weighted share (8 of 26) and its bound the weighted one, not the unweighted 2 of 14."""
    from stage_b.certify import upper_bound, upper_bound_weighted
    from stage_b.operating_point import escape_rate
    points = [(0.1, "通过", 1.0)] * 10 + [(0.1, "通过", 4.0)] * 2 + [(0.1, "不通过", 4.0)] * 2
    entry = {"threshold": 0.5, "threshold_fail": 0.5, "review_margin": 0.0}
    e = escape_rate(points, entry, 0.9)
    assert (e["auto_passed"], e["escapes"]) == (14, 2) and e["rate"] == pytest.approx(8 / 26)
    assert e["upper"] == pytest.approx(upper_bound_weighted([4.0, 4.0], [1.0] * 10 + [4.0] * 4, 0.9))
    assert e["upper"] != pytest.approx(upper_bound(2, 14, 0.9))


def test_an_auto_fail_threshold_below_the_auto_pass_one_is_refused_certified_or_not():
    from stage_b.operating_point import MissionPoint, OperatingPointError
    for certified in (True, False):
        entry = {"threshold": 0.5, "threshold_fail": 0.3, "review_margin": 0.0, "certified": certified,
                 "promise": ""}
        with pytest.raises(OperatingPointError, match="threshold_fail 0.3 is below threshold 0.5"):
            MissionPoint.from_json(entry, "F: M")


@pytest.mark.parametrize("above, errors", [(True, 2.0), (False, 20.0)])
def test_the_weighted_overkill_bound_counts_the_groups_at_or_above_the_auto_fail_threshold(above, errors):
    """Good groups (weight 2): ten at p_fail 0.1, one at 0.9; at an auto-fail threshold of 0.8 the overkill counts the
    one at or above it (2 of 22), the miss side counts those below (20 of 22)."""
    from stage_b.certify import upper_bound_weighted
    from stage_b.operating_point import _bound_below, _weighted_below
    values, weights, running = _weighted_below([(0.1, "通过", 2.0)] * 10 + [(0.9, "通过", 2.0)], "通过")
    assert _bound_below(values, weights, running, 0.8, 0.9, above=above) == \
        pytest.approx(upper_bound_weighted([errors], weights, 0.9))


@pytest.mark.parametrize("field, value", [("stage_a", ["x"]), ("stage_a", {"models": [1]}),
                                          ("stage_a", {"models": ["m"], "evidence_through": 5})])
def test_a_missions_stage_a_basis_is_checked_at_load(field, value):
    from stage_b.operating_point import MissionPoint, OperatingPointError
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
    from stage_b.operating_point import OperatingPoint, OperatingPointError
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
    # 8 promises at 80% each: "hold together with confidence at least 0%" said nothing (planted: printed as before)
    (8, 0.8, False, 8, "no joint statement: 8 certified promises (each at 80%) hold together with confidence at least "
                       "0% (Bonferroni), which promises nothing together; each holds on its own. For all to hold "
                       "together at 80%, --family_wise certifies each claim at 97.5%, which at a 20% miss-rate target "
                       "needs 17 defective groups per mission without a miss"),
    (2, 0.9, False, 2, "2 certified promises (each at 90%) hold together with confidence at least 80% (Bonferroni)"),
    (4, 0.8, False, 0, "no promise is certified"),
])
def test_the_family_line_is_a_joint_statement_only_when_it_is_one(claims, confidence, family_wise, certified, says):
    from stage_b.operating_point import family, family_text
    fam = family([f"m{k}" for k in range(claims)], 1, confidence, family_wise)
    fam.update(certified_claims=certified,
               certified_claims_hold_together=max(0.0, 1 - certified * (1 - fam["per_claim_confidence"])))
    assert family_text(fam, 0.2) == says
