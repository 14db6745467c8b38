"""Numba kernels of the adjoint method (used by :class:`NumbaBackend`'s adjoint methods).

- :func:`pauli_cross`: ``<bra|P|ket>`` for every term of a Pauli sum, in one pass over the two
  states, without forming ``P|ket>``.
- :func:`pauli_accumulate`: ``out += O state`` for a Pauli sum ``O`` in one pass (the adjoint
  of a readout adds ``ē O ψ`` to ``λ``).
- :func:`adjoint_block`: the reverse sweep of a gate block on the pair (ψ, λ) in one pass over
  each state. The forward block kernel (``numba_backend``) run backwards on two states at
  once: a batch of B groups of ψ and the same B groups of λ are gathered into split re/im
  buffers (rows = the block's 2^k amplitudes, one row map for both), then for every gate,
  last first, the derivative ``2 Im<λ|G ψ>`` is summed over the buffer while ``U^†`` is
  applied to both buffers, and the batch is scattered back. Each state crosses memory once
  per block, instead of once per gate plus (both states) once per derivative. λ may be a
  stack (the rows of a Jacobian): every λ is read against the one ψ, undone once.

Fusions inside a block: a run of diagonal gates (rz, phase, cz, crz, rzz, ...) is one
diagonal over the block's rows, and since diagonal gates commute with each other and with
their generators, every derivative of the run is a weighted sum of the row sums
``Im<λ_r|ψ_r>`` read in the same pass; a one-target gate takes its derivative in the pass
that applies its inverse; two uncontrolled one-target gates on different wires share a pass
over a quad of rows (in one loop when both are Y rotations, ry: a real 2x2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from numba import njit, prange

from qdiff.quantum.simulator.backend import GateOp, index_layout
from qdiff.quantum.simulator.numba_backend import (
    _blk_dense1,
    _blk_densek,
    _blk_gather,
    _blk_low,
    _blk_perm,
    _blk_quad,
    _blk_scale,
    _blk_scatter,
    _blk_start,
    _blk_workspace,
    _local_offsets,
    _op_table,
    _row_pattern,
)

from ..lang.gates import GateSpec, gate_spec
from ..lang.observables import PauliSum, parity

__all__ = ["pauli_cross", "pauli_accumulate", "adjoint_block", "encode_adjoint_block",
           "MAX_ADJOINT_TARGETS"]

_jit = njit(cache=True, nogil=True, fastmath=False)
_jit_par = njit(cache=True, nogil=True, parallel=True, fastmath=False)
# Derivative sums may reassociate, so that they vectorize: they are sums of many products,
# whose rounding does not depend on one order more than on another.
_jit_sum = njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
# The column loops of the fused steps: inlined into the step, so they take its flags, and a
# literal flag argument leaves one loop per call site.
_jit_row = njit(cache=True, nogil=True, inline="always")

_parity = njit(inline="always", cache=True)(parity)

_CHUNK = 1 << 12  # amplitudes per parallel work item of the one-pass kernels

_ADJ_AMPS = 1 << 15  # amplitudes per gathered batch of ψ and of one λ (a stack shares 2x this)

_ROW_PAD = 72  # doubles

_ACC_BITS = 10  # the low index bits whose signs the accumulate kernel tabulates per term

MAX_ADJOINT_TARGETS = 3
"""Widest dense gate (targets) the adjoint block kernel takes; wider ones go gate by gate."""

A_DENSE1, A_ROT1, A_DENSEK, A_DIAGRUN, A_PERM, A_ROT2 = 0, 1, 2, 3, 4, 5
"""Step kinds of the block kernel: an inverse 2x2, the same with its gate's derivative in the
same pass, a 2^m x 2^m inverse, a run of diagonal gates with their derivatives, a
permutation, two uncontrolled one-target gates on different wires with their derivatives in
one pass (see :func:`encode_adjoint_block`)."""

G_NONE, G_DIAG, G_DENSE1, G_DENSEK = 0, 1, 2, 3
"""Generator kinds of a step whose derivative is taken in its own pass: none, diagonal,
2x2, 2^m x 2^m."""


# ---------------------------------------------------------------------------------------------
# <bra|P|ket> for every term, in one pass
# ---------------------------------------------------------------------------------------------

@_jit_sum
def _cross_body(bra, ket, c0, c1, L, xs, zs, starts, signs, out, vr, vi):
    # out[k] += sum_i conj(bra[i^x_k]) (-1)^parity(i & z_k) ket[i] over the chunks c0..c1 of
    # 2^L amplitudes: per group of terms with one x, the products conj(bra[i^x]) ket[i] of
    # the chunk once, then per term a signed sum (the sign table of the low bits, times the
    # sign of the chunk's high bits)
    size = np.int64(1) << L
    for c in range(c0, c1):
        hi = np.int64(c) << L
        for g in range(starts.shape[0] - 1):
            x = xs[starts[g]]
            for lo in range(size):
                u = np.complex128(bra[(hi + lo) ^ x])
                v = np.complex128(ket[hi + lo])
                vr[lo] = u.real * v.real + u.imag * v.imag
                vi[lo] = u.real * v.imag - u.imag * v.real
            for k in range(starts[g], starts[g + 1]):
                row = signs[k]
                sr = 0.0
                si = 0.0
                for lo in range(size):
                    sr += row[lo] * vr[lo]
                    si += row[lo] * vi[lo]
                if _parity(hi & zs[k]):
                    out[k] -= complex(sr, si)
                else:
                    out[k] += complex(sr, si)


@_jit
def _cross_ser(bra, ket, L, xs, zs, starts, signs):
    size = 1 << L
    out = np.zeros(xs.shape[0], np.complex128)
    _cross_body(bra, ket, 0, ket.shape[0] >> L, L, xs, zs, starts, signs, out,
                    np.empty(size), np.empty(size))
    return out


@_jit_par
def _cross_par(bra, ket, nch, L, xs, zs, starts, signs):
    chunks = ket.shape[0] >> L
    size = 1 << L
    part = np.zeros((nch, xs.shape[0]), np.complex128)
    for c in prange(nch):
        _cross_body(bra, ket, c * chunks // nch, (c + 1) * chunks // nch, L, xs, zs,
                        starts, signs, part[c], np.empty(size), np.empty(size))
    return part.sum(axis=0)


_SIGN_TABLES: dict[tuple[int, bytes, bytes], tuple] = {}


def _sign_tables(num_qubits: int, x_masks: np.ndarray, z_masks: np.ndarray
                 ) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Terms sorted by x: (order, L, x masks, z masks, group starts, sign table of the low L
    bits ``signs[k, lo] = (-1)^parity(lo & z_k)``). Remembered: a gradient asks for the
    same generators' tables gate after gate (the kernels only read them)."""
    x_masks = np.asarray(x_masks, np.int64)
    z_masks = np.asarray(z_masks, np.int64)
    key = (num_qubits, x_masks.tobytes(), z_masks.tobytes())
    found = _SIGN_TABLES.get(key)
    if found is None:
        if len(_SIGN_TABLES) > 4096:
            _SIGN_TABLES.clear()
        found = _SIGN_TABLES[key] = _build_sign_tables(num_qubits, x_masks, z_masks)
    return found


