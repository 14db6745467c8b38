"""A batch of statevectors, one row per member, run through one circuit whose gate
matrices may differ per member (rotations by batched angles).

A batch is a C-contiguous ``(members, 2**n)`` array. The compiled loops here take the
members one at a time and run the whole circuit on that row before the next, so the row
(64 KiB at n = 12) stays in cache for every gate: one pass over memory per member, not one
per gate. Each gate has a kind: ``DENSE1`` (a 2x2 matrix on ``wire0``), ``DENSE2`` (a 4x4
matrix on ``wire0, wire1``; bit ``j`` of its index is wire ``j``) or ``CONTROLLED1`` (a
2x2 matrix on ``wire1`` where ``wire0`` is 1). ``mats[b, g]`` is a 4x4 array holding gate
``g``'s matrix for member ``b`` (top-left block for 2x2 ones).

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


@njit(inline="always", cache=True)
def _scatter(row, source, scratch):  # pragma: no cover - compiled
    # the inverse of `_gather`: row[source[i]] := row[i]
    for i in range(row.shape[0]):
        scratch[source[i]] = row[i]
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


@njit(inline="always", cache=True, fastmath=_FAST)
def _span_z(row, adj, start, count, stride, a00, a11):  # pragma: no cover - compiled
    # `_undo_span` of an rz (diagonal m, G = Z/2): a loop of its own, the sum's real and
    # imaginary parts in separate registers (a simpler loop for the compiler than one
    # that tests the gate's form at every pair)
    total_re = 0.0
    total_im = 0.0
    for i in range(start, start + count):
        j = i + stride
        x, y, u, v = row[i], row[j], adj[i], adj[j]
        term = np.conj(u) * x - np.conj(v) * y
        total_re += term.real
        total_im += term.imag
        row[i] = a00 * x
        row[j] = a11 * y
        adj[i] = a00 * u
        adj[j] = a11 * v
    return complex(total_re, total_im)


@njit(inline="always", cache=True, fastmath=_FAST)
def _span_y(row, adj, start, count, stride, a00, a01, a10, a11):  # pragma: no cover
    # `_undo_span` of an ry (G = Y/2), like `_span_z`
    total_re = 0.0
    total_im = 0.0
    for i in range(start, start + count):
        j = i + stride
        x, y, u, v = row[i], row[j], adj[i], adj[j]
        term = np.conj(v) * x - np.conj(u) * y
        total_re += term.real
        total_im += term.imag
        row[i] = a00 * x + a01 * y
        row[j] = a10 * x + a11 * y
        adj[i] = a00 * u + a01 * v
        adj[j] = a10 * u + a11 * v
    return complex(total_re, total_im)


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_span(row, adj, start, count, stride, a00, a01, a10, a11, gen,
               pauli):  # pragma: no cover - compiled
    # the pairs (i, i + stride), i in [start, start + count): the overlap with the
    # generator, then the undo, in one contiguous loop (rz and ry in loops of their own)
    if pauli == 3:
        return _span_z(row, adj, start, count, stride, a00, a11)
    if pauli == 2:
        return _span_y(row, adj, start, count, stride, a00, a01, a10, a11)
    g00, g01, g10, g11 = gen[0, 0], gen[0, 1], gen[1, 0], gen[1, 1]
    total = 0j
    for i in range(start, start + count):
        j = i + stride
        x, y, u, v = row[i], row[j], adj[i], adj[j]
        if pauli == 1:
            total += np.conj(u) * y + np.conj(v) * x
        elif pauli == 4:
            total += np.conj(u) * (g00 * x + g01 * y) + np.conj(v) * (g10 * x + g11 * y)
        row[i] = a00 * x + a01 * y
        row[j] = a10 * x + a11 * y
        adj[i] = a00 * u + a01 * v
        adj[j] = a10 * u + a11 * v
    return total


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_loops(row, adj, wire, control, a00, a01, a10, a11, gen,
                pauli):  # pragma: no cover - compiled
    # one pass over the amplitude pairs: the overlap with the generator, then the undo
    stride, lo, hi, on, outer, inner = _pair_layout(wire, control)
    total = 0j
    for a in range(0, row.shape[0], outer):
        for c in range(a + on, a + on + (1 << hi), inner):
            total += _undo_span(row, adj, c, 1 << lo, stride, a00, a01, a10, a11, gen, pauli)
    return total


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_pairs(row, adj, wire, control, m, gen, pauli):  # pragma: no cover - compiled
    """``<adj|G row>``, then ``row`` and ``adj`` through ``m^dagger``, in one pass over the
    amplitude pairs. ``pauli``: 0 no generator, 1/2/3 ``G = X/2, Y/2, Z/2`` (a rotation:
    cheaper sums, and ``Z`` keeps ``m`` diagonal), 4 any other 2x2 ``G``. A real ``m``
    (``ry``) is applied with real coefficients."""
    a00, a01 = np.conj(m[0, 0]), np.conj(m[1, 0])
    a10, a11 = np.conj(m[0, 1]), np.conj(m[1, 1])
    if pauli == 0:
        _pairs(row, wire, control, a00, a01, a10, a11)
        _pairs(adj, wire, control, a00, a01, a10, a11)
        return 0j
    if a00.imag == 0 and a01.imag == 0 and a10.imag == 0 and a11.imag == 0:
        total = _undo_loops(row, adj, wire, control, a00.real, a01.real, a10.real, a11.real,
                            gen, pauli)
    else:
        total = _undo_loops(row, adj, wire, control, a00, a01, a10, a11, gen, pauli)
    return _generator_factor(total, pauli)


@njit(inline="always", cache=True)
def _generator_factor(total, pauli):  # pragma: no cover - compiled
    # the Pauli sums leave out G's factor: 1/2 for X and Z, i/2 for Y
    if pauli == 1 or pauli == 3:
        return 0.5 * total
    if pauli == 2:
        return 0.5j * total
    return total


@njit(inline="always", cache=True, fastmath=_FAST)
def _overlap4(adj, row, w0, w1, gen):  # pragma: no cover - compiled
    lo, hi = min(w0, w1), max(w0, w1)
    s0, s1 = 1 << w0, 1 << w1
    total = 0j
    for a in range(0, row.shape[0], 2 << hi):
        for c in range(a, a + (1 << hi), 2 << lo):
            for i in range(c, c + (1 << lo)):
                for r in range(4):
                    ir = i + (s0 if r & 1 else 0) + (s1 if r & 2 else 0)
                    acc = 0j
                    for s in range(4):
                        acc += gen[r, s] * row[i + (s0 if s & 1 else 0) + (s1 if s & 2 else 0)]
                    total += np.conj(adj[ir]) * acc
    return total


# pairs per block of `_undo_run`: the block's amplitudes of psi and lam (64 bytes a pair)
# stay in the L1 cache while every gate of the run passes over them
_BLOCK_PAIRS = 512


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_block(row, adj, gates, mats, gens, paulis, totals, base, spans, span,
                stride):  # pragma: no cover - compiled
    # the run's gates from the last over one block: `spans` spans of `span` pairs, the
    # q-th starting at base + 2 q stride
    for t in range(gates.shape[0] - 1, -1, -1):
        g = gates[t]
        m = mats[g]
        a00, a01 = np.conj(m[0, 0]), np.conj(m[1, 0])
        a10, a11 = np.conj(m[0, 1]), np.conj(m[1, 1])
        real = a00.imag == 0 and a01.imag == 0 and a10.imag == 0 and a11.imag == 0
        for q in range(spans):
            start = base + 2 * q * stride
            if real:
                totals[t] += _undo_span(row, adj, start, span, stride, a00.real, a01.real,
                                        a10.real, a11.real, gens[g], paulis[g])
            else:
                totals[t] += _undo_span(row, adj, start, span, stride, a00, a01, a10, a11,
                                        gens[g], paulis[g])


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_run(row, adj, gates, wire, mats, gens, paulis, totals):  # pragma: no cover
    """A run of one-wire gates on ``wire`` undone block by block: each block of amplitude
    pairs stays in cache while all the gates pass over it (one pass over memory for the
    run, not one per gate), each gate's ``<lam|G psi>`` (without G's factor, as in
    `_undo_span`) added into ``totals``."""
    stride = 1 << wire
    n = row.shape[0]
    if stride >= _BLOCK_PAIRS:
        for a in range(0, n, 2 * stride):
            for c in range(a, a + stride, _BLOCK_PAIRS):
                _undo_block(row, adj, gates, mats, gens, paulis, totals, c, 1, _BLOCK_PAIRS,
                            stride)
    else:
        pairs = min(_BLOCK_PAIRS, n // 2)
        for base in range(0, n, 2 * pairs):
            _undo_block(row, adj, gates, mats, gens, paulis, totals, base, pairs // stride,
                        stride, stride)


@njit(inline="always", cache=True, fastmath=_FAST)
def _pauli_term(pauli, x, y, u, v):  # pragma: no cover - compiled
    # conj(u, v) . P (x, y) for P = X, Y (without its i), Z
    if pauli == 1:
        return np.conj(u) * y + np.conj(v) * x
    if pauli == 2:
        return np.conj(v) * x - np.conj(u) * y
    return np.conj(u) * x - np.conj(v) * y


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_pair_run(row, adj, wire, m_first, m_last, p_first, p_last):  # pragma: no cover
    """Two Pauli rotations on ``wire`` (``m_last`` applied after ``m_first``) undone in one
    pass through their product: each rotation commutes with its own generator, so the last
    one's overlap is taken on the states after the run and the first one's on the states
    before it, and the state between them is never formed. Returns both sums (without
    the generators' factors, as in `_undo_span`)."""
    f, k = m_first, m_last
    # the entries of (k f)^dagger
    a00 = np.conj(k[0, 0] * f[0, 0] + k[0, 1] * f[1, 0])
    a01 = np.conj(k[1, 0] * f[0, 0] + k[1, 1] * f[1, 0])
    a10 = np.conj(k[0, 0] * f[0, 1] + k[0, 1] * f[1, 1])
    a11 = np.conj(k[1, 0] * f[0, 1] + k[1, 1] * f[1, 1])
    stride = 1 << wire
    first = 0j
    last = 0j
    for a in range(0, row.shape[0], 2 * stride):
        for i in range(a, a + stride):
            j = i + stride
            x, y, p, q = row[i], row[j], adj[i], adj[j]
            last += _pauli_term(p_last, x, y, p, q)
            x, y = a00 * x + a01 * y, a10 * x + a11 * y
            p, q = a00 * p + a01 * q, a10 * p + a11 * q
            first += _pauli_term(p_first, x, y, p, q)
            row[i], row[j], adj[i], adj[j] = x, y, p, q
    return first, last


@njit(cache=True, fastmath=_FAST)
def adjoint_sweep(psi, lam, kinds, wire0, wire1, order, runs, permutes, tables, mats, gens,
                  paulis, out):  # pragma: no cover - compiled
    """The reverse sweep of `run_circuit`, member by member: ``psi`` holds the final states,
    ``lam`` the adjoint vectors of the objectives (``dJ = 2 Re<lam|dpsi>``). The gates come
    in entries, undone from the last: entry ``e`` is the gates ``order[runs[e]:runs[e + 1]]``,
    a run of one-wire gates on one wire (which `run_circuit` multiplies into one matrix)
    or one gate. For each gate ``out[b, g] = 2 Im<lam|G psi>`` where ``paulis[g]`` (``gens[g]``
    the generator of ``U = exp(-iθG)``, its 2x2 base block for a controlled gate), then
    ``psi`` and ``lam`` are undone through ``U^dagger``; a run of several gates is one pass
    over the state (`_undo_run`), not one per gate. Both end at the states before the
    circuit. An entry with ``permutes[e] >= 0`` is a run of permutation gates (no angle)
    that `run_circuit` applied as the table ``tables[permutes[e]]``: undone by scattering."""
    totals = np.zeros(max(1, kinds.shape[0]), np.complex128)
    scratch = np.empty(psi.shape[1], psi.dtype)
    for b in range(psi.shape[0]):
        row, adj = psi[b], lam[b]
        for e in range(runs.shape[0] - 2, -1, -1):
            first, stop = runs[e], runs[e + 1]
            if permutes[e] >= 0:
                _scatter(row, tables[permutes[e]], scratch)
                _scatter(adj, tables[permutes[e]], scratch)
                continue
            if stop - first == 2 and 1 <= paulis[order[first]] <= 3 \
                    and 1 <= paulis[order[first + 1]] <= 3:
                g0, g1 = order[first], order[first + 1]
                t0, t1 = _undo_pair_run(row, adj, wire0[g0], mats[b, g0, :2, :2],
                                        mats[b, g1, :2, :2], paulis[g0], paulis[g1])
                out[b, g0] = 2.0 * _generator_factor(t0, paulis[g0]).imag
                out[b, g1] = 2.0 * _generator_factor(t1, paulis[g1]).imag
                continue
            if stop - first > 1:
                gates = order[first:stop]
                totals[:stop - first] = 0
                _undo_run(row, adj, gates, wire0[gates[0]], mats[b], gens, paulis, totals)
                for t in range(stop - first):
                    g = gates[t]
                    if paulis[g]:
                        out[b, g] = 2.0 * _generator_factor(totals[t], paulis[g]).imag
                continue
            g = order[first]
            kind, w0, w1, m = kinds[g], wire0[g], wire1[g], mats[b, g]
            if kind == DENSE2:
                if paulis[g]:
                    out[b, g] = 2.0 * _overlap4(adj, row, w0, w1, gens[g]).imag
                u = np.conj(m.T)
                _quads(row, w0, w1, u)
                _quads(adj, w0, w1, u)
            else:
                wire, control = (w1, w0) if kind == CONTROLLED1 else (w0, -1)
                total = _undo_pairs(row, adj, wire, control, m, gens[g], paulis[g])
                if paulis[g]:
                    out[b, g] = 2.0 * total.imag
    return out
