"""Reason grounding on hand-made replies (stage_b.contract.grounding): what a reason cites, which photos show a defect,
contradictions, and the three metrics evaluation reports."""
from __future__ import annotations

import pytest

from stage_b.contract.grounding import (MAX_RANGE, NOT_CONFIRMED, asserted_defects, cited_photos, citation_prefix,
                                        defect_photos, defect_terms, ground, grounding_metrics, guided_reply)

M = "BBU线缆布放要求"
DEFECT = "BBU端光纤接头×2，光纤×2/未套保护管 备注：光纤裸露无保护"
CLEAN = "ODF端光纤接头×2，光纤×2/已套保护管/弯曲半径正常"
GROUP = [CLEAN, CLEAN, DEFECT, CLEAN, DEFECT]          # defects shown on 图片_3 and 图片_5


@pytest.mark.parametrize("reason, cited", [
    ("图片_3 光纤裸露", [3]),
    ("图片_5、图片_3 光纤裸露", [5, 3]),                  # order of first mention
    ("图片3和图3均未套保护管", [3]),                       # one photo cited twice counts once
    ("图片_1至图片_3 均符合要求", [1, 2, 3]),              # a range cites every photo in it
    ("图片_2到图片_4", [2, 3, 4]), ("图片_2-图片_4", [2, 3, 4]), ("图片_2~4", [2, 3, 4]),
    ("图片_0 与 图片_99", [0, 99]),                        # outside 1..N: cited all the same (and wrong)
    ("图片_1至图片_100000", [1, 100000]),                  # an absurd range: its two ends only
    ("图片_4至图片_2", [4, 3, 2]),                         # a backwards range: every photo in it, in its order
    ("光纤裸露", []),
])
def test_what_a_reason_cites(reason, cited):
    assert cited_photos(reason) == cited


def test_a_photo_shows_a_defect_when_its_summary_asserts_one_not_when_it_denies_it():
    assert defect_photos(GROUP, M) == [3, 5]
    assert defect_photos(["光纤×2/已套保护管，无破损", "无关图片"], M) == []


@pytest.mark.parametrize("reply, summaries, contradiction, wrong, review", [
    ("不通过\n理由: 图片_3、图片_5 光纤裸露无保护", GROUP, False, (), None),
    ("不通过\n理由: 图片_1 和 图片_2 均符合要求", GROUP, True, (1, 2), "contradicts 不通过"),   # naming no defect
    ("不通过\n理由: 关键检查要点无法从摘要中确认", GROUP, True, (), "contradicts 不通过"),     # names none, cites none
    ("不通过\n理由: 图片_1 光纤裸露", GROUP, False, (1,), "cites 图片_1, whose summary shows no defect"),
    ("不通过\n理由: 图片_5 符合要求", GROUP, False, (), None),   # cites a defect photo: not a contradiction
    ("通过\n理由: 图片_1至图片_5 均符合要求", GROUP, True, (), "contradicts 通过: it cites 图片_3、图片_5"),
    ("通过\n理由: 光纤裸露无保护", GROUP, True, (), "contradicts 通过: it names a defect"),
    # a grounded 通过 reason on a group whose summaries show a defect: not a contradiction, still for review
    ("通过\n理由: 图片_1、图片_2 光纤已套保护管，无破损", GROUP, False, (),
     "the verdict is 通过 and the summaries show"),
    ("通过\n理由: 图片_1、图片_2 光纤已套保护管，无破损", [CLEAN, CLEAN], False, (), None),
    ("不通过\n理由: 图片_0 与 图片_99 光纤裸露", GROUP, False, (0, 99),
     "图片_0、图片_99, which the group does not have"),
    ("不通过", GROUP, None, (), None),                                 # not two lines: not graded here
])
def test_contradictions_wrong_citations_and_what_review_is_told(reply, summaries, contradiction, wrong, review):
    g = ground(reply, summaries, M)
    if contradiction is None:
        assert not g.two_lines and not g.review_why()
        return
    assert g.contradiction is contradiction and g.wrong_citations == wrong
    assert bool(g.review_why()) == bool(review) and (review is None or review in " ".join(g.review_why()))