def _build_sign_tables(num_qubits: int, x_masks: np.ndarray, z_masks: np.ndarray
                       ) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray,
                                  np.ndarray]:
    order = np.argsort(x_masks, kind="stable")
    xs = np.ascontiguousarray(np.asarray(x_masks, np.int64)[order])
    zs = np.ascontiguousarray(np.asarray(z_masks, np.int64)[order])
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1], True]).astype(np.int64)
    L = min(_ACC_BITS, num_qubits)
    lo = np.arange(1 << L, dtype=np.int64)
    signs = np.ascontiguousarray(1.0 - 2.0 * parity(lo[None, :] & zs[:, None]))
    return order, L, xs, zs, starts, signs


def pauli_cross(bra: np.ndarray, ket: np.ndarray, x_masks: np.ndarray, z_masks: np.ndarray,
                parallel: bool = False) -> np.ndarray:
    """Per term: ``sum_i conj(bra[i^x]) (-1)^parity(i&z) ket[i]`` (complex128), all terms
    in one pass over the two states.

    >>> psi = np.array([1, 1j])                   # Y: <ψ|Y|ψ> = 2 = i * (-2i); Z: 0
    >>> [complex(c) for c in pauli_cross(psi, psi, np.array([1, 0]), np.array([1, 1]))]
    [-2j, 0j]
    """
    num_qubits = int(ket.shape[0]).bit_length() - 1
    order, L, xs, zs, starts, signs = _sign_tables(num_qubits, x_masks, z_masks)
    if parallel:
        nch = min(ket.shape[0] >> L, 8 * numba.get_num_threads())
        raw = _cross_par(bra, ket, nch, L, xs, zs, starts, signs)
    else:
        raw = _cross_ser(bra, ket, L, xs, zs, starts, signs)
    out = np.empty_like(raw)
    out[order] = raw
    return out


# ---------------------------------------------------------------------------------------------
# out += O state, in one pass
# ---------------------------------------------------------------------------------------------

@_jit
def _accumulate_body(out, state, c0, c1, L, xs, zs, fs, starts, signs, cr, ci):
    # out[i] += sum_k fs[k] (-1)^parity(i & z_k) state[i ^ x_k] over the chunks c0..c1 of 2^L
    # amplitudes (fs carry (-1)^parity(x_k & z_k)). Terms are grouped by x: a group's
    # coefficient of every amplitude in the chunk is a sum of rows of the sign table of the
    # low bits, each scaled by the sign of the chunk's high bits; then one pass over the chunk.
    size = np.int64(1) << L
    for c in range(c0, c1):
        hi = np.int64(c) << L
        for g in range(starts.shape[0] - 1):
            for lo in range(size):
                cr[lo] = 0.0
                ci[lo] = 0.0
            for k in range(starts[g], starts[g + 1]):
                f = fs[k]
                if _parity(hi & zs[k]):
                    f = -f
                ar = f.real
                ai = f.imag
                row = signs[k]
                for lo in range(size):
                    cr[lo] += ar * row[lo]
                    ci[lo] += ai * row[lo]
            x = xs[starts[g]]
            for lo in range(size):
                v = np.complex128(state[(hi + lo) ^ x])
                out[hi + lo] += complex(cr[lo] * v.real - ci[lo] * v.imag,
                                        cr[lo] * v.imag + ci[lo] * v.real)


@_jit
def _accumulate_ser(out, state, L, xs, zs, fs, starts, signs):
    size = 1 << L
    _accumulate_body(out, state, 0, out.shape[0] >> L, L, xs, zs, fs, starts, signs,
                     np.empty(size), np.empty(size))


@_jit_par
def _accumulate_par(out, state, nch, L, xs, zs, fs, starts, signs):
    chunks = out.shape[0] >> L
    size = 1 << L
    for c in prange(nch):
        _accumulate_body(out, state, c * chunks // nch, (c + 1) * chunks // nch, L, xs, zs,
                         fs, starts, signs, np.empty(size), np.empty(size))


def pauli_accumulate(out: np.ndarray, state: np.ndarray, num_qubits: int, x_masks: np.ndarray,
                     z_masks: np.ndarray, factors: np.ndarray, parallel: bool = False) -> None:
    """``out[i] += sum_k factors[k] (-1)^parity((i^x_k)&z_k) state[i^x_k]`` for all i (the
    ``_pauli`` convention), in place, in one pass over ``out``.

    >>> out = np.zeros(2, complex)
    >>> pauli_accumulate(out, np.array([1, 0j]), 1, np.array([0, 1]), np.array([1, 0]),
    ...                  np.array([0.5, 2.0]))
    >>> out.real.tolist()
    [0.5, 2.0]
    """
    order, L, xs, zs, starts, signs = _sign_tables(num_qubits, x_masks, z_masks)
    fs = np.asarray(factors, np.complex128)[order] * (1 - 2 * parity(xs & zs))
    fs = np.ascontiguousarray(fs)
    if parallel:
        nch = min(out.shape[0] >> L, 8 * numba.get_num_threads())
        _accumulate_par(out, state, nch, L, xs, zs, fs, starts, signs)
    else:
        _accumulate_ser(out, state, L, xs, zs, fs, starts, signs)


# ---------------------------------------------------------------------------------------------
# the block kernel. Batches, their gather and scatter, and the inverse gates (2x2, 2^m x 2^m,
# permutations) on both states' buffers are the forward block kernel's (``numba_backend``):
# its ops take a tuple of split re/im buffers, here ψ's and λ's under one row map, and are
# inlined where called, so that they compile here with this module's flags.
# ---------------------------------------------------------------------------------------------

@_jit
def _real_entries(pool, lo, hi):
    # whether pool[lo:hi] is real
    for j in range(lo, hi):
        if pool[j].imag != 0:
            return False
    return True


# -- derivatives in their own pass: Im<λ|G ψ>, G = |1..1><1..1|_controls ⊗ G_base(targets) ----
@_jit_sum
def _im_rows(lr, li, xr, xi):
    s = 0.0
    for k in range(lr.shape[0]):
        s += lr[k] * xi[k] - li[k] * xr[k]
    return s


@_jit
def _gdiag(pr, pi, lr, li, rowmap, B, tgt, m, cmask, gpool, go):
    total = 0.0
    for r in range(rowmap.shape[0]):
        if (r & cmask) != cmask:
            continue
        g = gpool[go + _row_pattern(r, tgt, m)].real
        if g != 0.0:
            p = rowmap[r] * B
            total += g * _im_rows(lr[p:p + B], li[p:p + B], pr[p:p + B], pi[p:p + B])
    return total


