"""The operating point rule on hand-made cases (stage_b.operating_point; pure, no model)."""
from __future__ import annotations

import json
import math

import pytest

from stage_b.judge import verdict_record
from stage_b.operating_point import (OperatingPointError, check_rate, curve, load_operating_point, mission_point,
                                     p_fail, parse_targets, pick_threshold, rates_at, review_margin, thresholds_for,
                                     verdict_at)

F, P = "不通过", "通过"


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
    ([(0.9, F), (0.8, F), (0.3, P), (0.2, P)], 0.0, 0.8),
    # a fail below a pass: miss 0 costs an overkill ...
    ([(0.9, F), (0.4, F), (0.6, P), (0.1, P)], 0.0, 0.4),
    # ... and a 50% miss budget lets the threshold rise to the higher fail
    ([(0.9, F), (0.4, F), (0.6, P), (0.1, P)], 0.5, 0.9),
    # a budget of 100% misses: 1.0, which fails nothing below p_fail 1
    ([(0.9, F), (0.4, F), (0.6, P)], 1.0, 1.0),
    # p_fail exactly 1 is failed even at 1.0 (>=)
    ([(1.0, F), (0.2, P)], 0.0, 1.0),
    # ties go to 不通过: a pass sharing the fail's p_fail is overkilled
    ([(0.5, F), (0.5, P)], 0.0, 0.5),
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
    assert got == [(1.0, 1.0, 0.0), (0.9, 0.5, 0.0), (0.6, 0.5, 0.5), (0.4, 0.0, 0.5), (0.1, 0.0, 1.0)]
    for c in curve(points):   # every point agrees with the direct count at that threshold
        at = rates_at(points, c["threshold"])
        assert (at["miss_rate"], at["overkill_rate"]) == (c["miss_rate"], c["overkill_rate"])


@pytest.mark.parametrize("points, threshold, share, margin", [
    ([(0.9, F), (0.8, F), (0.3, P)], 0.8, 0.8, 0.0),                 # nothing wrong: no band
    ([(0.9, F), (0.45, P), (0.2, F), (0.1, P)], 0.4, 1.0, 0.2),      # errors at distance 0.05 and 0.2: cover both
    ([(0.9, F), (0.45, P), (0.2, F), (0.1, P)], 0.4, 0.5, 0.05),     # half of them: the nearer one
])
def test_the_review_margin_covers_a_share_of_the_validation_errors(points, threshold, share, margin):
    assert review_margin(points, threshold, share) == pytest.approx(margin)


def test_a_mission_point_reports_rates_with_wilson_intervals_and_the_band():
    entry = mission_point([(0.9, F), (0.45, P), (0.2, F), (0.1, P)], 0.0, share=1.0)
    assert (entry["threshold"], entry["misses"], entry["overkills"]) == (0.2, 0, 1)
    assert entry["overkill_rate"] == 0.5 and entry["overkill_rate_ci95"][0] < 0.5 < entry["overkill_rate_ci95"][1]
    assert entry["review_margin"] == pytest.approx(0.25)   # the one error, the pass at 0.45
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
OP = {"format": 1, "model": MODEL, "adapters": [ADAPTER], "missions": {
    "BBU接地线检查": {"threshold": 0.4, "review_margin": 0.1},
    "挡风板安装检查": {"threshold": None, "why_none": "no fail group in validation"}}}


@pytest.mark.parametrize("model, adapters, missions, fallback, refusal", [
    (MODEL, [ADAPTER], ["BBU接地线检查"], None, None),
    ({"path": "/elsewhere/m", "fingerprint": "aaa"}, [{"path": "/x", "fingerprint": "bbb"}], ["BBU接地线检查"],
     None, None),                                                          # moved, same content: fine
    ({"path": "/other", "fingerprint": "zzz"}, [ADAPTER], ["BBU接地线检查"], None, "model /m and this is /other"),
    (MODEL, [], ["BBU接地线检查"], None, "adapters ['/a/checkpoint-5'] and these are none"),
    (MODEL, [ADAPTER], ["BBU线缆布放要求"], None, "no entry for BBU线缆布放要求"),
    (MODEL, [ADAPTER], ["挡风板安装检查"], None, "no threshold for 挡风板安装检查"),
    (MODEL, [ADAPTER], ["挡风板安装检查", "BBU线缆布放要求"], 0.3, None),   # --threshold fills the gaps
])
def test_an_operating_point_is_used_only_for_its_model_and_missions(model, adapters, missions, fallback, refusal):
    if refusal:
        with pytest.raises(OperatingPointError, match="cannot be used") as err:
            thresholds_for(OP, "op.json", missions, model=model, adapters=adapters, fallback=fallback)
        assert refusal in str(err.value)
    else:
        got = thresholds_for(OP, "op.json", missions, model=model, adapters=adapters, fallback=fallback)
        assert set(got) == set(missions)
        assert all(got[m]["threshold"] == (0.4 if m == "BBU接地线检查" else fallback) for m in missions)


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"), ("{not json", "cannot read"), (json.dumps({"format": 99}), "format"),
    (json.dumps({**OP, "missions": {"BBU接地线检查": {"threshold": 1.4}}}), "out of range"),
])
def test_a_bad_operating_point_file_is_refused_naming_it(tmp_path, content, message):
    path = tmp_path / "operating_point.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(OperatingPointError, match=message) as err:
        load_operating_point(path)
    assert str(path) in str(err.value)


RECORD = {"group_id": "QC-A-20250101-1", "mission": "BBU接地线检查", "label": None, "images": ["a/1.jpg"],
          "per_image": {"图片_1": "接地线×1"}}


@pytest.mark.parametrize("p, reply, verdict, needs_review, reason", [
    (0.9, "不通过\n理由: 图片_1 接地线松动", F, False, "图片_1 接地线松动"),
    (0.1, "通过\n理由: 图片_1 符合要求", P, False, "图片_1 符合要求"),
    (0.45, "不通过\n理由: 图片_1 接地线松动", F, True, "图片_1 接地线松动"),     # within the margin of 0.4
    (0.35, "通过\n理由: 图片_1 符合要求", P, True, "图片_1 符合要求"),
    (0.9, "不通过\n图片_1 ...\n还有一行", F, True, "图片_1 ...\n还有一行"),        # kept as written, flagged
    (0.9, "不通过\n", F, True, ""),
])
def test_a_verdict_record_follows_the_threshold_and_flags_what_needs_a_person(p, reply, verdict, needs_review,
                                                                              reason):
    rec = verdict_record(RECORD, p, {"threshold": 0.4, "review_margin": 0.1}, reply, {"model": "/m"})
    assert (rec["verdict"], rec["needs_review"], rec["reason"]) == (verdict, needs_review, reason)
    assert rec["reply"] == reply and rec["label"] is None and rec["summaries"] == ["接地线×1"]
    assert bool(rec["review_why"]) == needs_review
