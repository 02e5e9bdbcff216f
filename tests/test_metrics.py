"""QC metrics on hand-computed confusion matrices, edge cases included."""
import pytest

from stage_b.stats.calibration import reliability
from stage_b.stats.metrics import compute_metrics, metrics_from_confusion, wilson

P, F = "通过", "不通过"


def cm(pp=0, pf=0, pn=0, ff=0, fp=0, fn=0):
    """expected->predicted counts: pp pass->pass, pf pass->fail (overkill), pn pass->invalid,
    ff fail->fail, fp fail->pass (miss), fn fail->invalid."""
    return {(P, P): pp, (P, F): pf, (P, None): pn, (F, F): ff, (F, P): fp, (F, None): fn}


@pytest.mark.parametrize("counts, expected", [
    # 10 pass (8 ok, 2 overkill), 10 fail (6 caught, 3 missed, 1 invalid)
    # (the unparseable reply on a fail group is a miss: nothing failed it)
    (cm(pp=8, pf=2, ff=6, fp=3, fn=1), dict(n=20, accuracy=14 / 20, fail_recall=0.6, fail_precision=6 / 8,
                                            miss_rate=0.4, overkill_rate=0.2, balanced_accuracy=(0.6 + 0.8) / 2,
                                            invalid_verdict_rate=1 / 20)),
    # perfect
    (cm(pp=5, ff=5), dict(n=10, accuracy=1.0, miss_rate=0.0, overkill_rate=0.0, fail_precision=1.0,
                          balanced_accuracy=1.0)),
    # everything judged 通过: no 不通过 predictions -> precision undefined
    (cm(pp=5, fp=5), dict(accuracy=0.5, miss_rate=1.0, overkill_rate=0.0, fail_precision=None, fail_recall=0.0)),
    # only fail groups: overkill undefined, balanced accuracy = fail recall
    (cm(ff=3, fp=1), dict(n=4, overkill_rate=None, overkill_rate_ci95=None, balanced_accuracy=0.75,
                          miss_rate=0.25)),
    # all unparseable: wrong; on fail groups a miss (nothing failed them), on pass groups not an overkill
    (cm(pn=2, fn=2), dict(accuracy=0.0, miss_rate=1.0, overkill_rate=0.0, invalid_verdict_rate=1.0,
                          invalid_verdicts=4)),
    # no groups at all: n = 0, no division by zero
    (cm(), dict(n=0, accuracy=None, accuracy_ci95=None, miss_rate=None, overkill_rate=None,
                balanced_accuracy=None, fail_precision=None, invalid_verdict_rate=None)),
])
def test_metrics_from_confusion(counts, expected):
    got = metrics_from_confusion(counts)
    for key, value in expected.items():
        assert got[key] == (pytest.approx(value) if isinstance(value, float) else value), key


@pytest.mark.parametrize("k, n, low, high", [
    (14, 20, 0.4810, 0.8545),   # textbook Wilson values
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
])
def test_wilson(k, n, low, high):
    lo, hi = wilson(k, n)
    assert lo == pytest.approx(low, abs=1e-3) and hi == pytest.approx(high, abs=1e-3)


def test_wilson_of_nothing_is_none():
    assert wilson(0, 0) is None


def test_compute_metrics_per_mission_and_overall_with_an_empty_mission():
    preds = [{"mission": "A", "expected": P, "predicted": P, "rewards": {"qc_format": 1.0}},
             {"mission": "A", "expected": F, "predicted": None, "rewards": {"qc_format": 0.0}},
             {"mission": "B", "expected": F, "predicted": F, "rewards": {"qc_format": 1.0}}]
    m = compute_metrics(preds, missions=["A", "B", "C"])
    assert m["per_mission"]["A"]["accuracy"] == 0.5 and m["per_mission"]["A"]["format_compliance"] == 0.5
    assert m["per_mission"]["C"]["n"] == 0 and m["per_mission"]["C"]["accuracy"] is None
    assert m["overall"]["n"] == 3 and m["overall"]["accuracy"] == pytest.approx(2 / 3)


# --------------------------------------------------------------------------------------------------------------
# Calibration (stage_b.stats.calibration)
# --------------------------------------------------------------------------------------------------------------
# planted-bug tests (issue 36)
def test_ece_weighs_each_bin_by_its_groups():
    """9 good groups at 0.05 (gap 0.05) and 1 good group at 0.95 (gap 0.95): 0.9 x 0.05 + 0.1 x 0.95 = 0.14, not
    the bins' plain mean 0.5."""
    assert reliability([(0.05, "通过")] * 9 + [(0.95, "通过")])["ece"] == pytest.approx(0.14)


@pytest.mark.parametrize("p", [1.0, 0.9999, 0.9])
def test_a_p_fail_of_one_falls_in_the_last_bin(p):
    (only,) = reliability([(p, "不通过")])["bins"]
    assert (only["lo"], only["hi"]) == (0.9, 1.0)