@_jit_sum
def _gdense1_rows(x0r, x0i, x1r, x1i, l0r, l0i, l1r, l1i, g00, g11, gr, gi):
    # Im[l0^*(g00 x0 + g01 x1) + l1^*(g01^* x0 + g11 x1)], g01 = gr + i gi
    s00 = 0.0
    s11 = 0.0
    a_im = 0.0
    a_re = 0.0
    b_im = 0.0
    b_re = 0.0
    for k in range(x0r.shape[0]):
        s00 += l0r[k] * x0i[k] - l0i[k] * x0r[k]
        s11 += l1r[k] * x1i[k] - l1i[k] * x1r[k]
        a_im += l0r[k] * x1i[k] - l0i[k] * x1r[k]
        a_re += l0r[k] * x1r[k] + l0i[k] * x1i[k]
        b_im += l1r[k] * x0i[k] - l1i[k] * x0r[k]
        b_re += l1r[k] * x0r[k] + l1i[k] * x0i[k]
    return g00 * s00 + g11 * s11 + gr * (a_im + b_im) + gi * (a_re - b_re)


@_jit
def _gdense1(pr, pi, lr, li, rowmap, B, tb, cmask, gpool, go):
    g00 = gpool[go].real
    g11 = gpool[go + 3].real
    gr = gpool[go + 1].real
    gi = gpool[go + 1].imag
    total = 0.0
    for r0 in range(rowmap.shape[0]):
        if (r0 & tb) != 0 or (r0 & cmask) != cmask:
            continue
        p0 = rowmap[r0] * B
        p1 = rowmap[r0 | tb] * B
        total += _gdense1_rows(pr[p0:p0 + B], pi[p0:p0 + B], pr[p1:p1 + B], pi[p1:p1 + B],
                               lr[p0:p0 + B], li[p0:p0 + B], lr[p1:p1 + B], li[p1:p1 + B],
                               g00, g11, gr, gi)
    return total


@_jit_sum
def _gdensek(pr, pi, lr, li, rowmap, B, tgt, m, cmask, gpool, go, toff, rows):
    dim = 1 << m
    tmask = _local_offsets(tgt, m, toff)
    total = 0.0
    for r0 in range(rowmap.shape[0]):
        if (r0 & tmask) != 0 or (r0 & cmask) != cmask:
            continue
        for t in range(dim):
            rows[t] = rowmap[r0 | toff[t]] * B
        for s in range(dim):
            ps = rows[s]
            for t in range(dim):
                g = gpool[go + s * dim + t]
                if g == 0:
                    continue
                pt = rows[t]
                im_part = 0.0
                re_part = 0.0
                for b in range(B):  # Im(g conj(l_s) x_t)
                    im_part += lr[ps + b] * pi[pt + b] - li[ps + b] * pr[pt + b]
                    re_part += lr[ps + b] * pr[pt + b] + li[ps + b] * pi[pt + b]
                total += g.real * im_part + g.imag * re_part
    return total


# -- fused steps: a one-target gate with its derivative, a run of diagonal gates with theirs --
# Every λ of the stack is read against the same ψ: per row pair, each λ_j gets one pass that
# sums its derivative (reading ψ) and applies the inverse to λ_j, and the last of them also
# applies it to ψ (`write_psi`: a literal at every call, so each inlined copy keeps one loop).
# The loops over a row's B columns sit in the functions that slice the rows (a call per row
# pair costs about as much as the arithmetic); one-target gates whose matrix is real and whose
# generator has only Im g01 (ry, cry's base: the ansatz workhorses) have their own loops.
@_jit_row
def _y_rows(x0r, x0i, x1r, x1i, l0r, l0i, l1r, l1i, m00r, m01r, m10r, m11r, write_psi):
    # Re(l0^* x1) - Re(l1^* x0), then the real 2x2 m on λ (and ψ)
    s = 0.0
    for k in range(x0r.shape[0]):
        p0r = x0r[k]
        p0i = x0i[k]
        p1r = x1r[k]
        p1i = x1i[k]
        q0r = l0r[k]
        q0i = l0i[k]
        q1r = l1r[k]
        q1i = l1i[k]
        s += q0r * p1r + q0i * p1i - q1r * p0r - q1i * p0i
        if write_psi:
            x0r[k] = m00r * p0r + m01r * p1r
            x0i[k] = m00r * p0i + m01r * p1i
            x1r[k] = m10r * p0r + m11r * p1r
            x1i[k] = m10r * p0i + m11r * p1i
        l0r[k] = m00r * q0r + m01r * q1r
        l0i[k] = m00r * q0i + m01r * q1i
        l1r[k] = m10r * q0r + m11r * q1r
        l1i[k] = m10r * q0i + m11r * q1i
    return s


@_jit_row
def _pair_rows(x0r, x0i, x1r, x1i, l0r, l0i, l1r, l1i, m, g00, g11, gr, gi, write_psi):
    # Im[l0^*(g00 x0 + g01 x1) + l1^*(g01^* x0 + g11 x1)] (g01 = gr + i gi), then the 2x2
    # m = (m00r, m00i, m01r, m01i, m10r, m10i, m11r, m11i) on λ (and ψ)
    m00r, m00i, m01r, m01i, m10r, m10i, m11r, m11i = m
    s00 = 0.0
    s11 = 0.0
    a_im = 0.0
    a_re = 0.0
    b_im = 0.0
    b_re = 0.0
    for k in range(x0r.shape[0]):
        p0r = x0r[k]
        p0i = x0i[k]
        p1r = x1r[k]
        p1i = x1i[k]
        q0r = l0r[k]
        q0i = l0i[k]
        q1r = l1r[k]
        q1i = l1i[k]
        s00 += q0r * p0i - q0i * p0r
        s11 += q1r * p1i - q1i * p1r
        a_im += q0r * p1i - q0i * p1r
        a_re += q0r * p1r + q0i * p1i
        b_im += q1r * p0i - q1i * p0r
        b_re += q1r * p0r + q1i * p0i
        if write_psi:
            x0r[k] = m00r * p0r - m00i * p0i + m01r * p1r - m01i * p1i
            x0i[k] = m00r * p0i + m00i * p0r + m01r * p1i + m01i * p1r
            x1r[k] = m10r * p0r - m10i * p0i + m11r * p1r - m11i * p1i
            x1i[k] = m10r * p0i + m10i * p0r + m11r * p1i + m11i * p1r
        l0r[k] = m00r * q0r - m00i * q0i + m01r * q1r - m01i * q1i
        l0i[k] = m00r * q0i + m00i * q0r + m01r * q1i + m01i * q1r
        l1r[k] = m10r * q0r - m10i * q0i + m11r * q1r - m11i * q1i
        l1i[k] = m10r * q0i + m10i * q0r + m11r * q1i + m11i * q1r
    return g00 * s00 + g11 * s11 + gr * (a_im + b_im) + gi * (a_re - b_re)


