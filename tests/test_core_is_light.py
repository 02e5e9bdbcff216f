"""The pure core stays free of torch, transformers, ms-swift and datasets: each module the layout table
lists as core is imported alone in a fresh interpreter, and none of those may be imported with it."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import docs_text

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "swift", "datasets")


def contract_sources() -> list[str]:
    """The modules and packages pyproject.toml's forbidden contract (import-linter, `make lint`) keeps pure."""
    import tomllib
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    (pure,) = [c for c in config["tool"]["importlinter"]["contracts"]
               if c["type"] == "forbidden" and c["name"].startswith("the pure core")]
    assert set(pure["forbidden_modules"]) == set(HEAVY)
    return pure["source_modules"]


def core_modules() -> list[str]:
    """Every module the contract names, a package's modules each (imported alone below: the contract reads the code,
    this runs it)."""
    import importlib
    import pkgutil
    out = []
    for name in contract_sources():
        module = importlib.import_module(name)
        out.append(name)
        if hasattr(module, "__path__"):
            out += [m.name for m in pkgutil.walk_packages(module.__path__, f"{name}.")]
    return out


def documented_core() -> set[str]:
    """`stage_b.rules.routes`, … from the layout rows of docs/architecture.md: `| `stage_b/rules/` | pure core (…)`."""
    out = set()
    for line in docs_text().splitlines():
        row = re.match(r"\| `((?:qc_core|stage_[ab]|review)(?:/\w+)?)/` \| pure core \(([^)]*)\)", line)
        if row:
            package = row.group(1).replace("/", ".")
            out |= {f"{package}.{name}" for name in re.findall(r"`(\w+)`", row.group(2))}
    return out


def test_the_docs_call_pure_core_exactly_what_the_contract_keeps_pure():
    assert documented_core() == set(core_modules()) - {m for m in contract_sources() if m.count(".") == 1
                                                       and m.startswith("stage_b.")}


PACKAGES = ["qc_core", "stage_a", "stage_b", "review"] + sorted(
    f"stage_b/{p.parent.name}" for p in (REPO / "stage_b").glob("*/__init__.py"))


def test_the_readme_lists_the_core():
    assert {"qc_core.jsonl", "qc_core.missions", "stage_b.train.rewards", "stage_b.rules.operating_point",
            "stage_b.data.sft", "stage_b.contract.verdict", "stage_b.monitoring.monitor"} <= set(core_modules())