def test_review_why_names_the_photos():
    why = " ".join(ground("不通过\n理由: 图片_1 光纤裸露", GROUP, M).review_why())
    assert "图片_1, whose summary shows no defect" in why and "图片_3、图片_5" in why
    why = " ".join(ground("不通过\n理由: 图片_99 光纤裸露", GROUP, M).review_why())
    assert "图片_99, which the group does not have (5 photos)" in why


def test_the_three_metrics_on_hand_made_replies():
    replies = [
        ("不通过\n理由: 图片_3 光纤裸露", GROUP),                  # cites 1 right; 1 of 2 defects
        ("不通过\n理由: 图片_1、图片_5 光纤裸露", GROUP),           # 1 right, 1 wrong; 1 of 2 defects
        ("不通过\n理由: 图片_1 和 图片_2 均符合要求", GROUP),       # contradiction; 2 wrong; 0 of 2 defects
        ("不通过\n理由: 图片_7 光纤裸露", [CLEAN, CLEAN]),         # no defect photo: outside recall; 1 wrong
        ("通过\n理由: 图片_1 符合要求", [CLEAN]),                   # fine
        ("通过\n理由: 图片_3 符合要求", GROUP),                    # contradiction
        ("通过", GROUP),                                            # not two lines: not counted
    ]
    m = grounding_metrics([ground(r, s, M) for r, s in replies])
    assert m["grounding_counts"]["two_line_replies"] == 6
    assert m["reason_contradiction_rate"] == pytest.approx(2 / 6)
    assert m["citation_precision"] == pytest.approx(2 / 6)    # right: 图片_3, 图片_5; cited: 1 + 2 + 2 + 1
    assert m["citation_recall"] == pytest.approx(2 / 6)       # defect photos cited: 1 + 1 + 0 of 2 + 2 + 2
    assert m["grounding_counts"]["replies_citing_only_photo_1"] == 1
    empty = grounding_metrics([])
    assert (empty["reason_contradiction_rate"], empty["citation_precision"], empty["citation_recall"]) == (None,) * 3


@pytest.mark.parametrize("verdict, summaries, prefix", [
    ("不通过", GROUP, "理由: 图片_3、图片_5"),       # every photo whose summary shows a defect, in order
    ("不通过", [CLEAN, CLEAN], ""),                 # nothing to point at: the model writes the reason freely
    ("通过", GROUP, ""),                            # a 通过 is never steered
])
def test_guided_citations_start_a_fail_reason_with_the_defect_photos(verdict, summaries, prefix):
    assert citation_prefix(verdict, summaries, M) == prefix
    if prefix:   # and a reply that goes on from it is grounded by the rule that measures it
        g = ground(f"{verdict}\n{prefix} 光纤裸露无保护", summaries, M)
        assert not g.contradiction and not g.wrong_citations and set(g.cited) == set(g.defect_photos)


@pytest.mark.parametrize("verdict, summaries, photos, start, complete", [
    ("不通过", GROUP, False, "不通过\n理由: 图片_3、图片_5", False),
    # nothing in the summaries to point at: the conservative rule's words, not an arbitrary photo (always reviewed)
    ("不通过", [CLEAN, CLEAN], False, f"不通过\n理由: {NOT_CONFIRMED}", True),
    ("不通过", [CLEAN, CLEAN], True, "不通过\n", False),     # reading the photos, the model may have seen one
    ("通过", GROUP, False, "通过\n", False),
])
def test_the_guided_start_of_a_reply(verdict, summaries, photos, start, complete):
    assert guided_reply(verdict, summaries, M, photos) == (start, complete)
    if complete:
        g = ground(start, summaries, M)
        assert g.contradiction and not g.cited and g.review_why()


def _negated_by_whole_clause(text: str, start: int) -> bool:
    """The rule as first written: the whole clause before the word, then its last characters (quadratic in the number
    of words of a clause without breaks); negated must give the same answers."""
    from stage_b.contract.grounding import CLAUSE_BREAKS, NEGATION_GAP, NEGATIONS
    clause = text[:start]
    for k, ch in enumerate(reversed(clause)):
        if ch in CLAUSE_BREAKS:
            clause = clause[len(clause) - k:]
            break
    window = clause[-(NEGATION_GAP + max(map(len, NEGATIONS))):]
    return any(window[:len(window) - gap].endswith(neg) for neg in NEGATIONS for gap in range(NEGATION_GAP + 1)
               if gap <= len(window))


