"""No doc points at a file or a section that is gone: every relative link of the README, DEVELOPERS.md, docs/ and the
specs reaches a file, and every pointer to a section in words (README ("Stage-B that can look"), docs/testing.md,
"Tests") names a heading of that document, wherever it is written (docs, code, scripts, configs)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted([REPO / "README.md", REPO / "DEVELOPERS.md", *(REPO / "docs").glob("*.md"),
               *(REPO / "openspec" / "specs").rglob("*.md")])
SOURCES = sorted(p for folder in ("qc_core", "stage_a", "stage_b", "review", "swift_plugins", "group_qc_dev", "scripts",
                                  "configs", "tests", "docs")
                 for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".sh", ".yaml", ".md", ".toml"))
SOURCES += [REPO / "README.md", REPO / "DEVELOPERS.md", REPO / "Makefile", REPO / "pyproject.toml"]
SOURCES.remove(Path(__file__).resolve())   # its examples point at sections that are gone on purpose
LINK = re.compile(r"\]\(([^)\s]+)\)")
# a document, then within a few characters a quoted section name: README ("The pages"), docs/gpu.md, "Sizes"
SECTION = re.compile(r"\b((?:docs/)?[A-Za-z_]+\.md|README|DEVELOPERS)\b[ ,(§]{1,4}[\"“]([^\"”\n]{3,80})[\"”]")


def _name(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def headings(doc: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in doc.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")]


def document(name: str, near: Path) -> Path | None:
    name = {"README": "README.md", "DEVELOPERS": "DEVELOPERS.md"}.get(name, name)
    for candidate in (REPO / name, REPO / "docs" / name, near.parent / name):
        if candidate.is_file():
            return candidate
    return None


def broken_links(doc: Path) -> list[str]:
    out = []
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        if not path.exists():
            out.append(f"{_name(doc)}: link to {target}: no such file")
    return out


def broken_sections(path: Path) -> list[str]:
    out = []
    for name, section in SECTION.findall(path.read_text(encoding="utf-8", errors="replace")):
        doc = document(name, path)
        if doc is None:
            out.append(f"{_name(path)}: {name} (\"{section}\"): no such document")
        elif not any(h.lower().startswith(section.lower()) for h in headings(doc)):
            out.append(f"{_name(path)}: {name} (\"{section}\"): {_name(doc)} has no such "
                       f"heading")
    return out


def test_every_relative_link_reaches_a_file():
    assert [b for doc in DOCS for b in broken_links(doc)] == []


def test_every_pointer_to_a_section_names_a_heading():
    assert [b for path in SOURCES for b in broken_sections(path)] == []


@pytest.mark.parametrize("text, broken", [
    ('see docs/testing.md, "Tests, specs, benchmarks"', False),
    ('the README ("Stage-B that can look")', True),        # that section moved to docs/training.md
    ('docs/training.md ("Stage-B that can look")', False),
    ('README, "Tests"', True),                               # the README has no such heading
    ('see [the demo](demo.md)', False),
    ('see [the old page](gone.md)', True),
])
def test_the_checks_tell_a_live_pointer_from_a_dead_one(tmp_path, text, broken):
    (tmp_path / "demo.md").write_text("# The demo\n", encoding="utf-8")
    path = tmp_path / "page.md"
    path.write_text(text + "\n", encoding="utf-8")
    found = broken_sections(path) + broken_links(path)
    assert bool(found) == broken, found
