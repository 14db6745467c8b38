"""Kernels that move elements (CUDA target): a new device array whose element ``index``
is element ``source(index)`` of another, a thread per element. Transposes and reversals
are such kernels (`arrays`), and a nest reading an operand along a non-last axis at
every step reads it from such a copy with that axis last (`nest`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from ..lowering import Scope
from .kernels import KernelSource, blocks_for, named, threads_for, unflatten


def moved(scope: Scope, operand: str, shape: Sequence[int], dtype: object, prefix: str,
          source: Callable[[list[str]], list[str]]) -> str:
    """A new device array of ``shape`` and ``dtype``, each element ``index`` of it taken
    from element ``source(index)`` of ``operand`` (a thread per element)."""
    (operand,) = named(scope, [operand])
    src = scope.src
    assert isinstance(src, KernelSource)
    result = scope.fresh("y")
    src.allocate_empty(result, shape, dtype)
    count = math.prod(shape)
    threads = threads_for(count)
    with src.capture() as body:
        t = scope.fresh("t")
        scope.line(f"{t} = cuda.grid(1)")
        with src.block(f"if {t} < {count}"):
            names = [scope.fresh("q") for _ in shape]
            unflatten(scope, t, names, list(shape))
            scope.line(f"{result}[{', '.join(names)}] = {operand}[{', '.join(source(names))}]")
    name, params = src.kernel(prefix, body)
    src.launch(name, blocks_for(count, threads), threads, params, [result])
    return result


def transposed(scope: Scope, operand: str, shape: Sequence[int], dtype: object,
               perm: Sequence[int]) -> str:
    """A new device array holding ``operand`` (of ``shape``) with its axes in the order
    ``perm``, as ``np.transpose(operand, perm)``."""
    def source(index: list[str]) -> list[str]:
        taken = [""] * len(perm)
        for position, axis in enumerate(perm):
            taken[axis] = index[position]
        return taken
    return moved(scope, operand, [shape[axis] for axis in perm], dtype, "transpose", source)