@_jit_sum
def _rot1(buf, rowmap, B, tb, cmask, pool, mo, gpool, go, acc, slot):
    # acc[j, slot] += sum over the block of Im[l0^*(g00 x0 + g01 x1) + l1^*(g01^* x0 +
    # g11 x1)] for every λ_j, then the 2x2 m on λ_j and ψ, in one pass per λ
    m00, m01, m10, m11 = pool[mo], pool[mo + 1], pool[mo + 2], pool[mo + 3]
    m = (m00.real, m00.imag, m01.real, m01.imag, m10.real, m10.imag, m11.real, m11.imag)
    real = m00.imag == 0 and m01.imag == 0 and m10.imag == 0 and m11.imag == 0
    g00 = gpool[go].real
    g11 = gpool[go + 3].real
    gr = gpool[go + 1].real
    gi = gpool[go + 1].imag
    y_type = real and g00 == 0 and g11 == 0 and gr == 0
    last = buf.shape[0] // 2 - 2  # the last λ
    pr, pi = buf[0], buf[1]
    for r0 in range(rowmap.shape[0]):
        if (r0 & tb) != 0 or (r0 & cmask) != cmask:
            continue
        p0 = rowmap[r0] * B
        p1 = rowmap[r0 | tb] * B
        x0r = pr[p0:p0 + B]
        x0i = pi[p0:p0 + B]
        x1r = pr[p1:p1 + B]
        x1i = pi[p1:p1 + B]
        for j in range(last + 1):
            lr, li = buf[2 + 2 * j], buf[3 + 2 * j]
            l0r = lr[p0:p0 + B]
            l0i = li[p0:p0 + B]
            l1r = lr[p1:p1 + B]
            l1i = li[p1:p1 + B]
            if y_type:
                if j < last:
                    s = _y_rows(x0r, x0i, x1r, x1i, l0r, l0i, l1r, l1i, m[0], m[2], m[4],
                                m[6], False)
                else:
                    s = _y_rows(x0r, x0i, x1r, x1i, l0r, l0i, l1r, l1i, m[0], m[2], m[4],
                                m[6], True)
                acc[j, slot] += gi * s
            elif j < last:
                acc[j, slot] += _pair_rows(x0r, x0i, x1r, x1i, l0r, l0i, l1r, l1i, m, g00,
                                           g11, gr, gi, False)
            else:
                acc[j, slot] += _pair_rows(x0r, x0i, x1r, x1i, l0r, l0i, l1r, l1i, m, g00,
                                           g11, gr, gi, True)


@_jit_row
def _y2_rows(x0r, x0i, x1r, x1i, x2r, x2i, x3r, x3i, y0r, y0i, y1r, y1i, y2r, y2i, y3r, y3i,
             a, b, write_psi):
    # a (real, Y-type) on row pairs (0,1), (2,3), then b on (0,2), (1,3), with both
    # derivatives: a's against (ψ, λ), b's against a^†(ψ, λ)
    a00, a01, a10, a11 = a
    b00, b01, b10, b11 = b
    sa = 0.0
    sb = 0.0
    for k in range(x0r.shape[0]):
        p0r = x0r[k]
        p0i = x0i[k]
        p1r = x1r[k]
        p1i = x1i[k]
        p2r = x2r[k]
        p2i = x2i[k]
        p3r = x3r[k]
        p3i = x3i[k]
        q0r = y0r[k]
        q0i = y0i[k]
        q1r = y1r[k]
        q1i = y1i[k]
        q2r = y2r[k]
        q2i = y2i[k]
        q3r = y3r[k]
        q3i = y3i[k]
        sa += (q0r * p1r + q0i * p1i - q1r * p0r - q1i * p0i
               + q2r * p3r + q2i * p3i - q3r * p2r - q3i * p2i)
        t0r = a00 * p0r + a01 * p1r
        t0i = a00 * p0i + a01 * p1i
        t1r = a10 * p0r + a11 * p1r
        t1i = a10 * p0i + a11 * p1i
        t2r = a00 * p2r + a01 * p3r
        t2i = a00 * p2i + a01 * p3i
        t3r = a10 * p2r + a11 * p3r
        t3i = a10 * p2i + a11 * p3i
        u0r = a00 * q0r + a01 * q1r
        u0i = a00 * q0i + a01 * q1i
        u1r = a10 * q0r + a11 * q1r
        u1i = a10 * q0i + a11 * q1i
        u2r = a00 * q2r + a01 * q3r
        u2i = a00 * q2i + a01 * q3i
        u3r = a10 * q2r + a11 * q3r
        u3i = a10 * q2i + a11 * q3i
        sb += (u0r * t2r + u0i * t2i - u2r * t0r - u2i * t0i
               + u1r * t3r + u1i * t3i - u3r * t1r - u3i * t1i)
        if write_psi:
            x0r[k] = b00 * t0r + b01 * t2r
            x0i[k] = b00 * t0i + b01 * t2i
            x2r[k] = b10 * t0r + b11 * t2r
            x2i[k] = b10 * t0i + b11 * t2i
            x1r[k] = b00 * t1r + b01 * t3r
            x1i[k] = b00 * t1i + b01 * t3i
            x3r[k] = b10 * t1r + b11 * t3r
            x3i[k] = b10 * t1i + b11 * t3i
        y0r[k] = b00 * u0r + b01 * u2r
        y0i[k] = b00 * u0i + b01 * u2i
        y2r[k] = b10 * u0r + b11 * u2r
        y2i[k] = b10 * u0i + b11 * u2i
        y1r[k] = b00 * u1r + b01 * u3r
        y1i[k] = b00 * u1i + b01 * u3i
        y3r[k] = b10 * u1r + b11 * u3r
        y3i[k] = b10 * u1i + b11 * u3i
    return sa, sb


@_jit_sum
def _rot2(buf, rowmap, B, ta, tb, pool, mo, gpool, go, acc, slot):
    # two _rot1 steps (uncontrolled, different targets): a on row pairs (0,1), (2,3) of each
    # quad of rows, then b on (0,2), (1,3), in one pass per λ when both are real and Y-type
    a = (pool[mo].real, pool[mo + 1].real, pool[mo + 2].real, pool[mo + 3].real)
    b = (pool[mo + 4].real, pool[mo + 5].real, pool[mo + 6].real, pool[mo + 7].real)
    fused = _real_entries(pool, mo, mo + 8)
    for j in (0, 4):
        fused = fused and gpool[go + j] == 0 and gpool[go + j + 3] == 0 \
            and gpool[go + j + 1].real == 0
    if not fused:
        _rot1(buf, rowmap, B, ta, 0, pool, mo, gpool, go, acc, slot)
        _rot1(buf, rowmap, B, tb, 0, pool, mo + 4, gpool, go + 4, acc, slot + 1)
        return
    ga = gpool[go + 1].imag
    gb = gpool[go + 5].imag
    last = buf.shape[0] // 2 - 2
    pr, pi = buf[0], buf[1]
    for r0 in range(rowmap.shape[0]):
        if (r0 & (ta | tb)) != 0:
            continue
        p0, p1, p2, p3 = _blk_quad(rowmap, r0, ta, tb, B)
        x0r = pr[p0:p0 + B]
        x0i = pi[p0:p0 + B]
        x1r = pr[p1:p1 + B]
        x1i = pi[p1:p1 + B]
        x2r = pr[p2:p2 + B]
        x2i = pi[p2:p2 + B]
        x3r = pr[p3:p3 + B]
        x3i = pi[p3:p3 + B]
        for j in range(last + 1):
            lr, li = buf[2 + 2 * j], buf[3 + 2 * j]
            if j < last:
                sa, sb = _y2_rows(x0r, x0i, x1r, x1i, x2r, x2i, x3r, x3i,
                                  lr[p0:p0 + B], li[p0:p0 + B], lr[p1:p1 + B], li[p1:p1 + B],
                                  lr[p2:p2 + B], li[p2:p2 + B], lr[p3:p3 + B], li[p3:p3 + B],
                                  a, b, False)
            else:
                sa, sb = _y2_rows(x0r, x0i, x1r, x1i, x2r, x2i, x3r, x3i,
                                  lr[p0:p0 + B], li[p0:p0 + B], lr[p1:p1 + B], li[p1:p1 + B],
                                  lr[p2:p2 + B], li[p2:p2 + B], lr[p3:p3 + B], li[p3:p3 + B],
                                  a, b, True)
            acc[j, slot] += ga * sa
            acc[j, slot + 1] += gb * sb


