"""stage_b.contract.verdict: one label vocabulary inside (a label is the verdict it asserts, 通过 or 不通过);
files spell it pass or fail, and these are translated at the edge only."""
from __future__ import annotations

import pytest

from stage_b.contract.verdict import FAIL, FILE_LABELS, PASS, label_from_file, normalize_verdict


@pytest.mark.parametrize("word, label", [
    ("pass", PASS), ("fail", FAIL),
    ("通过", None), ("Fail", None), ("", None), (None, None), (1, None),   # a file's label is exactly pass or fail
])
def test_a_files_label_is_the_verdict_it_asserts(word, label):
    assert label_from_file(word) == label


def test_the_two_translations_are_inverse():
    assert {label_from_file(word) for word in FILE_LABELS.values()} == {PASS, FAIL}
    assert all(FILE_LABELS[label_from_file(word)] == word for word in FILE_LABELS.values())


@pytest.mark.parametrize("value, verdict", [("pass", PASS), ("fail", FAIL), ("通過", PASS), (" 不通过 ", FAIL),
                                            ("unsure", None)])
def test_a_verdict_from_any_spelling(value, verdict):
    assert normalize_verdict(value) == verdict
