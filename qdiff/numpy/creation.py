"""Array creation of `qdiff.numpy`. These make constants: their values fold into programs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.tracer import Tracer, as_operand
from ._core import shape_of
from .shape import broadcast_to, stack


def zeros(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """An array of zeros (a constant)."""
    return np.zeros(shape, dtype)


def ones(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """An array of ones (a constant)."""
    return np.ones(shape, dtype)


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    """An array filled with ``fill_value``, which may be traced.

    >>> import qdiff.numpy as qnp
    >>> qnp.full((2,), 3.0).tolist()
    [3.0, 3.0]
    """
    if isinstance(fill_value, Tracer):
        return broadcast_to(as_operand(fill_value, dtype), shape)
    return np.full(shape, fill_value, dtype)


def _like(x: Any, dtype: Any) -> tuple[tuple[int, ...], Any]:
    return shape_of(x), (dtype or as_operand(x).dtype)


def zeros_like(x: Any, dtype: Any = None) -> np.ndarray:
    """Zeros of ``x``'s shape and dtype."""
    return np.zeros(*_like(x, dtype))


def ones_like(x: Any, dtype: Any = None) -> np.ndarray:
    """Ones of ``x``'s shape and dtype."""
    return np.ones(*_like(x, dtype))


def full_like(x: Any, fill_value: Any, dtype: Any = None) -> Any:
    """``fill_value`` in ``x``'s shape and dtype."""
    shape, dt = _like(x, dtype)
    return full(shape, fill_value, dt)


def arange(*args: Any, dtype: Any = None) -> np.ndarray:
    """Evenly spaced values with static bounds (NumPy's arange)."""
    return np.arange(*args, dtype=dtype)


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True) -> np.ndarray:
    """``num`` evenly spaced values with static bounds."""
    return np.linspace(start, stop, num, endpoint=endpoint)


def eye(n: int, m: int | None = None, k: int = 0, dtype: Any = np.float64) -> np.ndarray:
    """Ones on the ``k``-th diagonal of an ``n`` by ``m`` matrix (NumPy's eye).

    >>> import qdiff.numpy as qnp
    >>> qnp.eye(2, 3, k=1).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    return np.eye(n, m, k=k, dtype=dtype)


def _holds_tracer(x: Any) -> bool:
    if isinstance(x, Tracer):
        return True
    return isinstance(x, (list, tuple)) and any(_holds_tracer(e) for e in x)


def asarray(x: Any, dtype: Any = None) -> Any:
    """``x`` as an array: a traced value as is (converted to ``dtype``), nested lists and
    tuples holding traced values stacked into one traced array, anything else a NumPy array.

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.trace(lambda a, b: qnp.asarray([[a, 1.0], [b, a]]), 2.0, 3.0)(2.0, 3.0).tolist()
    [[2.0, 1.0], [3.0, 2.0]]
    """
    if isinstance(x, (list, tuple)) and _holds_tracer(x):
        if not x:
            return np.asarray(x, dtype)
        return as_operand(stack([asarray(e) for e in x]), dtype)
    return as_operand(x, dtype)


array = asarray