@_jit_row
def _scale_im_rows(ar, ai, br, bi, dr, di, write_a):
    # Im sum conj(b) a, then b (and a) times d (|d| = 1 leaves the sum as it is)
    s = 0.0
    for k in range(ar.shape[0]):
        xr = ar[k]
        xi = ai[k]
        yr = br[k]
        yi = bi[k]
        s += yr * xi - yi * xr
        if write_a:
            ar[k] = dr * xr - di * xi
            ai[k] = dr * xi + di * xr
        br[k] = dr * yr - di * yi
        bi[k] = dr * yi + di * yr
    return s


@_jit_sum
def _diagrun(buf, rowmap, B, pool, mo, dpool, do, count, slots, so, acc, sums):
    # Every derivative of the run is sum_r G_j[r] Im<λ_r|ψ_r> over the block's rows r, read
    # while the run's product diagonal D is applied to the states.
    R = rowmap.shape[0]
    last = buf.shape[0] // 2 - 2
    pr, pi = buf[0], buf[1]
    for r in range(R):
        d = pool[mo + r]
        p = rowmap[r] * B
        if count == 0:
            if d != 1:
                for s in range(0, buf.shape[0], 2):
                    _blk_scale(buf[s][p:p + B], buf[s + 1][p:p + B], d.real, d.imag)
            continue
        for j in range(last + 1):
            lr, li = buf[2 + 2 * j], buf[3 + 2 * j]
            if d == 1:
                sums[j, r] = _im_rows(lr[p:p + B], li[p:p + B], pr[p:p + B], pi[p:p + B])
            elif j < last:
                sums[j, r] = _scale_im_rows(pr[p:p + B], pi[p:p + B], lr[p:p + B],
                                            li[p:p + B], d.real, d.imag, False)
            else:
                sums[j, r] = _scale_im_rows(pr[p:p + B], pi[p:p + B], lr[p:p + B],
                                            li[p:p + B], d.real, d.imag, True)
    for j in range(count):
        base = do + j * R
        for lam in range(last + 1):
            total = 0.0
            for r in range(R):
                total += dpool[base + r] * sums[lam, r]
            acc[lam, slots[so + j]] += total


# -- one batch, a range of batches, serial and parallel drivers -------------------------------
@_jit
def _batch(psi, lam, g0, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool, perm,
           poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs, slots, acc,
           buf, rowmap, bases, toff, rows, xr, xi, sums):
    # buf rows: ψ's re, im, then each λ's re, im
    layout = _blk_start(g0, B, pos, bases, rowmap)
    _blk_gather(psi, buf[0], buf[1], B, offs, low, layout, bases, pos)
    for j in range(lam.shape[0]):
        _blk_gather(lam[j], buf[2 + 2 * j], buf[3 + 2 * j], B, offs, low, layout, bases, pos)
    pr, pi = buf[0], buf[1]
    for q in range(kinds.shape[0]):
        kind = kinds[q]
        cm = cmasks[q]
        mo = moffs[q]
        slot = slots[soffs[q]] if scount[q] else 0
        if kind == A_DIAGRUN:
            _diagrun(buf, rowmap, B, pool, mo, dpool, goffs[q], scount[q], slots, soffs[q],
                     acc, sums)
            continue
        if kind == A_ROT1:
            _rot1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, gpool, goffs[q], acc, slot)
            continue
        if kind == A_ROT2:
            _rot2(buf, rowmap, B, tgts[q, 0], tgts[q, 1], pool, mo, gpool, goffs[q], acc, slot)
            continue
        gk = gkinds[q]
        for j in range(lam.shape[0]):
            lr, li = buf[2 + 2 * j], buf[3 + 2 * j]
            if gk == G_DIAG:
                acc[j, slot] += _gdiag(pr, pi, lr, li, rowmap, B, gtgts[q], gntg[q],
                                       gcmasks[q], gpool, goffs[q])
            elif gk == G_DENSE1:
                acc[j, slot] += _gdense1(pr, pi, lr, li, rowmap, B, gtgts[q, 0], gcmasks[q],
                                         gpool, goffs[q])
            elif gk == G_DENSEK:
                acc[j, slot] += _gdensek(pr, pi, lr, li, rowmap, B, gtgts[q], gntg[q],
                                         gcmasks[q], gpool, goffs[q], toff, rows)
        if kind == A_DENSE1:
            _blk_dense1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, _real_entries(pool, mo, mo + 4))
        elif kind == A_PERM:
            _blk_perm(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, perm, poffs[q], toff, rows)
        else:
            _blk_densek(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, toff, rows, xr, xi)
    _blk_scatter(psi, buf[0], buf[1], rowmap, B, offs, low, layout, bases, pos)
    for j in range(lam.shape[0]):
        _blk_scatter(lam[j], buf[2 + 2 * j], buf[3 + 2 * j], rowmap, B, offs, low, layout,
                     bases, pos)


@_jit
def _range(psi, lam, lo, hi, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs,
           gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs, slots, acc):
    R = offs.shape[0]
    low = _blk_low(offs)
    # rows a little longer than the R * B they hold: rows a power of two apart would share
    # cache sets (every column loop streams several of them at once)
    buf = np.empty((2 + 2 * lam.shape[0], R * B + _ROW_PAD))
    rowmap, bases, toff, rows, xr, xi = _blk_workspace(
        R, B, 1 << max(tgts.shape[1], gtgts.shape[1]))
    sums = np.empty((lam.shape[0], R))
    for batch in range(lo, hi):
        _batch(psi, lam, batch * B, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool,
               perm, poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs,
               slots, acc, buf, rowmap, bases, toff, rows, xr, xi, sums)


@_jit
def _block_ser(psi, lam, nb, B, nslots, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm,
               poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs, slots):
    acc = np.zeros((lam.shape[0], nslots))
    _range(psi, lam, 0, nb, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs,
           gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs, slots, acc)
    return acc


