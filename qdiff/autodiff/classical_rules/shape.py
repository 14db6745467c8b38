"""Derivative rules of the shape primitives (`qdiff.classical.shape`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import numpy as qnp
from ...classical.shape import (
    broadcast_in_dim_p,
    concatenate_p,
    iota_p,
    reshape_p,
    rev_p,
    slice_p,
    transpose_p,
)
from ...classical.soacs import scatter
from ...ir.primitives import get_primitive
from ...ir.tracer import bind, record, value_type
from ...ir.types import Tensor
from ..rules import def_cotangent, def_linear, def_tangent, def_zero_derivative
from ..tangents import instantiate, zeros


# Every shape op is linear in its array operand; the cotangent runs the inverse data movement.
def _reshape_transpose(ct: Any, values: list, *, shape: tuple[int, ...]) -> Any:
    return bind(reshape_p, ct, shape=value_type(values[0]).shape)


def _transpose_transpose(ct: Any, values: list, *, perm: tuple[int, ...]) -> Any:
    return bind(transpose_p, ct, perm=tuple(int(p) for p in np.argsort(perm)))


def _broadcast_transpose(ct: Any, values: list, *, shape: tuple[int, ...],
                         broadcast_dimensions: tuple[int, ...]) -> Any:
    # x̄ = Σ over the new axes and over the axes of size 1 that were repeated
    x_shape = value_type(values[0]).shape
    summed = tuple(d for d in range(len(shape)) if d not in broadcast_dimensions
                   or (x_shape[broadcast_dimensions.index(d)] == 1 and shape[d] != 1))
    total = record(get_primitive("reduce_sum"), ct, axes=summed) if summed else ct
    return bind(reshape_p, total, shape=x_shape)


def _slice_transpose(ct: Any, values: list, *, start: tuple[int, ...], limit: tuple[int, ...],
                     strides: tuple[int, ...]) -> Any:
    # x̄ = zeros with x̄[start:limit:strides] = ȳ, placed one axis at a time by a scatter
    x_shape = value_type(values[0]).shape
    result = ct
    for axis, (lo, hi, step, dim) in enumerate(zip(start, limit, strides, x_shape)):
        if (lo, hi, step) == (0, dim, 1):
            continue
        moved = qnp.moveaxis(result, axis, 0)
        rest = value_type(moved).shape[1:]
        count = value_type(moved).shape[0]
        positions = lo + step * np.arange(count, dtype=np.int64)
        placed = scatter(zeros(Tensor((dim, *rest), value_type(ct).dtype)), positions, moved)
        result = qnp.moveaxis(placed, 0, axis)
    return result


def _concatenate_tangent(values: list, tangents: list, out: Any, *, axis: int) -> Any:
    if all(t is None for t in tangents):
        return None
    filled = [instantiate(t, value_type(v)) for v, t in zip(values, tangents)]
    return bind(concatenate_p, *filled, axis=axis)


def _concatenate_cotangent(ct: Any, values: list, out: Any, active: list, *, axis: int) -> list:
    # each operand gets its own stretch of ȳ along the axis
    shape = value_type(out).shape
    pieces, offset = [], 0
    for v, flag in zip(values, active):
        size = value_type(v).shape[axis]
        if flag:
            lo = tuple(offset if a == axis else 0 for a in range(len(shape)))
            hi = tuple(offset + size if a == axis else d for a, d in enumerate(shape))
            pieces.append(bind(slice_p, ct, start=lo, limit=hi, strides=(1,) * len(shape)))
        else:
            pieces.append(None)
        offset += size
    return pieces


def_linear(reshape_p, _reshape_transpose)
def_linear(transpose_p, _transpose_transpose)
def_linear(broadcast_in_dim_p, _broadcast_transpose)
def_linear(slice_p, _slice_transpose)
def_linear(rev_p, lambda ct, values, *, axes: bind(rev_p, ct, axes=axes))
def_tangent(concatenate_p, _concatenate_tangent)
def_cotangent(concatenate_p, _concatenate_cotangent)
def_zero_derivative(iota_p)
