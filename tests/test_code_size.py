"""Small modules and short functions, as the design asks: no stage_b module over 400 lines, no product function over
60 (docs/architecture.md says where each part went when a module was split)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PRODUCT = ("qc_core", "stage_a", "stage_b", "review", "swift_plugins")
LIMITS = [("stage_b module lines", 400), ("product function lines", 60)]


def _modules(packages) -> list[Path]:
    return sorted(p for pkg in packages for p in (REPO / pkg).rglob("*.py"))


def too_long_modules(limit: int) -> list[str]:
    return [f"{p.relative_to(REPO)}: {n} lines" for p in _modules(["stage_b"])
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > limit]


def too_long_functions(limit: int) -> list[str]:
    out = []
    for path in _modules(PRODUCT):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    out.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name}: {lines} lines")
    return out


@pytest.mark.parametrize("what, limit", LIMITS)
def test_nothing_is_over_its_limit(what, limit):
    found = too_long_modules(limit) if what.startswith("stage_b module") else too_long_functions(limit)
    assert found == [], f"over {limit} {what.split()[-1]}: split by what the parts do\n" + "\n".join(found)


def test_the_checks_see_a_long_one(tmp_path):
    """Planted: a check that measured nothing would pass everything."""
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    path = tmp_path / "long.py"
    path.write_text(f"def f():\n{body}\n", encoding="utf-8")
    node = ast.parse(path.read_text(encoding="utf-8")).body[0]
    assert node.end_lineno - node.lineno + 1 == 62
    assert too_long_functions(1) and too_long_modules(10)
