"""Numba kernels of single gates: compiled loops over a range of amplitude groups.

Each kernel is a range body ``body(psi, lo, hi, ...)`` over the groups ``[lo, hi)`` (the shared
index math of :mod:`qdiff.quantum.simulator.indexing`, compiled from the same Python helpers),
paired with its threaded driver by :func:`~qdiff.quantum.simulator.numba_ranges.range_kernel`.
Every kernel makes one pass over the amplitudes it touches: a 1-qubit gate reads and writes
each amplitude once.

>>> import numpy as np
>>> psi = np.array([1, 0j]); PAIR(None, psi, 1, np.array([0]), 0, 1, True, 0j, 1 + 0j, 1 + 0j, 0j)
>>> psi.real.tolist()
[0.0, 1.0]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..lang.observables import parity
from .indexing import insert_zero_bits
from .numba_ranges import jit_range as _jit
from .numba_ranges import range_kernel, summed_range_kernel

__all__ = ["PAIR", "DENSE2", "DENSEK", "DIAGONAL", "DIAGONAL_TABLE", "PERMUTATION", "PAULI",
           "Z_PAULI", "PAULI_SUMS", "ABS_SQUARED", "ABS_SQUARED_PERMUTED", "GROUPS_PER_ITEM"]

GROUPS_PER_ITEM = 1 << 12
"""Groups per threaded work item: large enough to amortise scheduling."""

_insert = njit(inline="always", cache=True)(insert_zero_bits)
_parity = njit(inline="always", cache=True)(parity)


# ---------------------------------------------------------------------------------------------
# contiguous inner loops
#
# Consecutive group numbers g map to consecutive amplitude indices until g carries into the
# lowest gate wire, so the groups come in runs of 2^min(wire) contiguous amplitudes. When the
# runs are long, the bodies below hand each run to one of these small loops over contiguous
# slices; as separate functions over plain 1-D slices they compile to SIMD code (about twice as
# fast as the same arithmetic written inline around the index math). Short runs (a gate on
# wire 0..2) use scalar loops, where a call per run would cost more than it saves.
# ---------------------------------------------------------------------------------------------

_MIN_RUN_BITS = 3


@njit(inline="always", cache=True)
def _run_end(g, hi, pos):
    # the end of the run of contiguous groups from g: the next carry into the lowest gate wire
    span = np.int64(1) << pos[0]
    return min(g - (g & (span - 1)) + span, hi)


@njit(inline="always", cache=True)
def _run_at(g, hi, pos, cmask):
    # (first amplitude index, length) of the run of contiguous groups from g, below hi
    return _insert(g, pos) | cmask, _run_end(g, hi, pos) - g


@_jit
def _pair_loop(a, b, m00, m01, m10, m11):
    for k in range(a.shape[0]):
        x = a[k]
        y = b[k]
        a[k] = m00 * x + m01 * y
        b[k] = m10 * x + m11 * y


@_jit
def _quad_loop(a0, a1, a2, a3, m):
    m00, m01, m02, m03 = m[0, 0], m[0, 1], m[0, 2], m[0, 3]
    m10, m11, m12, m13 = m[1, 0], m[1, 1], m[1, 2], m[1, 3]
    m20, m21, m22, m23 = m[2, 0], m[2, 1], m[2, 2], m[2, 3]
    m30, m31, m32, m33 = m[3, 0], m[3, 1], m[3, 2], m[3, 3]
    for k in range(a0.shape[0]):
        x0 = a0[k]
        x1 = a1[k]
        x2 = a2[k]
        x3 = a3[k]
        a0[k] = m00 * x0 + m01 * x1 + m02 * x2 + m03 * x3
        a1[k] = m10 * x0 + m11 * x1 + m12 * x2 + m13 * x3
        a2[k] = m20 * x0 + m21 * x1 + m22 * x2 + m23 * x3
        a3[k] = m30 * x0 + m31 * x1 + m32 * x2 + m33 * x3


@_jit
def _scale_loop(a, d):
    for k in range(a.shape[0]):
        a[k] *= d


@_jit
def _swap_loop(a, b, f0, f1):
    for k in range(a.shape[0]):
        x = a[k]
        a[k] = f1 * b[k]
        b[k] = f0 * x


# ---------------------------------------------------------------------------------------------
# loop bodies over a group range [lo, hi)
# ---------------------------------------------------------------------------------------------

@_jit
def _pair_body(psi, lo, hi, pos, cmask, bit, swap, m00, m01, m10, m11):
    # A 2x2 on the pairs (i0, i0 | bit). `swap`: m is anti-diagonal (x, y, and cx, cy via
    # controls: U|0> = m10|1>, U|1> = m01|0>), a swap with phases, without the zeros.
    if pos[0] >= _MIN_RUN_BITS:
        g = lo
        while g < hi:
            i0, run = _run_at(g, hi, pos, cmask)
            a = psi[i0:i0 + run]
            b = psi[i0 + bit:i0 + bit + run]
            if swap:
                _swap_loop(a, b, m10, m01)
            else:
                _pair_loop(a, b, m00, m01, m10, m11)
            g += run
    else:
        for g in range(lo, hi):
            i0 = _insert(g, pos) | cmask
            i1 = i0 | bit
            a = psi[i0]
            b = psi[i1]
            if swap:
                psi[i0] = m01 * b
                psi[i1] = m10 * a
            else:
                psi[i0] = m00 * a + m01 * b
                psi[i1] = m10 * a + m11 * b


@_jit
def _dense2_body(psi, lo, hi, pos, cmask, b0, b1, m):
    if pos[0] >= _MIN_RUN_BITS:
        g = lo
        while g < hi:
            i0, run = _run_at(g, hi, pos, cmask)
            i1 = i0 | b0
            i2 = i0 | b1
            i3 = i2 | b0
            _quad_loop(psi[i0:i0 + run], psi[i1:i1 + run], psi[i2:i2 + run],
                       psi[i3:i3 + run], m)
            g += run
    else:
        for g in range(lo, hi):
            i0 = _insert(g, pos) | cmask
            i1 = i0 | b0
            i2 = i0 | b1
            i3 = i2 | b0
            a0 = psi[i0]
            a1 = psi[i1]
            a2 = psi[i2]
            a3 = psi[i3]
            psi[i0] = m[0, 0] * a0 + m[0, 1] * a1 + m[0, 2] * a2 + m[0, 3] * a3
            psi[i1] = m[1, 0] * a0 + m[1, 1] * a1 + m[1, 2] * a2 + m[1, 3] * a3
            psi[i2] = m[2, 0] * a0 + m[2, 1] * a1 + m[2, 2] * a2 + m[2, 3] * a3
            psi[i3] = m[3, 0] * a0 + m[3, 1] * a1 + m[3, 2] * a2 + m[3, 3] * a3


@njit(inline="always", cache=True)
def _gather_group(psi, g, pos, cmask, offs, tmp):
    # amplitude r of group g into tmp[r]; returns the group's base index
    base = _insert(g, pos) | cmask
    for r in range(offs.shape[0]):
        tmp[r] = psi[base | offs[r]]
    return base


@_jit
def _densek_body(psi, lo, hi, pos, cmask, offs, m):
    dim = offs.shape[0]
    tmp = np.empty(dim, psi.dtype)
    for g in range(lo, hi):
        base = _gather_group(psi, g, pos, cmask, offs, tmp)
        for r in range(dim):
            acc = m[r, 0] * tmp[0]
            for c in range(1, dim):
                acc += m[r, c] * tmp[c]
            psi[base | offs[r]] = acc


@_jit
def _diag_body(psi, lo, hi, pos, cmask, offs, d):
    nd = offs.shape[0]
    if pos[0] >= _MIN_RUN_BITS:
        g = lo
        while g < hi:
            base, run = _run_at(g, hi, pos, cmask)
            for r in range(nd):
                i = base | offs[r]
                _scale_loop(psi[i:i + run], d[r])
            g += run
    else:
        for g in range(lo, hi):
            base = _insert(g, pos) | cmask
            for r in range(nd):
                psi[base | offs[r]] *= d[r]


@_jit
def _diag_table_body(psi, lo, hi, lowbits, lowpat, highpat, d):
    # chunks of 2^lowbits contiguous amplitudes: amplitude l of chunk c times
    # d[highpat[c] | lowpat[l]], one contiguous sweep whatever the diagonal's wires are
    size = np.int64(1) << lowbits
    for c in range(lo, hi):
        base = c << lowbits
        row = d[highpat[c]:]
        chunk = psi[base:base + size]
        for k in range(size):
            chunk[k] *= row[lowpat[k]]


@njit(inline="always", cache=True)
def _cycles(perm, phases):
    # the cycles of r -> perm[r] that change amplitudes, rows in cycle order (perm[rows[i]] =
    # rows[i + 1]) from starts[c] to starts[c + 1]: fixed rows with phase 1 are left out
    dim = perm.shape[0]
    rows = np.empty(dim, np.int64)
    starts = np.zeros(dim + 1, np.int64)
    seen = np.zeros(dim, np.bool_)
    count = 0
    filled = 0
    for r in range(dim):
        if seen[r] or (perm[r] == r and phases[r] == 1):
            continue
        t = r
        while not seen[t]:
            seen[t] = True
            rows[filled] = t
            filled += 1
            t = perm[t]
        count += 1
        starts[count] = filled
    return rows, starts[:count + 1]


@_jit
def _cycle_loop(psi, first, run, offs, rows, lo, hi, phases):
    # one cycle of the permutation on a run of groups: the amplitude of row rows[i] moves to
    # rows[i + 1] (times its phase), the last one's to rows[lo], a column at a time
    last = offs[rows[hi - 1]]
    for k in range(first, first + run):
        carried = psi[k | last]
        for i in range(hi - 1, lo, -1):
            psi[k | offs[rows[i]]] = phases[rows[i - 1]] * psi[k | offs[rows[i - 1]]]
        psi[k | offs[rows[lo]]] = phases[rows[hi - 1]] * carried


@_jit
def _permk_body(psi, lo, hi, pos, cmask, offs, perm, phases):
    # U|r> = phases[r] |perm[r]>, cycle by cycle (_cycles): a cycle of two rows (x, cx, swap,
    # ccx, cswap) is a swap with phases, a fixed row a scaling, and rows the gate leaves alone
    # are not read (a 3-qubit rccx moves 2 of its 8 rows and phases 2: a quarter of the
    # state's traffic); on runs of contiguous groups the loops run over slices
    rows, starts = _cycles(perm, phases)
    cycles = starts.shape[0] - 1
    if pos[0] >= _MIN_RUN_BITS:
        g = lo
        while g < hi:
            base, run = _run_at(g, hi, pos, cmask)
            for c in range(cycles):
                a, b = starts[c], starts[c + 1]
                i0 = base | offs[rows[a]]
                if b - a == 1:
                    _scale_loop(psi[i0:i0 + run], phases[rows[a]])
                elif b - a == 2:
                    i1 = base | offs[rows[a + 1]]
                    _swap_loop(psi[i0:i0 + run], psi[i1:i1 + run], phases[rows[a]],
                               phases[rows[a + 1]])
                else:
                    _cycle_loop(psi, base, run, offs, rows, a, b, phases)
            g += run
    else:
        for g in range(lo, hi):
            base = _insert(g, pos) | cmask
            for c in range(cycles):
                _cycle_loop(psi, base, 1, offs, rows, starts[c], starts[c + 1], phases)


@_jit
def _pauli_body(psi, lo, hi, x, z, hpos, alpha, beta):
    # Pairs (i, i^x) with the highest flipped bit clear in i; each pair is read and written once.
    for g in range(lo, hi):
        i = _insert(g, hpos)
        j = i ^ x
        a = psi[i]
        b = psi[j]
        sj = 1 - 2 * _parity(j & z)
        si = 1 - 2 * _parity(i & z)
        psi[i] = alpha * a + (beta * sj) * b
        psi[j] = alpha * b + (beta * si) * a


@_jit
def _zpauli_body(psi, lo, hi, z, alpha, beta):
    plus = alpha + beta
    minus = alpha - beta
    for i in range(lo, hi):
        psi[i] *= minus if _parity(i & z) else plus


@_jit
def _abs_squared_body(psi, lo, hi, out):
    for i in range(lo, hi):
        v = psi[i]
        out[i] = np.float64(v.real) * v.real + np.float64(v.imag) * v.imag


@_jit
def _abs_squared_permuted_body(psi, lo, hi, out, tile_pos, in_offs, out_offs, out_bit):
    # tile h of indexing.permutation_tiles: its amplitudes read in runs of contiguous
    # entries, their |.|^2 written to the permuted indices, runs of contiguous entries too
    for h in range(lo, hi):
        base = _insert(h, tile_pos)
        obase = np.int64(0)
        for b in range(out_bit.shape[0]):
            obase |= ((base >> b) & 1) << out_bit[b]
        for u in range(in_offs.shape[0]):
            v = psi[base | in_offs[u]]
            out[obase | out_offs[u]] = np.float64(v.real) * v.real + np.float64(v.imag) * v.imag


@njit(inline="always", cache=True)
def _clear_below(t, h):
    # how many indices below t have bit h clear
    return ((t >> (h + 1)) << h) + min(t & ((np.int64(1) << (h + 1)) - 1), np.int64(1) << h)


@_jit
def _flip_pair_sums(psi, lo, hi, x, za, zb):
    # the sums over i in [lo, hi) of conj(psi[i^x]) (-1)^parity(i & z) psi[i] for z = za, zb,
    # visiting each pair (i, i^x) once from its member with the top bit h of x clear: the
    # partner's term is the conjugate times (-1)^parity(x & z) (i^x has the same parity
    # as i, flipped by x & z), so the pair adds 2 Re v or 2i Im v (times the sign of i)
    h = 0
    while (x >> (h + 1)) != 0:
        h += 1
    odd_a = _parity(x & za)
    odd_b = _parity(x & zb)
    ra = 0.0
    rb = 0.0
    for g in range(_clear_below(lo, h), _clear_below(hi, h)):
        i = ((g >> h) << (h + 1)) | (g & ((np.int64(1) << h) - 1))
        v = np.complex128(np.conj(psi[i ^ x]) * psi[i])
        pa = v.imag if odd_a else v.real
        pb = v.imag if odd_b else v.real
        ra += -pa if _parity(i & za) else pa
        rb += -pb if _parity(i & zb) else pb
    # the partners i^x of the pairs counted here may lie outside [lo, hi) and the other way
    # round: every pair is counted by the range that holds its clear member, so the ranges'
    # sums add up to the whole sum
    return ((2j * ra) if odd_a else (2.0 * ra + 0j)), ((2j * rb) if odd_b else (2.0 * rb + 0j))


@_jit
def _sums_body(psi, lo, hi, out, xs, zs):
    # out[k] = sum over [lo, hi) of conj(psi[i^x_k]) (-1)^parity(i & z_k) psi[i]: one pass
    # for the diagonal terms (x_k = 0) and one per distinct x_k
    diagonal = np.flatnonzero(xs == 0)
    if diagonal.size:
        # the diagonal terms in one pass: each probability is read and squared once, and
        # each term still sums over i in order (the same rounding as a pass per term)
        z_of = zs[diagonal]
        sums = np.zeros(diagonal.size)
        for i in range(lo, hi):
            a = psi[i]
            p = np.float64(a.real) ** 2 + np.float64(a.imag) ** 2
            for j in range(diagonal.size):
                sums[j] += -p if _parity(i & z_of[j]) else p
        for j in range(diagonal.size):
            out[diagonal[j]] = sums[j]
    # the other terms grouped by their X mask (their flip pattern): one pass per mask over
    # the pairs (i, i^x) in the range, each product conj(psi[i^x]) psi[i] computed once for
    # two terms of the group at a time (XX and YY on the same wires share it)
    flipped = np.flatnonzero(xs != 0)
    for x in np.unique(xs[flipped]):
        group = flipped[xs[flipped] == x]
        for j in range(0, group.size, 2):
            a = group[j]
            b = group[min(j + 1, group.size - 1)]
            sa, sb = _flip_pair_sums(psi, lo, hi, x, zs[a], zs[b])
            out[a] = sa
            out[b] = sb


PAIR = range_kernel(_pair_body)
"""A 2x2 on pairs of amplitudes, or (``swap``) an anti-diagonal one as a swap with phases."""
DENSE2 = range_kernel(_dense2_body)
"""A dense 4x4 on two target wires."""
DENSEK = range_kernel(_densek_body)
"""A dense 2^k x 2^k on k target wires."""
DIAGONAL = range_kernel(_diag_body)
"""Amplitude ``base | offs[r]`` times ``d[r]``."""
DIAGONAL_TABLE = range_kernel(_diag_table_body)
"""Amplitude ``i`` times ``d[highpat[i >> lowbits] + lowpat[i & (2^lowbits - 1)]]``, over
chunks of ``2^lowbits`` amplitudes (``indexing.diagonal_patterns`` makes the tables)."""
PERMUTATION = range_kernel(_permk_body)
"""Amplitude ``r`` of every group to ``perm[r]``, times ``phases[r]``."""
PAULI = range_kernel(_pauli_body)
"""``alpha psi + beta P psi`` for a Pauli string with X or Y letters, over pairs (i, i^x)."""
Z_PAULI = range_kernel(_zpauli_body)
"""``alpha psi + beta P psi`` for a Pauli string of Z letters, over amplitudes."""
ABS_SQUARED = range_kernel(_abs_squared_body)
"""``out[i] = |psi[i]|^2`` in float64, over amplitudes: one pass (no square root, no
temporaries)."""
ABS_SQUARED_PERMUTED = range_kernel(_abs_squared_permuted_body)
"""``out[o] = |psi[i]|^2`` in float64, ``o`` the index ``i`` with its bits permuted, over the
tiles of ``indexing.permutation_tiles``: the probabilities of a register whose wires were
renamed, in one pass (no transpose of the probability vector)."""
PAULI_SUMS = summed_range_kernel(_sums_body)
"""``<psi|P_k|psi>``-style sums of every term (complex128 accumulator), over amplitudes."""
