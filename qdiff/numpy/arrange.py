"""Rearranging functions of `qdiff.numpy`: roll, repeat, tile, take_along_axis, cross.

All are built from slices, concatenation, broadcasting and gathers with static index
arrays (or the caller's traced indices), so they differentiate through those primitives.
Shifts, repeat counts and tile counts are static, as shapes depend on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.tracer import Tracer, as_operand
from ._core import broadcast_to_shape, promote, shape_of
from .elementwise import multiply, subtract
from .indexing import getitem, take
from .shape import concatenate, moveaxis, reshape, stack


def _static_ints(value: Any, name: str, what: str) -> np.ndarray:
    if isinstance(value, Tracer):
        raise TypeCheckError(
            f"{name}: {what} must be static (Python ints or a NumPy array), not a traced "
            "value, because the result's layout depends on it")
    values = np.asarray(value)
    if values.dtype.kind not in "iu" and values.size:
        raise TypeCheckError(f"{name}: {what} must be integers, got {values.dtype}")
    return values.astype(np.int64)


def roll(x: Any, shift: int | Sequence[int], axis: int | Sequence[int] | None = None) -> Any:
    """Elements shifted along ``axis`` (the flattened array when None), wrapping around.

    >>> import qdiff.numpy as qnp
    >>> qnp.roll(np.arange(5), 2).tolist()
    [3, 4, 0, 1, 2]
    """
    x = as_operand(x)
    shifts = _static_ints(shift, "roll", "shift")
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), int(shifts.sum()), 0), shape_of(x))
    axes = np.atleast_1d(_static_ints(axis, "roll", "axis"))
    shifts, axes = np.broadcast_arrays(np.atleast_1d(shifts), axes)
    shape = shape_of(x)
    for s, a in zip(shifts, axes):
        if not -len(shape) <= a < len(shape):
            raise TypeCheckError(f"roll: axis {a} is out of range for {len(shape)} dimensions")
        a = int(a) % len(shape)
        n = shape[a]
        s = int(s) % n if n else 0
        if s:
            head = (slice(None),) * a
            x = concatenate([getitem(x, head + (slice(n - s, None),)),
                             getitem(x, head + (slice(None, n - s),))], axis=a)
    return x


def repeat(x: Any, repeats: int | Sequence[int], axis: int | None = None) -> Any:
    """Each element repeated ``repeats`` times along ``axis`` (flattened when None).

    >>> import qdiff.numpy as qnp
    >>> qnp.repeat(np.array([[1, 2], [3, 4]]), [1, 2], axis=0).tolist()
    [[1, 2], [3, 4], [3, 4]]
    """
    x = as_operand(x)
    counts = _static_ints(repeats, "repeat", "repeats")
    if np.any(counts < 0):
        raise TypeCheckError(f"repeat: repeats must be non-negative, got {counts.tolist()}")
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    ndim = len(shape_of(x))
    if not -ndim <= axis < ndim:
        raise TypeCheckError(f"repeat: axis {axis} is out of range for {ndim} dimensions")
    n = shape_of(x)[axis]
    if counts.ndim > 1 or (counts.ndim == 1 and counts.size not in (1, n)):
        raise TypeCheckError(f"repeat: {counts.size} repeat counts for an axis of length {n}")
    return take(x, np.repeat(np.arange(n), counts), axis=axis)


def tile(x: Any, reps: int | Sequence[int]) -> Any:
    """``x`` repeated ``reps`` times along each axis (NumPy's tile).

    >>> import qdiff.numpy as qnp
    >>> qnp.tile(np.array([1, 2]), (2, 2)).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    x = as_operand(x)
    counts = [int(r) for r in np.atleast_1d(_static_ints(reps, "tile", "reps"))]
    if any(r < 0 for r in counts):
        raise TypeCheckError(f"tile: reps must be non-negative, got {counts}")
    shape = list(shape_of(x))
    ndim = max(len(shape), len(counts))
    shape = [1] * (ndim - len(shape)) + shape
    counts = [1] * (ndim - len(counts)) + counts
    # x as (1, s0, 1, s1, ...), broadcast to (r0, s0, r1, s1, ...), merged pairwise
    spread = reshape(x, tuple(d for s in shape for d in (1, s)))
    spread = broadcast_to_shape(spread, tuple(d for r, s in zip(counts, shape) for d in (r, s)))
    return reshape(spread, tuple(r * s for r, s in zip(counts, shape)))


def take_along_axis(x: Any, indices: Any, axis: int | None) -> Any:
    """Elements of ``x`` at ``indices`` along ``axis``, matched over the other axes
    (NumPy's take_along_axis; ``indices`` may be traced, as from ``argsort``-like code).

    >>> import qdiff.numpy as qnp
    >>> qnp.take_along_axis(np.array([[10, 30], [40, 20]]), np.array([[1], [0]]), 1).tolist()
    [[30], [40]]
    """
    x = as_operand(x)
    indices = as_operand(indices)
    if indices.dtype.kind not in "iu":
        raise TypeCheckError(f"take_along_axis: indices must be integers, got {indices.dtype}")
    if axis is None:
        if len(shape_of(indices)) != 1:
            raise TypeCheckError("take_along_axis: with axis=None the indices must be 1-d")
        return take(x, indices)
    shape, index_shape = shape_of(x), shape_of(indices)
    ndim = len(shape)
    if len(index_shape) != ndim:
        raise TypeCheckError(f"take_along_axis: indices {index_shape} and array {shape} "
                             "need the same number of dimensions")
    if not -ndim <= axis < ndim:
        raise TypeCheckError(f"take_along_axis: axis {axis} is out of range for {ndim} "
                             "dimensions")
    axis = int(axis) % ndim
    entries = []
    for a, d in enumerate(shape):
        if a == axis:
            entries.append(indices)
        else:
            entries.append(np.arange(d).reshape([-1 if b == a else 1 for b in range(ndim)]))
    return getitem(x, tuple(entries))


def cross(a: Any, b: Any, axis: int = -1) -> Any:
    """The cross product of 3-vectors along ``axis`` (broadcasting the other axes).

    >>> import qdiff.numpy as qnp
    >>> qnp.cross(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])).tolist()
    [0.0, 0.0, 1.0]
    """
    (a, b), _ = promote("cross", as_operand(a), as_operand(b), keep_scalars=False)
    shape = shape_of(a)
    if not shape or shape[axis] != 3:
        raise TypeCheckError(
            f"cross: vectors along axis {axis} must have 3 components, got shape {shape}")
    a, b = moveaxis(a, axis, -1), moveaxis(b, axis, -1)
    comps = [(1, 2), (2, 0), (0, 1)]
    out = [subtract(multiply(a[..., i], b[..., j]), multiply(a[..., j], b[..., i]))
           for i, j in comps]
    return stack(out, axis=axis)
