"""Silent bugs in the operating point that the suite let through (issue 27, classes 1-3), each caught on the whole
path a QC owner takes: a predictions.jsonl with p_fail -> `python -m stage_b.evaluate --predictions ...
--target_miss_rate ...` (in process, the real argument parser) -> operating_point.json -> the judge's reading of it
(stage_b.operating_point.thresholds_for, stage_b.judge.verdict_record).

The numbers are chosen to tell the right rule from the wrong one: per-mission targets whose thresholds differ, a
p_fail of exactly 0.0, p_fail values that are binary fractions so a group sits exactly on the review band's edge,
and a review share that does not divide the number of validation errors.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stage_b import evaluate
from stage_b.judge import verdict_record
from stage_b.operating_point import P_FAIL_TIE, load_operating_point, thresholds_for, verdict_at
from stage_b.verdict import FAIL, PASS

A, B = "BBU接地线检查", "挡风板安装检查"
A_ALIAS = "BBU接地检查"   # an alias of A in the mission registry
MODEL = {"path": "/models/qc", "fingerprint": "f" * 32}


@pytest.fixture(autouse=True)
def _no_group_qc_environment(monkeypatch):
    import os
    for name in [n for n in os.environ if n.startswith("GROUP_QC_")]:
        monkeypatch.delenv(name)


def prediction(mission: str, k: int, p: float, expected: str) -> dict:
    """One predictions.jsonl record as stage_b.evaluate writes it (the reply agrees with p_fail at 0.5)."""
    said = FAIL if p >= 0.5 else PASS
    reason = "图片_1 接地线未捆扎" if said == FAIL else "图片_1 接地线已捆扎"
    return {"group_id": f"QC-OP-20250101-{k}", "mission": mission, "expected": expected,
            "completion": f"{said}\n理由: {reason}", "summaries": ["接地线×1/已捆扎"], "p_fail": p}


def rescore(tmp_path: Path, predictions: list[dict], *flags: str) -> tuple[int, dict, dict | None]:
    """`python -m stage_b.evaluate --predictions P --output_dir O FLAGS` in process, with the metrics.json an
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


# ---------------------------------------------------------------- class 1: a mission's own target wins
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


# ---------------------------------------------------------------- class 2: a p_fail of exactly 0.0 is a value
ZERO_PREDICTIONS = [
    prediction(A, 0, 0.0, FAIL),     # a defective group the model is sure about, wrongly: p_fail exactly 0
    prediction(A, 1, 0.6, FAIL), prediction(A, 2, 0.8, FAIL),
    prediction(A, 3, 0.1, PASS), prediction(A, 4, 0.3, PASS), prediction(A, 5, 0.7, PASS),
    prediction(B, 0, 0.0, PASS),     # a good group at exactly 0: an overkill denominator
    prediction(B, 1, 0.2, PASS), prediction(B, 2, 0.5, FAIL), prediction(B, 3, 0.9, FAIL),
]


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


# ---------------------------------------------------------------- class 3: the review band
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


@pytest.mark.parametrize("share, overkills, clean_passes, margin", [
    # errors at distances 1/8 and 1/4 (plus the tie tolerance); share 1: the band reaches the overkill at 0.75
    (1.0, [0.625, 0.75], [0.25, 0.125], 0.25),
    # share 0.5: the band reaches the overkill at 0.625
    (0.5, [0.625, 0.75], [0.375, 0.125], 0.125),
])
def test_a_group_exactly_on_the_review_bands_edge_goes_to_review(tmp_path, share, overkills, clean_passes, margin):
    """Silent bug: the band's `|p_fail - t| <= margin` turned into `<` (stage_b.operating_point.decide, and
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
