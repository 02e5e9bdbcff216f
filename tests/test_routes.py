"""stage_b.rules.routes: the blind-audit draw, each verdict's route, and which labelled groups are fair evidence."""
from __future__ import annotations

import math

import pytest

from stage_b.rules.routes import (AUDIT, AUTO, GROUP, MISSION, REVIEW, RouteError, audit_draw, check_audit_share,
                                  evidence_weight, route_of, route_of_record, why_not_fair)


@pytest.mark.parametrize("share", [0.05, 0.2, 0.5])
def test_the_audit_draws_its_share_of_10000_ids_within_the_binomial_range(share):
    drawn = sum(route_of([], [], share, 7, "BBU接地线检查", f"group-{i}")["route"] == AUDIT for i in range(10_000))
    sd = math.sqrt(10_000 * share * (1 - share))
    assert abs(drawn - 10_000 * share) <= 4 * sd   # a 4-sigma band: a wrong draw misses it by far


def test_the_same_seed_draws_the_same_groups_and_another_seed_others():
    ids = [f"g{i}" for i in range(2000)]
    first = [audit_draw(3, "m", g) < 0.1 for g in ids]
    assert first == [audit_draw(3, "m", g) < 0.1 for g in ids]
    assert first != [audit_draw(4, "m", g) < 0.1 for g in ids]
    # the mission is part of the draw: one work order in two missions is two independent draws
    assert [audit_draw(3, "m", g) for g in ids[:50]] != [audit_draw(3, "n", g) for g in ids[:50]]


@pytest.mark.parametrize("mission_why, group_why, share, expected", [
    (["not certified"], [], 0.5, (REVIEW, MISSION, None)),
    ([], ["p_fail in the band"], 0.5, (REVIEW, GROUP, None)),
    (["withdrawn"], ["in the band"], 0.5, (REVIEW, MISSION, None)),   # the mission's reason decides the scope
    ([], [], 0.0, (AUTO, None, 0.0)),
    ([], [], 1.0, (AUDIT, None, 1.0)),
])
def test_each_group_gets_its_route(mission_why, group_why, share, expected):
    r = route_of(mission_why, group_why, share, 0, "m", "g")
    assert (r["route"], r["review_scope"], r["audit_probability"]) == expected
    assert r["why"][:len(mission_why + group_why)] == mission_why + group_why


@pytest.mark.parametrize("value", [0, "0", 0.05, 1, "1.0"])
def test_audit_shares_from_0_to_1_are_taken(value):
    assert check_audit_share(value) == float(value)


@pytest.mark.parametrize("value, message", [(-0.1, "is out of range"), (1.5, "is out of range"),
                                            ("nan", "is out of range"), ("abc", "is not a number"),
                                            (None, "is not a number")])
def test_audit_shares_out_of_range_are_refused_by_value(value, message):
    with pytest.raises(RouteError, match=f"--audit_share {value!r} {message}".replace("(", r"\(")):
        check_audit_share(value)


@pytest.mark.parametrize("review, weight, why", [
    (None, 1.0, None),                                                             # the original labelled data
    ({"route": REVIEW, "review_scope": MISSION}, 1.0, None),                       # every group of the mission
    ({"route": AUDIT, "audit_probability": 0.05}, 20.0, None),                     # drawn with probability 5%
    ({"route": REVIEW, "review_scope": GROUP}, None, "its own p_fail or reply"),   # chosen by score
    ({"route": AUTO, "audit_probability": 0.05}, None, "a reviewer chose to look"),
    ({"route": None}, None, "treated as chosen by score"),                         # an older page
    ({"route": AUDIT, "audit_probability": 0}, None, "treated as chosen by score"),
    ({"route": AUDIT, "audit_probability": True}, None, "treated as chosen by score"),
])
def test_only_fair_samples_weigh_in_a_bound(review, weight, why):
    assert evidence_weight(review) == weight
    assert (why_not_fair(review) is None) if why is None else why in why_not_fair(review)


def test_a_verdict_line_written_before_routes_has_the_route_its_flag_implies():
    assert route_of_record({"needs_review": True}) == REVIEW and route_of_record({"needs_review": False}) == AUTO
    assert route_of_record({"needs_review": False, "route": AUDIT}) == AUDIT


@pytest.mark.parametrize("what, mission_why, group_why, gold, route", [
    ("a gold check flagged by its own score stays a blind audit", [], ["the reason names no defect"], True, "audit"),
    ("a day's group flagged by its own score goes to review", [], ["the reason names no defect"], False, "review"),
    ("a gold check of a mission sent whole to review is reviewed like the day's", ["withdrawn"], [], True, "review"),
])
def test_where_a_gold_check_goes(what, mission_why, group_why, gold, route):
    from stage_b.rules.routes import route_of
    assert route_of(mission_why, group_why, 0.05, 1, "BBU接地线检查", "g", gold=gold)["route"] == route, what
