"""Reductions of `qdiff.numpy`: sum, prod, max, min, mean, logsumexp, argmax, argmin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.tracer import as_operand
from ._core import apply, shape_of
from .elementwise import add, exp, log, subtract
from .shape import reshape


def _axes(axis: int | Sequence[int] | None, ndim: int, name: str) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    result = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise TypeCheckError(f"{name}: axis {a} is out of range for {ndim} dimensions")
        result.append(int(a) % ndim)
    if len(set(result)) != len(result):
        raise TypeCheckError(f"{name}: repeated axis in {axes}")
    return tuple(sorted(result))


def _reduce(prim: str, x: Any, axis: Any, keepdims: bool, name: str) -> Any:
    x = as_operand(x)
    if x.dtype == np.bool_:
        x = as_operand(x, np.int64)
    axes = _axes(axis, len(shape_of(x)), name)
    result = apply(prim, x, axes=axes)
    return _keep(result, shape_of(x), axes) if keepdims else result


def _keep(result: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    return reshape(result, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Sum over ``axis`` (all axes by default).

    >>> import qdiff.numpy as qnp
    >>> qnp.sum(np.ones((2, 3)), axis=0).tolist()
    [2.0, 2.0, 2.0]
    """
    return _reduce("reduce_sum", x, axis, keepdims, "sum")


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Product over ``axis`` (all axes by default)."""
    return _reduce("reduce_prod", x, axis, keepdims, "prod")


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Maximum over ``axis``; an empty axis is an error, as in NumPy."""
    return _reduce("reduce_max", x, axis, keepdims, "max")


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Minimum over ``axis``; an empty axis is an error, as in NumPy."""
    return _reduce("reduce_min", x, axis, keepdims, "min")


amax, amin = max, min


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Arithmetic mean over ``axis``."""
    x = as_operand(x)
    shape = shape_of(x)
    count = int(np.prod([shape[a] for a in _axes(axis, len(shape), "mean")], dtype=np.int64))
    total = sum(x if x.dtype.kind in "fc" else as_operand(x, np.float64), axis, keepdims)
    return total / count


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``log(sum(exp(x)))`` over ``axis``, shifted by the maximum for stability.

    >>> import qdiff.numpy as qnp
    >>> round(float(qnp.logsumexp(np.array([1000.0, 1000.0]))), 6)
    1000.693147
    """
    x = as_operand(x, np.float64) if as_operand(x).dtype.kind not in "fc" else as_operand(x)
    shift = max(x, axis, keepdims=True)
    total = sum(exp(subtract(x, shift)), axis, keepdims=True)
    result = add(log(total), shift)
    if keepdims:
        return result
    axes = _axes(axis, len(shape_of(x)), "logsumexp")
    return reshape(result, tuple(d for i, d in enumerate(shape_of(result)) if i not in axes))


def _arg(prim: str, x: Any, axis: int | None, name: str) -> Any:
    x = as_operand(x)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    (axis,) = _axes(axis, len(shape_of(x)), name)
    return apply(prim, x, axis=axis)


def argmax(x: Any, axis: int | None = None) -> Any:
    """Index of the maximum along ``axis`` (flattened when None); ties take the first."""
    return _arg("argmax", x, axis, "argmax")


def argmin(x: Any, axis: int | None = None) -> Any:
    """Index of the minimum along ``axis`` (flattened when None); ties take the first."""
    return _arg("argmin", x, axis, "argmin")



