"""Indexing primitives: dynamic_slice, dynamic_update_slice (traced start indices) and gather.

Start indices and gathered indices follow NumPy: a negative index counts from the end. An
index that is out of bounds even then is an error, never a silently clamped read.
"""

from __future__ import annotations

import numpy as np

from ..ir.errors import QdiffError, TypeCheckError
from ..ir.primitives import register_primitive
from ..ir.type_rules import int_scalar, same_dtype, tensor
from ..ir.types import Tensor, Type


def _start_indices(starts: tuple[np.ndarray, ...], shape: tuple[int, ...],
                   sizes: tuple[int, ...], what: str) -> tuple[int, ...]:
    result = []
    for axis, (start, dim, size) in enumerate(zip(starts, shape, sizes)):
        s = int(start)
        if s < 0:
            s += dim
        if not 0 <= s <= dim - size:
            raise QdiffError(
                f"{what}: start index {int(start)} on axis {axis} is out of bounds for a "
                f"slice of size {size} in an axis of size {dim}")
        result.append(s)
    return tuple(result)


# dynamic_slice[sizes](x, *starts) = x[starts[0]:starts[0]+sizes[0], ...]
def _dynamic_slice_rule(x: Type, *starts: Type, sizes: tuple[int, ...]) -> tuple[Type, ...]:
    t = tensor(x, "operand")
    if len(starts) != t.ndim or len(sizes) != t.ndim:
        raise TypeCheckError(f"needs {t.ndim} start indices and sizes for {t.short()}")
    for i, s in enumerate(starts):
        int_scalar(s, f"start index {i}")
    if any(not 0 <= size <= dim for size, dim in zip(sizes, t.shape)):
        raise TypeCheckError(f"slice sizes {sizes} do not fit {t.short()}")
    return (t.with_shape(tuple(sizes)),)


dynamic_slice_p = register_primitive("dynamic_slice", _dynamic_slice_rule)


@dynamic_slice_p.def_impl("numpy")
def _dynamic_slice_impl(x: np.ndarray, *starts: np.ndarray, sizes: tuple[int, ...]) -> np.ndarray:
    begin = _start_indices(starts, x.shape, sizes, "dynamic_slice")
    return np.array(x[tuple(slice(b, b + s) for b, s in zip(begin, sizes))])


# dynamic_update_slice(x, update, *starts): x with the block at `starts` replaced by `update`.
def _dynamic_update_slice_rule(x: Type, update: Type, *starts: Type) -> tuple[Type, ...]:
    t, u = tensor(x, "operand"), tensor(update, "update")
    same_dtype([t, u])
    if u.ndim != t.ndim or any(a > b for a, b in zip(u.shape, t.shape)):
        raise TypeCheckError(f"update {u.short()} does not fit in {t.short()}")
    if len(starts) != t.ndim:
        raise TypeCheckError(f"needs {t.ndim} start indices for {t.short()}")
    for i, s in enumerate(starts):
        int_scalar(s, f"start index {i}")
    return (t,)


dynamic_update_slice_p = register_primitive("dynamic_update_slice", _dynamic_update_slice_rule)


@dynamic_update_slice_p.def_impl("numpy")
def _dynamic_update_slice_impl(x: np.ndarray, update: np.ndarray,
                               *starts: np.ndarray) -> np.ndarray:
    begin = _start_indices(starts, x.shape, update.shape, "dynamic_update_slice")
    result = np.array(x)
    result[tuple(slice(b, b + s) for b, s in zip(begin, update.shape))] = update
    return result


# gather[axis](x, indices) = take(x, indices, axis): the result's axis `axis` is replaced by
# the shape of `indices`.
def _gather_rule(x: Type, indices: Type, *, axis: int) -> tuple[Type, ...]:
    t, i = tensor(x, "operand"), tensor(indices, "indices")
    if i.np_dtype.kind not in "iu":
        raise TypeCheckError(f"indices must be integers, got {i.short()}")
    if not 0 <= axis < t.ndim:
        raise TypeCheckError(f"axis {axis} is out of range for {t.short()}")
    return (Tensor(t.shape[:axis] + i.shape + t.shape[axis + 1:], t.dtype),)


gather_p = register_primitive("gather", _gather_rule)


@gather_p.def_impl("numpy")
def _gather_impl(x: np.ndarray, indices: np.ndarray, *, axis: int) -> np.ndarray:
    size = x.shape[axis]
    bad = (indices < -size) | (indices >= size)
    if np.any(bad):
        raise QdiffError(
            f"gather: index {int(indices[bad].flat[0])} is out of bounds for axis {axis} "
            f"with size {size}")
    return np.take(x, indices, axis=axis)


# unpack[indices](x) = (x.flat[i] for i in indices): many scalar elements in one equation (the
# `unpack_scalars` pass rewrites per-element slice/reshape chains into it: one record and one
# reverse rule for every gate angle read from a parameter array).
def _unpack_rule(x: Type, *, indices: tuple[int, ...]) -> tuple[Type, ...]:
    t = tensor(x, "operand")
    if any(not 0 <= i < t.size for i in indices):
        raise TypeCheckError(f"unpack: an index of {indices} is out of range for {t.short()}")
    return tuple(Tensor((), t.dtype) for _ in indices)


unpack_p = register_primitive("unpack", _unpack_rule, multiple_results=True)


@unpack_p.def_impl("numpy")
def _unpack_impl(x: np.ndarray, *, indices: tuple[int, ...]) -> list[np.ndarray]:
    flat = np.asarray(x).reshape(-1)
    return [flat[i] for i in indices]
