"""Stage-B rewards, table-driven: the rule in each docstring, edge by edge."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stage_b.evaluate import predictions_from_rows
from stage_b.train.rewards import REWARDS, qc_consistency, qc_format, qc_label
from stage_b.contract.verdict import FAIL, PASS, parse

M = "BBU接地线检查"
S = ["机柜侧接地螺丝×1，接地线×1/未捆扎 备注：接地线散乱未捆扎",
     "接地排×1，接地排侧接地螺丝×1，接地线×1/已捆扎"]
S_OK = ["机柜侧接地螺丝×1，接地线×1/已捆扎", "接地排×1，接地排侧接地螺丝×1，接地线×1/已捆扎"]


@pytest.mark.parametrize("completion, expected, reward", [
    ("通过\n理由: 图片_1 规范", "通过", 1.0),
    ("不通过\n理由: 图片_1 未捆扎", "不通过", 1.0),
    ("不通过\n理由: x", "通过", 0.0),                # 不通过 never counts as 通过
    ("通过\n理由: x", "不通过", 0.0),
    ("  通过  \n理由: x", "通过", 1.0),               # whitespace stripped
    ("\u3000通过\u3000\n理由：x", "通过", 1.0),       # full-width space and colon
    ("通過\n理由: x", "通过", 1.0),                   # traditional characters
    ("不通過\n理由: x", "不通过", 1.0),
    ("通过。\n理由: x", "通过", 0.0),                 # exact verdict only
    ("判定：通过\n理由: x", "通过", 0.0),
    ("通过，需复核", "通过", 0.0),
    ("<think>先看图片_1</think>\n不通过\n理由: x", "不通过", 1.0),
    ("<think>没有结束\n不通过\n理由: x", "不通过", 0.0),
    ("", "通过", 0.0),
    (None, "通过", 0.0),
    ("通过", "pass", 1.0),                            # solution may be the Stage-A label
    ("通过", "unknown", 0.0),
])
def test_qc_label(completion, expected, reward):
    assert qc_label([completion], solution=[expected]) == [reward]


@pytest.mark.parametrize("completion, reward", [
    ("通过\n理由: 图片_1、图片_2 接地线已捆扎", 1.0),
    ("不通过\n理由：图片_1 接地线未捆扎", 1.0),
    ("\n  不通过\n理由: 有缺陷  \n\n", 1.0),          # surrounding whitespace stripped
    ("不通过\r\n理由: x", 1.0),
    ("不通过\n理由:", 0.0),                            # empty reason
    ("不通过\n理由:   ", 0.0),
    ("不通过\n原因: x", 0.0),
    ("不通过", 0.0),
    ("不通过\n理由: x\n补充: y", 0.0),                # three lines
    ("不通过\n\n理由: x", 0.0),
    ("通过 理由: x", 0.0),
    ("<think>想一想</think>通过\n理由: x", 1.0),
    ("通過\n理由：圖片_1 正常", 1.0),
    (None, 0.0),
    ([{"role": "assistant", "content": "通过\n理由: x"}], 1.0),   # conversational form
])
def test_qc_format(completion, reward):
    assert qc_format([completion]) == [reward]


@pytest.mark.parametrize("completion, summaries, reward", [
    ("不通过\n理由: 图片_1 接地线未捆扎", S, 1.0),                    # grounded, cited, supported
    ("通过\n理由: 图片_1、图片_2 接地线均已捆扎", S_OK, 1.0),
    ("不通过\n理由: 接地线未捆扎", S, 0.8),                           # no citation
    ("不通过\n理由: 图片_3 接地线未捆扎", S, 0.4),                    # cites a photo that does not exist
    ("不通过\n理由: 图片_1 螺丝松动", S, 0.6),                        # 松动: no summary says so
    ("通过\n理由: 图片_1 接地线散乱", S, 0.6),                        # pass naming a defect
    ("通过\n理由: 图片_1 接地线规范", S, 0.6),                        # pass citing a defective photo
    ("通过\n理由: 图片_2 接地线已捆扎，无松动", S_OK, 1.0),           # negated defect is not asserted
    ("不通过\n理由: 图片_5 螺丝缺失", S, 0.0),                        # clipped at 0
    ("不通过", S, 0.0),                                               # no two-line contract
    ("不通过\n理由: 图片_1 接地线未捆扎", [], 0.0),                   # no summaries: nothing cited is valid
    # 不通过 naming no defect: contradiction, 2/2 wrong
    ("不通过\n理由: 图片_1、图片_2 均符合要求", S_OK, 0.2),
    ("不通过\n理由: 图片_2 接地线未捆扎", S, 0.6),                    # the defect on the wrong photo
    ("不通过\n理由: 图片_1至图片_2 接地线未捆扎", S, 0.8),            # a range: 1 of its 2 photos shows no defect
])
def test_qc_consistency(completion, summaries, reward):
    assert qc_consistency([completion], summaries=[summaries], mission=[M]) == [pytest.approx(reward)]


def test_copying_the_summaries_verbatim_does_not_maximise_consistency():
    concise = "不通过\n理由: 图片_1 接地线散乱未捆扎"
    transcript = "不通过\n理由: " + "；".join(f"图片_{i}: {s}" for i, s in enumerate(S, 1))
    scores = qc_consistency([concise, transcript], summaries=[S, S], mission=[M, M])
    assert scores[0] == 1.0 and scores[1] < 0.75


def test_each_completion_is_scored_against_its_own_row():
    completions = ["通过\n理由: 图片_1 正常", "不通过\n理由: 图片_1 未捆扎"]
    assert qc_label(completions, solution=["通过", "不通过"]) == [1.0, 1.0]
    assert qc_label(completions, solution=["不通过", "通过"]) == [0.0, 0.0]


def test_registry_names_match_the_plugin_contract():
    assert list(REWARDS) == ["qc_label", "qc_format", "qc_consistency"]


text = st.one_of(st.none(), st.text(), st.text(alphabet="通过不理由:：\n 图片_0123456789<think></think>缺失松动無過"))


@settings(max_examples=300, deadline=None)
@given(completion=text, solution=text, summaries=st.lists(st.one_of(st.none(), st.text()), max_size=5),
       mission=st.one_of(st.none(), st.text(), st.just(M)))
def test_rewards_never_raise_and_stay_in_range(completion, solution, summaries, mission):
    kwargs = dict(solution=[solution], summaries=[summaries], mission=[mission])
    for name, func in REWARDS.items():
        (value,) = func([completion], **kwargs)
        assert 0.0 <= value <= 1.0, name


# planted-bug test (issue 27, class 9): a hedged first line is no verdict
A = M


@pytest.mark.parametrize("first_line", [
    "通过/不通过", "不通过/通过", "通过 / 不通过", "通过|不通过", "通过、不通过", "通过或不通过", "通过 不通过",
    "通过/", "不通过（通过）",
])
def test_a_first_line_naming_both_verdicts_is_no_verdict(first_line):
    """Silent bug: the format reward (and the verdict parser under it) scoring a first line like `通过/不通过` as a
    valid verdict line: a policy that learns to hedge collects the format reward, and half the label reward, for a
    reply no one can act on. Every reward must give 0 for such a reply, whichever verdict was expected, and the
    parser must find no verdict (evaluation counts it unparseable, a miss when the group is defective)."""
    summaries = ["接地线×1/已捆扎"]
    reply = f"{first_line}\n理由: 图片_1 接地线已捆扎"
    parsed = parse(reply)
    assert (parsed.verdict, parsed.two_lines) == (None, False)
    assert qc_format([reply]) == [0.0]
    assert qc_label([reply, reply], solution=[PASS, FAIL]) == [0.0, 0.0]
    assert qc_consistency([reply], summaries=[summaries], mission=[A]) == [0.0]
    (scored,) = predictions_from_rows([{"group_id": "QC-H-20250101-1", "mission": A, "solution": FAIL,
                                        "summaries": summaries}], [reply])
    assert scored["predicted"] is None and set(scored["rewards"].values()) == {0.0}


def test_a_new_reward_is_added_in_one_place_and_the_launcher_preflight_and_lora_follow(tiny_qwen2_5_vl,
                                                                                       monkeypatch):
    """REWARDS and REWARD_WEIGHTS are the one list: a fourth reward registered there reaches the launcher's swift
    argv (a config that leaves the rewards out), the preflight's default weights and `stage_b.lora --swift_args`
    (planted: the launcher's reward_args skipped -> no reward reaches swift)."""
    import io
    from contextlib import redirect_stdout

    from stage_b.train import lora, rewards
    from stage_b.train.launch import build_command
    from stage_b.train.launch_settings import LaunchSettings
    from stage_b.train.preflight import PreflightSettings

    def qc_extra(completions, **kwargs):
        return [0.0 for _ in completions]
    monkeypatch.setitem(rewards.REWARDS, "qc_extra", qc_extra)
    monkeypatch.setitem(rewards.REWARD_WEIGHTS, "qc_extra", 0.5)
    _, argv, _ = build_command(LaunchSettings(str(tiny_qwen2_5_vl), cuda="cpu", lora_last_k=2), environ={},
                               can_import=lambda name: True)
    funcs = argv[argv.index("--reward_funcs") + 1:argv.index("--reward_funcs") + 5]
    weights = argv[argv.index("--reward_weights") + 1:argv.index("--reward_weights") + 5]
    assert funcs == ["qc_label", "qc_format", "qc_consistency", "qc_extra"]
    assert weights == ["1.0", "0.25", "0.25", "0.5"]
    settings = PreflightSettings(None, {})   # type: ignore[arg-type] - only the weights are read here
    assert settings.reward_weights == (1.0, 0.25, 0.25, 0.5)
    out = io.StringIO()
    with redirect_stdout(out):
        lora.main(["--model", str(tiny_qwen2_5_vl), "--last_k", "2", "--swift_args", "--grpo"])
    assert ("--reward_funcs qc_label qc_format qc_consistency qc_extra --reward_weights 1 0.25 0.25 0.5"
            in out.getvalue())


def test_a_reward_without_a_weight_is_named(monkeypatch):
    from stage_b.train import rewards
    monkeypatch.setitem(rewards.REWARDS, "qc_unweighted", lambda completions, **kw: [0.0] * len(completions))
    with pytest.raises(KeyError, match="no weight for reward.*qc_unweighted"):
        rewards.reward_weights()
