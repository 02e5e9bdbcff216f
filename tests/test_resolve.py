"""stage_b.labels.resolve: the decisions log resolved per group into DecisionGroup records: the latest decision of
each reviewer counts, definite decisions that disagree are a conflict, `unsure` labels nothing."""
from __future__ import annotations

import pytest

from stage_b.labels.resolve import DecisionGroup, resolve
from stage_b.contract.verdict import FAIL, PASS

M = "BBU接地线检查"


def _line(group: str, reviewer: str, decision: str, at: str) -> dict:
    return {"mission": M, "group_id": group, "reviewer": reviewer, "decision": decision, "decided_at": at,
            "verdict": "通过", "route": "audit", "record": {"group_id": group, "mission": M}}


@pytest.mark.parametrize("lines, status", [
    ([("王工", "不通过", "2026-11-28T09:00:00+00:00")], FAIL),
    ([("王工", "通过", "2026-11-28T09:00:00+00:00")], PASS),
    ([("王工", "unsure", "2026-11-28T09:00:00+00:00")], "unsure"),
    ([("王工", "通过", "2026-11-28T09:00:00+00:00"), ("李工", "不通过", "2026-11-28T09:05:00+00:00")], "conflict"),
    ([("王工", "通过", "2026-11-28T09:00:00+00:00"), ("李工", "unsure", "2026-11-28T09:05:00+00:00")], PASS),
    # the same reviewer later: the latest counts
    ([("王工", "通过", "2026-11-28T09:00:00+00:00"), ("王工", "不通过", "2026-11-28T10:00:00+00:00")], FAIL),
])
def test_a_group_resolves_to_its_status_with_exactly_the_declared_fields(lines, status):
    groups = resolve([_line("g1", *line) for line in lines])
    group = groups[(M, "g1")]
    assert group["status"] == status
    assert set(group) == set(DecisionGroup.__required_keys__) | set(DecisionGroup.__optional_keys__)
    assert group["route"] == "audit" and group["verdict"] == "通过"
    assert len(group["decisions"]) == len({who for who, *_ in lines})
