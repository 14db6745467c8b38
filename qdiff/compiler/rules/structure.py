"""Shape and indexing primitives: views where the layout allows, copies where it does not
(every array in generated code is C-contiguous, so ``reshape`` is free)."""

from __future__ import annotations

import math

from ...autodiff.stop_gradient import stop_gradient_p
from ...classical.indexing import (
    dynamic_slice_p,
    dynamic_update_slice_p,
    gather_p,
    unpack_p,
)
from ...classical.reductions import argmax_p, argmin_p
from ...classical.shape import (
    concatenate_p,
    reshape_p,
    rev_p,
    slice_p,
    transpose_p,
)
from ...ir.core import Eqn, Var
from ...ir.errors import QdiffError
from ..analysis import leading_block
from ..lowering import Scope, rule, shape_text


def reshape_text(scope: Scope, operand: str, source: tuple, target: tuple) -> str:
    """``operand`` (of shape ``source``) relabelled as ``target``."""
    if source == target:
        return operand
    if target == ():
        return f"{operand}.reshape(-1)[0]"
    if source == ():
        return f"np.full({shape_text(target)}, {operand})"
    return f"{operand}.reshape({shape_text(target)})"


def _bind(scope: Scope, expression: str) -> list[str]:
    out = scope.fresh()
    scope.line(f"{out} = {expression}")
    return [out]


# One-element arrays between a scalar and a dynamic slice or update (how loop reversal
# reads and writes the carries it stores) stay scalars: no allocation per iteration.
def _reads_element(eqn: Eqn, var: Var) -> bool:
    return eqn.primitive is reshape_p and eqn.params["shape"] == ()


def _writes_element(eqn: Eqn, var: Var) -> bool:
    return eqn.primitive is dynamic_update_slice_p and eqn.inputs[1] is var \
        and eqn.inputs[0] is not var


def _rows(scope: Scope, eqn: Eqn, operand: str, start: str, count: int) -> list[str]:
    """A block of ``count`` rows from ``start``: a view; one row is remembered, so that a
    reshape dropping its leading axis becomes ``operand[start]`` (no reshape call)."""
    if count == 1:
        scope.rows[eqn.outputs[0]] = (operand, start)
    return _bind(scope, f"{operand}[{start}:{start} + {count}]")


