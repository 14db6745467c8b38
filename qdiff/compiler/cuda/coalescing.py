"""Which of a kernel's thread levels varies fastest from lane to lane of a warp.

A warp's 32 threads run each load and store together. Where their addresses are one
(a broadcast) the warp reads one value; where they follow each other it reads a few 32-byte
sectors; where they lie a row apart each lane reads a sector of its own. A nest's threads
number its outer levels row-major by default, the last level fastest; GMM's (point,
component) nest then has each lane read its own component's d × d matrix at every step
of its d × d loop, 32 matrices per warp, none reused from the cache, where with the
point varying fastest every lane of a warp reads the same matrix. So the kernel's text is
read: each access (load, store, atomic) of an array, weighted by the loop trips around
it, costs by how its address moves when one level's index grows by one, and the level
costing least varies fastest.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

# cost of one warp access by how its address moves from lane to lane
_SAME = {"load": 0, "store": 0, "atomic": 32}  # one address: a broadcast; atomics queue on it
_UNIT = 1      # consecutive elements: a few sectors
_STRIDED = 8   # a sector per lane
# trips assumed for a loop whose bounds are not literals
_UNKNOWN_TRIPS = 16

_Deps = dict[str, bool]  # root index -> whether it moves the value by exactly one


def _merge(*parts: _Deps, unit: bool = True) -> _Deps:
    """The dependencies of a sum of ``parts`` (``unit``) or of any other combination."""
    merged: _Deps = {}
    for part in parts:
        for name, is_unit in part.items():
            merged[name] = unit and is_unit and name not in merged
    return merged


class _Accesses:
    """The weighted accesses of a kernel body, with each index's dependence on the roots."""

    def __init__(self, roots: Sequence[str]):
        self.roots = set(roots)
        self.env: dict[str, _Deps] = {}
        self.local: set[str] = set()
        # (kind, weight, dependencies of each subscript position)
        self.found: list[tuple[str, int, list[_Deps]]] = []

    def deps(self, node: ast.AST) -> _Deps:
        if isinstance(node, ast.Name):
            if node.id in self.roots:
                return {node.id: True}
            return dict(self.env.get(node.id, {}))
        if isinstance(node, ast.Constant):
            return {}
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            # a step of -1 (a reversal) reads consecutive elements too
            return _merge(self.deps(node.left), self.deps(node.right))
        parts = [self.deps(child) for child in ast.iter_child_nodes(node)]
        return _merge(*parts, unit=False)

    def access(self, kind: str, array: ast.AST, index: ast.AST, weight: int) -> None:
        if not isinstance(array, ast.Name) or array.id in self.local:
            return
        positions = index.elts if isinstance(index, ast.Tuple) else [index]
        self.found.append((kind, weight, [self.deps(p) for p in positions]))

    def expression(self, node: ast.AST, weight: int) -> None:
        for child in ast.walk(node):
            if isinstance(child, ast.Subscript) and isinstance(child.ctx, ast.Load):
                self.access("load", child.value, child.slice, weight)
            elif isinstance(child, ast.Call) and ast.unparse(child.func).startswith(
                    "cuda.atomic.") and len(child.args) >= 2:
                self.access("atomic", child.args[0], child.args[1], weight)

    def statements(self, body: Sequence[ast.stmt], weight: int) -> None:
        for statement in body:
            if isinstance(statement, ast.For):
                self.statements(statement.body, weight * _trips(statement.iter))
            elif isinstance(statement, (ast.If, ast.While)):
                self.expression(statement.test, weight)
                self.statements(statement.body, weight)
                self.statements(statement.orelse, weight)
            elif isinstance(statement, ast.Assign):
                self.expression(statement.value, weight)
                for target in statement.targets:
                    self.target(target, statement.value, weight)
            elif isinstance(statement, ast.AugAssign):
                self.expression(statement.value, weight)
                if isinstance(statement.target, ast.Name):
                    name = statement.target.id
                    self.env[name] = _merge(self.env.get(name, {}), self.deps(statement.value),
                                            unit=False)
                else:
                    self.target(statement.target, statement.value, weight)
            else:
                self.expression(statement, weight)

    def target(self, target: ast.AST, value: ast.AST, weight: int) -> None:
        if isinstance(target, ast.Subscript):
            self.expression(target.slice, weight)
            self.access("store", target.value, target.slice, weight)
        elif isinstance(target, ast.Name) and target.id not in self.roots:
            if isinstance(value, ast.Call) and ast.unparse(value.func).startswith(
                    ("cuda.shared.", "cuda.local.")):
                self.local.add(target.id)
            self.env[target.id] = self.deps(value)

    def cost(self, root: str) -> int:
        """What the accesses cost with ``root`` varying fastest."""
        total = 0
        for kind, weight, positions in self.found:
            moved = [p for p, deps in enumerate(positions) if root in deps]
            if not moved:
                total += weight * _SAME[kind]
            elif moved == [len(positions) - 1] and positions[-1][root]:
                total += weight * _UNIT
            else:
                total += weight * _STRIDED
        return total


def _trips(iterator: ast.AST) -> int:
    if isinstance(iterator, ast.Call) and ast.unparse(iterator.func) == "range":
        try:
            return max(1, len(range(*(ast.literal_eval(a) for a in iterator.args))))
        except (ValueError, TypeError):
            pass
    return _UNKNOWN_TRIPS


def fastest_level(lines: Sequence[str], names: Sequence[str]) -> int:
    """The position in ``names`` (a kernel's thread indices, outermost first) of the index
    that should vary fastest from lane to lane, for the accesses of the kernel body
    ``lines``: the last unless another costs less.

    >>> fastest_level(["    y[i, j] = x[i, j] * w[j, i]"], ["i", "j"])
    1
    >>> fastest_level(["    acc = 0.0",
    ...                "    for a in range(64):",
    ...                "        acc = acc + m[k, a] * c[k, a] * x[n, a]",
    ...                "    y[n, k] = acc"], ["n", "k"])
    0
    """
    if len(names) < 2 or not any(line.strip() for line in lines):
        return len(names) - 1
    accesses = _Accesses(names)
    accesses.statements(ast.parse("def _():\n" + "\n".join(lines)).body[0].body, 1)
    costs = [accesses.cost(name) for name in names]
    best = min(costs)
    return len(names) - 1 if costs[-1] == best else costs.index(best)