@_jit_par
def _block_par(psi, lam, nb, nch, B, nslots, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool,
               perm, poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs,
               slots):
    # nch work items of about nb / nch batches each
    part = np.zeros((nch, lam.shape[0], nslots))
    for c in prange(nch):
        _range(psi, lam, c * nb // nch, (c + 1) * nb // nch, B, pos, offs, kinds, cmasks, ntg,
               tgts, moffs, pool, perm, poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool,
               scount, soffs, slots, part[c])
    return part.sum(axis=0)


# ---------------------------------------------------------------------------------------------
# encoding and the entry point
# ---------------------------------------------------------------------------------------------

_GENERATORS: dict[int, tuple[GateSpec, tuple[int, np.ndarray, bool]]] = {}


def _generator_parts(spec: GateSpec) -> tuple[int, np.ndarray, bool]:
    """``(number of controls c, G_base data, diagonal?)`` with ``G = |1..1><1..1| ⊗ G_base``
    (controls first): G_base's diagonal or its flattened matrix."""
    hit = _GENERATORS.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    if spec.structure == "controlled" and spec.base is not None \
            and spec.base.generator is not None:
        controls, g = spec.num_controls, spec.base.generator_matrix()
    elif spec.generator is not None:
        controls, g = 0, spec.generator_matrix()
    else:
        raise ValueError(f"adjoint block: gate {spec.name!r} has no generator")
    diagonal = not np.any(g - np.diag(np.diagonal(g)))
    data = np.ascontiguousarray(np.diagonal(g) if diagonal else g.ravel(), np.complex128)
    value = (controls, data, diagonal)
    if len(_GENERATORS) > 1024:
        _GENERATORS.clear()
    _GENERATORS[id(spec)] = (spec, value)
    return value


def _inverse_structure(spec: GateSpec, params: tuple[float, ...], wires: tuple[int, ...]
                       ) -> tuple[str, tuple[int, ...], tuple[int, ...], np.ndarray, Any]:
    """(kind, controls, targets, data, perm) of ``U(params)^†`` on ``wires``."""
    inverse, inverse_params = spec.inverse(*params)
    controls: tuple[int, ...] = ()
    targets = wires
    if inverse.structure == "controlled":
        assert inverse.base is not None
        controls, targets = wires[:inverse.num_controls], wires[inverse.num_controls:]
        inverse = inverse.base
    if inverse.structure == "diagonal":
        return "diag", controls, targets, inverse.diagonal(*inverse_params), None
    if inverse.structure == "permutation":
        perm, phases = inverse.permutation()
        return "perm", controls, targets, np.asarray(phases, np.complex128), perm
    return "dense", controls, targets, inverse.matrix(*inverse_params), None


_ROTATIONS: dict[int, tuple[GateSpec, np.ndarray | None, np.ndarray | None]] = {}


def _rotation_word(spec: GateSpec) -> tuple[np.ndarray | None, np.ndarray | None] | None:
    """For a Pauli rotation ``exp(-iθP/2)`` (also controlled; its inverse is itself at -θ):
    ``(diagonal of P, None)`` when P is diagonal, else ``(None, P)``, on the targets;
    ``None`` for other gates."""
    base = spec.base if spec.structure == "controlled" else spec
    if base is None or base.pauli_word is None or spec.inverse_name != spec.name:
        return None
    hit = _ROTATIONS.get(id(base))
    if hit is None or hit[0] is not base:
        word = PauliSum([(1.0, base.pauli_word)]).to_matrix()
        diagonal = base.structure == "diagonal"
        hit = (base, np.diagonal(word).real.copy() if diagonal else None,
               None if diagonal else word)
        _ROTATIONS[id(base)] = hit
    return hit[1], hit[2]


def _inverse_data(spec: GateSpec, params: tuple[float, ...],
                  wires: tuple[int, ...]) -> np.ndarray:
    """The data of ``U(params)^†`` that :func:`_inverse_structure` gives (matrix, diagonal or
    phases), for Pauli rotations (also controlled) straight from cos and sin."""
    word = _rotation_word(spec)
    if word is not None:
        theta = float(params[0])  # exp(-iθP/2)^† = cos(θ/2) + i sin(θ/2) P
        if word[0] is not None:
            return np.exp(0.5j * theta * word[0])
        assert word[1] is not None
        return math.cos(theta / 2) * np.eye(word[1].shape[0]) + 1j * math.sin(theta / 2) * word[1]
    return _inverse_structure(spec, params, wires)[3]


