"""Shape primitives: reshape, transpose, broadcast_in_dim, concatenate, slice, rev, iota."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autodiff.rules import def_cotangent, def_linear, def_tangent, def_zero_derivative
from ..autodiff.tangents import instantiate, zeros
from ..ir.errors import TypeCheckError
from ..ir.primitives import get_primitive, register_primitive
from ..ir.tracer import bind, record, value_type
from ..ir.type_rules import same_dtype, tensor
from ..ir.types import Tensor, Type, canonical_dtype


def _reshape_rule(x: Type, *, shape: tuple[int, ...]) -> tuple[Type, ...]:
    t = tensor(x, "operand")
    if int(np.prod(shape, dtype=np.int64)) != t.size:
        raise TypeCheckError(f"cannot reshape {t.short()} ({t.size} elements) to {shape}")
    return (t.with_shape(tuple(shape)),)


reshape_p = register_primitive("reshape", _reshape_rule)
reshape_p.def_impl("numpy")(lambda x, *, shape: np.reshape(x, shape))


def _transpose_rule(x: Type, *, perm: tuple[int, ...]) -> tuple[Type, ...]:
    t = tensor(x, "operand")
    if sorted(perm) != list(range(t.ndim)):
        raise TypeCheckError(f"{perm} is not a permutation of the axes of {t.short()}")
    return (t.with_shape(tuple(t.shape[p] for p in perm)),)


transpose_p = register_primitive("transpose", _transpose_rule)
transpose_p.def_impl("numpy")(lambda x, *, perm: np.ascontiguousarray(np.transpose(x, perm)))


# broadcast_in_dim[shape, dims](x): operand axis i becomes result axis dims[i]; its size is
# either the result's or 1 (repeated).
def _broadcast_rule(x: Type, *, shape: tuple[int, ...],
                    broadcast_dimensions: tuple[int, ...]) -> tuple[Type, ...]:
    t = tensor(x, "operand")
    dims = broadcast_dimensions
    if len(dims) != t.ndim or list(dims) != sorted(set(dims)) or any(
            not 0 <= d < len(shape) for d in dims):
        raise TypeCheckError(
            f"broadcast_dimensions {dims} do not map {t.short()} into shape {shape}")
    for axis, d in enumerate(dims):
        if t.shape[axis] not in (1, shape[d]):
            raise TypeCheckError(f"cannot broadcast {t.short()} to shape {tuple(shape)}")
    return (t.with_shape(tuple(shape)),)


broadcast_in_dim_p = register_primitive("broadcast_in_dim", _broadcast_rule)


@broadcast_in_dim_p.def_impl("numpy")
def _broadcast_impl(x: np.ndarray, *, shape: tuple[int, ...],
                    broadcast_dimensions: tuple[int, ...]) -> np.ndarray:
    expanded = [1] * len(shape)
    for axis, d in enumerate(broadcast_dimensions):
        expanded[d] = x.shape[axis]
    return np.ascontiguousarray(np.broadcast_to(np.reshape(x, expanded), shape))


def _concatenate_rule(*xs: Type, axis: int) -> tuple[Type, ...]:
    ts = [tensor(x, f"operand {i}") for i, x in enumerate(xs)]
    if not ts:
        raise TypeCheckError("needs at least one operand")
    dtype = same_dtype(ts)
    first = ts[0]
    if not 0 <= axis < first.ndim:
        raise TypeCheckError(f"axis {axis} is out of range for {first.short()}")
    for t in ts:
        if t.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(t.shape, first.shape)) if i != axis):
            raise TypeCheckError(
                f"shapes {' and '.join(str(u.shape) for u in ts)} differ off axis {axis}")
    shape = list(first.shape)
    shape[axis] = sum(t.shape[axis] for t in ts)
    return (Tensor(tuple(shape), dtype),)


concatenate_p = register_primitive("concatenate", _concatenate_rule)
concatenate_p.def_impl("numpy")(lambda *xs, axis: np.concatenate(xs, axis=axis))


# slice[start, limit, strides](x) = x[start:limit:strides] per axis (positive strides).
def _slice_rule(x: Type, *, start: tuple[int, ...], limit: tuple[int, ...],
                strides: tuple[int, ...]) -> tuple[Type, ...]:
    t = tensor(x, "operand")
    if not len(start) == len(limit) == len(strides) == t.ndim:
        raise TypeCheckError(f"slice bounds {start}:{limit}:{strides} do not fit {t.short()}")
    shape = []
    for lo, hi, step, size in zip(start, limit, strides, t.shape):
        if not (0 <= lo <= hi <= size and step >= 1):
            raise TypeCheckError(f"slice {lo}:{hi}:{step} is out of bounds for size {size}")
        shape.append(max(0, -(-(hi - lo) // step)))
    return (t.with_shape(tuple(shape)),)


slice_p = register_primitive("slice", _slice_rule)


@slice_p.def_impl("numpy")
def _slice_impl(x: np.ndarray, *, start, limit, strides) -> np.ndarray:
    return np.ascontiguousarray(x[tuple(slice(a, b, s) for a, b, s in zip(start, limit, strides))])


def _rev_rule(x: Type, *, axes: tuple[int, ...]) -> tuple[Type, ...]:
    t = tensor(x, "operand")
    if any(not 0 <= a < t.ndim for a in axes):
        raise TypeCheckError(f"axes {axes} are out of range for {t.short()}")
    return (t,)


rev_p = register_primitive("rev", _rev_rule)
rev_p.def_impl("numpy")(lambda x, *, axes: np.ascontiguousarray(np.flip(x, axis=tuple(axes))))


# iota[shape, dimension, dtype]() = the index along `dimension`, broadcast to `shape`.
def _iota_rule(*, shape: tuple[int, ...], dimension: int, dtype: str) -> tuple[Type, ...]:
    if not 0 <= dimension < len(shape):
        raise TypeCheckError(f"dimension {dimension} is out of range for shape {shape}")
    return (Tensor(tuple(shape), canonical_dtype(dtype)),)


iota_p = register_primitive("iota", _iota_rule)


@iota_p.def_impl("numpy")
def _iota_impl(*, shape, dimension, dtype) -> np.ndarray:
    index = np.arange(shape[dimension], dtype=dtype)
    view = [1] * len(shape)
    view[dimension] = shape[dimension]
    return np.ascontiguousarray(np.broadcast_to(index.reshape(view), shape))


# ------------------------------------------------------------------------- derivative rules
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
    from .. import numpy as qnp
    from .soacs import scatter

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
