"""stage_b.pages.cards: what a judge's review card answers to. A blind audit's card carries no verdict anywhere a
reviewer
can read it before deciding: not in its facts, not in its filter tags (the page's filter counts would tell the
answer: one group under `audit` and under `不通过` is an audited 不通过)."""
from __future__ import annotations

import pytest

from stage_b.pages.cards import judge_cards, judge_tags


def verdict(route, verdict_text, needs_review, group_id="G1"):
    return {"group_id": group_id, "mission": "BBU接地线检查", "verdict": verdict_text, "p_fail": 0.7,
            "threshold": 0.5, "needs_review": needs_review, "route": route,
            "reply": f"{verdict_text}\n理由: 图片_1 正常", "reason": "图片_1 正常", "images": ["a.jpg"],
            "summaries": ["正常"], "label": None}


@pytest.mark.parametrize("route, verdict_text, needs_review, tags", [
    ("audit", "通过", False, ["audit"]),              # planted: ["audit", "pass"] -> the filter counts tell the answer
    ("audit", "不通过", False, ["audit"]),
    ("review", "不通过", True, ["needs_review", "fail"]),
    ("review", "通过", True, ["needs_review", "pass"]),
    ("auto", "通过", False, ["pass"]),
    ("auto", "不通过", False, ["fail"]),
])
def test_each_route_answers_to_its_filters(route, verdict_text, needs_review, tags):
    assert judge_tags(verdict(route, verdict_text, needs_review)) == tags


def test_an_audit_card_holds_no_verdict_a_reviewer_can_read_before_deciding():
    (card,) = judge_cards([verdict("audit", "不通过", False)])
    assert card["tags"] == ["audit"] and card["outcome"] == "audit"
    assert card["verdict"] is None and card["p_fail"] is None and card["reason"] is None and card["cited"] == []
    assert not any(value in ("不通过", "通过") for _, value in card["facts"])
    assert card["sealed"]   # the answer travels sealed, opened by the page once decided
