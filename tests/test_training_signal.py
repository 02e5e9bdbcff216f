"""Per-mission training signal and greedy validation metrics, from what the trainer scored (pure)."""
import pytest

from stage_b.stats.training_signal import step_signal, validation_metrics

A, B = "BBU接地线检查", "挡风板安装检查"


def test_per_mission_label_reward_zero_advantage_and_verdict_counts():
    # 3 prompts x 2 samples: A/fail with spread, A/pass all equal, B/fail all equal
    missions = [A, A, A, A, B, B]
    solutions = ["不通过", "不通过", "通过", "通过", "不通过", "不通过"]
    label = [1.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    totals = [1.25, 0.25, 1.0, 1.0, 0.0, 0.0]
    signal = step_signal(missions, solutions, label, totals, num_generations=2)
    assert signal == {"qc/label_reward/" + A: 0.75, "qc/zero_advantage/" + A: 0.5,
                      "qc/label_reward/" + B: 0.0, "qc/zero_advantage/" + B: 1.0,
                      "qc/prompts/fail": 2, "qc/prompts/pass": 1}


def test_zero_advantage_follows_the_weighted_total_not_the_label():
    # equal labels, but the format reward differs: GRPO still has a gradient here
    signal = step_signal([A, A], ["通过", "通过"], [1.0, 1.0], [1.25, 1.0], num_generations=2)
    assert signal["qc/zero_advantage/" + A] == 0.0


def test_without_qc_label_only_the_zero_advantage_share_is_logged():
    signal = step_signal([A, A], ["通过", "通过"], None, [0.5, 0.5], num_generations=2)
    assert signal == {"qc/zero_advantage/" + A: 1.0, "qc/prompts/fail": 0, "qc/prompts/pass": 1}


def test_samples_must_form_whole_groups():
    with pytest.raises(ValueError, match="do not form groups of 4"):
        step_signal([A] * 6, ["通过"] * 6, None, [0.0] * 6, num_generations=4)


def test_validation_metrics_overall_and_per_mission():
    rows = [{"mission": A, "solution": "不通过", "completion": "通过\n理由: 图片_1 正常"},     # miss
            {"mission": A, "solution": "不通过", "completion": "不通过\n理由: 图片_1 松动"},  # caught
            {"mission": A, "solution": "通过", "completion": "通过"},                       # correct
            {"mission": B, "solution": "通过", "completion": "乱码"}]                        # invalid
    m = validation_metrics(rows)
    assert m["qc_val/groups"] == 4
    assert m["qc_val/accuracy"] == 0.5 and m["qc_val/miss_rate"] == 0.5
    assert m[f"qc_val/balanced_accuracy/{A}"] == 0.75 and m[f"qc_val/overkill_rate/{A}"] == 0.0
    assert f"qc_val/miss_rate/{B}" not in m   # no fail group in B: no rate, rather than a made-up 0
    assert m[f"qc_val/accuracy/{B}"] == 0.0
