"""The import graph, drawn from the code (docs/architecture.md shows its output; tests/test_core_is_light.py keeps
its two rules: no import runs back up a layer, and no circle of module-level imports).

    python -m group_qc_dev.import_graph            # the layers' edges, with how many imports each carries
    python -m group_qc_dev.import_graph --mermaid  # the same as a Mermaid flowchart
    python -m group_qc_dev.import_graph --write docs/architecture.md   # redraw the page's ```mermaid block in place

An edge A -> B counts every import of a module of package B in a module of package A, at module level or inside a
function (a function-level import is how an adapter loads ms-swift or torch only when it runs). Cycles are looked
for among module-level imports only: those run when a module is imported, so a circle of them can leave a module
half-initialised. Pure stdlib (ast).
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# The layers, lowest first: a module may import its own package and any package before it, never one after it.
LAYERS = ("qc_core", "review", "stage_a", "stage_b", "swift_plugins", "review_app", "group_qc_dev", "group_qc")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, top_level_only: bool = False) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import of one of our packages in a file; relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out = []
    for node in nodes:
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            # `from . import x` and `from pkg import module` name modules too
            out += [(node.lineno, f"{module}.{a.name}") if not node.module or is_module(f"{module}.{a.name}")
                    else (node.lineno, module) for a in node.names]
    return [(line, name) for line, name in out if name.split(".")[0] in LAYERS]


def is_module(name: str) -> bool:
    path = REPO.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def our_files() -> list[Path]:
    return [p for layer in LAYERS for p in sorted((REPO / layer).rglob("*.py"))]


def layer_edges() -> Counter:
    """{(package, imported package): imports} between different packages."""
    edges = Counter()
    for path in our_files():
        source = module_name(path).split(".")[0]
        for _, name in imported_modules(path):
            target = name.split(".")[0]
            if target != source:
                edges[source, target] += 1
    return edges


def module_cycles() -> list[list[str]]:
    """Circles of module-level imports between our modules (each found once, as the modules along it)."""
    graph: dict[str, set[str]] = {}
    for path in our_files():
        here = module_name(path)
        graph[here] = {n for _, n in imported_modules(path, top_level_only=True) if n != here and is_module(n)}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"
    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def upward_imports() -> list[str]:
    """Imports that run back up a layer (a lower package importing a higher one), as FILE:LINE imports PACKAGE."""
    back = []
    for path in our_files():
        layer = LAYERS.index(module_name(path).split(".")[0])
        for line, name in imported_modules(path):
            if LAYERS.index(name.split(".")[0]) > layer:
                back.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return back


def mermaid(edges: Counter) -> str:
    lines = ["flowchart BT"]
    lines += [f"  {a} -->|{n}| {b}" for (a, b), n in sorted(edges.items(), key=lambda e: (LAYERS.index(e[0][0]),
                                                                                            LAYERS.index(e[0][1])))]
    return "\n".join(lines)


def redraw(page: Path, edges: Counter) -> bool:
    """Replace the one ```mermaid block of `page` with the graph; True when the page changed."""
    text = page.read_text(encoding="utf-8")
    blocks = re.findall(r"^```mermaid\n.*?^```$", text, flags=re.M | re.S)
    if len(blocks) != 1:
        raise SystemExit(f"error: {page} has {len(blocks)} ```mermaid blocks; --write redraws exactly one")
    new = text.replace(blocks[0], f"```mermaid\n{mermaid(edges)}\n```")
    if new != text:
        page.write_text(new, encoding="utf-8")
    return new != text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m group_qc_dev.import_graph", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mermaid", action="store_true", help="print a Mermaid flowchart")
    p.add_argument("--write", type=Path, metavar="PAGE", help="redraw the one ```mermaid block of PAGE in place")
    args = p.parse_args(argv)
    edges = layer_edges()
    if args.write:
        print(f"{args.write}: {'redrawn' if redraw(args.write, edges) else 'already up to date'}")
    elif args.mermaid:
        print(mermaid(edges))
    else:
        for (a, b), n in sorted(edges.items(), key=lambda e: (LAYERS.index(e[0][0]), LAYERS.index(e[0][1]))):
            print(f"{a:>14} -> {b:<14} {n:>4} imports")
    back, cycles = upward_imports(), module_cycles()
    print(f"imports running back up a layer: {len(back)}; circles of module-level imports: {len(cycles)}",
          file=sys.stderr)
    for line in back + [" -> ".join(c) for c in cycles]:
        print(f"  {line}", file=sys.stderr)
    return 1 if back or cycles else 0


if __name__ == "__main__":
    sys.exit(main())
