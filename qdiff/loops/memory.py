"""Checkpoint buffers and the measurement of what loop reversal stores.

Reverse-mode loops keep carries in buffers made by the `checkpoint_buffer` primitive; the
reference interpreter reports every buffer it allocates to the active
`measure_checkpoint_memory` contexts. Buffers of one allocation site are never alive at
the same time (an inner level's buffer is refilled per segment), so the elements stored are
the sum over sites of each site's largest buffer.

>>> import qdiff, qdiff.numpy as qnp
>>> step = lambda i, s: qnp.sin(s) * 1.1
>>> g = qdiff.grad(lambda x: qdiff.fori_loop(0, 100, step, x))
>>> with measure_checkpoint_memory() as memory:
...     _ = g(0.5)
>>> memory.elements
100
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..autodiff.rules import def_zero_derivative
from ..ir.errors import QdiffError
from ..ir.host import available_memory_bytes, format_bytes
from ..ir.primitives import register_primitive
from ..ir.tracer import record
from ..ir.type_rules import tensor
from ..ir.types import Type

_site_ids = itertools.count()


class CheckpointMemoryError(QdiffError, MemoryError):
    """A loop reversal would store more than the memory available."""


class CheckpointMemory:
    """What the loop reversals of one run stored, in array elements."""

    def __init__(self) -> None:
        self.by_site: dict[int, int] = {}

    def note(self, site: int, elements: int) -> None:
        self.by_site[site] = max(self.by_site.get(site, 0), elements)

    @property
    def elements(self) -> int:
        """Elements stored at the peak: the sum of each site's largest buffer."""
        return sum(self.by_site.values())


_measurements: list[CheckpointMemory] = []


@contextmanager
def measure_checkpoint_memory() -> Iterator[CheckpointMemory]:
    """Collect the checkpoint buffers allocated while the block runs."""
    memory = CheckpointMemory()
    _measurements.append(memory)
    try:
        yield memory
    finally:
        _measurements.remove(memory)


# checkpoint_buffer[slots, site](like) = zeros of shape (slots, *like.shape)
def _buffer_rule(like: Type, *, slots: int, site: int) -> tuple[Type, ...]:
    t = tensor(like, "buffer element")
    return (t.with_shape((slots, *t.shape)),)


checkpoint_buffer_p = register_primitive("checkpoint_buffer", _buffer_rule)


# Reading the memory available costs a system call and a parse (about 15 µs), as much as
# a compiled gradient of a small loop: a buffer far below what was free a moment ago
# is let through on that reading; any other is checked against a fresh one.
_RECENT_SECONDS = 1.0
_recent: list[float] = [-float("inf"), 0.0]  # (when read, bytes available then)


def _recently_available() -> float:
    now = time.monotonic()
    if now - _recent[0] > _RECENT_SECONDS:
        _recent[:] = [now, float(available_memory_bytes())]
    return _recent[1]


def check_buffer_memory(slots: int, carry_bytes: int) -> None:
    """Raise `CheckpointMemoryError` when ``slots`` carries of ``carry_bytes`` each do not
    fit in the memory available (checked before allocating, by every back end; a buffer
    under half of what was available within the last second is not checked again).

    >>> check_buffer_memory(100, 8)   # 800 bytes: fits
    >>> check_buffer_memory(2 ** 40, 2 ** 30)
    Traceback (most recent call last):
    ...
    qdiff.loops.memory.CheckpointMemoryError: reverse mode would store ...
    """
    needed = slots * carry_bytes
    if needed <= _recently_available() / 2:
        return
    if needed > available_memory_bytes():
        raise CheckpointMemoryError(
            f"reverse mode would store {slots} loop carries of {format_bytes(carry_bytes)} "
            f"each ({format_bytes(needed)}), more than the {format_bytes(available_memory_bytes())}"
            " available; bound the loop with a smaller max_iter, or pass checkpoint=k to "
            "keep about k·N^(1/k) carries instead of N")


@checkpoint_buffer_p.def_impl("numpy")
def _buffer_impl(like: np.ndarray, *, slots: int, site: int) -> np.ndarray:
    like = np.asarray(like)
    check_buffer_memory(slots, like.nbytes)
    for memory in _measurements:
        memory.note(site, slots * like.size)
    return np.zeros((slots, *like.shape), like.dtype)


# a fresh buffer is zeros whatever its template holds
def_zero_derivative(checkpoint_buffer_p)


def checkpoint_buffer(like: Any, slots: int) -> Any:
    """A zeroed buffer for ``slots`` values shaped like ``like`` (a new allocation site)."""
    return record(checkpoint_buffer_p, like, slots=int(slots), site=next(_site_ids))