def _spread_index(tmasks: Sequence[int], cmask: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """For a diagonal on target row bits: the target pattern of every row of the block, and
    the rows where a control is 0 (the diagonal is 1 there)."""
    r = np.arange(size, dtype=np.int64)
    pattern = np.zeros(size, np.int64)
    for j, t in enumerate(tmasks):
        pattern |= ((r & t) != 0).astype(np.int64) << j
    return pattern, (r & cmask) != cmask


def _spread(data: np.ndarray, index: tuple[np.ndarray, np.ndarray], fill: complex) -> np.ndarray:
    out = np.asarray(data, np.complex128)[index[0]]
    out[index[1]] = fill
    return out


class _Skeleton:
    """What :func:`encode_adjoint_block` computes once per block structure: every array,
    and where the data of the parametric gates goes, filled at every call (`fill`).

    The inverse of a Pauli rotation, ``cos(θ/2) + i sin(θ/2) P``, is filled for all the
    block's rotations at once: ``pool[pos] = a cos(θ/2) + b sin(θ/2)``; a run of diagonal
    rotations is ``exp(i/2 Σ_k θ_k e_k)`` over the rows (e_k: the eigenvalues of gate k's
    word on each row, 0 where a control is off). Other parametric gates are filled one by
    one."""

    def __init__(self, specs: list[GateSpec], arrays: tuple[Any, ...], pool_at: int,
                 matrices: list[tuple[int, int, int]],
                 runs: list[tuple[int, np.ndarray, list[tuple[int, Any]]]]):
        self.specs = specs  # kept: the cache key holds their ids
        self.arrays = arrays
        self.pool_at = pool_at  # position of the matrix pool in arrays
        self.dynamic = bool(matrices or runs)
        rot_ops, positions, which, cos_part, sin_part = [], [], [], [], []
        self.matrices = []  # (op, pool offset, size) of the other parametric gates
        for k, offset, size in matrices:
            word = _rotation_word(specs[k])
            if word is None:
                self.matrices.append((k, offset, size))
                continue
            unit, pauli = ((np.ones(size), word[0]) if word[0] is not None
                           else (np.eye(word[1].shape[0]).ravel(), word[1].ravel()))
            positions.append(np.arange(offset, offset + size))
            which.append(np.full(size, len(rot_ops)))
            cos_part.append(unit.astype(np.complex128))
            sin_part.append(1j * pauli)
            rot_ops.append(k)
        self.rotations = None if not rot_ops else (
            rot_ops, np.concatenate(positions), np.concatenate(which),
            np.concatenate(cos_part), np.concatenate(sin_part))
        # (pool offset, product of the fixed gates' diagonals, rotations, their exponents
        #  e_k per row, other parametric gates with their spread index)
        self.runs = []
        for offset, fixed, parts in runs:
            rotations, exponents, others = [], [], []
            for k, index in parts:
                word = _rotation_word(specs[k])
                if word is not None and word[0] is not None:
                    rotations.append(k)
                    exponents.append(_spread(word[0], index, 0.0).real)
                else:
                    others.append((k, index))
            self.runs.append((offset, fixed, rotations,
                              np.array(exponents).reshape(len(rotations), fixed.size), others))

    def fill(self, ops: Sequence[GateOp]) -> tuple[Any, ...]:
        """The block's arrays with the angles of ``ops``."""
        arrays = list(self.arrays)
        pool = arrays[self.pool_at].copy()
        if self.rotations is not None:
            rot_ops, positions, which, cos_part, sin_part = self.rotations
            half = 0.5 * np.array([ops[k].params[0] for k in rot_ops], np.float64)
            pool[positions] = cos_part * np.cos(half)[which] + sin_part * np.sin(half)[which]
        for k, offset, size in self.matrices:
            op = ops[k]
            pool[offset:offset + size] = np.ravel(
                _inverse_data(self.specs[k], tuple(op.params), tuple(op.wires)))
        for offset, fixed, rotations, exponents, others in self.runs:
            diag = fixed.copy()
            if rotations:
                half = 0.5 * np.array([ops[k].params[0] for k in rotations], np.float64)
                diag *= np.exp(1j * (half @ exponents))
            for k, index in others:
                op = ops[k]
                diag *= _spread(_inverse_data(self.specs[k], tuple(op.params), tuple(op.wires)),
                                index, 1.0)
            pool[offset:offset + diag.size] = diag
        arrays[self.pool_at] = pool
        return tuple(arrays)


_SKELETONS: dict[tuple[Any, ...], _Skeleton | None] = {}


def encode_adjoint_block(wires: Sequence[int], ops: Sequence[GateOp], want: Sequence[bool],
                         filled: dict | None = None) -> tuple[Any, ...] | None:
    """The arrays of the block kernel for the forward gates ``ops`` (table gates by name or
    :class:`GateSpec`, all inside ``wires``), last gate first: each gate's inverse and, for
    ``want[k]``, its generator. ``None`` when a gate is too wide for the kernel (more dense
    targets than ``MAX_ADJOINT_TARGETS``).

    Steps: a run of diagonal gates becomes one diagonal over the block's rows whose
    derivatives are row sums (``A_DIAGRUN``); a one-target gate whose derivative is wanted
    takes it in the pass that applies its inverse (``A_ROT1``), and two of them on different
    wires share a pass (``A_ROT2``). Returns ``(number of derivative slots, kinds, cmasks,
    ntargets, targets, matrix offsets, matrix pool, perm pool, perm offsets, generator kinds,
    generator cmasks, generator ntargets, generator targets, generator offsets, generator
    pool, diagonal-run generator pool, slot counts, slot offsets, slots)``; targets hold row
    bit masks (row bit ``j`` is ``sorted(wires)[j]``); slot ``s`` is op ``len(ops) - 1 - s``.
    The structure is computed once per block shape and cached; a call fills in the angles,
    and keeps the filled block in ``filled`` when given (the sweeps of a Jacobian's rows go
    over the same blocks at the same angles).

    >>> arrays = encode_adjoint_block([0, 1], [GateOp("ry", (0,), (0.3,)),
    ...                                        GateOp("rz", (1,), (0.2,)),
    ...                                        GateOp("cx", (0, 1))], [True, True, False])
    >>> arrays[1].tolist()  # cx^† (a permutation), rz^† (a diagonal run), ry^† (with ry')
    [4, 3, 1]
    """
    ws = tuple(sorted(int(w) for w in wires))
    ops = [op if type(op) is GateOp else GateOp(*op) for op in ops]
    specs = [gate_spec(op.gate) for op in ops]
    key = (ws, tuple(map(id, specs)), tuple(tuple(op.wires) for op in ops),
           tuple(bool(wk) for wk in want))
    if key in _SKELETONS:
        skel = _SKELETONS[key]
        if skel is not None and any(a is not b for a, b in zip(skel.specs, specs)):
            skel = _build_skeleton(ws, ops, specs, want)
    else:
        skel = _build_skeleton(ws, ops, specs, want)
        if len(_SKELETONS) > 4096:
            _SKELETONS.clear()
        _SKELETONS[key] = skel
    if skel is None:
        return None
    if not skel.dynamic:
        return skel.arrays
    filled_key = (id(skel), tuple(tuple(op.params) for op in ops))
    if filled is not None:
        found = filled.get(filled_key)
        if found is not None and found[0] is skel:
            return found[1]
    arrays = skel.fill(ops)
    if filled is not None:
        filled[filled_key] = (skel, arrays)
    return arrays


def _build_skeleton(ws: tuple[int, ...], ops: list[GateOp], specs: list[GateSpec],
                    want: Sequence[bool]) -> _Skeleton | None:
    local = {w: j for j, w in enumerate(ws)}
    size = 1 << len(ws)
    raw = []
    for slot, k in enumerate(range(len(ops) - 1, -1, -1)):
        op, spec = ops[k], specs[k]
        wires = tuple(int(w) for w in op.wires)
        if not set(wires) <= set(local):
            raise ValueError(f"adjoint block on wires {ws}: a gate acts on {wires}, outside "
                             "them")
        kind, controls, targets, data, perm = _inverse_structure(spec, tuple(op.params), wires)
        if kind == "dense" and len(targets) > MAX_ADJOINT_TARGETS:
            return None
        gen = None
        if want[k]:
            nc, gdata, diagonal = _generator_parts(spec)
            if not diagonal and len(wires) - nc > MAX_ADJOINT_TARGETS:
                return None
            gen = (sum(1 << local[c] for c in wires[:nc]), [1 << local[t] for t in wires[nc:]],
                   gdata, diagonal)
        raw.append((kind, sum(1 << local[c] for c in controls),
                    [1 << local[t] for t in targets], data, perm, gen, slot, k))

    def diagonal_step(entry: tuple[Any, ...]) -> bool:
        return entry[0] == "diag" and (entry[5] is None or entry[5][3])

    # steps: (kind, cmask, target masks, data, perm, generator, slots, diagonal-run rows,
    #         parametric ops: [(op, offset in data, size)] or, for a run, (product of the
    #         fixed gates' diagonals, [(op, spread index)]))
    steps: list[tuple[Any, ...]] = []
    q = 0
    while q < len(raw):
        kind, cmask, tmasks, data, perm, gen, slot, k = raw[q]
        if diagonal_step(raw[q]):
            fixed = np.ones(size, np.complex128)
            rows, slots, parts = [], [], []
            while q < len(raw) and diagonal_step(raw[q]):
                _, cmask, tmasks, data, _, gen, slot, k = raw[q]
                index = _spread_index(tmasks, cmask, size)
                if specs[k].num_params:
                    parts.append((k, index))
                else:
                    fixed *= _spread(data, index, 1.0)
                if gen is not None:
                    rows.append(_spread(gen[2], _spread_index(gen[1], gen[0], size), 0.0).real)
                    slots.append(slot)
                q += 1
            diag = fixed.copy()
            for k, index in parts:
                op = ops[k]
                diag *= _spread(_inverse_data(specs[k], tuple(op.params), tuple(op.wires)),
                                index, 1.0)
            steps.append((A_DIAGRUN, 0, [], diag, None, None, slots, rows,
                          (fixed, parts) if parts else None))
            continue
        q += 1
        slots = [] if gen is None else [slot]
        dynamic = [(k, 0, np.size(data))] if specs[k].num_params else []
        if kind == "dense" and len(tmasks) == 1 and gen is not None and not gen[3] \
                and gen[1] == tmasks and gen[0] == cmask:
            steps.append((A_ROT1, cmask, tmasks, data, None, gen, slots, [], dynamic))
        elif kind == "dense":
            steps.append((A_DENSE1 if len(tmasks) == 1 else A_DENSEK, cmask, tmasks, data,
                          None, gen, slots, [], dynamic))
        elif kind == "perm":
            steps.append((A_PERM, cmask, tmasks, data, perm, gen, slots, [], dynamic))
        else:  # a diagonal gate whose generator is not diagonal: not a table gate
            return None
    # pairs of uncontrolled A_ROT1 steps on different wires: one step
    paired: list[tuple[Any, ...]] = []
    for step in steps:
        last = paired[-1] if paired else None
        if step[0] == A_ROT1 and step[1] == 0 and last is not None and last[0] == A_ROT1 \
                and last[1] == 0 and last[2] != step[2]:
            gen = (0, last[2] + step[2], np.concatenate([last[5][2], step[5][2]]), False)
            data = np.concatenate([np.ravel(last[3]), np.ravel(step[3])])
            dynamic = last[8] + [(k, offset + np.size(last[3]), n)
                                 for k, offset, n in step[8]]
            paired[-1] = (A_ROT2, 0, last[2] + step[2], data, None, gen, last[6] + step[6], [],
                          dynamic)
        else:
            paired.append(step)
    steps = paired
    count = len(steps)
    width = max([len(st[2]) for st in steps] + [1])
    gwidth = max([len(st[5][1]) for st in steps if st[5] is not None] + [1])
    kinds, cmasks, ntg, tgts, moffs, poffs = _op_table(count, width)
    gkinds, gcmasks, gntg, gtgts, goffs, _ = _op_table(count, gwidth)  # generators alike
    scount = np.zeros(count, np.int64)
    soffs = np.zeros(count, np.int64)
    pool: list[np.ndarray] = []
    gpool: list[np.ndarray] = []
    dpool: list[np.ndarray] = []
    perms: list[int] = []
    slot_list: list[int] = []
    matrices: list[tuple[int, int, int]] = []
    runs: list[tuple[int, np.ndarray, list[tuple[int, Any]]]] = []
    size_m = size_g = size_d = 0
    for q, (kind, cmask, tmasks, data, perm, gen, slots, rows, dynamic) in enumerate(steps):
        kinds[q] = kind
        cmasks[q] = cmask
        ntg[q] = len(tmasks)
        tgts[q, :len(tmasks)] = tmasks
        if kind == A_PERM:
            poffs[q] = len(perms)
            perms.extend(int(p) for p in perm)
        flat = np.ascontiguousarray(data, np.complex128).ravel()
        moffs[q] = size_m
        if kind == A_DIAGRUN:
            if dynamic is not None:
                runs.append((size_m, dynamic[0], dynamic[1]))
        else:
            for k, offset, n in dynamic:
                matrices.append((k, size_m + offset, n))
        pool.append(flat)
        size_m += flat.size
        scount[q] = len(slots)
        soffs[q] = len(slot_list)
        slot_list.extend(slots)
        if kind == A_DIAGRUN:
            goffs[q] = size_d
            for row in rows:
                dpool.append(row)
                size_d += row.size
        elif gen is not None:
            gcmask, gtmasks, gdata, diagonal = gen
            gm = len(gtmasks)
            gkinds[q] = G_DIAG if diagonal else G_DENSE1 if gm == 1 else G_DENSEK
            gcmasks[q] = gcmask
            gntg[q] = gm
            gtgts[q, :gm] = gtmasks
            goffs[q] = size_g
            gpool.append(gdata)
            size_g += gdata.size
    arrays = (len(ops), kinds, cmasks, ntg, tgts, moffs,
              np.concatenate(pool) if pool else np.zeros(1, np.complex128),
              np.array(perms or [0], np.int64), poffs, gkinds, gcmasks, gntg, gtgts, goffs,
              np.concatenate(gpool) if gpool else np.zeros(1, np.complex128),
              np.concatenate(dpool) if dpool else np.zeros(1),
              scount, soffs, np.array(slot_list or [0], np.int64))
    return _Skeleton(specs, arrays, 6, matrices, runs)


def adjoint_block(psi: np.ndarray, lam: np.ndarray, num_qubits: int, wires: Sequence[int],
                  ops: Sequence[GateOp], want: Sequence[bool], min_batch: int,
                  parallel: bool = False, filled: dict | None = None) -> np.ndarray | None:
    """The block kernel on (ψ, λ) (the contract of ``StatevectorBackend.adjoint_block``),
    or ``None`` when it does not apply: fewer than ``min_batch`` groups of the other wires
    (unless the block is the whole register, one group), or a gate too wide
    (:func:`encode_adjoint_block`). ``lam`` may be a stack of adjoints
    (rows), all undone against the one ψ: then the derivatives have a row per adjoint.

    >>> psi = np.zeros(64, complex); psi[0] = 1; lam = psi.copy()
    >>> g = adjoint_block(psi, lam, 6, [0], [GateOp("rx", (0,), (0.0,))], [True], 32)
    >>> g.tolist(), complex(psi[0])
    ([0.0], (1+0j))
    """
    ws = tuple(sorted(int(w) for w in wires))
    k = len(ws)
    groups = 1 << (num_qubits - k)
    if groups < min_batch and groups > 1:
        return None
    encoded = encode_adjoint_block(ws, ops, want, filled)
    if encoded is None:
        return None
    nslots, *arrays = encoded
    stack = lam if lam.ndim == 2 else lam[None]
    layout = index_layout(num_qubits, ws)
    # a batch of every state fits the cache together: 2 _ADJ_AMPS amplitudes in all
    per_state = 2 * _ADJ_AMPS // (1 + stack.shape[0])
    batch = min(groups, max(min_batch, (1 << (per_state.bit_length() - 1)) >> k))
    nb = groups // batch
    if parallel and nb > 1:
        acc = _block_par(psi, stack, nb, min(nb, 8 * numba.get_num_threads()), batch, nslots,
                         layout.positions, layout.offsets, *arrays)
    else:
        acc = _block_ser(psi, stack, nb, batch, nslots, layout.positions, layout.offsets,
                         *arrays)
    grads = 2.0 * acc[:, ::-1]
    return grads if lam.ndim == 2 else grads[0]