@rule(reshape_p)
def _reshape(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    source, target = eqn.inputs[0].type.shape, eqn.params["shape"]
    operand, out = eqn.inputs[0], eqn.outputs[0]
    if target == () and operand in scope.elements:
        return [scope.elements[operand]]
    if source == () and scope.only_read_by(out, _writes_element):
        scope.elements[out] = args[0]
        return [args[0]]
    if operand in scope.rows and tuple(target) == tuple(source[1:]):
        base, start = scope.rows[operand]
        return _bind(scope, f"{base}[{start}]")
    return _bind(scope, reshape_text(scope, args[0], source, target))


@rule(stop_gradient_p)
def _identity(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    return [args[0]]


@rule(transpose_p)
def _transpose(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    perm = tuple(eqn.params["perm"])
    if perm == tuple(range(len(perm))):
        return [args[0]]
    return _bind(scope, f"np.ascontiguousarray(np.transpose({args[0]}, {shape_text(perm)}))")


@rule(concatenate_p)
def _concatenate(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    return _bind(scope, f"np.concatenate(({', '.join(args)},), axis={eqn.params['axis']})")


@rule(slice_p)
def _slice(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    start, limit = eqn.params["start"], eqn.params["limit"]
    if leading_block(eqn):
        return _rows(scope, eqn, args[0], str(start[0]), limit[0] - start[0])
    parts = [f"{a}:{b}:{s}" for a, b, s in zip(start, limit, eqn.params["strides"])]
    return _bind(scope, f"{args[0]}[{', '.join(parts)}].copy()")


@rule(rev_p)
def _rev(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    ndim = eqn.inputs[0].type.ndim
    parts = ["::-1" if axis in eqn.params["axes"] else ":" for axis in range(ndim)]
    return _bind(scope, f"{args[0]}[{', '.join(parts)}].copy()")


def starts(scope: Scope, what: str, shape: tuple, sizes: tuple, exprs: list[str]) -> list[str]:
    """Checked, normalized start indices of a dynamic slice or update."""
    result = []
    for axis, (expr, dim, size) in enumerate(zip(exprs, shape, sizes)):
        code = len(scope.src.messages)
        scope.src.error(QdiffError, f"{what}: a start index on axis {axis} is out of bounds "
                                    f"for a slice of size {size} in an axis of size {dim}")
        name = scope.fresh("s")
        scope.line(f"{name} = rt.start_index({expr}, {dim}, {size}, {code})")
        result.append(name)
    return result


def block(begin: list[str], sizes: tuple) -> str:
    return ", ".join(f"{b}:{b} + {s}" for b, s in zip(begin, sizes))


@rule(dynamic_slice_p)
def _dynamic_slice(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    sizes = eqn.params["sizes"]
    begin = starts(scope, "dynamic_slice", eqn.inputs[0].type.shape, sizes, args[1:])
    if all(s == 1 for s in sizes) and scope.only_read_by(eqn.outputs[0], _reads_element):
        (element,) = _bind(scope, f"{args[0]}[{', '.join(begin)}]")
        scope.elements[eqn.outputs[0]] = element
        return [element]
    if leading_block(eqn):
        return _rows(scope, eqn, args[0], begin[0], sizes[0])
    return _bind(scope, f"{args[0]}[{block(begin, sizes)}].copy()")


@rule(dynamic_update_slice_p)
def _dynamic_update_slice(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    update = eqn.inputs[1].type
    if update.shape == ():
        return [args[1]]
    begin = starts(scope, "dynamic_update_slice", eqn.inputs[0].type.shape, update.shape,
                   args[2:])
    target = scope.writable(eqn.inputs[0])
    if eqn.inputs[1] in scope.elements:
        scope.line(f"{target}[{', '.join(begin)}] = {scope.elements[eqn.inputs[1]]}")
    else:
        scope.line(f"{target}[{block(begin, update.shape)}] = {args[1]}")
    return [target]


def _three_axes(shape: tuple, axis: int) -> str:
    return shape_text((math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])))


@rule(gather_p)
def _gather(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    x, indices = eqn.inputs[0].type, eqn.inputs[1].type
    axis = eqn.params["axis"]
    code = len(scope.src.messages)
    scope.src.error(QdiffError, f"gather: an index is out of bounds for axis {axis} with "
                                f"size {x.shape[axis]}")
    flat = f"{args[1]}.reshape(-1)" if indices.shape else f"np.full(1, {args[1]})"
    gathered = f"rt.gather({args[0]}.reshape({_three_axes(x.shape, axis)}), {flat}, {code})"
    out = eqn.outputs[0].type.shape
    return _bind(scope, reshape_text(scope, gathered, None, out) if out else f"{gathered}[0, 0, 0]")


@rule(unpack_p)
def _unpack(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    flat = scope.fresh("u")
    scope.line(f"{flat} = {args[0]}.reshape(-1)" if eqn.inputs[0].type.shape else
               f"{flat} = np.full(1, {args[0]})")
    # named now: a later in-place update of the array must not change these scalars
    names = [scope.fresh() for _ in eqn.params["indices"]]
    for name, i in zip(names, eqn.params["indices"]):
        scope.line(f"{name} = {flat}[{i}]")
    return names


@rule(argmax_p, argmin_p)
def _arg_extremum(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    shape, axis = eqn.inputs[0].type.shape, eqn.params["axis"]
    largest = eqn.primitive is argmax_p
    found = f"rt.arg_extremum({args[0]}.reshape({_three_axes(shape, axis)}), {largest})"
    out = eqn.outputs[0].type.shape
    return _bind(scope, f"{found}.reshape({shape_text(out)})" if out else f"{found}[0, 0]")
