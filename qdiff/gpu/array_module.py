"""Array-module selection (NumPy or CuPy) with a lazy CuPy import.

Importing this module never imports CuPy and never raises; :func:`cupy_available` checks both
that CuPy imports and that a CUDA device is visible.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np

__all__ = ["cupy_available", "get_array_module", "import_cupy", "array_module_of"]


@functools.lru_cache(maxsize=1)
def _probe_cupy() -> tuple[types.ModuleType | None, str]:
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return None, f"CuPy is not importable ({type(exc).__name__}: {exc})"
    try:
        count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # no driver, no device, or the runtime refuses
        return None, f"CuPy imports but no CUDA device is usable ({type(exc).__name__}: {exc})"
    if count < 1:
        return None, "CuPy imports but reports no CUDA device"
    return cupy, ""


def cupy_available() -> bool:
    """True when CuPy imports and at least one CUDA device exists (cached).

    >>> isinstance(cupy_available(), bool)
    True
    """
    return _probe_cupy()[0] is not None


def import_cupy() -> types.ModuleType:
    """The ``cupy`` module, or ``RuntimeError`` saying why it cannot be used.

    >>> import_cupy() if cupy_available() else "no GPU here"  # doctest: +SKIP
    """
    mod, why = _probe_cupy()
    if mod is None:
        raise RuntimeError(f"the GPU back end needs CuPy and a CUDA device: {why}")
    return mod


def get_array_module(prefer_gpu: bool = False) -> types.ModuleType:
    """``cupy`` when ``prefer_gpu`` and a GPU is usable, else ``numpy``.

    >>> get_array_module().__name__
    'numpy'
    """
    if prefer_gpu and cupy_available():
        return import_cupy()
    return np


def array_module_of(array: Any) -> types.ModuleType:
    """The module that owns ``array`` (``cupy`` for CuPy arrays, else ``numpy``).

    >>> array_module_of(np.zeros(1)).__name__
    'numpy'
    """
    if type(array).__module__.split(".")[0] == "cupy":
        return import_cupy()
    return np
