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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from qdiff.quantum.simulator.backend import (
    GateOp,
    IndexLayout,
    StatevectorBackend,
    check_wires,
    index_layout,
    insert_zero_bits,
)

from ..lang.gates import GateSpec, gate_spec
from ..lang.observables import parity

__all__ = ["NumbaBackend", "DEFAULT_PARALLEL_THRESHOLD", "encode_block"]

DEFAULT_PARALLEL_THRESHOLD = 1 << 15
"""Amplitudes at and above which the threaded drivers are used."""

_CHUNK = 1 << 12  # groups per parallel work item: large enough to amortise scheduling

MAX_BLOCK_WIRES = 8
"""Widest block of gates the block kernel is given (see :meth:`NumbaBackend.fusion_width`)."""

MIN_BATCH = 32
"""Fewest groups of the other wires the block kernel needs (its rows' length)."""

FUSION_MIN_QUBITS = 9
"""Registers below this size have fewer than ``MIN_BATCH`` groups for any block: the block
kernel takes the whole register as one block (one group), a call per run of gates."""


def _block_wires(num_qubits: int, wires: tuple[int, ...]) -> tuple[int, ...]:
    """The wires the block kernel runs a block on: ``wires``, or below ``FUSION_MIN_QUBITS``
    qubits the whole register (one group, the only batch layout such a register has)."""
    return tuple(range(num_qubits)) if num_qubits < FUSION_MIN_QUBITS else wires

_BLOCK_AMPS = 1 << 15  # amplitudes per gathered batch (512 KiB as split re/im): in L2

_jit = njit(cache=True, nogil=True, fastmath=False)
_jit_par = njit(cache=True, nogil=True, parallel=True, fastmath=False)
# the block kernels: FMA contraction only (a product rounds once instead of twice), so that
# the complex 2x2 and 4x4 arithmetic compiles to fused multiply-adds
_jit_blk = njit(cache=True, nogil=True, fastmath={"contract"})
# the block ops that the adjoint kernel (numba_adjoint) shares: inlined where they are called,
# so that each kernel compiles them with its own flags (the adjoint's rounding stays its own)
_jit_op = njit(cache=True, nogil=True, inline="always")

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
def _pair_body(psi, lo, hi, pos, cmask, bit, swap, m00, m01, m10, m11):
    # A 2x2 on the pairs (i0, i0 | bit). `swap`: m is anti-diagonal (x, y, and cx, cy via
    # controls: U|0> = m10|1>, U|1> = m01|0>), a swap with phases, without the zeros.
    if pos[0] >= _MIN_RUN_BITS:
        span = np.int64(1) << pos[0]
        g = lo
        while g < hi:
            run = min(span - (g & (span - 1)), hi - g)
            i0 = _insert(g, pos) | cmask
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
def _pair_ser(psi, ng, pos, cmask, bit, swap, m00, m01, m10, m11):
    _pair_body(psi, 0, ng, pos, cmask, bit, swap, m00, m01, m10, m11)