def test_negation_looks_back_a_few_characters_with_the_same_answers_as_the_whole_clause():
    """Every position of random texts made of negations, defect words, fillers and clause breaks."""
    import random
    from stage_b.contract.grounding import negated
    rng = random.Random(0)
    pieces = ["无", "没有", "未见", "松动", "缺失", "明显", "任何", "，", "。", "螺丝", "齐全", "a", " "]
    for _ in range(300):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        for start in range(len(text) + 1):
            assert negated(text, start) == _negated_by_whole_clause(text, start), (text, start)


@pytest.mark.timeout(120)
def test_a_long_run_of_denied_defects_is_read_in_linear_time():
    """240,000 characters of 无松动 with no clause break: the whole-clause rule took 80 s for 24,000; linear, this is
    a fraction of a second (the timeout only stops a regression from hanging the suite)."""
    from qc_core.missions import load_registry
    from stage_b.contract.grounding import asserted_defects, defect_terms
    terms = defect_terms(load_registry().resolve("BBU接地线检查"))
    assert asserted_defects("无松动" * 80_000, terms) == set()


# planted-bug tests (issue 36)
@pytest.mark.parametrize("reason, cited", [
    ("图片_1至图片_64", list(range(1, 65))),          # exactly MAX_RANGE photos: every one
    ("图片_1至图片_65", [1, 65]),                      # one more: its two ends
    ("图片_3至图片_1", [3, 2, 1]),                     # either direction
    ("图片_1234567", []),                              # not a 6-digit photo number's prefix
    ("接线图2", []), ("见图2", [2]), ("图片_2、图3和图片_5", [2, 3, 5]),
])
def test_a_range_cites_every_photo_up_to_max_range_and_citations_are_whole(reason, cited):
    assert MAX_RANGE == 64 and cited_photos(reason) == cited


# planted-bug test (issue 36), on the defect words of the earthing mission
EARTHING = "BBU接地线检查"


@pytest.mark.parametrize("text, defect", [
    ("螺丝齐全，无松动", False), ("未发现松动", False), ("未发现明显松动", False), ("无明显破损", False),
    ("未见明显松动", False), ("无任何缺失", False), ("没有发现松动", False),
    ("接地线松动", True), ("无遮挡，螺丝缺失", True), ("无法确认螺丝是否缺失", True),
])
def test_a_negation_denies_a_defect_over_a_word_within_its_clause(text, defect):
    assert bool(asserted_defects(text, defect_terms(EARTHING))) == defect


# planted-bug test (issue 36)
def test_citation_parsing_is_linear_in_the_ranges():
    import time
    reason = "，".join(f"图片_{i}至图片_{i + 1}" for i in range(1, 40_001))
    started = time.perf_counter()
    assert len(cited_photos(reason)) == 40_001
    assert time.perf_counter() - started < 5   # 121 s when every citation was checked against every range


@pytest.mark.parametrize("text, asserted", [
    ("没有发现松动和缺失", set()), ("无松动、缺失", set()), ("未发现松动或破损", set()), ("没有松动以及缺失", set()),
    ("螺丝松动、缺失", {"松动", "缺失"}), ("松动和缺失", {"松动", "缺失"}), ("无遮挡，螺丝缺失", {"缺失"}),
    ("无松动，螺丝缺失", {"缺失"}),
])
def test_a_denial_carries_over_the_defects_coordinated_with_it(text, asserted):
    """The field case: `没有发现松动和缺失` asserted 缺失 (the denial stopped at 和). A defect word joined to a denied
    one by 和, 与, 及, 或, 以及, 或者 or 、 is denied with it; a clause break still ends the denial (planted: no
    carry-over -> 缺失 asserted)."""
    assert asserted_defects(text, defect_terms("BBU接地线检查")) == asserted


@pytest.mark.parametrize("reason, cited", [
    ("图片二 接地线松动", [2]), ("图片_1至图片三", [1, 2, 3]), ("图片十二、图片二十", [12, 20]), ("图片两", [2]),
    ("接线图二 所示", []), ("图片一百", []),
])
def test_a_photo_named_with_a_chinese_numeral_is_cited(reason, cited):
    """The field case: `图片二` cited nothing. A Chinese numeral up to 九十九 after 图片 cites as the digits do
    (planted: digits only -> [])."""
    assert cited_photos(reason) == cited
