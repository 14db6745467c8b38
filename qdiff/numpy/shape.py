"""Shape functions of `qdiff.numpy`: reshape, transpose, broadcast_to, concatenate, stack, ..."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.tracer import as_operand
from ._core import apply, broadcast_to_shape, promote, shape_of


def reshape(x: Any, shape: int | Sequence[int]) -> Any:
    """``x`` with a new shape of the same size; one entry may be -1.

    >>> import qdiff.numpy as qnp
    >>> qnp.reshape(np.arange(6), (2, -1)).shape
    (2, 3)
    """
    x = as_operand(x)
    old = shape_of(x)
    new = [int(shape)] if isinstance(shape, (int, np.integer)) else [int(d) for d in shape]
    size = int(np.prod(old, dtype=np.int64))
    if new.count(-1) > 1:
        raise TypeCheckError(f"reshape: only one dimension may be -1, got {tuple(new)}")
    if -1 in new:
        known = int(np.prod([d for d in new if d != -1], dtype=np.int64))
        if known == 0 or size % known:
            raise TypeCheckError(f"reshape: cannot reshape {old} into {tuple(new)}")
        new[new.index(-1)] = size // known
    if tuple(new) == tuple(old):
        return x
    return apply("reshape", x, shape=tuple(new))


def transpose(x: Any, axes: Sequence[int] | None = None) -> Any:
    """Permute the axes (reverse them by default)."""
    x = as_operand(x)
    ndim = len(shape_of(x))
    perm = tuple(reversed(range(ndim))) if axes is None else tuple(int(a) % ndim for a in axes)
    if perm == tuple(range(ndim)):
        return x
    return apply("transpose", x, perm=perm)


def swapaxes(x: Any, axis1: int, axis2: int) -> Any:
    """Exchange two axes."""
    perm = list(range(len(shape_of(x))))
    perm[axis1], perm[axis2] = perm[axis2], perm[axis1]
    return transpose(x, perm)


def _axis_list(axes: int | Sequence[int], ndim: int, name: str) -> list[int]:
    """``axes`` (one or several, negative counting from the end) as distinct axes >= 0."""
    listed = [axes] if isinstance(axes, (int, np.integer)) else list(axes)
    for a in listed:
        if not -ndim <= a < ndim:
            raise TypeCheckError(f"{name}: axis {a} is out of range for {ndim} dimensions")
    found = [int(a) % ndim for a in listed]
    if len(set(found)) != len(found):
        raise TypeCheckError(f"{name}: repeated axis in {listed}")
    return found


def moveaxis(x: Any, source: int | Sequence[int], destination: int | Sequence[int]) -> Any:
    """Move axes to new positions; the other axes keep their order (NumPy's moveaxis).

    >>> import qdiff.numpy as qnp
    >>> qnp.moveaxis(np.zeros((2, 3, 4)), [0, 1], [-1, -2]).shape
    (4, 3, 2)
    """
    ndim = len(shape_of(x))
    sources = _axis_list(source, ndim, "moveaxis")
    destinations = _axis_list(destination, ndim, "moveaxis")
    if len(sources) != len(destinations):
        raise TypeCheckError("moveaxis: source and destination need the same number of axes")
    perm = [a for a in range(ndim) if a not in sources]
    for dest, src in sorted(zip(destinations, sources)):
        perm.insert(dest, src)
    return transpose(x, perm)


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    """``x`` broadcast to ``shape`` by NumPy's rules."""
    return broadcast_to_shape(as_operand(x), tuple(int(d) for d in shape))


def expand_dims(x: Any, axis: int | Sequence[int]) -> Any:
    """Insert size-1 axes at ``axis``."""
    shape = list(shape_of(x))
    axes = [axis] if isinstance(axis, (int, np.integer)) else list(axis)
    ndim = len(shape) + len(axes)
    for a in sorted(int(a) % ndim for a in axes):
        shape.insert(a, 1)
    return reshape(x, tuple(shape))


def squeeze(x: Any, axis: int | Sequence[int] | None = None) -> Any:
    """Remove size-1 axes (all of them, or those named)."""
    shape = shape_of(x)
    if axis is None:
        axes = {i for i, d in enumerate(shape) if d == 1}
    else:
        axes = {int(a) % len(shape) for a in ([axis] if isinstance(axis, int) else axis)}
        if any(shape[a] != 1 for a in axes):
            raise TypeCheckError(f"squeeze: axis {sorted(axes)} of shape {shape} is not 1")
    return reshape(x, tuple(d for i, d in enumerate(shape) if i not in axes))


def ravel(x: Any) -> Any:
    """``x`` flattened to one axis."""
    return reshape(x, (-1,))


def concatenate(arrays: Sequence[Any], axis: int = 0) -> Any:
    """Join arrays along an existing axis.

    >>> import qdiff.numpy as qnp
    >>> qnp.concatenate([np.ones(2), np.zeros(1)]).tolist()
    [1.0, 1.0, 0.0]
    """
    if not arrays:
        raise TypeCheckError("concatenate needs at least one array")
    operands = [as_operand(a) for a in arrays]
    dtype = np.result_type(*(o.dtype for o in operands))
    operands = [as_operand(o, dtype) for o in operands]
    ndim = len(shape_of(operands[0]))
    if ndim == 0:
        raise TypeCheckError("concatenate: zero-dimensional arrays cannot be concatenated")
    if len(operands) == 1:
        return operands[0]
    return apply("concatenate", *operands, axis=int(axis) % ndim)


def stack(arrays: Sequence[Any], axis: int = 0) -> Any:
    """Join arrays of one shape along a new axis."""
    if not arrays:
        raise TypeCheckError("stack needs at least one array")
    operands, shape = promote("stack", *arrays, keep_scalars=False)
    if any(shape_of(a) != shape_of(arrays_i) for a, arrays_i in zip(operands, arrays)):
        raise TypeCheckError(
            f"stack: arrays must share one shape, got {[tuple(shape_of(a)) for a in arrays]}")
    ndim = len(shape) + 1
    axis = int(axis) % ndim
    return concatenate([expand_dims(o, axis) for o in operands], axis)


def hstack(arrays: Sequence[Any]) -> Any:
    """Concatenate along the second axis (the first for 1-d arrays)."""
    return concatenate(arrays, 0 if len(shape_of(arrays[0])) == 1 else 1)


def vstack(arrays: Sequence[Any]) -> Any:
    """Stack 1-d arrays as rows, or concatenate along the first axis."""
    return concatenate([reshape(a, (1, -1)) if len(shape_of(a)) == 1 else a for a in arrays])
