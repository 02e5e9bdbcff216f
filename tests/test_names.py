"""qc_core.names: one rule for a reviewer's name, applied by the review page, the judge's --reviewers and the import.
The table is the rule; the page's script is held to the same table in headless Chromium."""
from __future__ import annotations

import json
import re

import pytest

from qc_core.names import MAX_NAME, ReviewerNameError, reviewer_name

NAMES = [   # (typed, the name, or the refusal's words)
    ("王工", "王工", None),
    ("王\u3000工", "王 工", None),                 # an IME's full-width space is a space
    ("  李\u00a0\u00a0工 ", "李 工", None),        # no-break spaces, a run of them, spaces at the ends
    ("e\u0301", "\u00e9", None),                  # NFD é is NFC é: one reviewer
    ("O'Brien-Smith 2", "O'Brien-Smith 2", None),
    ("王" * MAX_NAME, "王" * MAX_NAME, None),
    ("王" * (MAX_NAME + 1), None, f"over {MAX_NAME}"),
    ("a\u202eb", None, "U+202E"),                 # a bidi override would reverse what is printed after it
    ("a\u2066b", None, "U+2066"),
    ("a\u200db", None, "U+200D"),                 # zero-width: two names that look alike
    ("a\tb", None, "U+0009"),
    ("a\nb", None, "U+000A"),
    ("--", None, "no letter or digit"),           # reviewers=-- is a slip, not a person
    ("", None, "empty"),
    ("\u3000", None, "empty"),
]


@pytest.mark.parametrize("typed, name, refusal", NAMES)
def test_the_name_rule(typed, name, refusal):
    if refusal is None:
        assert reviewer_name(typed) == name
    else:
        with pytest.raises(ReviewerNameError, match=re.escape(refusal)) as err:
            reviewer_name(typed)
        assert f"up to {MAX_NAME} characters" in str(err.value)   # every refusal says what a name may be


@pytest.mark.parametrize("value, names, refusal", [
    ("王　工,李工", ["王 工", "李工"], None),
    ("\u00e9,e\u0301", None, "names é twice"),    # NFC and NFD: one reviewer given twice
    ("--", None, "no letter or digit"),
    ("王工,a\u202eb", None, "U+202E"),
])
def test_the_judges_reviewers_follow_the_rule(value, names, refusal):
    from stage_b.labels.assign import AssignError, check_reviewers
    if refusal is None:
        assert check_reviewers(value) == names
    else:
        with pytest.raises(AssignError, match=re.escape(refusal)):
            check_reviewers(value)


def test_the_page_applies_the_same_rule(browser, tmp_path, synthetic):
    """Every row of the table through the page's own script: the same name, or refused. Planted: the page without NFC
    -> NFD é stayed two characters."""
    from tests.helpers import fresh_page, judged_day
    out, _ = judged_day(tmp_path, synthetic)
    fresh_page(browser, out / "review" / "index.html")
    for typed, name, refusal in NAMES:
        seen = json.loads(browser.execute_script("return JSON.stringify(window.groupQcReviewerName(arguments[0]))",
                                                 typed))
        assert seen["name"] == (name or ""), typed
        assert bool(seen["problem"]) == (refusal is not None and refusal != "empty"), typed


def test_a_name_the_rule_refuses_takes_no_decision_on_the_page_and_says_why(browser, tmp_path, synthetic):
    from tests.helpers import fresh_page, judged_day, send_keys
    out, _ = judged_day(tmp_path, synthetic)
    fresh_page(browser, out / "review" / "index.html", reviewer="王\u202e工")
    send_keys(browser, "p")
    assert browser.find_element("id", "decided-count").text == "0"
    assert "shows nothing or moves the text" in browser.find_element("id", "name-needed").text


def test_the_import_keeps_the_name_as_the_rule_writes_it_and_names_a_line_it_refuses(tmp_path, synthetic):
    from stage_b.labels.decisions import import_decisions
    from stage_b.labels.decision_lines import DecisionsError
    from tests.helpers import judged_day, write_decision_file
    out, verdicts = judged_day(tmp_path, synthetic)
    typed = write_decision_file(tmp_path, out, verdicts[0], name="typed.jsonl")
    line = json.loads(typed.read_text(encoding="utf-8"))
    typed.write_text(json.dumps({**line, "reviewer": "王\u3000工"}, ensure_ascii=False) + "\n", encoding="utf-8")
    result = import_decisions([typed], tmp_path / "labels")
    assert [d["reviewer"] for g in result["groups"].values() for d in g["decisions"]] == ["王 工"]
    typed.write_text(json.dumps({**line, "reviewer": "王\u202e工"}, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(DecisionsError, match="typed.jsonl:1: .*U\\+202E"):
        import_decisions([typed], tmp_path / "labels2")


@pytest.mark.parametrize("given", ["reviewer-day4,REVIEWER-DAY4", "王工,王 工", "reviewer-day4,r\u0435viewer-day4"])
def test_reviewers_refuses_two_names_that_look_alike(given):
    from stage_b.labels.assign import AssignError, check_reviewers
    with pytest.raises(AssignError, match="look alike"):
        check_reviewers(given)
