"""Array creation of `qdiff.numpy`. These make constants: their values fold into programs."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.tracer import Tracer, as_operand
from ._core import shape_of
from .indexing import IndexUpdateHelper
from .shape import broadcast_to, stack


class ConstantArray(np.ndarray):
    """A NumPy array made by `qdiff.numpy`'s constructors, with JAX's functional updates:
    ``x.at[idx].set(v)`` (and ``add``, ``multiply``, ``min``, ``max``) returns the updated
    array, traced when ``v`` is, so code written for JAX runs as it is.

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.trace(lambda v: qnp.zeros(3).at[1].set(v), 1.0)(2.0).tolist()
    [0.0, 2.0, 0.0]
    """

    @property
    def at(self) -> IndexUpdateHelper:
        return IndexUpdateHelper(np.asarray(self))


def _constant(values: np.ndarray) -> ConstantArray:
    return values.view(ConstantArray)


def zeros(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """An array of zeros (a constant)."""
    return _constant(np.zeros(shape, dtype))


def ones(shape: Any, dtype: Any = np.float64) -> np.ndarray:
    """An array of ones (a constant)."""
    return _constant(np.ones(shape, dtype))


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Any:
    """An array filled with ``fill_value``, which may be traced.

    >>> import qdiff.numpy as qnp
    >>> qnp.full((2,), 3.0).tolist()
    [3.0, 3.0]
    >>> import qdiff
    >>> qdiff.trace(lambda x: qnp.full(3, x), 1.0)(2.0).tolist()
    [2.0, 2.0, 2.0]
    """
    if isinstance(fill_value, Tracer):
        # NumPy takes an int for a 1-D shape
        dims = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return broadcast_to(as_operand(fill_value, dtype), dims)
    return _constant(np.full(shape, fill_value, dtype))


def _like(x: Any, dtype: Any) -> tuple[tuple[int, ...], Any]:
    return shape_of(x), (dtype or as_operand(x).dtype)


def zeros_like(x: Any, dtype: Any = None) -> np.ndarray:
    """Zeros of ``x``'s shape and dtype."""
    return _constant(np.zeros(*_like(x, dtype)))


def ones_like(x: Any, dtype: Any = None) -> np.ndarray:
    """Ones of ``x``'s shape and dtype."""
    return _constant(np.ones(*_like(x, dtype)))


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
    return _constant(np.eye(n, m, k=k, dtype=dtype))


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
