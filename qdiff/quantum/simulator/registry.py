"""Back-end selection: a table of back ends by name, filled by the back-end modules themselves.

Each back-end module calls :func:`register_backend` when it is imported (the package imports
them all; the Numba one when Numba imports). :func:`get_backend` makes one shared instance per
name on first use, so a back end whose dependency is optional (CuPy) costs nothing until it
is asked for.

>>> get_backend("numpy").name
'numpy'
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from qdiff.gpu.array_module import cupy_available

from .backend import StatevectorBackend

__all__ = ["register_backend", "get_backend", "available_backends", "numba_available"]

_FACTORIES: dict[str, Callable[[], Any]] = {}
_INSTANCES: dict[str, StatevectorBackend] = {}
_LOCK = threading.Lock()

_MISSING = {"numba": "the 'numba' back end needs the numba package (pip install numba)"}
"""Why a known back end is not registered here."""


def register_backend(name: str, factory: Callable[[], StatevectorBackend]) -> None:
    """Make ``factory()`` the back end :func:`get_backend` returns for ``name`` (its first
    call; the instance is shared).

    >>> "numpy" in _FACTORIES
    True
    """
    with _LOCK:
        _FACTORIES[name] = factory
        _INSTANCES.pop(name, None)


@functools.lru_cache(maxsize=1)
def numba_available() -> bool:
    """True when Numba imports.

    >>> isinstance(numba_available(), bool)
    True
    """
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def available_backends() -> list[str]:
    """Names :func:`get_backend` can return here (``cupy`` only with a working GPU).

    >>> "numpy" in available_backends()
    True
    """
    names = ["numpy"]
    if numba_available():
        names.append("numba")
    if cupy_available():
        names.append("cupy")
    return names


def get_backend(name: str | StatevectorBackend = "auto") -> StatevectorBackend:
    """A shared back-end instance: ``"numpy"``, ``"numba"``, ``"cupy"``, ``"auto"``, ``"auto-gpu"``.

    ``auto`` is Numba when it imports, else NumPy; ``auto-gpu`` is CuPy when CuPy and a GPU are
    present, else ``auto``. CuPy is never chosen unless asked for.

    >>> get_backend("numpy") is get_backend("NumPy")
    True
    """
    if isinstance(name, StatevectorBackend):
        return name
    key = name.lower()
    if key == "auto-gpu":
        key = "cupy" if cupy_available() else "auto"
    if key == "auto":
        key = "numba" if numba_available() else "numpy"
    with _LOCK:
        if key not in _INSTANCES:
            _INSTANCES[key] = _make_backend(key)
        return _INSTANCES[key]


def _make_backend(key: str) -> StatevectorBackend:
    factory = _FACTORIES.get(key)
    if factory is not None:
        return factory()
    if key in _MISSING:
        raise ImportError(_MISSING[key])
    raise ValueError(
        f"unknown back end {key!r}; choose one of 'numpy', 'numba', 'cupy', 'auto', 'auto-gpu'"
    )
