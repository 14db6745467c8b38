"""Arguments and outputs of the programs the differentiation API is given.

The API (`qdiff.transforms`) and the whole-program rules (`whole_program`) both pick the
differentiated arguments (``argnums``), flag their leaves and give results the structure of
the arguments or outputs: one set of helpers serves both.

>>> import qdiff
>>> p = qdiff.trace(lambda x, n: x[0] * x[1] * n, (1.0, 2.0), 3)
>>> argnum_tuple(-2, p, "grad"), wrt_flags(p, (0,), "grad")
((0,), [True, True, False])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir import pytree
from ..ir.core import Program
from ..ir.errors import QdiffError
from ..ir.program_function import ProgramFunction
from ..ir.tracer import current_builder, trace, trace_closed
from .tangents import is_differentiable

Function = Program | ProgramFunction | Callable[..., Any]
ArgNums = int | Sequence[int]


def as_program(f: Function, args: Sequence[Any]) -> Program:
    """``f`` as a Program traced at ``args`` (a Program is returned as is)."""
    if isinstance(f, Program):
        return f
    if isinstance(f, ProgramFunction):
        return f.trace(*args)
    if not callable(f):
        raise QdiffError(f"cannot differentiate {f!r}: pass a Program or a function")
    return trace(f, *args)


def as_closed_program(f: Function, args: Sequence[Any]) -> tuple[Program, list[Any]]:
    """``f`` as a Program traced at ``args``, and the traced values of enclosing traces it
    reads (`trace_closed`): they are the program's trailing inputs, not differentiated
    here, and the caller passes them after ``args``. Only a function called inside another
    trace can read such values; elsewhere this is `as_program` (cached per signature).
    """
    if isinstance(f, Program):
        return f, []
    if not callable(f):
        raise QdiffError(f"cannot differentiate {f!r}: pass a Program or a function")
    if isinstance(f, ProgramFunction) and current_builder() is None:
        return f.trace(*args), []
    return trace_closed(f, *args)


def arg_trees(program: Program) -> list[tuple]:
    """The tree of each argument of ``program`` (a closure argument is not one of them)."""
    if program.in_tree is None:
        return [pytree.LEAF] * len(program.inputs)
    trees = list(program.in_tree[1])
    return trees[:-1] if trees and pytree.is_closure(trees[-1]) else trees


def leaf_ranges(program: Program) -> list[range]:
    ranges, start = [], 0
    for tree in arg_trees(program):
        count = pytree.num_leaves(tree)
        ranges.append(range(start, start + count))
        start += count
    return ranges


def argnum_tuple(argnums: ArgNums, program: Program, what: str) -> tuple[int, ...]:
    numbers = (argnums,) if isinstance(argnums, (int, np.integer)) else tuple(argnums)
    count = len(arg_trees(program))
    for k in numbers:
        if not -count <= k < count:
            raise QdiffError(f"{what}: argnums {k} is out of range for {count} arguments")
    return tuple(int(k) % count for k in numbers)


def wrt_flags(program: Program, argnums: tuple[int, ...], what: str) -> list[bool]:
    flags = [False] * len(program.inputs)
    for k in argnums:
        for leaf in leaf_ranges(program)[k]:
            t = program.inputs[leaf].type
            if not is_differentiable(t):
                raise QdiffError(
                    f"{what}: argument {k} holds a {t.short()} value; only float and complex "
                    "arguments can be differentiated (pass argnums to pick others)")
            flags[leaf] = True
    return flags


def wrt_tree(program: Program, argnums: ArgNums, numbers: tuple[int, ...]) -> tuple:
    trees = [arg_trees(program)[k] for k in numbers]
    return trees[0] if isinstance(argnums, (int, np.integer)) else ("tuple", tuple(trees))


def unflatten_outputs(program: Program, leaves: list[Any]) -> Any:
    if program.out_tree is None:
        return leaves[0] if len(leaves) == 1 else tuple(leaves)
    return pytree.unflatten(program.out_tree, leaves)


def output_leaves(program: Program, value: Any) -> list[Any]:
    if program.out_tree is None:
        return list(value) if len(program.outputs) > 1 else [value]
    leaves, tree = pytree.flatten(value)
    if tree != program.out_tree:
        raise QdiffError("vjp: the cotangent must have the structure of the function's output")
    return leaves


# --------------------------------------------------------------------------------- jacobians
