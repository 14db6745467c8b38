"""Shape primitives: reshape, transpose, broadcast_in_dim, concatenate, slice, rev, iota."""

from __future__ import annotations

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.primitives import register_primitive
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
