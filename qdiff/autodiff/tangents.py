"""What derivative rules share: symbolic zeros, zero arrays, accumulation, un-broadcasting.

A tangent or cotangent is either a value or ``None``, the symbolic zero: it costs nothing,
and rules skip the work it would feed. Only float and complex values carry derivatives;
integer and bool values never do.

>>> add_tangents(None, 2.0)
2.0
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import numpy as qnp
from ..ir.core import Program, Var
from ..ir.primitives import get_primitive
from ..ir.tracer import record, value_type
from ..ir.types import Tensor, Type


def is_differentiable(t: Type) -> bool:
    """Whether values of type ``t`` carry derivatives (float or complex tensors).

    >>> is_differentiable(Tensor((2,), "float64")), is_differentiable(Tensor((), "int64"))
    (True, False)
    """
    return isinstance(t, Tensor) and t.np_dtype.kind in "fc"


def zeros(t: Tensor) -> Any:
    """A zero array of type ``t``; large ones are recorded as a broadcast, not a literal.

    >>> zeros(Tensor((2,), "float64")).tolist()
    [0.0, 0.0]
    """
    scalar = np.zeros((), t.np_dtype)
    if t.shape == ():
        return scalar
    return record(get_primitive("broadcast_in_dim"), scalar, shape=t.shape,
                  broadcast_dimensions=())


def instantiate(value: Any, t: Type) -> Any:
    """``value``, with the symbolic zero made a real zero array of type ``t``."""
    return zeros(t) if value is None else value


def add_tangents(a: Any, b: Any) -> Any:
    """``a + b`` where either may be the symbolic zero ``None``."""
    if a is None:
        return b
    if b is None:
        return a
    return qnp.add(a, b)


def sum_to_shape(value: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``value`` down to ``shape``: the adjoint of an implicit broadcast.

    Elementwise primitives broadcast rank-0 operands, so a rank-0 operand's cotangent is
    the sum of the output's cotangent.

    >>> sum_to_shape(np.ones(3), ()).item()
    3.0
    """
    if value is None:
        return None
    have = value_type(value).shape
    if have == tuple(shape):
        return value
    if shape != ():
        raise ValueError(f"cannot sum shape {have} down to {shape}")
    return record(get_primitive("reduce_sum"), value, axes=tuple(range(len(have))))


def broadcast_to(value: Any, shape: tuple[int, ...]) -> Any:
    """``value`` (rank 0 or already of ``shape``) as an array of ``shape``."""
    have = value_type(value).shape
    if have == tuple(shape):
        return value
    return record(get_primitive("broadcast_in_dim"), value, shape=tuple(shape),
                  broadcast_dimensions=())


def cast_like(value: Any, t: Tensor) -> Any:
    """``value`` converted to ``t``'s dtype (real part for a complex value into a real type)."""
    if isinstance(value, np.ndarray) and value.dtype == t.np_dtype:  # eager, already right
        return value
    have = value_type(value)
    if have.dtype == t.dtype:
        return value
    if have.np_dtype.kind == "c" and t.np_dtype.kind != "c":
        value = record(get_primitive("real"), value)
        if value_type(value).dtype == t.dtype:
            return value
    return record(get_primitive("convert"), value, dtype=t.dtype)


def reorder_inputs(program: Program, order: Sequence[int]) -> Program:
    """``program`` with its inputs permuted: new input k is old input ``order[k]``."""
    if sorted(order) != list(range(len(program.inputs))):
        raise ValueError(f"{list(order)} is not a permutation of {len(program.inputs)} inputs")
    inputs = tuple(program.inputs[k] for k in order)
    return Program(inputs, program.eqns, program.outputs, name=program.name)


def interleave_order(groups: Sequence[int], tangent_groups: Sequence[int]) -> list[int]:
    """The input order that puts each group's tangents right after the group.

    A transformed body takes ``(*g0, *g1, ..., *t0, *t1, ...)``; combinators want
    ``(*g0, *t0, *g1, *t1, ...)``. ``groups[k]`` counts the primal inputs of group k,
    ``tangent_groups[k]`` its tangent inputs.

    >>> interleave_order([1, 2], [1, 1])
    [0, 3, 1, 2, 4]
    """
    primal_total = sum(groups)
    order: list[int] = []
    primal_at, tangent_at = 0, primal_total
    for size, tangent_size in zip(groups, tangent_groups):
        order += range(primal_at, primal_at + size)
        order += range(tangent_at, tangent_at + tangent_size)
        primal_at += size
        tangent_at += tangent_size
    return order


def var_types(vars_: Sequence[Var]) -> list[Type]:
    """The types of ``vars_``."""
    return [v.type for v in vars_]
