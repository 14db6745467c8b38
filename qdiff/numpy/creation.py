"""Array creation of `qdiff.numpy`. These make constants: their values fold into programs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.tracer import Tracer, as_operand
from ._core import shape_of
from .shape import broadcast_to


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


def eye(n: int, m: int | None = None, dtype: Any = np.float64) -> np.ndarray:
    """The identity matrix."""
    return np.eye(n, m, dtype=dtype)


def asarray(x: Any, dtype: Any = None) -> Any:
    """A traced value as is (converted to ``dtype``), anything else as a NumPy array."""
    return as_operand(x, dtype)


array = asarray
