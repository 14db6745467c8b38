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
