"""Independent references the tests share."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def central_difference(f: Callable[[np.ndarray], float], x: np.ndarray,
                       h: float = 1e-6) -> np.ndarray:
    """``(f(x + h e_k) - f(x - h e_k)) / 2h`` for every element k of ``x``."""
    x = np.asarray(x, np.float64)
    grad = np.zeros_like(x)
    for k in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[k] = h
        grad[k] = (float(f(x + step)) - float(f(x - step))) / (2 * h)
    return grad


def central_difference_jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray,
                                h: float = 1e-5) -> np.ndarray:
    """The Jacobian of an array-valued ``f`` by central differences: shape
    ``f(x).shape + x.shape`` (the Hessian when ``f`` is an exact gradient)."""
    x = np.asarray(x, np.float64)
    columns = []
    for k in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[k] = h
        columns.append((np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * h))
    stacked = np.stack(columns, axis=-1)
    return stacked.reshape(stacked.shape[:-1] + x.shape)
