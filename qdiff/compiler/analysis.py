"""What in-place updates may overwrite: the last use of every value and the array each
value is a view of.

Generated code updates an array in place (``dynamic_update_slice``, ``scatter``, ``hist``)
only when the array is owned (allocated by this program, or a loop carry, which the loop
protocol owns) and no later equation reads it or any view of it. That turns the O(n) copy of
an SSA update into O(update), which is what makes the stored carries of reversed loops
cheap.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ..ir.core import Eqn, Program, Var

# primitives whose compiled form returns a view of their first operand
VIEW_PRIMITIVES = {"reshape", "stop_gradient"}
# primitives whose outputs are not fresh arrays (loop and while outputs are fresh: the loop
# protocol copies any carry it does not own)
_NOT_FRESH = VIEW_PRIMITIVES | {"cond"}


def leading_block(eqn: Eqn) -> bool:
    """Whether ``eqn`` is a ``slice`` (unit strides) or ``dynamic_slice`` that keeps every
    axis but the first whole: a block of rows, which a C-contiguous array has as a
    C-contiguous view (``x[a:b]``), so it is compiled as one instead of a copy."""
    name = eqn.primitive.name
    if name not in ("slice", "dynamic_slice"):
        return False
    shape = eqn.inputs[0].type.shape
    if not shape:
        return False
    if name == "dynamic_slice":
        return tuple(eqn.params["sizes"][1:]) == tuple(shape[1:])
    start, limit, strides = eqn.params["start"], eqn.params["limit"], eqn.params["strides"]
    return all(s == 1 for s in strides) and all(
        a == 0 and b == d for a, b, d in zip(start[1:], limit[1:], shape[1:]))


def transpose_keeps_order(eqn: Eqn) -> bool:
    """Whether ``eqn`` is a ``transpose`` that moves only axes of length 1: its compiled
    form (``np.ascontiguousarray`` of the transposed view) is then a view of the operand,
    not a copy (a (1, n) array transposed is already C-contiguous)."""
    if eqn.primitive.name != "transpose":
        return False
    shape = eqn.inputs[0].type.shape
    moved = [axis for axis in eqn.params["perm"] if shape[axis] != 1]
    return moved == sorted(moved)


def returns_view(eqn: Eqn) -> bool:
    """Whether ``eqn``'s compiled form may return a view of its first operand.

    >>> import numpy as np, qdiff
    >>> [returns_view(e) for e in qdiff.trace(lambda x: (x.T, x[:1].T), np.ones((2, 3))).eqns]
    [False, True, True]
    """
    return eqn.primitive.name in VIEW_PRIMITIVES or leading_block(eqn) \
        or transpose_keeps_order(eqn)


@dataclass
class Liveness:
    """Per program: the index of each var's last reader and each var's view root."""

    last_use: dict[Var, float] = field(default_factory=dict)
    root: dict[Var, Var] = field(default_factory=dict)
    owned_roots: set[Var] = field(default_factory=set)
    root_last_use: dict[Var, float] = field(default_factory=dict)  # over a root's views

    def root_of(self, var: Var) -> Var:
        return self.root.get(var, var)

    def dead_after(self, var: Var, index: int) -> bool:
        """Whether no equation after ``index`` (nor the output) reads ``var`` or a view of it."""
        return self.root_last_use.get(self.root_of(var), -1) <= index

    def overwritable(self, var: Var, index: int) -> bool:
        return self.root_of(var) in self.owned_roots and self.dead_after(var, index)


def readers(program: Program) -> dict[Var, list[Eqn | None]]:
    """The equations of ``program`` that read each value, in program order, once per operand
    that reads it, with None for a value the program returns.

    >>> import qdiff
    >>> p = qdiff.trace(lambda x: x * x + x, 1.0)   # x: twice by the product, once by the sum
    >>> [len(r) for r in readers(p).values()]
    [3, 1, 1]
    """
    found: dict[Var, list[Eqn | None]] = {}
    for eqn in program.eqns:
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                found.setdefault(atom, []).append(eqn)
    for atom in program.outputs:
        if isinstance(atom, Var):
            found.setdefault(atom, []).append(None)
    return found


def liveness(program: Program, owned_inputs: Iterable[Var] = ()) -> Liveness:
    """Last uses and view roots of ``program``'s vars; ``owned_inputs`` are inputs the
    caller hands over for in-place use."""
    result = Liveness()
    result.owned_roots.update(owned_inputs)
    for index, eqn in enumerate(program.eqns):
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                result.last_use[atom] = index
        _note_outputs(result, eqn)
    for atom in program.outputs:
        if isinstance(atom, Var):
            result.last_use[atom] = float("inf")
    for var, last in result.last_use.items():
        root = result.root_of(var)
        result.root_last_use[root] = max(result.root_last_use.get(root, -1), last)
    return result


def _note_outputs(result: Liveness, eqn: Eqn) -> None:
    if returns_view(eqn):
        if isinstance(eqn.inputs[0], Var):
            result.root[eqn.outputs[0]] = result.root_of(eqn.inputs[0])
        # a view of a literal belongs to no one: never updated in place
    elif eqn.primitive.name not in _NOT_FRESH:
        result.owned_roots.update(eqn.outputs)

