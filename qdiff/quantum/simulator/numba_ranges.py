"""Compiled loops over an index range, run serially or split across threads, written once.

Every Numba kernel of the simulator is a *range body* ``body(state, lo, hi, *args)``: one loop
over the items ``[lo, hi)`` (amplitude groups, batches of groups, chunks of amplitudes). A
:class:`RangeKernel` pairs the body with its threaded driver, which splits ``[0, total)`` into
``items`` work items and ``prange``s over them; :func:`range_kernel` makes the pair.
A *summed* body ``body(state, lo, hi, acc, *args)`` adds its results into ``acc``; its
threaded driver gives every work item its own zeroed ``acc`` and returns their sum
(:func:`summed_range_kernel`).

The drivers are generated from the two templates below, one compiled function per body, with
the body bound as the global ``_body``. They are separate functions, not one function compiled
twice (serial and parallel), so Numba's on-disk cache (``cache=True``) never mixes serial and
parallel machine code; each gets its own name and the body's source file, so that its cache
entry is its own and is invalidated when the body's module changes. (A closure over the body
would not do: Numba keys the cache of a closure on its cell contents, and a compiled
function pickles differently in every process, so such a cache is never hit.)

>>> import numpy as np
>>> kernel = range_kernel(_example_body)
>>> a = np.zeros(6); kernel(None, a, 6, 1.0); kernel(3, a, 6, 2.0); a.tolist()
[3.0, 3.0, 3.0, 3.0, 3.0, 3.0]
"""

from __future__ import annotations

import types
from typing import Any, NamedTuple

import numba
import numpy as np
from numba import njit, prange

__all__ = ["RangeKernel", "SummedRangeKernel", "range_kernel", "summed_range_kernel",
           "spread_items", "jit_range", "jit_threaded"]

jit_range = njit(cache=True, nogil=True, fastmath=False)
"""The flags of a plain range body (no reassociation: results do not depend on threading)."""

jit_threaded = njit(cache=True, nogil=True, parallel=True, fastmath=False)
"""The flags of a threaded driver."""


def _threaded_template(state, total, items, *args):  # pragma: no cover - compiled copies run
    for c in prange(items):
        _body(state, c * total // items, (c + 1) * total // items, *args)  # noqa: F821


def _summed_template(state, total, items, acc, *args):  # pragma: no cover - compiled copies run
    part = np.zeros((items,) + acc.shape, acc.dtype)
    for c in prange(items):
        _body(state, c * total // items, (c + 1) * total // items, part[c], *args)  # noqa: F821
    return part.sum(axis=0)


def _driver(template: Any, body: Any) -> Any:
    """``template`` compiled with ``body`` as its ``_body``, named after the body and filed
    (for the cache) with the body's source."""
    code = body.py_func.__code__
    name = f"{code.co_name}_threaded"
    clone = template.__code__.replace(co_name=name, co_qualname=name,
                                      co_filename=code.co_filename,
                                      co_firstlineno=code.co_firstlineno)
    fn = types.FunctionType(clone, {**template.__globals__, "_body": body}, name)
    fn.__module__ = body.py_func.__module__
    fn.__qualname__ = name
    return jit_threaded(fn)


class RangeKernel(NamedTuple):
    """A range body and its threaded driver (see the module doc)."""

    body: Any
    threaded: Any

    def __call__(self, items: int | None, state: Any, total: int, *args: Any) -> None:
        """The body on ``[0, total)``: serially when ``items`` is None, else split into
        ``items`` work items across threads."""
        if items is None:
            self.body(state, 0, total, *args)
        else:
            self.threaded(state, total, items, *args)


class SummedRangeKernel(NamedTuple):
    """A summed range body and its threaded driver (see the module doc)."""

    body: Any
    threaded: Any

    def __call__(self, items: int | None, state: Any, total: int, acc: np.ndarray,
                 *args: Any) -> np.ndarray:
        """``acc`` (zeroed by the caller) plus the body's sums over ``[0, total)``: serially
        when ``items`` is None, else split into ``items`` work items across threads."""
        if items is None:
            self.body(state, 0, total, acc, *args)
            return acc
        return self.threaded(state, total, items, acc, *args)


def spread_items(total: int, parallel: bool) -> int | None:
    """The ``items`` argument of a kernel call over ``total`` items: None (serial) unless
    ``parallel``, else a few work items per thread (at most ``total``), so that threads that
    finish early take more.

    >>> spread_items(1000, False) is None, spread_items(1, True)
    (True, 1)
    """
    return min(total, 8 * numba.get_num_threads()) if parallel else None


def range_kernel(body: Any) -> RangeKernel:
    """The :class:`RangeKernel` of a compiled range body ``body(state, lo, hi, *args)``."""
    return RangeKernel(body, _driver(_threaded_template, body))


def summed_range_kernel(body: Any) -> SummedRangeKernel:
    """The :class:`SummedRangeKernel` of a compiled body ``body(state, lo, hi, acc, *args)``."""
    return SummedRangeKernel(body, _driver(_summed_template, body))


@jit_range
def _example_body(a, lo, hi, v):
    for i in range(lo, hi):
        a[i] += v
