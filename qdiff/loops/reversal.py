"""Reversal of counted loops: stored carries, strip-mined checkpoints, data-dependent counts.

The loop is given by its step program ``step(i, *consts, *carry) -> carry`` and runs for
``i = start .. stop-1``. The reverse sweep needs the carry at the entry of each iteration,
in reverse order; it restores it and re-runs the step forward then backward (the step's
VJP, which re-executes the step: no tape inside the body).

Strategy (Futhark's strip-mining, ``#[stripmine(k)]``): ``k`` levels of buffers of ``m``
slots, ``m = ceil(N^(1/k))``. Level 0 stores the carry every ``s = ceil(N/m)`` iterations;
the reverse sweep walks its segments backwards and hands each to level 1, which refills its
own buffer from the restored carry, and so on; the last level stores every iteration of
its segment. Memory: ``k·m·S`` elements for carries of S elements (``N·S`` when k = 1);
work: at most k+1 forward runs of each step plus one reverse run.

When N is only known at run time (traced bounds, while loops), the buffers are sized by a
static capacity C (``m = ceil(C^(1/k))``) and the strides are computed at run time.
Increment-only carries (`increments`) are never stored. With k = ceil(log2 N) levels of
m = 2 slots, memory is 2·log2(N)·S and work at most log2(N)+1 forward runs per step: the
logarithmic end of the trade-off that binomial (revolve) checkpointing also reaches.

Reverse computing (`reverse_computing_loop`): a loop given the inverse of its step needs
no stored carry at all; the reverse sweep starts from the final carry and undoes the steps
one by one, running the step's VJP at each recomputed carry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import numpy as qnp
from ..autodiff.reverse import vjp_program
from ..autodiff.tangents import is_differentiable, zeros
from ..ir.control_flow import UNBOUNDED_WHILE_LIMIT, fori_loop, loop_p, while_loop
from ..ir.core import Program
from ..ir.interpreter import inline
from ..ir.tracer import bind, value_type
from ..numpy.indexing import IndexUpdateHelper, getitem
from .increments import increment_only_carries
from .memory import checkpoint_buffer

# Buffer capacity for loops whose trip count is only known at run time and not bounded by
# the program (a while loop without max_iter, traced fori_loop bounds).
DEFAULT_CAPACITY = UNBOUNDED_WHILE_LIMIT
DEFAULT_DYNAMIC_LEVELS = 2


def static_count(start: Any, stop: Any) -> int | None:
    """The trip count if both bounds are constants, else None."""
    if isinstance(start, np.ndarray) and isinstance(stop, np.ndarray):
        return max(0, int(stop) - int(start))
    if isinstance(start, (int, np.integer)) and isinstance(stop, (int, np.integer)):
        return max(0, int(stop) - int(start))
    return None


def slots_per_level(count: int, levels: int) -> int:
    """The smallest m with m**levels >= count (at least 1).

    >>> slots_per_level(1000, 1), slots_per_level(1000, 2), slots_per_level(1000, 3)
    (1000, 32, 10)
    """
    m = max(1, math.ceil(count ** (1.0 / levels)) if count else 1)
    while m ** levels < count:
        m += 1
    while m > 1 and (m - 1) ** levels >= count:
        m -= 1
    return m


def reverse_loop(step: Program, num_consts: int, start: Any, stop: Any, consts: Sequence[Any],
                 carry: Sequence[Any], ct_carry: Sequence[Any], const_active: Sequence[bool],
                 checkpoint: int | None = None, capacity: int | None = None
                 ) -> tuple[list[Any], list[Any]]:
    """Cotangents of the consts and of the initial carry of a counted loop.

    ``ct_carry`` holds one cotangent per differentiable carry (of the final carry). Returns
    (one cotangent or None per const, one per carry: None for non-differentiable ones).
    ``checkpoint`` is the number of strip-mining levels (None: 1 for a static trip count);
    ``capacity`` bounds a run-time trip count (default `DEFAULT_CAPACITY`).
    """
    carry = list(carry)
    diff = [is_differentiable(value_type(c)) for c in carry]
    adjoint = vjp_program(step, [False, *const_active, *diff], with_primal=False)
    skipped = [d and inc for d, inc in zip(diff, increment_only_carries(step, num_consts))]
    count = static_count(start, stop)
    if count is not None:
        levels = checkpoint or 1
        slots = slots_per_level(count, levels)
        length: Any = np.asarray(count, np.int64)
    else:
        limit = capacity or DEFAULT_CAPACITY
        # about a thousand slots a level: a loop bounded by max_iter=1e15 keeps ~5 levels of
        # 1000 carries (one more forward run a level), not 3e7 carries for the bound alone
        levels = checkpoint or max(DEFAULT_DYNAMIC_LEVELS, math.ceil(math.log2(limit) / 10))
        slots = slots_per_level(limit, levels)
        length = qnp.maximum(qnp.subtract(stop, start), 0)
        _check_capacity(length, slots ** levels)
    plan = _Plan(step, adjoint, num_consts, list(consts), diff, skipped, slots, levels)
    live = [k for k, flag in enumerate(const_active) if flag]
    ct_consts = [zeros(value_type(consts[k])) for k in live]
    entry = [zeros(value_type(c)) if skip else c for c, skip in zip(carry, skipped)]
    ct_out, ct_consts = plan.sweep(0, start, length, entry, list(ct_carry), ct_consts)
    by_const = dict(zip(live, ct_consts))
    ct_iter = iter(ct_out)
    return ([by_const.get(k) for k in range(len(consts))],
            [next(ct_iter) if d else None for d in diff])


def reverse_computing_loop(step: Program, inverse: Program, num_consts: int, start: Any,
                           stop: Any, consts: Sequence[Any], final_carry: Sequence[Any],
                           ct_carry: Sequence[Any], const_active: Sequence[bool]
                           ) -> tuple[list[Any], list[Any]]:
    """`reverse_loop` for a step with an inverse ``inverse(i, *consts, *carry_out) ->
    carry_in``: for i = stop-1 .. start, carry_i = inverse(i, carry_{i+1}), then step i's
    VJP at carry_i. Stores no carries; the recomputed carries differ from the forward ones
    by the rounding the inverse accumulates (exact for integer updates).
    """
    diff = [is_differentiable(value_type(c)) for c in final_carry]
    adjoint = vjp_program(step, [False, *const_active, *diff], with_primal=False)
    live = [k for k, flag in enumerate(const_active) if flag]
    ct_consts = [zeros(value_type(consts[k])) for k in live]
    count = static_count(start, stop)
    length: Any = count if count is not None else qnp.maximum(qnp.subtract(stop, start), 0)
    last = qnp.subtract(qnp.astype(stop, np.int64), 1)

    def backward(r: Any, state: Any) -> Any:
        carry, ct, ct_c = state
        i = qnp.subtract(last, r)
        carry = inline(inverse, [i, *consts, *carry])
        ct, ct_c = _reverse_step(adjoint, consts, i, carry, ct, ct_c)
        return carry, ct, ct_c

    _, ct_out, ct_consts = fori_loop(0, length, backward,
                                     (list(final_carry), list(ct_carry), ct_consts))
    by_const = dict(zip(live, ct_consts))
    ct_iter = iter(ct_out)
    return ([by_const.get(k) for k in range(len(consts))],
            [next(ct_iter) if d else None for d in diff])


def _reverse_step(adjoint: Program, consts: list, i: Any, carry: list, ct: list,
                  ct_consts: list) -> tuple[list, list]:
    """Re-run step i forward then backward: the carry's cotangent before step i."""
    outs = inline(adjoint, [qnp.astype(i, np.int64), *consts, *carry, *ct])
    n_consts = len(ct_consts)
    summed = [a + b for a, b in zip(ct_consts, outs[:n_consts])]
    return list(outs[n_consts:]), summed


