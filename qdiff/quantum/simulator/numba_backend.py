"""Numba CPU back end: compiled loops over amplitude groups, threaded for large states.

Each kernel is one ``*_body(psi, lo, hi, ...)`` loop over the group range ``[lo, hi)`` (the
shared index math of :mod:`qdiff.quantum.simulator.backend`, compiled from the same Python
helpers), called by two thin drivers: a serial one, and a ``parallel=True`` one that ``prange``s
over chunks of groups. The drivers are separate functions, not one function compiled twice,
so Numba's on-disk cache (``cache=True``) never mixes serial and parallel machine code. States
below ``parallel_threshold`` amplitudes use the serial driver, because waking the thread pool
costs more than a pass over a small state.

Every kernel makes one pass over the amplitudes it touches: a 1-qubit gate reads and writes
each amplitude once.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import njit, prange

from qdiff.quantum.observables import parity
from qdiff.quantum.simulator.backend import IndexLayout, StatevectorBackend, insert_zero_bits

__all__ = ["NumbaBackend", "DEFAULT_PARALLEL_THRESHOLD"]

DEFAULT_PARALLEL_THRESHOLD = 1 << 15
"""Amplitudes at and above which the threaded drivers are used."""

_CHUNK = 1 << 12  # groups per parallel work item: large enough to amortise scheduling

_jit = njit(cache=True, nogil=True, fastmath=False)
_jit_par = njit(cache=True, nogil=True, parallel=True, fastmath=False)

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
def _dense1_body(psi, lo, hi, pos, cmask, bit, m00, m01, m10, m11):
    if pos[0] >= _MIN_RUN_BITS:
        span = np.int64(1) << pos[0]
        g = lo
        while g < hi:
            run = min(span - (g & (span - 1)), hi - g)
            i0 = _insert(g, pos) | cmask
            _pair_loop(psi[i0:i0 + run], psi[i0 + bit:i0 + bit + run], m00, m01, m10, m11)
            g += run
    else:
        for g in range(lo, hi):
            i0 = _insert(g, pos) | cmask
            i1 = i0 | bit
            a = psi[i0]
            b = psi[i1]
            psi[i0] = m00 * a + m01 * b
            psi[i1] = m10 * a + m11 * b


@_jit
def _dense2_body(psi, lo, hi, pos, cmask, b0, b1, m):
    if pos[0] >= _MIN_RUN_BITS:
        span = np.int64(1) << pos[0]
        g = lo
        while g < hi:
            run = min(span - (g & (span - 1)), hi - g)
            i0 = _insert(g, pos) | cmask
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


@_jit
def _densek_body(psi, lo, hi, pos, cmask, offs, m, tmp):
    dim = offs.shape[0]
    for g in range(lo, hi):
        base = _insert(g, pos) | cmask
        for r in range(dim):
            tmp[r] = psi[base | offs[r]]
        for r in range(dim):
            acc = m[r, 0] * tmp[0]
            for c in range(1, dim):
                acc += m[r, c] * tmp[c]
            psi[base | offs[r]] = acc


@_jit
def _diag_body(psi, lo, hi, pos, cmask, offs, d):
    nd = offs.shape[0]
    if pos[0] >= _MIN_RUN_BITS:
        span = np.int64(1) << pos[0]
        g = lo
        while g < hi:
            run = min(span - (g & (span - 1)), hi - g)
            base = _insert(g, pos) | cmask
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
def _perm1_body(psi, lo, hi, pos, cmask, bit, f0, f1):
    # x, y (and cx, cy via controls): swap the pair, with phases U|0> = f0|1>, U|1> = f1|0>.
    if pos[0] >= _MIN_RUN_BITS:
        span = np.int64(1) << pos[0]
        g = lo
        while g < hi:
            run = min(span - (g & (span - 1)), hi - g)
            i0 = _insert(g, pos) | cmask
            _swap_loop(psi[i0:i0 + run], psi[i0 + bit:i0 + bit + run], f0, f1)
            g += run
    else:
        for g in range(lo, hi):
            i0 = _insert(g, pos) | cmask
            i1 = i0 | bit
            a = psi[i0]
            psi[i0] = f1 * psi[i1]
            psi[i1] = f0 * a


@_jit
def _permk_body(psi, lo, hi, pos, cmask, offs, perm, phases, tmp):
    dim = offs.shape[0]
    for g in range(lo, hi):
        base = _insert(g, pos) | cmask
        for r in range(dim):
            tmp[r] = psi[base | offs[r]]
        for r in range(dim):
            psi[base | offs[perm[r]]] = phases[r] * tmp[r]


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
def _sums_body(psi, lo, hi, xs, zs, out):
    for k in range(xs.shape[0]):
        x = xs[k]
        z = zs[k]
        if x == 0:
            acc_r = 0.0
            for i in range(lo, hi):
                a = psi[i]
                p = np.float64(a.real) ** 2 + np.float64(a.imag) ** 2
                acc_r += -p if _parity(i & z) else p
            out[k] = acc_r
        else:
            acc = 0j
            for i in range(lo, hi):
                v = np.complex128(np.conj(psi[i ^ x]) * psi[i])
                acc += -v if _parity(i & z) else v
            out[k] = acc


# ---------------------------------------------------------------------------------------------
# drivers: serial, and parallel over chunks of groups
# ---------------------------------------------------------------------------------------------

@_jit
def _dense1_ser(psi, ng, pos, cmask, bit, m00, m01, m10, m11):
    _dense1_body(psi, 0, ng, pos, cmask, bit, m00, m01, m10, m11)


@_jit_par
def _dense1_par(psi, ng, pos, cmask, bit, m00, m01, m10, m11):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        _dense1_body(psi, lo, min(lo + _CHUNK, ng), pos, cmask, bit, m00, m01, m10, m11)


@_jit
def _dense2_ser(psi, ng, pos, cmask, b0, b1, m):
    _dense2_body(psi, 0, ng, pos, cmask, b0, b1, m)


@_jit_par
def _dense2_par(psi, ng, pos, cmask, b0, b1, m):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        _dense2_body(psi, lo, min(lo + _CHUNK, ng), pos, cmask, b0, b1, m)


@_jit
def _densek_ser(psi, ng, pos, cmask, offs, m):
    _densek_body(psi, 0, ng, pos, cmask, offs, m, np.empty(offs.shape[0], psi.dtype))


@_jit_par
def _densek_par(psi, ng, pos, cmask, offs, m):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        tmp = np.empty(offs.shape[0], psi.dtype)
        _densek_body(psi, lo, min(lo + _CHUNK, ng), pos, cmask, offs, m, tmp)


@_jit
def _diag_ser(psi, ng, pos, cmask, offs, d):
    _diag_body(psi, 0, ng, pos, cmask, offs, d)


@_jit_par
def _diag_par(psi, ng, pos, cmask, offs, d):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        _diag_body(psi, lo, min(lo + _CHUNK, ng), pos, cmask, offs, d)


@_jit
def _perm1_ser(psi, ng, pos, cmask, bit, f0, f1):
    _perm1_body(psi, 0, ng, pos, cmask, bit, f0, f1)


@_jit_par
def _perm1_par(psi, ng, pos, cmask, bit, f0, f1):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        _perm1_body(psi, lo, min(lo + _CHUNK, ng), pos, cmask, bit, f0, f1)


@_jit
def _permk_ser(psi, ng, pos, cmask, offs, perm, phases):
    _permk_body(psi, 0, ng, pos, cmask, offs, perm, phases, np.empty(offs.shape[0], psi.dtype))


@_jit_par
def _permk_par(psi, ng, pos, cmask, offs, perm, phases):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        tmp = np.empty(offs.shape[0], psi.dtype)
        _permk_body(psi, lo, min(lo + _CHUNK, ng), pos, cmask, offs, perm, phases, tmp)


@_jit
def _pauli_ser(psi, ng, x, z, hpos, alpha, beta):
    _pauli_body(psi, 0, ng, x, z, hpos, alpha, beta)


@_jit_par
def _pauli_par(psi, ng, x, z, hpos, alpha, beta):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        _pauli_body(psi, lo, min(lo + _CHUNK, ng), x, z, hpos, alpha, beta)


@_jit
def _zpauli_ser(psi, z, alpha, beta):
    _zpauli_body(psi, 0, psi.shape[0], z, alpha, beta)


@_jit_par
def _zpauli_par(psi, z, alpha, beta):
    n = psi.shape[0]
    for c in prange((n + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        _zpauli_body(psi, lo, min(lo + _CHUNK, n), z, alpha, beta)


@_jit
def _sums_ser(psi, xs, zs):
    out = np.zeros(xs.shape[0], np.complex128)
    _sums_body(psi, 0, psi.shape[0], xs, zs, out)
    return out


@_jit_par
def _sums_par(psi, xs, zs):
    n = psi.shape[0]
    nch = (n + _CHUNK - 1) // _CHUNK
    part = np.zeros((nch, xs.shape[0]), np.complex128)
    for c in prange(nch):
        lo = c * _CHUNK
        _sums_body(psi, lo, min(lo + _CHUNK, n), xs, zs, part[c])
    return part.sum(axis=0)


class NumbaBackend(StatevectorBackend):
    """Numba-compiled CPU back end (NumPy arrays, compiled kernels).

    ``parallel_threshold``: states with at least this many amplitudes use the threaded kernels
    (``NUMBA_NUM_THREADS`` / ``numba.set_num_threads`` choose the thread count).

    >>> be = NumbaBackend(); psi = be.zero_state(2)
    >>> be.apply_gate(psi, 2, "h", [1]).real.round(4).tolist()
    [0.7071, 0.0, 0.7071, 0.0]
    """

    name = "numba"

    def __init__(self, parallel_threshold: int = DEFAULT_PARALLEL_THRESHOLD) -> None:
        super().__init__(np)
        self.parallel_threshold = int(parallel_threshold)

    def _parallel(self, size: int) -> bool:
        return size >= self.parallel_threshold and numba.get_num_threads() > 1

    def _dense(self, state: Any, layout: IndexLayout, matrix: Any) -> None:
        par = self._parallel(state.shape[0])
        pos, cm, ng = layout.positions, layout.cmask, layout.num_groups
        k = len(layout.targets)
        if k == 1:
            m = matrix
            (_dense1_par if par else _dense1_ser)(state, ng, pos, cm, 1 << layout.targets[0],
                                                  m[0, 0], m[0, 1], m[1, 0], m[1, 1])
        elif k == 2:
            b0, b1 = 1 << layout.targets[0], 1 << layout.targets[1]
            (_dense2_par if par else _dense2_ser)(state, ng, pos, cm, b0, b1,
                                                  np.ascontiguousarray(matrix))
        else:
            (_densek_par if par else _densek_ser)(state, ng, pos, cm, layout.offsets,
                                                  np.ascontiguousarray(matrix))

    def _diagonal(self, state: Any, layout: IndexLayout, offsets: Any, diag: Any) -> None:
        par = self._parallel(state.shape[0])
        (_diag_par if par else _diag_ser)(state, layout.num_groups, layout.positions,
                                          layout.cmask, np.ascontiguousarray(offsets), diag)

    def _permutation(self, state: Any, layout: IndexLayout, perm: Any, phases: Any) -> None:
        par = self._parallel(state.shape[0])
        pos, cm, ng = layout.positions, layout.cmask, layout.num_groups
        if len(layout.targets) == 1:
            if perm[0] == 0:  # identity permutation with phases: a diagonal gate
                self._diagonal(state, layout, layout.offsets, phases)
                return
            (_perm1_par if par else _perm1_ser)(state, ng, pos, cm, 1 << layout.targets[0],
                                                phases[0], phases[1])
        else:
            (_permk_par if par else _permk_ser)(state, ng, pos, cm, layout.offsets, perm,
                                                phases)

    def _pauli(self, state: Any, num_qubits: int, x_mask: int, z_mask: int,
               alpha: complex, beta: complex) -> None:
        par = self._parallel(state.shape[0])
        a = state.dtype.type(alpha)
        b = state.dtype.type(beta)
        if x_mask == 0:
            (_zpauli_par if par else _zpauli_ser)(state, z_mask, a, b)
            return
        hpos = np.array([x_mask.bit_length() - 1], dtype=np.int64)
        ng = state.shape[0] >> 1
        (_pauli_par if par else _pauli_ser)(state, ng, x_mask, z_mask, hpos, a, b)

    def _pauli_sums(self, state: Any, x_masks: np.ndarray, z_masks: np.ndarray) -> np.ndarray:
        par = self._parallel(state.shape[0])
        return (_sums_par if par else _sums_ser)(state, x_masks, z_masks)

