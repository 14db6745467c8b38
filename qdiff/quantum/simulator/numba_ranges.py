"""Compiled loops over an index range, run serially or split across threads, written once.

Every Numba kernel of the simulator is a *range body* ``body(state, lo, hi, *args)``: one loop
over the items ``[lo, hi)`` (amplitude groups, batches of groups, chunks of amplitudes). A
:class:`RangeKernel` holds its two compiled drivers: the serial one runs the body on
``[0, total)``, the threaded one splits ``[0, total)`` into ``items`` work items and ``prange``s
over them; :func:`range_kernel` makes both. A *summed* body ``body(state, lo, hi, acc, *args)``
adds its results into ``acc``; its threaded driver gives every work item its own zeroed
``acc`` and returns their sum (:func:`summed_range_kernel`).

The drivers are generated from the source templates below, one compiled function per body and
template, with the body bound as the global ``_body``. The serial driver is compiled code too,
not the body called from Python: compiled with the body, it knows that the range starts at 0.
Serial and threaded drivers are separate functions, not one function compiled twice, so
Numba's on-disk cache (``cache=True``) never mixes serial and parallel machine code; each gets
its own name and the body's source file, so that its cache entry is its own and is
invalidated when the body's module changes. (A closure over the body would not do: Numba keys
the cache of a closure on its cell contents, and a compiled function pickles differently in
every process, so such a cache is never hit.)

>>> import numpy as np
>>> kernel = range_kernel(_example_body)
>>> a = np.zeros(6); kernel(None, a, 6, 1.0); kernel(3, a, 6, 2.0); a.tolist()
[3.0, 3.0, 3.0, 3.0, 3.0, 3.0]
"""

from __future__ import annotations

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


# The drivers, one per body: ``{args}`` is the body's parameters after ``(state, lo, hi)``
# (after ``acc`` too for a summed body), spelled out: a driver that passes them on as
# ``*args`` compiles to slower code (about 20% on the expectation sums).
_TEMPLATES = {  # underscored names: they must not clash with the body's parameters
    "serial": """\
def {name}(_state, _total{args}):
    _body(_state, 0, _total{args})
""",
    "threaded": """\
def {name}(_state, _total, _items{args}):
    for _c in prange(_items):
        _body(_state, _c * _total // _items, (_c + 1) * _total // _items{args})
""",
    "summed_serial": """\
def {name}(_state, _total, _acc{args}):
    _body(_state, 0, _total, _acc{args})
    return _acc
""",
    "summed_threaded": """\
def {name}(_state, _total, _items, _acc{args}):
    _part = np.zeros((_items,) + _acc.shape, _acc.dtype)
    for _c in prange(_items):
        _body(_state, _c * _total // _items, (_c + 1) * _total // _items, _part[_c]{args})
    return _part.sum(axis=0)
""",
}


def _driver(body: Any, kind: str, jit: Any) -> Any:
    """The ``kind`` driver of ``body`` (see ``_TEMPLATES``), compiled by ``jit``, named after
    the body and filed (for the cache) with the body's source."""
    code = body.py_func.__code__
    params = code.co_varnames[:code.co_argcount]
    skip = 4 if kind.startswith("summed") else 3
    name = f"{code.co_name}_{kind}"
    source = _TEMPLATES[kind].format(name=name, args="".join(f", {p}" for p in params[skip:]))
    namespace = {"np": np, "prange": prange, "_body": body}
    exec(compile(source, code.co_filename, "exec"), namespace)  # noqa: S102
    fn = namespace[name]
    fn.__module__ = body.py_func.__module__
    return jit(fn)


class RangeKernel(NamedTuple):
    """The serial and threaded drivers of a range body (see the module doc)."""

    serial: Any
    threaded: Any

    def __call__(self, items: int | None, state: Any, total: int, *args: Any) -> None:
        """The body on ``[0, total)``: serially when ``items`` is None, else split into
        ``items`` work items across threads."""
        if items is None:
            self.serial(state, total, *args)
        else:
            self.threaded(state, total, items, *args)


class SummedRangeKernel(NamedTuple):
    """The serial and threaded drivers of a summed range body (see the module doc)."""

    serial: Any
    threaded: Any

    def __call__(self, items: int | None, state: Any, total: int, acc: np.ndarray,
                 *args: Any) -> np.ndarray:
        """``acc`` (zeroed by the caller) plus the body's sums over ``[0, total)``: serially
        when ``items`` is None, else split into ``items`` work items across threads."""
        if items is None:
            return self.serial(state, total, acc, *args)
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
    return RangeKernel(_driver(body, "serial", jit_range),
                       _driver(body, "threaded", jit_threaded))


def summed_range_kernel(body: Any) -> SummedRangeKernel:
    """The :class:`SummedRangeKernel` of a compiled body ``body(state, lo, hi, acc, *args)``."""
    return SummedRangeKernel(_driver(body, "summed_serial", jit_range),
                             _driver(body, "summed_threaded", jit_threaded))


@jit_range
def _example_body(a, lo, hi, v):
    for i in range(lo, hi):
        a[i] += v
