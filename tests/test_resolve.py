"""stage_b.labels.resolve: the decisions log resolved per group into DecisionGroup records: the latest decision of
each reviewer counts, definite decisions that disagree are a conflict, `unsure` labels nothing."""
from __future__ import annotations

import pytest

from stage_b.labels.resolve import DecisionGroup, resolve, review_of
from stage_b.labels.reviewer_quality import pool, unconfirmed_fails
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
    assert set(group) == set(DecisionGroup.__required_keys__)   # `adjudication` only where a lead settled it
    assert group["route"] == "audit" and group["verdict"] == "通过"
    assert len(group["decisions"]) == len({who for who, *_ in lines})


def _adjudication(group: str, lead: str, decision: str, at: str, reason: str = "photo 2 shows the loose cable") -> dict:
    return {**_line(group, lead, decision, at), "adjudication": {"reason": reason}}


CONFLICT = [("王工", "通过", "2026-11-28T09:00:00+00:00"), ("李工", "不通过", "2026-11-28T09:05:00+00:00")]


@pytest.mark.parametrize("settled, status", [
    ([], "conflict"),
    ([("组长", FAIL, "2026-11-28T10:00:00+00:00")], FAIL),
    ([("组长", PASS, "2026-11-28T10:00:00+00:00")], PASS),
    # the latest adjudication in the log settles it
    ([("组长", PASS, "2026-11-28T10:00:00+00:00"), ("组长", FAIL, "2026-11-28T10:30:00+00:00")], FAIL),
])
def test_an_adjudication_settles_a_conflict_and_is_kept_beside_the_reviewers(settled, status):
    log = [_line("g1", *c) for c in CONFLICT] + [_adjudication("g1", *a) for a in settled]
    group = resolve(log)[(M, "g1")]
    assert group["status"] == status
    assert sorted(d["reviewer"] for d in group["decisions"]) == ["李工", "王工"]   # the lead is no reviewer
    if settled:
        assert set(group) == set(DecisionGroup.__required_keys__) | {"adjudication"}
        assert group["adjudication"]["by"] == "组长" and group["adjudication"]["decision"] == status
        review = review_of({"group_id": "g1", "mission": M, "p_fail": 0.1, "verdict": PASS, "route": "audit"},
                           group["decisions"], adjudication=group["adjudication"])
        assert review["adjudicated"]["reason"] == "photo 2 shows the loose cable"
        assert review["decided_at"] == settled[-1][2] and "certifies" not in review


def test_an_adjudication_is_no_review_and_confirms_an_escape_as_a_second_person():
    log = [_line("g1", *CONFLICT[0]), _line("g1", *CONFLICT[1]),
           _adjudication("g1", "组长", FAIL, "2026-11-28T10:00:00+00:00")]
    groups = resolve(log)
    assert unconfirmed_fails(groups, trusted=[]) == {}   # 李工's 不通过 and the lead's: two people
    # the lead's adjudication is not counted as a decision or an overlap of the lead's
    assert "组长" not in pool({}, log)
    alone = [_line("g2", "李工", FAIL, "2026-11-28T09:05:00+00:00")]
    assert unconfirmed_fails(resolve(alone), trusted=[]) == {(M, "g2"): "李工"}


@pytest.mark.parametrize("second", ["REVIEWER-DAY4", "ｒｅｖｉｅｗｅｒ－ｄａｙ４", "reviewer\u2011day4",
                                    "reviewer - day4", "r\u0435viewer-day4"])
def test_a_look_alike_spelling_is_the_same_reviewer(second):
    """The field case: the same reviewer under a second spelling confirmed their own escapes and, deciding the day
    again, agreed with themselves (kappa 1.00, both 'meet the bar'). Look-alike spellings are one reviewer: the
    escape still waits for a second person, the table has one row, no overlap (planted: resolve keyed by the spelling
    -> two reviewers, the escape confirmed)."""
    log = [_line("g1", "reviewer-day4", FAIL, "2026-11-28T09:00:00+00:00"),
           _line("g1", second, FAIL, "2026-11-28T09:05:00+00:00")]
    groups = resolve(log)
    assert [d["reviewer"] for d in groups[(M, "g1")]["decisions"]] == ["reviewer-day4"]
    assert unconfirmed_fails(groups, trusted=[]) == {(M, "g1"): "reviewer-day4"}
    rows = pool({}, log)
    assert list(rows) == ["reviewer-day4"] and rows["reviewer-day4"]["overlaps"] == 0
    assert resolve(log + [_line("g1", "李工", FAIL, "2026-11-28T10:00:00+00:00")])[(M, "g1")]["status"] == FAIL
    assert unconfirmed_fails(resolve(log + [_line("g1", "李工", FAIL, "2026-11-28T10:00:00+00:00")]), []) == {}


def test_an_unsure_second_reviewer_confirms_no_escape():
    """Confirmation is a second person's 不通过, not any second decision (planted: counting every reviewer of the
    group -> 李工's unsure confirms 王工's escape)."""
    log = [_line("g1", "王工", FAIL, "2026-11-28T09:00:00+00:00"),
           _line("g1", "李工", "unsure", "2026-11-28T09:05:00+00:00")]
    assert unconfirmed_fails(resolve(log), trusted=[]) == {(M, "g1"): "王工"}


def test_a_label_keeps_the_stage_a_models_fingerprint():
    """A label from a Stage-A record keeps the record's fields the judge compares, the model's fingerprint among them
    (planted: LABEL_RECORD_FIELDS without it -> a re-certified point's missions read as summarized by another Stage-A
    model, and every group goes to review)."""
    from qc_core.checkpoints import stage_a_identity
    from stage_b.labels.resolve import stage_a_record
    record = {"group_id": "g1", "mission": M, "images": ["1.jpg"], "per_image": {"图片_1": "接地线×1/已捆扎"},
              "model": "/models/stage-a", "model_fingerprint": "fp-stage-a", "created_at": "2026-11-28T09:00:00+00:00"}
    label = stage_a_record(record, PASS)
    assert label["model_fingerprint"] == "fp-stage-a" and stage_a_identity(label) == stage_a_identity(record)
