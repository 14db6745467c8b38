"""Which simulator runs `qdiff.vmap`'s batched statevector simulations.

By default (``"auto"``, or ``"numba"``) the batched runs and gradients of straight circuits
use the Numba kernels with the members along the SIMD lanes (`simulator.lane_kernels`);
``"numpy"`` and ``"cupy"`` run them with the array-module code of
`simulator.array_batched` on NumPy or, on a GPU, CuPy (imported when asked for). The
choice holds inside a ``with batched_backend(name):`` block, as ``backend=`` selects the
simulator of `qm.run` and `qm.gradient`.

>>> with batched_backend("numpy"):
...     batched_array_module().__name__
'numpy'
>>> batched_array_module() is None
True
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import numpy as np

from ...gpu.array_module import import_cupy
from ...ir.errors import QdiffError

__all__ = ["BATCHED_BACKENDS", "batched_array_module", "batched_backend"]

BATCHED_BACKENDS = ("auto", "numba", "numpy", "cupy")

_CHOSEN = threading.local()


@contextmanager
def batched_backend(name: str) -> Iterator[None]:
    """Run `qdiff.vmap`'s batched simulations inside the block on ``name``: ``"auto"`` or
    ``"numba"`` (the lane kernels), ``"numpy"`` or ``"cupy"`` (the array-module simulator;
    ``"cupy"`` raises a RuntimeError saying why when CuPy or a CUDA device is missing).

    >>> with batched_backend("numba"):
    ...     batched_array_module() is None
    True
    """
    if name not in BATCHED_BACKENDS:
        raise QdiffError(f"batched_backend: backend must be one of "
                         f"{', '.join(map(repr, BATCHED_BACKENDS))}, got {name!r}")
    module = import_cupy() if name == "cupy" else np if name == "numpy" else None
    stack = _stack()
    stack.append(module)
    try:
        yield
    finally:
        stack.pop()


def _stack() -> list[ModuleType | None]:
    if not hasattr(_CHOSEN, "stack"):
        _CHOSEN.stack = []
    return _CHOSEN.stack


def batched_array_module() -> ModuleType | None:
    """The array module the batched simulations run on here, or None for the lane kernels.

    >>> batched_array_module() is None
    True
    """
    stack = _stack()
    return stack[-1] if stack else None
