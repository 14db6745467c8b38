"""Gates on a batch of statevectors, one row per shot (the vectorized sample mode).

A batch is a C-contiguous ``(rows, 2**n)`` array. `apply_block` applies a gate's block on
its target wires, only where every control wire is 1 (a controlled gate is its base's block,
so ``mcx`` on six wires costs a 2x2 block on the amplitudes where the five controls are 1,
not a 64x64 matrix); each row may take its own block (angles that differ between shots).
The compiled loop runs the rows one at a time, so a row stays in cache for the gate.
`diagonal_phases` spreads a diagonal gate over the register, for one multiplication.

>>> state = np.zeros((2, 4), complex); state[:, 0] = 1; state[1] = [0, 1, 0, 0]
>>> x = np.array([[[0, 1], [1, 0]]], complex)
>>> apply_block(state, np.array([1]), 1, x, np.zeros(2, np.int64)).real.tolist()  # CX 0->1
[[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

_FAST = {"nnan", "ninf", "nsz", "contract"}  # plain complex arithmetic, sums in order


@njit(cache=True, fastmath=_FAST)
def apply_block(state, targets, control_mask, blocks, which):  # pragma: no cover - compiled
    """Row ``r`` of ``state`` gets ``blocks[which[r]]`` on ``targets`` (bit ``j`` of the
    block's index is ``targets[j]``) where the wires in ``control_mask`` are all 1; in
    place, returns ``state``."""
    rows, size = state.shape
    k = targets.shape[0]
    d = 1 << k
    offsets = np.zeros(d, np.int64)
    skip = control_mask
    for j in range(k):
        skip |= 1 << targets[j]
    for t in range(d):
        for j in range(k):
            if (t >> j) & 1:
                offsets[t] += 1 << targets[j]
    # the bases: every index whose target bits are 0 and control bits are 1
    free = size >> (k + _popcount(control_mask))
    bases = np.empty(free, np.int64)
    count = 0
    for base in range(size):
        if (base & skip) == control_mask:
            bases[count] = base
            count += 1
    for r in range(rows):
        block = blocks[which[r]]
        row = state[r]
        if d == 2:
            m00, m01, m10, m11 = block[0, 0], block[0, 1], block[1, 0], block[1, 1]
            if m00 == 0 and m11 == 0 and m01 == 1 and m10 == 1:  # X: a swap, no arithmetic
                _swap_pairs(row, bases, offsets[1])
            elif m00.imag == 0 and m01.imag == 0 and m10.imag == 0 and m11.imag == 0:
                _pairs(row, bases, offsets[1], m00.real, m01.real, m10.real, m11.real)
            else:
                _pairs(row, bases, offsets[1], m00, m01, m10, m11)
            continue
        buffer = np.empty(d, state.dtype)
        for base in bases:
            for t in range(d):
                buffer[t] = row[base + offsets[t]]
            for t in range(d):
                total = block[t, 0] * buffer[0]
                for u in range(1, d):
                    total += block[t, u] * buffer[u]
                row[base + offsets[t]] = total
    return state


@njit(inline="always", cache=True, fastmath=_FAST)
def _pairs(row, bases, step, m00, m01, m10, m11):  # pragma: no cover - compiled
    for base in bases:
        x = row[base]
        y = row[base + step]
        row[base] = m00 * x + m01 * y
        row[base + step] = m10 * x + m11 * y


@njit(inline="always", cache=True)
def _swap_pairs(row, bases, step):  # pragma: no cover - compiled
    for base in bases:
        x = row[base]
        row[base] = row[base + step]
        row[base + step] = x


@njit(cache=True)
def _popcount(mask):  # pragma: no cover - compiled
    count = 0
    while mask:
        count += mask & 1
        mask >>= 1
    return count


@njit(cache=True, fastmath=_FAST)
def wire_weights(state, wire):  # pragma: no cover - compiled
    """Per row, the squared norms of the amplitudes where ``wire`` is 0 and where it is 1
    (a ``(rows, 2)`` array)."""
    rows, size = state.shape
    out = np.zeros((rows, 2))
    for r in range(rows):
        row = state[r]
        for i in range(size):
            a = row[i]
            out[r, (i >> wire) & 1] += a.real * a.real + a.imag * a.imag
    return out


@njit(cache=True, fastmath=_FAST)
def collapse(state, wire, outcome, scale, to_zero):  # pragma: no cover - compiled
    """In place: row ``r`` keeps its amplitudes where ``wire`` reads ``outcome[r]``, times
    ``scale[r]``, the others zeroed; with ``to_zero`` the kept ones move to where ``wire``
    is 0 (a reset). Returns ``state``."""
    rows, size = state.shape
    stride = 1 << wire
    for r in range(rows):
        row = state[r]
        s = scale[r]
        for i in range(size):
            if (i >> wire) & 1:
                continue
            if outcome[r] == 1:
                kept = row[i + stride] * s
                row[i + stride] = 0
                if to_zero:
                    row[i] = kept
                else:
                    row[i] = 0
                    row[i + stride] = kept
            else:
                row[i] = row[i] * s
                row[i + stride] = 0
    return state


def diagonal_phases(diagonal: np.ndarray, wires: Sequence[int], num_qubits: int) -> np.ndarray:
    """The register-wide diagonal of a gate whose diagonal on ``wires`` is ``diagonal``
    (its last axis; bit ``j`` of its index is ``wires[j]``).

    >>> diagonal_phases(np.array([1, -1]), [1], 2).tolist()
    [1, 1, -1, -1]
    """
    index = np.arange(1 << num_qubits)
    local = np.zeros_like(index)
    for j, w in enumerate(wires):
        local |= ((index >> w) & 1) << j
    return diagonal[..., local]
