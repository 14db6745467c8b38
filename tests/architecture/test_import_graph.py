"""The package's import graph is a DAG of layers, and imports sit at module level.

Read from the source with `ast` (nothing is imported): every ``import``/``from`` of a qdiff
module is an edge. Module-level edges must point to the same layer or a lower one and form
no cycle; an import inside a function body (the old way to dodge a cycle) is refused unless
it loads an optional dependency, which is not a qdiff module. A new cycle or a new hidden
import fails here, with the edge named.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "qdiff"

# Lowest first. A module belongs to the longest prefix listed; `qdiff` (the facade) and the
# user-facing entry points sit on top.
LAYERS: list[tuple[str, ...]] = [
    ("qdiff.ir", "qdiff.gpu"),
    ("qdiff.classical", "qdiff.numpy"),
    ("qdiff.autodiff",),
    ("qdiff.loops",),
    ("qdiff.batching",),
    ("qdiff.compiler",),
    ("qdiff.quantum.lang",),
    ("qdiff.quantum.simulator",),
    ("qdiff.quantum.certificate",),
    ("qdiff.quantum.execution",),
    ("qdiff.quantum.gradients",),
    ("qdiff.quantum.compiled",),
    ("qdiff.quantum.qiskit",),
    ("qdiff.quantum",),
    ("qdiff.transforms", "qdiff.api", "qdiff.demo", "qdiff.cli", "qdiff"),
]

# Imports inside functions that still close a circle in the classical core; each one
# removed must be removed here too (the test fails on a stale entry).
KNOWN_FUNCTION_LEVEL: set[tuple[str, str]] = set()
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def _target(module: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in MODULES]
    is_package = MODULES[module].name == "__init__.py"
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[:len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    targets = []
    for alias in node.names:
        full = f"{prefix}.{alias.name}"
        targets.append(full if full in MODULES else prefix)
    return [t for t in targets if t in MODULES]


def _edges() -> tuple[set[tuple[str, str]], set[tuple[str, str]]]:
    """(module-level edges, function-level edges) between qdiff modules."""
    top, inner = set(), set()
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module_level = set()
        for statement in tree.body:
            for node in ast.walk(statement):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    break
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    module_level.add(id(node))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _target(module, node):
                    if target != module:
                        (top if id(node) in module_level else inner).add((module, target))
    return top, inner


def _layer(module: str) -> int:
    best, rank = -1, None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    assert rank is not None, f"{module} is in no layer of LAYERS"
    return rank


def _is_parent_facade(module: str, target: str) -> bool:
    # importing a submodule runs its parents' __init__: that edge is Python's, not ours
    return module.startswith(target + ".")


def test_every_module_is_in_a_layer():
    for module in MODULES:
        _layer(module)


def test_imports_point_down_the_layers():
    top, _ = _edges()
    upward = {(m, t) for m, t in top
              if not _is_parent_facade(m, t) and _layer(t) > _layer(m)}
    assert upward - KNOWN_UPWARD == set(), "imports up the layers"
    assert KNOWN_UPWARD - upward == set(), "stale KNOWN_UPWARD entries"


def test_module_level_imports_form_no_cycle():
    top, _ = _edges()
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, target in top:
        graph[module].add(target)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = stack[stack.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_no_qdiff_import_inside_functions():
    _, inner = _edges()
    assert inner - KNOWN_FUNCTION_LEVEL == set(), "imports of qdiff modules inside functions"
    assert KNOWN_FUNCTION_LEVEL - inner == set(), "stale KNOWN_FUNCTION_LEVEL entries"


def test_the_checks_see_a_cycle_and_an_upward_edge():
    # the graph reader finds what it must: the quantum facade imports the runner (down),
    # and the runner does not import the facade
    top, _ = _edges()
    assert ("qdiff.quantum", "qdiff.quantum.execution.run") in top
    assert _layer("qdiff.quantum.lang.gates") < _layer("qdiff.quantum.gradients.adjoint")
    assert ("qdiff.quantum.execution.runner", "qdiff.quantum") not in top
