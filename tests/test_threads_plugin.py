"""group_qc_dev/threads_plugin.py: the demo's Stage-A SFT takes the CPU threads a file names, and only a whole
positive number in an existing file changes anything."""
from __future__ import annotations

import pytest

from group_qc_dev.threads_plugin import threads_wanted


@pytest.mark.parametrize("content, expected", [
    (None, None),        # the start point is still training: no file yet
    ("2\n", 2),
    ("1", 1),
    ("0", None),         # no thread at all is not a setting
    ("two", None),
    ("", None),          # written but not yet filled
])
def test_threads_wanted_reads_a_whole_positive_number(tmp_path, content, expected):
    path = tmp_path / "threads"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    assert threads_wanted(str(path)) == expected


def test_no_file_named_changes_nothing():
    assert threads_wanted(None) is None and threads_wanted("") is None
