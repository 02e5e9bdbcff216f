"""The order `make test`'s two workers take the files in (tests.helpers.run_order, applied by tests/conftest.py):
longest first, and while one worker builds the shared start point the other starts with files that do not need it."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_order

A, B, C, D, E = (Path(f"tests/test_{name}.py") for name in "abcde")


@pytest.mark.parametrize("files, expected", [
    # longest first; equals keep their collection order
    ([(A, 10, False), (B, 30, False), (C, 20, False), (D, 20, False)], [B, C, D, A]),
    # the first builds the start point: the other worker starts with the two longest files that do not need it
    ([(A, 500, True), (B, 300, True), (C, 200, False), (D, 250, False)], [A, D, B, C]),
    ([(A, 500, True), (B, 300, True), (C, 200, False), (D, 250, False), (E, 400, True)], [A, D, E, C, B]),
    ([(A, 500, True), (B, 300, True), (C, 200, False)], [A, C, B]),
    ([(A, 500, True), (C, 200, False), (D, 250, False)], [A, D, C]),
    # the first builds nothing shared: plain longest first
    ([(A, 500, False), (B, 300, True), (C, 200, True)], [A, B, C]),
    # every file needs the start point: nothing to move
    ([(A, 100, True), (B, 300, True)], [B, A]),
    ([], []),
])
def test_longest_first_and_the_second_file_needs_no_shared_build(files, expected):
    assert run_order(files) == expected
