"""`python -m group_qc_dev.import_graph --write PAGE` redraws the page's one Mermaid block and nothing else."""
from __future__ import annotations

from collections import Counter

import pytest

from group_qc_dev.import_graph import mermaid, redraw

EDGES = Counter({("stage_a", "qc_core"): 3})
DRAWN = f"```mermaid\n{mermaid(EDGES)}\n```"


@pytest.mark.parametrize("before, changed", [
    ("# Page\ntext\n```mermaid\nflowchart BT\n  stage_a -->|2| qc_core\n```\nafter\n", True),
    (f"# Page\ntext\n{DRAWN}\nafter\n", False),
])
def test_write_redraws_the_one_block_and_keeps_the_rest(tmp_path, before, changed):
    page = tmp_path / "architecture.md"
    page.write_text(before, encoding="utf-8")
    assert redraw(page, EDGES) is changed
    assert page.read_text(encoding="utf-8") == f"# Page\ntext\n{DRAWN}\nafter\n"


@pytest.mark.parametrize("text, count", [("# no graph\n", 0), (f"{DRAWN}\n{DRAWN}\n", 2)])
def test_a_page_without_exactly_one_block_is_refused_and_left_alone(tmp_path, text, count):
    page = tmp_path / "architecture.md"
    page.write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit, match=f"has {count} ```mermaid blocks"):
        redraw(page, EDGES)
    assert page.read_text(encoding="utf-8") == text
