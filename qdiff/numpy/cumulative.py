"""Running sums and products and differences of `qdiff.numpy`: cumsum, cumprod, diff.

`cumsum` and `cumprod` are the `scan` primitive along the chosen axis (moved to the front),
so they get the scan's derivative rules, zeros in a product included; `diff` is slices.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..classical import soacs
from ..ir.errors import TypeCheckError
from ..ir.tracer import as_operand
from ._core import shape_of
from .elementwise import not_equal, subtract
from .indexing import getitem
from .reductions import _accumulator
from .shape import moveaxis, reshape


def _axis(axis: int, ndim: int, name: str) -> int:
    if not -ndim <= axis < ndim:
        raise TypeCheckError(f"{name}: axis {axis} is out of range for {ndim} dimensions")
    return int(axis) % ndim


def _cumulative(op: str, x: Any, axis: int | None, dtype: Any, name: str) -> Any:
    x = _accumulator(as_operand(x), dtype)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    if not shape_of(x):
        x, axis = reshape(x, (1,)), 0  # NumPy treats a scalar as one element
    axis = _axis(axis, len(shape_of(x)), name)
    front = moveaxis(x, axis, 0)
    neutral = np.full(shape_of(front)[1:], 0 if op == "add" else 1, x.dtype)
    return moveaxis(soacs.scan(op, neutral, front), 0, axis)


def cumsum(x: Any, axis: int | None = None, dtype: Any = None) -> Any:
    """Running sum along ``axis`` (of the flattened array when None), NumPy's accumulator.

    >>> import qdiff.numpy as qnp
    >>> qnp.cumsum(np.array([[1, 2], [3, 4]]), axis=0).tolist()
    [[1, 2], [4, 6]]
    """
    return _cumulative("add", x, axis, dtype, "cumsum")


def cumprod(x: Any, axis: int | None = None, dtype: Any = None) -> Any:
    """Running product along ``axis`` (of the flattened array when None).

    >>> import qdiff.numpy as qnp
    >>> qnp.cumprod(np.array([1.0, 2.0, 0.0, 4.0])).tolist()
    [1.0, 2.0, 0.0, 0.0]
    """
    return _cumulative("mul", x, axis, dtype, "cumprod")


def diff(x: Any, n: int = 1, axis: int = -1) -> Any:
    """The ``n``-th difference along ``axis`` (``not_equal`` for booleans, as in NumPy).

    >>> import qdiff.numpy as qnp
    >>> qnp.diff(np.array([1.0, 4.0, 9.0, 16.0]), n=2).tolist()
    [2.0, 2.0]
    """
    x = as_operand(x)
    if n < 0:
        raise TypeCheckError(f"diff: order n={n} must be non-negative")
    ndim = len(shape_of(x))
    if ndim == 0:
        raise TypeCheckError("diff requires an input of at least one dimension")
    axis = _axis(axis, ndim, "diff")
    step = not_equal if x.dtype == np.bool_ else subtract
    head = (slice(None),) * axis
    for _ in range(n):
        x = step(getitem(x, head + (slice(1, None),)), getitem(x, head + (slice(None, -1),)))
    return x
