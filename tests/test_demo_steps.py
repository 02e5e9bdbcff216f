"""group_qc_dev.demo_steps: what scripts/demo.sh asks between its commands, answered as the demo printed it when the
answers were programs inside the script."""
from __future__ import annotations

import json

import pytest

from group_qc_dev import demo_steps


def _write(path, obj) -> str:
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return str(path)


def _mission(certified: bool, auto_passed: int | None) -> dict:
    return {"certified": certified, "escape": None if auto_passed is None else {"auto_passed": auto_passed}}


@pytest.mark.parametrize("missions, expected", [
    ({"A": _mission(True, 3), "B": _mission(True, 9), "C": _mission(False, 20)}, "B A"),   # most auto-passed first
    ({"A": _mission(True, 0), "B": _mission(True, None)}, ""),                             # none passes work
])
def test_the_candidates_are_certified_missions_that_pass_work(tmp_path, missions, expected):
    assert demo_steps.candidates(_write(tmp_path / "op.json", {"missions": missions})) == expected


@pytest.mark.parametrize("states, expected", [
    ({"A": "tightened", "B": "normal"}, "B"),
    ({"A": "tightened", "B": "tightened"}, "A"),   # every candidate tightened: the first
    ({}, "A"),
])
def test_the_shift_hits_the_first_candidate_not_tightened(tmp_path, states, expected):
    monitor = _write(tmp_path / "monitor.json", {"missions": {k: {"state": s} for k, s in states.items()}})
    assert demo_steps.shift(monitor, "A B") == expected


def test_the_grpo_run_summary(tmp_path):
    rows = [{"rewards/qc_label/mean": x} for x in (0.1, 0.2, 0.3, 0.4, 0.5)] + [{"loss": 1.0}]
    (tmp_path / "logging.jsonl").write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    _write(tmp_path / "group_qc_run.json", {"validation": {
        "history": [{"step": 5, "qc_val/balanced_accuracy": 0.5}, {"step": 10, "qc_val/balanced_accuracy": 0.75}],
        "best_step": 10, "best_checkpoint": "run/checkpoint-10"}})
    assert demo_steps.grpo_run(str(tmp_path)).splitlines() == [
        "  label reward per step: 0.10 0.20 0.30 0.40 0.50",
        "  first 1 steps 0.10 -> last 1 steps 0.50",
        "  greedy validation (balanced accuracy) by step: 5:0.50 10:0.75",
        "  best step: 10 -> run/checkpoint-10"]


def test_the_day_routes_count_withdrawn_promises(tmp_path):
    day = tmp_path / "day5"
    day.mkdir()
    lines = [{"route": "review", "review_why": ["promise withdrawn on day4"]},
             {"route": "review", "review_why": ["p_fail above the threshold"]}, {"route": "auto", "review_why": []}]
    (day / "M_verdicts.jsonl").write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    assert demo_steps.day_routes(str(day), "M") == \
        "  day5, M: 2 of 3 groups sent to review, 1 of them because the promise was withdrawn"


def test_accounts_and_the_first_record(tmp_path):
    demo_steps.accounts(str(tmp_path / "accounts.json"), ["owner pw1\n", "lead pw2\n", "\n"])
    assert json.loads((tmp_path / "accounts.json").read_text(encoding="utf-8")) == {"owner": "pw1", "lead": "pw2"}
    (tmp_path / "a.jsonl").write_text(json.dumps({"group_id": "g", "text": "图片_1"}, ensure_ascii=False) + "\nbad",
                                      encoding="utf-8")
    assert json.loads(demo_steps.first_record(str(tmp_path / "a.jsonl")))["text"] == "图片_1"
    assert demo_steps.main(["no-such-step"]) == 2