@_jit_par
def _pair_par(psi, ng, pos, cmask, bit, swap, m00, m01, m10, m11):
    for c in prange((ng + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        _pair_body(psi, lo, min(lo + _CHUNK, ng), pos, cmask, bit, swap, m00, m01, m10, m11)


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
            (_pair_par if par else _pair_ser)(state, ng, pos, cm, 1 << layout.targets[0], False,
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
            zero = state.dtype.type(0)
            (_pair_par if par else _pair_ser)(state, ng, pos, cm, 1 << layout.targets[0], True,
                                              zero, phases[1], phases[0], zero)
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

    # -- the adjoint method (kernels in numba_adjoint) ----------------------------------------
    def _pauli_cross(self, bra: Any, ket: Any, x_masks: np.ndarray,
                     z_masks: np.ndarray) -> np.ndarray:
        from qdiff.quantum.simulator.numba_adjoint import pauli_cross

        return pauli_cross(bra, ket, x_masks, z_masks, self._parallel(ket.shape[0]))

    def _pauli_accumulate(self, out: Any, state: Any, num_qubits: int, x_masks: np.ndarray,
                          z_masks: np.ndarray, factors: np.ndarray) -> None:
        from qdiff.quantum.simulator.numba_adjoint import pauli_accumulate

        pauli_accumulate(out, state, num_qubits, x_masks, z_masks, factors,
                         self._parallel(state.shape[0]))

    def adjoint_block(self, psi: Any, lam: Any, num_qubits: int, wires: Sequence[int],
                      ops: Sequence[GateOp], want: Sequence[bool],
                      filled: dict | None = None) -> np.ndarray:
        """The reverse sweep of a gate block on (ψ, λ) in one pass over each state (the base
        class has the contract; the kernel is ``numba_adjoint.adjoint_block``), when at least
        ``MIN_BATCH`` groups of the other wires exist, or on the whole register below
        ``FUSION_MIN_QUBITS`` qubits (one group: a call for the block instead of Python
        work per gate); gate by gate otherwise.

        >>> be = NumbaBackend(); psi = be.apply_gate(be.zero_state(6), 6, "ry", [0], [0.4])
        >>> lam = be.apply_pauli_string(psi.copy(), 6, "Z", [0])
        >>> g = be.adjoint_block(psi, lam, 6, [0], [GateOp("ry", (0,), (0.4,))], [True])
        >>> bool(round(float(g[0]), 10) == round(-np.sin(0.4), 10)), round(float(abs(psi[0])), 10)
        (True, 1.0)
        """
        from qdiff.quantum.simulator import numba_adjoint

        n = self._num_qubits_of(psi, num_qubits, "adjoint_block")
        ws = tuple(sorted(check_wires(wires, n, "adjoint block")))
        if lam is None:  # ψ only: the forward block kernel on the inverse gates
            inverse = []
            for op in reversed(ops):
                op = GateOp(*op)
                spec, params = gate_spec(op.gate).inverse(*op.params)
                gate = spec.static["matrix"] if spec.name == "unitary" else spec
                inverse.append(GateOp(gate, tuple(op.wires), params))
            self.apply_fused(psi, n, ws, inverse)
            return np.zeros(len(ops))
        self._num_qubits_of(lam if lam.ndim == 1 else lam[0], n, "adjoint_block")
        grads = numba_adjoint.adjoint_block(psi, lam, n, _block_wires(n, ws), ops, want,
                                            MIN_BATCH, self._parallel(psi.shape[0]), filled)
        if grads is None:
            return super().adjoint_block(psi, lam, n, ws, ops, want)
        return grads

    def fusion_width(self, num_qubits: int) -> int:
        """Blocks up to ``MAX_BLOCK_WIRES`` wide while a batch of ``MIN_BATCH`` groups is left
        for the block kernel's rows; below ``FUSION_MIN_QUBITS`` qubits the whole register,
        one kernel call per run of gates (n = 4, 55 gates: 0.34 ms against 0.54 ms gate by
        gate, the Python cost per gate being most of a small register's time).

        >>> NumbaBackend().fusion_width(20), NumbaBackend().fusion_width(10)
        (8, 5)
        >>> NumbaBackend().fusion_width(4)  # the register
        4
        """
        if num_qubits < FUSION_MIN_QUBITS:
            return num_qubits
        return max(2, min(MAX_BLOCK_WIRES, num_qubits - MIN_BATCH.bit_length() + 1))

    def apply_fused(self, state: Any, num_qubits: int, wires: Sequence[int],
                    ops: Sequence[GateOp]) -> Any:
        """One pass over the state for the whole gate sequence: the block kernel (see
        :func:`encode_block`), when at least ``MIN_BATCH`` groups of the other wires exist,
        or on the whole register below ``FUSION_MIN_QUBITS`` qubits (one group).

        >>> be = NumbaBackend(); psi = be.zero_state(6)
        >>> ops = [GateOp("h", (0,)), GateOp("cx", (0, 1))]
        >>> be.apply_fused(psi, 6, [0, 1], ops)[[0, 3]].real.round(4).tolist()
        [0.7071, 0.7071]
        """
        n = self._num_qubits_of(state, num_qubits, "apply_fused")
        ws = _block_wires(n, tuple(sorted(check_wires(wires, n, "fused gate"))))
        k = len(ws)
        groups = 1 << (n - k)
        batch = min(groups, max(MIN_BATCH, _BLOCK_AMPS >> k))
        if 1 < groups < MIN_BATCH:
            return super().apply_fused(state, n, wires, ops)
        layout = index_layout(n, ws)
        arrays = encode_block(ws, ops)  # checks that the ops stay on the block's wires
        nb = groups // batch
        if self._parallel(state.shape[0]) and nb > 1:
            _blk_par(state, nb, min(nb, 8 * numba.get_num_threads()), batch, layout.positions,
                     layout.offsets, *arrays)
        else:
            _blk_ser(state, nb, batch, layout.positions, layout.offsets, *arrays)
        return state



# ---------------------------------------------------------------------------------------------
# fused blocks: a gate sequence confined to k wires, applied in cache, one pass over the state
#
# The state splits into 2^(n-k) groups of 2^k amplitudes (one per setting of the other wires).
# A batch of B consecutive groups is gathered into a split real/imaginary buffer of 2^k rows
# by B columns (row r = amplitude r of each group), every gate of the block is applied to the
# buffer, and the batch is scattered back. Each gate then works on whole rows, contiguous
# runs of B doubles, so the inner loops vectorize whatever the gate's wires are. Permutation
# gates (x, cx, swap, mcx, ...) only permute a row map; rows move once, at the scatter.
#
# The adjoint block kernel (numba_adjoint) runs the same batches on two states at once, with
# the gather, the scatter and the ops below: an op takes ``buf``, a tuple of the split
# buffers of one or more states (buf[2s] and buf[2s + 1]: the real and imaginary parts of
# state s, each 2^k rows of B columns), and applies itself to every state in it, under one
# row map.
# ---------------------------------------------------------------------------------------------

OP_DENSE1, OP_DENSE2, OP_DENSEK, OP_DIAG, OP_PERM, OP_REAL1, OP_REAL2 = 0, 1, 2, 3, 4, 5, 6
"""Op kinds of the block kernel (see :func:`encode_block`)."""


@_jit_blk
def _blk_low(offs):
    # the block's wires 0, 1, ..., log2(low) - 1 are wires 0, 1, ... of the state: each group
    # is 2^k / low runs of `low` contiguous amplitudes
    low = 1
    while low < offs.shape[0] and offs[low] == low:
        low *= 2
    return low


@_jit_blk
def _blk_workspace(R, B, dim):
    # what a range of batches needs besides its buffers: the row map, the group bases, and
    # the scratch of an op on up to `dim` rows (row numbers, row offsets, a column's re, im)
    return (np.empty(R, np.int64), np.empty(B, np.int64), np.empty(dim, np.int64),
            np.empty(dim, np.int64), np.empty(dim), np.empty(dim))


@_jit_blk
def _blk_start(g0, B, pos, bases, rowmap):
    # A batch of groups g0..g0+B-1: the identity row map, and the layout of the groups, with
    # their bases: 0, contiguous, when B is below the lowest block wire (bases[0]); 1, runs of
    # 2^pos[0] >= 8 contiguous groups (bases[b] at the start of each run); 2, a transpose
    # (every bases[b]).
    for r in range(rowmap.shape[0]):
        rowmap[r] = r
    if (np.int64(1) << pos[0]) >= B:
        bases[0] = _insert(g0, pos)
        return 0
    if pos[0] >= 3:
        run = np.int64(1) << pos[0]
        for b in range(0, B, run):
            bases[b] = _insert(g0 + b, pos)
        return 1
    for b in range(B):
        bases[b] = _insert(g0 + b, pos)
    return 2


@_jit_blk
def _blk_gather(psi, re, im, B, offs, low, layout, bases, pos):
    # the batch of `psi` into re/im: row r = amplitude r of each group (`low` as _blk_low)
    R = offs.shape[0]
    if layout == 0:
        for r in range(R):
            o = bases[0] | offs[r]
            src = psi[o:o + B]
            dr = re[r * B:(r + 1) * B]
            di = im[r * B:(r + 1) * B]
            for b in range(B):
                v = src[b]
                dr[b] = v.real
                di[b] = v.imag
    elif layout == 1:
        run = np.int64(1) << pos[0]
        for r in range(R):
            o = offs[r]
            for b0 in range(0, B, run):
                s = bases[b0] | o
                src = psi[s:s + run]
                dr = re[r * B + b0:r * B + b0 + run]
                di = im[r * B + b0:r * B + b0 + run]
                for b in range(run):
                    v = src[b]
                    dr[b] = v.real
                    di[b] = v.imag
    else:  # a transpose, by tiles of 8 groups so that buffer writes fill cache lines
        for b0 in range(0, B, 8):
            for rh in range(0, R, low):
                oh = offs[rh]
                for rl in range(low):
                    p = (rh + rl) * B + b0
                    for t in range(8):
                        v = psi[(bases[b0 + t] | oh) + rl]
                        re[p + t] = v.real
                        im[p + t] = v.imag


@_jit_blk
def _blk_scatter(psi, re, im, rowmap, B, offs, low, layout, bases, pos):
    # re/im back into the batch of `psi`, reading each logical row from where the row map put it
    R = offs.shape[0]
    if layout == 0:
        for r in range(R):
            o = bases[0] | offs[r]
            p = rowmap[r] * B
            dst = psi[o:o + B]
            sr = re[p:p + B]
            si = im[p:p + B]
            for b in range(B):
                dst[b] = complex(sr[b], si[b])
    elif layout == 1:
        run = np.int64(1) << pos[0]
        for r in range(R):
            o = offs[r]
            p = rowmap[r] * B
            for b0 in range(0, B, run):
                s = bases[b0] | o
                dst = psi[s:s + run]
                sr = re[p + b0:p + b0 + run]
                si = im[p + b0:p + b0 + run]
                for b in range(run):
                    dst[b] = complex(sr[b], si[b])
    else:
        for b0 in range(0, B, 8):
            for rh in range(0, R, low):
                oh = offs[rh]
                for rl in range(low):
                    p = rowmap[rh + rl] * B + b0
                    for t in range(8):
                        psi[(bases[b0 + t] | oh) + rl] = complex(re[p + t], im[p + t])


@_jit_op
def _blk_scale(xr, xi, dr, di):
    # one row times d = dr + i di
    for b in range(xr.shape[0]):
        ar = xr[b]
        ai = xi[b]
        xr[b] = dr * ar - di * ai
        xi[b] = dr * ai + di * ar


@_jit_blk
def _local_offsets(tgt, m, out):
    # out[t] = the local row bits of target pattern t (bit j of t -> target bit tgt[j]);
    # returns the mask of all targets
    for t in range(1 << m):
        o = 0
        for j in range(m):
            if (t >> j) & 1:
                o |= tgt[j]
        out[t] = o
    return out[(1 << m) - 1]


@_jit_blk
def _row_pattern(r, tgt, m):
    # the target pattern of row r (bit j set where r has target bit tgt[j])
    t = 0
    for j in range(m):
        if r & tgt[j]:
            t |= 1 << j
    return t


@_jit_op
def _blk_dense1(buf, rowmap, B, tb, cmask, pool, mo, real):
    # a 2x2 on row bit tb; `real`: the matrix is (ry, h, products of real gates), half the
    # arithmetic
    m00r, m00i = pool[mo].real, pool[mo].imag
    m01r, m01i = pool[mo + 1].real, pool[mo + 1].imag
    m10r, m10i = pool[mo + 2].real, pool[mo + 2].imag
    m11r, m11i = pool[mo + 3].real, pool[mo + 3].imag
    for r0 in range(rowmap.shape[0]):
        if (r0 & tb) != 0 or (r0 & cmask) != cmask:
            continue
        p0 = rowmap[r0] * B
        p1 = rowmap[r0 | tb] * B
        for s in range(0, len(buf), 2):
            xr = buf[s][p0:p0 + B]
            xi = buf[s + 1][p0:p0 + B]
            yr = buf[s][p1:p1 + B]
            yi = buf[s + 1][p1:p1 + B]
            if real:
                for b in range(B):
                    ar = xr[b]
                    ai = xi[b]
                    br = yr[b]
                    bi = yi[b]
                    xr[b] = m00r * ar + m01r * br
                    xi[b] = m00r * ai + m01r * bi
                    yr[b] = m10r * ar + m11r * br
                    yi[b] = m10r * ai + m11r * bi
                continue
            for b in range(B):
                ar = xr[b]
                ai = xi[b]
                br = yr[b]
                bi = yi[b]
                xr[b] = m00r * ar - m00i * ai + m01r * br - m01i * bi
                xi[b] = m00r * ai + m00i * ar + m01r * bi + m01i * br
                yr[b] = m10r * ar - m10i * ai + m11r * br - m11i * bi
                yi[b] = m10r * ai + m10i * ar + m11r * bi + m11i * br


@_jit_blk
def _blk_quad(rowmap, r0, ta, tb, B):
    # the buffer offsets of rows r0, r0 | ta, r0 | tb, r0 | ta | tb
    return (rowmap[r0] * B, rowmap[r0 | ta] * B, rowmap[r0 | tb] * B,
            rowmap[r0 | ta | tb] * B)


@_jit_blk
def _real2_rows(s0, s1, s2, s3, B, a00, a01, a10, a11, b00, b01, b10, b11):
    for b in range(B):
        x0 = s0[b]
        x1 = s1[b]
        x2 = s2[b]
        x3 = s3[b]
        y0 = a00 * x0 + a01 * x1
        y1 = a10 * x0 + a11 * x1
        y2 = a00 * x2 + a01 * x3
        y3 = a10 * x2 + a11 * x3
        s0[b] = b00 * y0 + b01 * y2
        s2[b] = b10 * y0 + b11 * y2
        s1[b] = b00 * y1 + b01 * y3
        s3[b] = b10 * y1 + b11 * y3


@_jit_blk
def _blk_real2(buf, rowmap, B, ta, tb, pool, mo):
    # two real 2x2 on two wires in one sweep (A on ta, then B on tb): half the buffer traffic
    a00, a01, a10, a11 = pool[mo].real, pool[mo + 1].real, pool[mo + 2].real, pool[mo + 3].real
    b00, b01, b10, b11 = (pool[mo + 4].real, pool[mo + 5].real, pool[mo + 6].real,
                          pool[mo + 7].real)
    for r0 in range(rowmap.shape[0]):
        if (r0 & (ta | tb)) != 0:
            continue
        p0, p1, p2, p3 = _blk_quad(rowmap, r0, ta, tb, B)
        for s in range(len(buf)):  # a real matrix: re and im alike
            _real2_rows(buf[s][p0:p0 + B], buf[s][p1:p1 + B], buf[s][p2:p2 + B],
                        buf[s][p3:p3 + B], B, a00, a01, a10, a11, b00, b01, b10, b11)


@_jit_blk
def _blk_dense2(buf, rowmap, B, t0, t1, cmask, pool, mo):
    mr = np.empty(16)
    mi = np.empty(16)
    for e in range(16):
        mr[e] = pool[mo + e].real
        mi[e] = pool[mo + e].imag
    for r0 in range(rowmap.shape[0]):
        if (r0 & (t0 | t1)) != 0 or (r0 & cmask) != cmask:
            continue
        p0, p1, p2, p3 = _blk_quad(rowmap, r0, t0, t1, B)
        for s in range(0, len(buf), 2):
            ar = buf[s][p0:p0 + B]
            ai = buf[s + 1][p0:p0 + B]
            br = buf[s][p1:p1 + B]
            bi = buf[s + 1][p1:p1 + B]
            cr = buf[s][p2:p2 + B]
            ci = buf[s + 1][p2:p2 + B]
            dr = buf[s][p3:p3 + B]
            di = buf[s + 1][p3:p3 + B]
            for b in range(B):
                x0r = ar[b]
                x0i = ai[b]
                x1r = br[b]
                x1i = bi[b]
                x2r = cr[b]
                x2i = ci[b]
                x3r = dr[b]
                x3i = di[b]
                ar[b] = (mr[0] * x0r - mi[0] * x0i + mr[1] * x1r - mi[1] * x1i
                         + mr[2] * x2r - mi[2] * x2i + mr[3] * x3r - mi[3] * x3i)
                ai[b] = (mr[0] * x0i + mi[0] * x0r + mr[1] * x1i + mi[1] * x1r
                         + mr[2] * x2i + mi[2] * x2r + mr[3] * x3i + mi[3] * x3r)
                br[b] = (mr[4] * x0r - mi[4] * x0i + mr[5] * x1r - mi[5] * x1i
                         + mr[6] * x2r - mi[6] * x2i + mr[7] * x3r - mi[7] * x3i)
                bi[b] = (mr[4] * x0i + mi[4] * x0r + mr[5] * x1i + mi[5] * x1r
                         + mr[6] * x2i + mi[6] * x2r + mr[7] * x3i + mi[7] * x3r)
                cr[b] = (mr[8] * x0r - mi[8] * x0i + mr[9] * x1r - mi[9] * x1i
                         + mr[10] * x2r - mi[10] * x2i + mr[11] * x3r - mi[11] * x3i)
                ci[b] = (mr[8] * x0i + mi[8] * x0r + mr[9] * x1i + mi[9] * x1r
                         + mr[10] * x2i + mi[10] * x2r + mr[11] * x3i + mi[11] * x3r)
                dr[b] = (mr[12] * x0r - mi[12] * x0i + mr[13] * x1r - mi[13] * x1i
                         + mr[14] * x2r - mi[14] * x2i + mr[15] * x3r - mi[15] * x3i)
                di[b] = (mr[12] * x0i + mi[12] * x0r + mr[13] * x1i + mi[13] * x1r
                         + mr[14] * x2i + mi[14] * x2r + mr[15] * x3i + mi[15] * x3r)


@_jit_op
def _blk_densek(buf, rowmap, B, tgt, m, cmask, pool, mo, toff, rows, xr, xi):
    dim = 1 << m
    tmask = _local_offsets(tgt, m, toff)
    for r0 in range(rowmap.shape[0]):
        if (r0 & tmask) != 0 or (r0 & cmask) != cmask:
            continue
        for t in range(dim):
            rows[t] = rowmap[r0 | toff[t]] * B
        for s in range(0, len(buf), 2):
            re = buf[s]
            im = buf[s + 1]
            for b in range(B):
                for t in range(dim):
                    xr[t] = re[rows[t] + b]
                    xi[t] = im[rows[t] + b]
                for u in range(dim):
                    accr = 0.0
                    acci = 0.0
                    for t in range(dim):
                        v = pool[mo + u * dim + t]
                        accr += v.real * xr[t] - v.imag * xi[t]
                        acci += v.real * xi[t] + v.imag * xr[t]
                    re[rows[u] + b] = accr
                    im[rows[u] + b] = acci


@_jit_blk
def _blk_diag(buf, rowmap, B, tgt, m, cmask, pool, mo):
    for r in range(rowmap.shape[0]):
        if (r & cmask) != cmask:
            continue
        d = pool[mo + _row_pattern(r, tgt, m)]
        if d == 1:
            continue
        p = rowmap[r] * B
        for s in range(0, len(buf), 2):
            _blk_scale(buf[s][p:p + B], buf[s + 1][p:p + B], d.real, d.imag)


@_jit_op
def _blk_perm(buf, rowmap, B, tgt, m, cmask, pool, mo, perm, po, toff, rows):
    # U|t> = phases[t] |perm[t]>: logical row t moves to perm[t] (only the row map changes)
    dim = 1 << m
    tmask = _local_offsets(tgt, m, toff)
    for r0 in range(rowmap.shape[0]):
        if (r0 & tmask) != 0 or (r0 & cmask) != cmask:
            continue
        for t in range(dim):
            rows[t] = rowmap[r0 | toff[t]]
        for t in range(dim):
            rowmap[r0 | toff[perm[po + t]]] = rows[t]
            d = pool[mo + t]
            if d != 1:
                p = rows[t] * B
                for s in range(0, len(buf), 2):
                    _blk_scale(buf[s][p:p + B], buf[s + 1][p:p + B], d.real, d.imag)


@_jit_blk
def _blk_batch(psi, g0, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs,
               buf, rowmap, bases, toff, rows, xr, xi):
    layout = _blk_start(g0, B, pos, bases, rowmap)
    _blk_gather(psi, buf[0], buf[1], B, offs, low, layout, bases, pos)
    for q in range(kinds.shape[0]):
        kind = kinds[q]
        cm = cmasks[q]
        mo = moffs[q]
        if kind == 0:  # `real` constant: the inlined op keeps one of its two loops
            _blk_dense1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, False)
        elif kind == 5:
            _blk_dense1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, True)
        elif kind == 1:
            _blk_dense2(buf, rowmap, B, tgts[q, 0], tgts[q, 1], cm, pool, mo)
        elif kind == 2:
            _blk_densek(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, toff, rows, xr, xi)
        elif kind == 3:
            _blk_diag(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo)
        elif kind == 6:
            _blk_real2(buf, rowmap, B, tgts[q, 0], tgts[q, 1], pool, mo)
        else:
            _blk_perm(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, perm, poffs[q], toff, rows)
    _blk_scatter(psi, buf[0], buf[1], rowmap, B, offs, low, layout, bases, pos)


@_jit_blk
def _blk_range(psi, lo, hi, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs):
    R = offs.shape[0]
    low = _blk_low(offs)
    buf = (np.empty(R * B), np.empty(R * B))  # separate arrays: rows of one 2-D array ran slower
    rowmap, bases, toff, rows, xr, xi = _blk_workspace(R, B, 1 << tgts.shape[1])
    for batch in range(lo, hi):
        _blk_batch(psi, batch * B, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool,
                   perm, poffs, buf, rowmap, bases, toff, rows, xr, xi)


@_jit_blk
def _blk_ser(psi, nb, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs):
    _blk_range(psi, 0, nb, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs)


@_jit_par
def _blk_par(psi, nb, nch, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs):
    # nch work items of about nb / nch batches each
    for c in prange(nch):
        _blk_range(psi, c * nb // nch, (c + 1) * nb // nch, B, pos, offs, kinds, cmasks, ntg,
                   tgts, moffs, pool, perm, poffs)


# ---------------------------------------------------------------------------------------------
# encoding a gate sequence for the block kernel
#
# The structure of a block (which gates on which wires) is encoded once and cached: the op
# kinds, masks and pool offsets, and which one-qubit gates fold into one 2x2. Each call only
# computes the matrices from the parameters, one vectorized NumPy step per gate type.
# ---------------------------------------------------------------------------------------------

@dataclass(eq=False)
class _Skeleton:
    keep: tuple[Any, ...]  # gates named by id() in the cache key stay alive with the entry
    kinds: np.ndarray
    cmasks: np.ndarray
    ntg: np.ndarray
    tgts: np.ndarray
    moffs: np.ndarray
    perm: np.ndarray
    poffs: np.ndarray
    pool_fixed: np.ndarray  # the pool with constant data filled in
    # runs of one-qubit gates multiplied into one 2x2, grouped by the gates they multiply:
    # (gates, op indices [runs, len(gates)], entry numbers, pool offsets, mode), mode "real"
    # or "complex" (the kind follows the product: diagonal, anti-diagonal or full) or
    # "fixed" (one half of a pair of real runs)
    folds: list[tuple[tuple[Any, ...], np.ndarray, np.ndarray, np.ndarray, str]]
    # multi-qubit ops computed at every call: (entry number, op index, spec, kind), kind
    # "dense" | "perm" for parametric table gates, "matrix" for raw matrices
    dynamic: list[tuple[int, int, GateSpec | None, str]]
    # merged diagonals: (pool offset, size, [([(spec, op index)], control ok, index)]):
    # each item's diagonal d (2^targets) enters as d[index] where its controls are 1
    diagonals: list[tuple[int, int, list[tuple[list[tuple[GateSpec, int]], np.ndarray,
                                               np.ndarray]]]]


def _split(spec: GateSpec, wires: tuple[int, ...]) -> tuple[GateSpec, tuple[int, ...],
                                                             tuple[int, ...], str]:
    """(the gate acting on the targets, controls, targets, kind) of one table gate."""
    controls: tuple[int, ...] = ()
    if spec.structure == "controlled":
        controls, wires, spec = wires[:spec.num_controls], wires[spec.num_controls:], spec.base
    kind = {"diagonal": "diag", "permutation": "perm"}.get(spec.structure, "dense")
    return spec, controls, wires, kind


def _op_data(spec: GateSpec, kind: str, params: tuple[float, ...]) -> np.ndarray:
    if kind == "diag":
        return spec.diagonal(*params)
    if kind == "perm":
        return np.asarray(spec.permutation()[1], np.complex128)
    return spec.matrix(*params)


def _op_table(count: int, width: int) -> tuple[np.ndarray, ...]:
    """The zeroed op arrays of ``count`` ops of a block kernel (this one's and the adjoint
    one's): kinds, control masks, numbers of targets, target masks ``[count, width]``, pool
    offsets, perm offsets."""
    return (np.zeros(count, np.int64), np.zeros(count, np.int64), np.zeros(count, np.int64),
            np.zeros((count, width), np.int64), np.zeros(count, np.int64),
            np.zeros(count, np.int64))


def _always_real(spec: GateSpec) -> bool:
    """Whether a one-qubit table gate's matrix is real for every parameter (ry, h, x, z)."""
    probes = [()] if spec.num_params == 0 else [(0.37,) * spec.num_params,
                                                 (-1.9,) * spec.num_params]
    return all(not np.any(spec.matrix(*p).imag) for p in probes)


def _build_skeleton(ws: tuple[int, ...], ops: list[tuple[Any, tuple[int, ...]]]) -> _Skeleton:
    # Encoding order: one-qubit gates wait on their wire (pending) until a multi-qubit gate
    # comes; then every wire's run is emitted, split into its part up to the last
    # non-diagonal gate (a real or complex 2x2) and its trailing diagonal gates, which join
    # the diagonal gates of all wires, and diagonal multi-qubit gates, in ONE diagonal op.
    local = {w: j for j, w in enumerate(ws)}
    entries: list[list[Any]] = []  # [kind, cmask, tmasks, size, payload]
    pending: dict[int, list[int]] = {}
    diag_items: list[tuple[list[int], int, tuple[int, ...]]] = []  # (ops, cmask, tbits)
    specs: list[GateSpec | None] = []
    info: list[tuple[str, bool]] = []  # per op: kind, real

    def emit_diagonal() -> None:
        if diag_items:
            bits = sorted({b for _, cmask, tbits in diag_items for b in tbits}
                          | {b for _, cmask, _ in diag_items for b in range(len(ws))
                             if cmask >> b & 1})
            entries.append(["diagonal", 0, tuple(1 << b for b in bits), 1 << len(bits),
                            (bits, list(diag_items))])
            diag_items.clear()

    def flush_all() -> None:
        if pending and diag_items:
            emit_diagonal()  # diagonals gathered before the pending runs come first
        real_heads: list[tuple[int, list[int]]] = []
        for bit in sorted(pending):
            chain = pending[bit]
            last = max((k for k, i in enumerate(chain) if info[i][0] != "diag"), default=-1)
            head, tail = chain[:last + 1], chain[last + 1:]
            if head and not all(info[i][1] for i in head):
                head, tail = chain, []  # a complex 2x2 anyway: fold the diagonals into it
            if head and all(info[i][1] for i in head) and not all(
                    info[i][0] in ("perm", "diag") for i in head):
                real_heads.append((bit, head))  # (x, z, ... alone cost nothing: not paired)
            elif head:
                entries.append(["fold", 0, (1 << bit,), 4, head])
            if tail:
                diag_items.append((tail, 0, (bit,)))
        for k in range(0, len(real_heads) - 1, 2):  # real runs two by two: one sweep each
            (a, head_a), (b, head_b) = real_heads[k], real_heads[k + 1]
            entries.append(["fold2", 0, (1 << a, 1 << b), 8, (head_a, head_b)])
        if len(real_heads) % 2:
            bit, head = real_heads[-1]
            entries.append(["fold", 0, (1 << bit,), 4, head])
        pending.clear()

    for index, (gate, wires) in enumerate(ops):
        if any(w not in local for w in wires):
            raise ValueError(f"fused gate on wires {ws}: a gate acts on {wires}, outside them")
        if isinstance(gate, np.ndarray):
            m = np.asarray(gate, np.complex128)
            if m.shape != (1 << len(wires),) * 2:
                raise ValueError(f"a matrix of shape {m.shape} cannot act on wires {wires}")
            spec, controls, targets, kind, real = None, (), wires, "matrix", False
        else:
            full = gate_spec(gate)
            if len(wires) != full.num_qubits:
                raise ValueError(f"gate {full.name!r} acts on {full.num_qubits} wire(s), "
                                 f"got {wires}")
            spec, controls, targets, kind = _split(full, wires)
            real = not controls and len(targets) == 1 and _always_real(spec)
        specs.append(spec)
        info.append((kind, real))
        if not controls and len(targets) == 1:
            pending.setdefault(local[targets[0]], []).append(index)
            continue
        flush_all()
        cbits = [local[w] for w in controls]
        tbits = tuple(local[w] for w in targets)
        cmask = sum(1 << b for b in cbits)
        if kind == "diag":
            diag_items.append(([index], cmask, tbits))
            continue
        emit_diagonal()
        size = (1 << len(tbits)) ** (2 if kind in ("dense", "matrix") else 1)
        entries.append([kind, cmask, tuple(1 << b for b in tbits), size, index])
    flush_all()
    emit_diagonal()

    count = len(entries)
    width = max([len(e[2]) for e in entries] + [1])
    kinds, cmasks, ntg, tgts, moffs, poffs = _op_table(count, width)
    perms: list[int] = [1, 0]  # slot 0: the swap of a folded anti-diagonal 2x2
    size = 0
    fold_groups: dict[tuple[Any, ...], list[tuple[int, list[int], int]]] = {}
    dynamic: list[tuple[int, int, GateSpec | None, str]] = []
    diagonals: list[tuple[int, int, list[tuple[list[tuple[GateSpec, int]], np.ndarray,
                                               np.ndarray]]]] = []
    fixed: list[tuple[int, np.ndarray]] = []
    for q, (kind, cmask, tmasks, sz, payload) in enumerate(entries):
        m = len(tmasks)
        cmasks[q], ntg[q], moffs[q] = cmask, m, size
        tgts[q, :m] = tmasks
        size += sz
        if kind in ("fold", "fold2"):
            halves = [payload] if kind == "fold" else list(payload)
            if kind == "fold2":
                kinds[q] = OP_REAL2
            for half, chain in enumerate(halves):
                mode = ("fixed" if kind == "fold2" else
                        "real" if all(info[i][1] for i in chain) else "complex")
                key = (mode, *(id(specs[i]) if specs[i] is not None else -1 - i
                               for i in chain))
                fold_groups.setdefault(key, []).append((q, chain, int(moffs[q]) + 4 * half))
            continue
        if kind == "diagonal":
            kinds[q] = OP_DIAG
            bits, items = payload
            t = np.arange(1 << len(bits))
            rows = sum(((t >> j) & 1) << b for j, b in enumerate(bits))  # local row bits
            expanded = []
            for op_indices, icmask, tbits in items:
                ok = (rows & icmask) == icmask
                idx = sum(((rows >> b) & 1) << j for j, b in enumerate(tbits))
                expanded.append(([(specs[i], i) for i in op_indices], ok, idx))
            diagonals.append((int(moffs[q]), sz, expanded))
            continue
        kinds[q] = {"perm": OP_PERM}.get(
            kind, OP_DENSE1 if m == 1 else OP_DENSE2 if m == 2 else OP_DENSEK)
        spec = specs[payload]
        if kind == "perm":
            poffs[q] = len(perms)
            perms.extend(int(p) for p in spec.permutation()[0])
        if kind == "matrix":  # read at every call: the array may change in place
            dynamic.append((q, payload, spec, kind))
        elif spec.num_params == 0:
            fixed.append((q, np.ravel(_op_data(spec, kind, ()))))
        else:
            dynamic.append((q, payload, spec, kind))
    pool = np.zeros(max(size, 1), np.complex128)
    for q, data in fixed:
        pool[moffs[q]:moffs[q] + data.size] = data
    folds = []
    for key, group in fold_groups.items():
        chain = group[0][1]
        folds.append((tuple(specs[i] if specs[i] is not None else ops[i][0] for i in chain),
                      np.array([g[1] for g in group], np.int64),
                      np.array([g[0] for g in group], np.int64),
                      np.array([g[2] for g in group], np.int64), key[0]))
    keep = tuple(g for g, _ in ops if not isinstance(g, str))
    return _Skeleton(keep, kinds, cmasks, ntg, tgts, moffs, np.array(perms, np.int64), poffs,
                     pool, folds, dynamic, diagonals)


def _stacked_matrices(spec: Any, params: list[tuple[float, ...]]) -> np.ndarray:
    """The 2x2 matrices of one one-qubit gate for many parameter tuples: [N, 2, 2]."""
    count = len(params)
    if isinstance(spec, np.ndarray):
        return np.broadcast_to(np.asarray(spec, np.complex128), (count, 2, 2))
    if spec.num_params == 0:
        return np.broadcast_to(spec.matrix(), (count, 2, 2))
    theta = np.array(params, np.float64)
    if spec.pauli_word is not None:
        half = 0.5 * theta[:, 0]
        c, s = np.cos(half), np.sin(half)
        pauli = {"X": ((0, 1), (1, 0)), "Y": ((0, -1j), (1j, 0)), "Z": ((1, 0), (0, -1)),
                 "I": ((1, 0), (0, 1))}[spec.pauli_word]
        return (c[:, None, None] * np.eye(2) - 1j * s[:, None, None]
                * np.array(pauli, np.complex128))
    if spec.structure == "diagonal":
        return np.stack([np.diag(spec.diagonal(*p)) for p in params])
    return np.stack([spec.matrix(*p) for p in params])


_SKELETONS: dict[Any, _Skeleton] = {}


def encode_block(wires: Sequence[int], ops: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """The op arrays of the block kernel for ``ops`` (``GateOp``s or ``(gate, wires, params)``
    with global wires, all inside ``wires``).

    Local row bit ``j`` is ``sorted(wires)[j]``. Runs of one-qubit gates on a wire are
    multiplied into one 2x2 (real when the gates are, like ``ry``: half the arithmetic, and
    real runs on two wires share one sweep); a product that is diagonal or anti-diagonal
    becomes a diagonal or row-permutation op. Diagonal gates (``rz`` after a real run,
    ``cz``, ``rzz``, ...) merge into one diagonal op over all their wires. Returns
    ``(kinds, cmasks, ntargets, targets, matrix offsets, matrix pool, perm pool, perm
    offsets)``; ``targets[q]`` holds row bit masks.

    >>> kinds, *_ = encode_block([0, 1], [GateOp("ry", (0,), (0.3,)), GateOp("rz", (0,), (0.2,)),
    ...                                    GateOp("rx", (1,), (0.1,)), GateOp("cx", (0, 1))])
    >>> kinds.tolist()  # rx (complex), ry (real), rz as a diagonal op, cx a row permutation
    [0, 5, 3, 4]
    """
    ws = tuple(sorted(int(w) for w in wires))
    gates = [(op[0], tuple(op[1])) for op in ops]
    params = [tuple(op[2]) if len(op) > 2 else () for op in ops]
    key = (ws, tuple((g if isinstance(g, str) else id(g), w) for g, w in gates))
    skel = _SKELETONS.get(key)
    if skel is None:
        skel = _build_skeleton(ws, gates)
        if len(_SKELETONS) > 2048:
            _SKELETONS.clear()
        _SKELETONS[key] = skel
    kinds = skel.kinds.copy()
    pool = skel.pool_fixed.copy()
    for q, index, spec, kind in skel.dynamic:
        if kind == "matrix":
            data = np.asarray(gates[index][0], np.complex128).ravel()
        else:
            data = np.ravel(_op_data(spec, kind, params[index]))
        pool[skel.moffs[q]:skel.moffs[q] + data.size] = data
    for chain, indices, entries, offsets, mode in skel.folds:
        m = _stacked_matrices(chain[0], [params[i] for i in indices[:, 0]])
        for j in range(1, len(chain)):
            m = _stacked_matrices(chain[j], [params[i] for i in indices[:, j]]) @ m
        if mode == "fixed":  # half of a pair of real runs: the kind is fixed
            pool[offsets[:, None] + np.arange(4)] = m.reshape(-1, 4).real
            continue
        real = mode == "real"
        diag = (m[:, 0, 1] == 0) & (m[:, 1, 0] == 0)
        anti = ~diag & (m[:, 0, 0] == 0) & (m[:, 1, 1] == 0)
        kinds[entries] = np.where(diag, OP_DIAG, np.where(anti, OP_PERM,
                                                          OP_REAL1 if real else OP_DENSE1))
        flat = m.reshape(-1, 4).copy()
        flat[diag, 1] = flat[diag, 3]  # diagonal ops read d0, d1
        flat[anti, 0], flat[anti, 1] = m[anti, 1, 0], m[anti, 0, 1]  # phases of |0>, |1>
        pool[offsets[:, None] + np.arange(4)] = flat
    for offset, size, items in skel.diagonals:
        d = np.ones(size, np.complex128)
        for parts, ok, idx in items:
            part = parts[0][0].diagonal(*params[parts[0][1]])
            for spec, i in parts[1:]:
                part = spec.diagonal(*params[i]) * part
            d *= np.where(ok, part[idx], 1)
        pool[offset:offset + size] = d
    return (kinds, skel.cmasks, skel.ntg, skel.tgts, skel.moffs, pool, skel.perm, skel.poffs)
