"""A ``map`` over rows whose lambda holds small arrays, as one kernel: a thread per row runs
the lambda as the CPU target writes it (loops in the thread, the kernels' scalar forms), its
temporary arrays in ``cuda.local.array`` (sizes known when the code is generated).

The lambda's text must use only what a kernel can run: loops, scalar arithmetic, the ufuncs
numba-cuda lowers, element reads and writes, and ``np.empty`` (which becomes a local array).
Anything else (a BLAS call, a reshape, a helper of the CPU runtime, an error check), or
temporaries over `LOCAL_LIMIT` elements in all, refuses the kernel: the map stays a host
loop.
"""

from __future__ import annotations

import math
import re

import numpy as np

from ..errors import NotCompilableError
from ..lowering import Scope
from .elementwise import CUDA_SCALAR, CUDA_UFUNCS

# elements of local arrays per thread, in all (local memory is per thread, and spills)
LOCAL_LIMIT = 1024
_ALLOCATION = re.compile(r"np\.empty\(\(([\d, ]*)\), np\.(\w+)\)")
# text a kernel cannot run (CPU runtime helpers, views, BLAS, module constants, errors)
_REFUSED = re.compile(r"\brt\.|\.reshape\(|\.copy\(|\braise\b|\b_frozen\d|\bprange\(|\.shape\b")


class ThreadScope(Scope):
    """The CPU target's lowering, for code that one GPU thread runs: loop nests are loops,
    elementwise primitives take the kernels' forms."""

    scalar_forms = CUDA_SCALAR
    # a thread's arrays become its local arrays (`in_thread`), in place
    hoists_allocations = False


def in_thread(lines: list[str]) -> list[str] | None:
    """``lines`` (a lambda lowered by `ThreadScope`) with its allocations as local arrays;
    None where a kernel cannot run them.

    >>> in_thread(["    y = np.empty((3,), np.float64)", "    y[0] = np.sin(x)"])
    ['    y = cuda.local.array((3,), numba.float64)', '    y[0] = np.sin(x)']
    >>> in_thread(["    y = rt.gather(x, i)"]) is None
    True
    """
    text = "\n".join(lines)
    allowed = CUDA_UFUNCS | {"empty"}
    called = {name for name in re.findall(r"\bnp\.(\w+)\(", text)
              if not isinstance(getattr(np, name, None), type)}
    if _REFUSED.search(text) or called - allowed:
        return None
    sizes = [math.prod(int(d) for d in shape.replace(" ", "").split(",") if d)
             for shape, _ in _ALLOCATION.findall(text)]
    if sum(sizes) > LOCAL_LIMIT or "np.empty(" in _ALLOCATION.sub("", text):
        return None
    return [_ALLOCATION.sub(lambda m: f"cuda.local.array(({m[1]}), numba.{m[2]})", line)
            for line in lines]


def lower_in_thread(scope: Scope, program: object, inputs: list[str]) -> list[str] | None:
    """Lower ``program`` on ``inputs`` in the current kernel body as one thread's code;
    None where it has no compiled form."""
    try:
        return ThreadScope(scope.src, scope.options, program, inputs).lower()
    except NotCompilableError:
        return None
