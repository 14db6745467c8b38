"""Triangles and diagonals of `qdiff.numpy`: triu, tril, their index functions, diag,
diagonal and trace.

Triangles are a `where` with a static mask; diagonals are gathers with static indices, and
`diag` of a vector scatters it into a zero matrix: all differentiate through those.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.tracer import as_operand
from ._core import shape_of
from .creation import zeros
from .elementwise import where
from .indexing import getitem
from .reductions import sum as _sum
from .shape import moveaxis


def _triangle(x: Any, k: int, lower: bool, name: str) -> Any:
    x = as_operand(x)
    shape = shape_of(x)
    if len(shape) < 2:
        raise TypeCheckError(f"{name} needs an array of at least 2 dimensions, got {shape}")
    keep = np.tri(shape[-2], shape[-1], k, dtype=bool)
    if not lower:
        keep = ~np.tri(shape[-2], shape[-1], k - 1, dtype=bool)
    return where(keep, x, np.zeros((), x.dtype))


def tril(x: Any, k: int = 0) -> Any:
    """``x`` with the elements above the ``k``-th diagonal zeroed (last two axes).

    >>> import qdiff.numpy as qnp
    >>> qnp.tril(np.ones((2, 3)), k=1).tolist()
    [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    """
    return _triangle(x, k, True, "tril")


def triu(x: Any, k: int = 0) -> Any:
    """``x`` with the elements below the ``k``-th diagonal zeroed (last two axes).

    >>> import qdiff.numpy as qnp
    >>> qnp.triu(np.ones((2, 2))).tolist()
    [[1.0, 1.0], [0.0, 1.0]]
    """
    return _triangle(x, k, False, "triu")


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the lower triangle of an ``n`` by ``m`` matrix (static).

    >>> import qdiff.numpy as qnp
    >>> [i.tolist() for i in qnp.tril_indices(2)]
    [[0, 1, 1], [0, 0, 1]]
    """
    return np.tril_indices(n, k, m)


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices of the upper triangle of an ``n`` by ``m`` matrix (static).

    >>> import qdiff.numpy as qnp
    >>> [i.tolist() for i in qnp.triu_indices(2)]
    [[0, 0, 1], [0, 1, 1]]
    """
    return np.triu_indices(n, k, m)


def _diagonal_positions(rows: int, cols: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    length = max(0, min(rows + min(offset, 0), cols - max(offset, 0)))
    i = np.arange(length) + max(-offset, 0)
    return i, i + offset


def diagonal(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    """The ``offset``-th diagonal over ``axis1`` and ``axis2``, as the last axis.

    >>> import qdiff.numpy as qnp
    >>> qnp.diagonal(np.arange(6).reshape(2, 3), offset=1).tolist()
    [1, 5]
    """
    x = as_operand(x)
    ndim = len(shape_of(x))
    if ndim < 2:
        raise TypeCheckError(f"diagonal needs at least 2 dimensions, got {shape_of(x)}")
    for a in (axis1, axis2):
        if not -ndim <= a < ndim:
            raise TypeCheckError(f"diagonal: axis {a} is out of range for {ndim} dimensions")
    if int(axis1) % ndim == int(axis2) % ndim:
        raise TypeCheckError("diagonal: axis1 and axis2 cannot be the same")
    x = moveaxis(x, [axis1, axis2], [-2, -1])
    rows, cols = shape_of(x)[-2:]
    i, j = _diagonal_positions(rows, cols, int(offset))
    return getitem(x, (Ellipsis, i, j))


def trace(x: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None) -> Any:
    """The sum along a diagonal (NumPy's trace, summed in NumPy's accumulator dtype).

    >>> import qdiff.numpy as qnp
    >>> int(qnp.trace(np.arange(9).reshape(3, 3)))
    12
    """
    return _sum(diagonal(x, offset, axis1, axis2), axis=-1, dtype=dtype)


def diag(v: Any, k: int = 0) -> Any:
    """A square matrix with the vector ``v`` on its ``k``-th diagonal, or the ``k``-th
    diagonal of the matrix ``v``.

    >>> import qdiff.numpy as qnp
    >>> qnp.diag(np.array([1.0, 2.0]), k=1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 2.0], [0.0, 0.0, 0.0]]
    """
    v = as_operand(v)
    shape = shape_of(v)
    if len(shape) == 2:
        return diagonal(v, k)
    if len(shape) != 1:
        raise TypeCheckError(f"diag: input must be 1-d or 2-d, got shape {shape}")
    n = shape[0] + abs(int(k))
    i, j = _diagonal_positions(n, n, int(k))
    return zeros((n, n), v.dtype).at[i, j].set(v)
