"""The order `make test`'s two workers take the files in (tests.helpers.run_order, applied by tests/conftest.py):
longest first, and never two files that wait for the shared start point side by side at the start."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_order

A, B, C, D = (Path(f"tests/test_{name}.py") for name in "abcd")


@pytest.mark.parametrize("files, expected", [
    # longest first; equals keep their collection order
    ([(A, 10, False), (B, 30, False), (C, 20, False), (D, 20, False)], [B, C, D, A]),
    # the first waits for the start point: the longest file that does not comes second
    ([(A, 500, True), (B, 300, True), (C, 200, False), (D, 250, False)], [A, D, B, C]),
    # the first builds nothing shared: plain longest first
    ([(A, 500, False), (B, 300, True), (C, 200, True)], [A, B, C]),
    # every file needs the start point: nothing to move
    ([(A, 100, True), (B, 300, True)], [B, A]),
    ([], []),
])
def test_longest_first_and_the_second_file_needs_no_shared_build(files, expected):
    assert run_order(files) == expected