@pytest.mark.parametrize("module", core_modules())
def test_a_core_module_imports_nothing_heavy(module):
    code = (f"import sys, {module}; "
            f"print(' '.join(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "", f"{module} imports {result.stdout.strip()[:300]}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_placed_in_the_layout_table(package):
    """A new module must be classified (pure core, renderer, adapter or command) in the layout table's row for its
    package, or the core list could silently leave it out."""
    row = next(line for line in docs_text().splitlines()
               if line.startswith(f"| `{package}/` |"))
    named = set(re.findall(r"`(\w+)`", row))
    modules = {p.stem for p in (REPO / package).glob("*.py") if p.stem not in ("__init__", "__main__")} | {
        p.parent.name for p in (REPO / package).glob("*/__init__.py")}   # a module that is a package
    assert modules - named == set(), f"{package} modules missing from the layout table (docs/architecture.md)"
    assert named - modules <= {"templates"}, f"the layout table names {package} modules that do not exist"


def test_stage_a_imports_nothing_from_stage_b():
    """Stage-B builds on Stage-A, never the other way round: qc_core/missions.py once took GROUP_QC_MISSIONS from
    stage_b/data/settings.py, so importing the mission registry imported Stage-B's settings (issue 26, item 8)."""
    import ast
    found = []
    for path in sorted((REPO / "stage_a").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
            found += [f"{path.name}:{node.lineno} imports {n}" for n in names if n.split(".")[0] == "stage_b"]
    assert found == []
    result = subprocess.run([sys.executable, "-c", "import sys, qc_core.missions, stage_a.runner, stage_a.cli; "
                             "print(sorted(m for m in sys.modules if m.startswith('stage_b')))"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr[-2000:]


def test_no_import_runs_back_up_a_layer():
    """qc_core knows no stage, review knows no stage, Stage-A no Stage-B, and none of them the plugin or the dev
    tools (issue 38: review/ imported stage_b, and stage_b took its JSONL I/O from stage_a). The layers and the graph
    are group_qc_dev.import_graph's, which docs/architecture.md draws."""
    from group_qc_dev.import_graph import upward_imports
    assert upward_imports() == []


def test_no_circle_of_module_level_imports():
    """A circle of imports that run when a module is imported can leave one of them half-initialised (an
    ImportError that depends on which module a command imports first). Planted `import stage_b.judging.judge` at the
    top of
    stage_b/rules/routes.py: found as stage_b.rules.routes -> stage_b.judging.judge -> stage_b.rules.routes."""
    from group_qc_dev.import_graph import module_cycles
    assert module_cycles() == []


# An import of one of our modules inside a function hides what a module depends on (and a circle it would close);
# one is kept there only when the module it imports is heavy, and a comment says so: `# heavy: <why>` on the
# import's line, or in the comment lines above it (above the first of a run of imports). group_qc_dev is not scanned:
# the developers' tools load their heavy models freely.
HEAVY_MARK = "heavy:"
NO_LAZY_PROJECT_IMPORTS = ("qc_core", "review", "stage_a", "stage_b", "swift_plugins", "review_app", "group_qc")


def unexplained_function_imports() -> list[str]:
    """FILE:LINE imports MODULE, for each import of one of our packages inside a function without a `heavy:`
    comment."""
    import ast
    from group_qc_dev.import_graph import LAYERS

    def ours(node) -> bool:
        if isinstance(node, ast.Import):
            return any(a.name.split(".")[0] in LAYERS for a in node.names)
        return isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").split(".")[0] in LAYERS)

    def marked(line: str) -> bool:
        return "#" in line and HEAVY_MARK in line[line.index("#"):]

    found = set()
    for path in sorted(p for package in NO_LAZY_PROJECT_IMPORTS for p in (REPO / package).rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        functions = [n for n in ast.walk(ast.parse("\n".join(lines)))
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in (n for f in functions for n in ast.walk(f)):
            for field in ("body", "orelse", "finalbody"):
                block = getattr(node, field, None)
                if not isinstance(block, list):
                    continue
                run: set[int] = set()   # the lines of the imports just before this one
                for statement in block:
                    if not isinstance(statement, (ast.Import, ast.ImportFrom)):
                        run = set()
                        continue
                    said = any(marked(line) for line in lines[statement.lineno - 1:statement.end_lineno])
                    line = statement.lineno - 1   # up over the run's imports and the comment lines above them
                    while not said and line >= 1 and (line in run or lines[line - 1].strip().startswith("#")):
                        said = line not in run and marked(lines[line - 1])
                        line -= 1
                    run |= set(range(statement.lineno, statement.end_lineno + 1))
                    if ours(statement) and not said:
                        what = (statement.module or "") if isinstance(statement, ast.ImportFrom) else \
                            statement.names[0].name
                        found.add(f"{path.relative_to(REPO)}:{statement.lineno} imports "
                                  f"{'.' * getattr(statement, 'level', 0)}{what}")
    return sorted(found, key=lambda s: (s.split(":")[0], int(s.split(":")[1].split()[0])))


def test_a_project_import_inside_a_function_says_why():
    """Our modules import each other at the top; an import inside a function is for a heavy module only (torch,
    transformers, ms-swift, datasets, scipy, matplotlib, or an adapter that loads them), with a `# heavy:` comment
    saying why. Planted `from stage_b.rules.routes import AUDIT` inside stage_b/monitoring/days.py's
    `verdict_files`: found as stage_b/monitoring/days.py:LINE imports stage_b.rules.routes."""
    found = unexplained_function_imports()
    assert found == [], ("imports of our modules inside a function: move each to the module's top, or say on its "
                         "line or the line above why it must wait (`# heavy: torch, loaded only when a model "
                         "runs`):\n" + "\n".join(found))


def test_the_architecture_page_draws_the_import_graph_the_code_has():
    """docs/architecture.md's diagram is group_qc_dev.import_graph's output, so it cannot drift from the code."""
    from group_qc_dev.import_graph import layer_edges, mermaid
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"```mermaid\n{mermaid(layer_edges())}\n```" in page, (
        "run: python -m group_qc_dev.import_graph --write docs/architecture.md")


def test_the_type_checker_covers_the_pure_core_and_the_review_app():
    """`make lint` runs mypy on [tool.mypy] files: at least the modules the forbidden contracts keep free of model
    libraries (the pure core, the review app and the router); the commands' modules above them are checked too."""
    import tomllib
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    checked = {f.removesuffix(".py").replace("/", ".") for f in config["tool"]["mypy"]["files"]}
    pure = set(contract_sources())
    served = {m for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "forbidden"
              and not c["name"].startswith("the pure core") for m in c["source_modules"]}
    assert served == {"review_app", "group_qc"}

    def covered(module: str) -> bool:   # listed itself, or inside a listed package
        parts = module.split(".")
        return any(".".join(parts[:n]) in checked for n in range(1, len(parts) + 1))
    assert [m for m in sorted(pure | served) if not covered(m)] == []


def test_the_review_app_loads_no_model_library():
    """The server starts without torch, transformers, ms-swift or datasets (its import contract in pyproject.toml,
    run here as the process it is): a reviewer's server needs neither a GPU's libraries nor their seconds of import."""
    code = ("import sys, review_app.serve, review_app.app, review_app.labels_sync, review_app.users, group_qc.cli; "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
