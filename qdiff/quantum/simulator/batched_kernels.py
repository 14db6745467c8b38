"""A batch of statevectors, one row per member, run through one circuit whose gate
matrices may differ per member (rotations by batched angles).

A batch is a C-contiguous ``(members, 2**n)`` array. The compiled loops here take the
members one at a time and run the whole circuit on that row before the next, so the row
(64 KiB at n = 12) stays in cache for every gate: one pass over memory per member, not one
per gate. Each gate has a kind: ``DENSE1`` (a 2x2 matrix on ``wire0``), ``DENSE2`` (a 4x4
matrix on ``wire0, wire1``; bit ``j`` of its index is wire ``j``) or ``CONTROLLED1`` (a
2x2 matrix on ``wire1`` where ``wire0`` is 1). ``mats[b, g]`` is a 4x4 array holding gate
``g``'s matrix for member ``b`` (top-left block for 2x2 ones). Gates on more wires, or
of several angles, reach these kernels lowered into such steps and ``PERMUTE`` tables
(`execution.batched.lowered_gates`). The batched branching
simulation (`execution.batched_branches`) runs its branches here; ``qdiff.vmap`` of a
straight circuit runs on `lane_kernels` (the members along the SIMD lanes).

>>> psi = np.zeros((2, 2), complex); psi[:, 0] = 1
>>> mats = np.zeros((2, 1, 4, 4), complex)
>>> mats[0, 0, :2, :2] = np.eye(2); mats[1, 0, :2, :2] = [[0, 1], [1, 0]]
>>> run_circuit(psi, np.array([DENSE1]), np.array([0]), np.array([0]), mats,
...             np.zeros((0, 2), np.int64)).real.tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import numpy as np
from numba import njit

DENSE1, DENSE2, CONTROLLED1, PERMUTE = 1, 2, 3, 4

# Finite values only, no reassociation: complex products compile to plain arithmetic
# (not the inf/NaN-careful library routine) and vectorize, while sums keep their order.
_FAST = {"nnan", "ninf", "nsz", "contract"}


@njit(inline="always", cache=True)
def _pair_layout(wire, control):  # pragma: no cover - compiled
    # the loop bounds over amplitude pairs (i, i + 2^wire) where bit `control` is 1
    # (control < 0: all): stride, the lower and higher wire, the control's mask, and the
    # strides of the outer and inner loops
    stride = 1 << wire
    if control < 0:
        return stride, wire, wire, 0, 2 * stride, 2 * stride
    lo, hi = min(wire, control), max(wire, control)
    return stride, lo, hi, 1 << control, 2 << hi, 2 << lo


@njit(inline="always", cache=True, fastmath=_FAST)
def _pair_loops(row, wire, control, m00, m01, m10, m11):  # pragma: no cover - compiled
    # amplitude pairs (i, i + 2^wire), only where bit `control` is 1 (control < 0: all);
    # the innermost loops run over contiguous indices, without a branch
    stride, lo, hi, on, outer, inner = _pair_layout(wire, control)
    for a in range(0, row.shape[0], outer):
        for c in range(a + on, a + on + (1 << hi), inner):
            for i in range(c, c + (1 << lo)):
                x = row[i]
                y = row[i + stride]
                row[i] = m00 * x + m01 * y
                row[i + stride] = m10 * x + m11 * y


@njit(inline="always", cache=True, fastmath=_FAST)
def _pairs(row, wire, control, m00, m01, m10, m11):  # pragma: no cover - compiled
    """The 2x2 matrix on amplitude pairs: a swap when it is X (no arithmetic), real
    coefficients when they are real (a third of the multiplications), else complex."""
    if m00 == 0 and m11 == 0 and m01 == 1 and m10 == 1:
        _pair_loops(row, wire, control, 0.0, 1.0, 1.0, 0.0)
    elif m00.imag == 0 and m01.imag == 0 and m10.imag == 0 and m11.imag == 0:
        _pair_loops(row, wire, control, m00.real, m01.real, m10.real, m11.real)
    else:
        _pair_loops(row, wire, control, m00, m01, m10, m11)


@njit(inline="always", cache=True, fastmath=_FAST)
def _quads(row, w0, w1, u):  # pragma: no cover - compiled
    lo, hi = min(w0, w1), max(w0, w1)
    s0, s1 = 1 << w0, 1 << w1
    for a in range(0, row.shape[0], 2 << hi):
        for c in range(a, a + (1 << hi), 2 << lo):
            for i in range(c, c + (1 << lo)):
                x0 = row[i]
                x1 = row[i + s0]
                x2 = row[i + s1]
                x3 = row[i + s0 + s1]
                row[i] = u[0, 0] * x0 + u[0, 1] * x1 + u[0, 2] * x2 + u[0, 3] * x3
                row[i + s0] = u[1, 0] * x0 + u[1, 1] * x1 + u[1, 2] * x2 + u[1, 3] * x3
                row[i + s1] = u[2, 0] * x0 + u[2, 1] * x1 + u[2, 2] * x2 + u[2, 3] * x3
                row[i + s0 + s1] = u[3, 0] * x0 + u[3, 1] * x1 + u[3, 2] * x2 + u[3, 3] * x3


@njit(inline="always", cache=True, fastmath=_FAST)
def _apply(row, kind, w0, w1, m):  # pragma: no cover - compiled
    if kind == DENSE2:
        _quads(row, w0, w1, m)
    elif kind == CONTROLLED1:
        _pairs(row, w1, w0, m[0, 0], m[0, 1], m[1, 0], m[1, 1])
    else:
        _pairs(row, w0, -1, m[0, 0], m[0, 1], m[1, 0], m[1, 1])


@njit(inline="always", cache=True)
def _gather(row, source, scratch):  # pragma: no cover - compiled
    # row[i] := row[source[i]]: a product of permutation gates in one pass
    for i in range(row.shape[0]):
        scratch[i] = row[source[i]]
    row[:] = scratch


@njit(cache=True, fastmath=_FAST)
def run_circuit(psi, kinds, wire0, wire1, mats, tables):  # pragma: no cover - compiled
    """Apply gates ``g = 0, 1, ...`` to every row of ``psi``, in place; returns ``psi``. A
    ``PERMUTE`` entry moves amplitudes by the table ``tables[wire0[g]]``
    (``row[i] := row[table[i]]``), a product of permutation gates."""
    scratch = np.empty(psi.shape[1], psi.dtype)
    for b in range(psi.shape[0]):
        row = psi[b]
        for g in range(kinds.shape[0]):
            if kinds[g] == PERMUTE:
                _gather(row, tables[wire0[g]], scratch)
            else:
                _apply(row, kinds[g], wire0[g], wire1[g], mats[b, g])
    return psi
