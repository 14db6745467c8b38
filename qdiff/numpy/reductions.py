"""Reductions of `qdiff.numpy`: sum, prod, max, min, mean, logsumexp (and logaddexp, its
two-operand form), argmax, argmin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.tracer import as_operand
from ._core import apply, astype, float_dtype, promote, shape_of
from .elementwise import add, equal, exp, isfinite, log, subtract, where
from .shape import reshape, stack


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


def _accumulator(x: Any, dtype: Any) -> Any:
    """``x`` in the dtype NumPy sums and multiplies it in: ``dtype`` when given, else x's
    own, with booleans and integers narrower than 64 bits widened to 64 bits."""
    if dtype is None:
        kind = x.dtype.kind
        if kind == "b" or (kind == "i" and x.dtype.itemsize < 8):
            dtype = np.int64
        elif kind == "u" and x.dtype.itemsize < 8:
            dtype = np.uint64
    return as_operand(x, dtype)


def _reduce(prim: str, x: Any, axis: Any, keepdims: bool, name: str) -> Any:
    x = as_operand(x)
    if x.dtype == np.bool_ and prim in ("reduce_max", "reduce_min"):
        return astype(_reduce(prim, as_operand(x, np.int64), axis, keepdims, name), np.bool_)
    axes = _axes(axis, len(shape_of(x)), name)
    result = apply(prim, x, axes=axes)
    return _keep(result, shape_of(x), axes) if keepdims else result


def _keep(result: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    return reshape(result, tuple(1 if i in axes else d for i, d in enumerate(shape)))


def sum(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Sum over ``axis`` (all axes by default), accumulated in ``dtype`` as in NumPy.

    >>> import qdiff.numpy as qnp
    >>> qnp.sum(np.ones((2, 3)), axis=0).tolist()
    [2.0, 2.0, 2.0]
    """
    return _reduce("reduce_sum", _accumulator(as_operand(x), dtype), axis, keepdims, "sum")


def prod(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """Product over ``axis`` (all axes by default), accumulated in ``dtype`` as in NumPy."""
    return _reduce("reduce_prod", _accumulator(as_operand(x), dtype), axis, keepdims, "prod")


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Maximum over ``axis``; an empty axis is an error, as in NumPy."""
    return _reduce("reduce_max", x, axis, keepdims, "max")


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Minimum over ``axis``; an empty axis is an error, as in NumPy."""
    return _reduce("reduce_min", x, axis, keepdims, "min")


amax, amin = max, min


def mean(x: Any, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """Arithmetic mean over ``axis``; integers and booleans average in float64."""
    x = as_operand(x)
    shape = shape_of(x)
    count = int(np.prod([shape[a] for a in _axes(axis, len(shape), "mean")], dtype=np.int64))
    total = sum(x, axis, dtype=float_dtype(x) if dtype is None or np.dtype(dtype).kind in "biu"
                else dtype, keepdims=keepdims)
    average = total / np.asarray(count, total.dtype)
    return average if dtype is None else astype(average, dtype)


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """``log(sum(exp(x)))`` over ``axis``, shifted by the maximum for stability.

    As in JAX, an infinite or NaN maximum is not used as the shift (0 is), so a group
    holding ``+inf`` gives ``+inf`` instead of NaN, and a group of only ``-inf`` (a fully
    masked row) gives ``-inf``. The shift cancels in the derivatives, ties included. The
    derivative with respect to a fully masked group is 0 (JAX gives NaN there, and lets it
    reach the other groups' gradients when their sum is differentiated).

    >>> import qdiff.numpy as qnp
    >>> round(float(qnp.logsumexp(np.array([1000.0, 1000.0]))), 6)
    1000.693147
    >>> float(qnp.logsumexp(np.array([-np.inf, -np.inf])))
    -inf
    """
    x = as_operand(x, float_dtype(x))
    axes = _axes(axis, len(shape_of(x)), "logsumexp")
    if any(shape_of(x)[a] == 0 for a in axes):  # empty groups: log(0), no maximum to shift by
        shift = np.zeros(tuple(1 if i in axes else d for i, d in enumerate(shape_of(x))),
                         x.dtype)
    else:
        shift = max(x, axis, keepdims=True)
        shift = where(isfinite(shift), shift, 0.0)
    total = sum(exp(subtract(x, shift)), axis, keepdims=True)
    masked = equal(total, 0)
    # log(0) would send an infinite derivative (times a zero cotangent: NaN) into the group
    result = add(where(masked, -np.inf, log(where(masked, 1.0, total))), shift)
    if keepdims:
        return result
    return reshape(result, tuple(d for i, d in enumerate(shape_of(result)) if i not in axes))


def logaddexp(x: Any, y: Any) -> Any:
    """``log(exp(x) + exp(y))`` elementwise: `logsumexp` of the broadcast pair.

    >>> import qdiff.numpy as qnp
    >>> float(qnp.logaddexp(-np.inf, -np.inf)), float(qnp.logaddexp(np.inf, 1.0))
    (-inf, inf)
    """
    pair, _ = promote("logaddexp", x, y, dtype=float_dtype(x, y), keep_scalars=False)
    return logsumexp(stack(pair), axis=0)


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