def _check_capacity(length: Any, capacity: int) -> None:
    # a counting loop bounded by the capacity: longer runs stop with a LoopLimitError
    while_loop(lambda c: c < length, lambda c: c + 1, np.asarray(0, np.int64),
               max_iter=capacity)


class _Plan:
    """The static shape of one loop reversal: programs, flags, slots and levels."""

    def __init__(self, step: Program, adjoint: Program, num_consts: int, consts: list,
                 diff: list[bool], skipped: list[bool], slots: int, levels: int):
        self.step, self.adjoint, self.num_consts = step, adjoint, num_consts
        self.consts, self.diff, self.skipped = consts, diff, skipped
        self.slots, self.levels = slots, levels

    def run(self, lo: Any, hi: Any, carry: list) -> list:
        """The carry after iterations lo .. hi-1 (the step itself, as a loop)."""
        return list(bind(loop_p, qnp.astype(lo, np.int64), qnp.astype(hi, np.int64),
                         *self.consts, *carry, body=self.step, num_consts=self.num_consts))

    def buffers(self, carry: list) -> list:
        return [None if skip else checkpoint_buffer(c, self.slots)
                for c, skip in zip(carry, self.skipped)]

    # Buffers are indexed through qdiff.numpy, never by NumPy's own indexing: a sweep run on
    # concrete values (a quantum program's classical records) holds concrete level-0 buffers
    # that the traced loop bodies index with a traced slot.
    def store(self, buffers: list, slot: Any, carry: list) -> list:
        return [None if b is None else IndexUpdateHelper(b)[slot].set(c)
                for b, c in zip(buffers, carry)]

    def restore(self, buffers: list, slot: Any, carry: list) -> list:
        # increment-only carries are not stored: the reverse sweep does not read them
        return [c if b is None else getitem(b, slot) for b, c in zip(buffers, carry)]

    def sweep(self, level: int, base: Any, length: Any, carry: list, ct: list,
              ct_consts: list) -> tuple[list, list]:
        """Reverse iterations base .. base+length-1 from the carry at ``base``."""
        stride = 1 if level == self.levels - 1 else qnp.maximum(
            (length + self.slots - 1) // self.slots, 1)
        segments = (length + stride - 1) // stride
        buffers = self.buffers(carry)

        def forward(q: Any, state: Any) -> Any:
            current, stored = state
            stored = self.store(stored, q, current)
            lo = base + q * stride
            return self.run(lo, qnp.minimum(lo + stride, base + length), current), stored

        _, buffers = fori_loop(0, segments, forward, (carry, buffers))

        def backward(r: Any, state: Any) -> Any:
            ct_now, ct_c = state
            q = segments - 1 - r
            restored = self.restore(buffers, q, carry)
            if level == self.levels - 1:
                return _reverse_step(self.adjoint, self.consts, base + q, restored, ct_now, ct_c)
            size = qnp.minimum(stride, length - q * stride)
            return self.sweep(level + 1, base + q * stride, size, restored, ct_now, ct_c)

        ct, ct_consts = fori_loop(0, segments, backward, (ct, ct_consts))
        return list(ct), list(ct_consts)
