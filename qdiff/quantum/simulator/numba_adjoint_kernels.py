"""Numba kernels of the adjoint method (the entry points are in :mod:`.numba_adjoint`).

- :data:`PAULI_CROSS`: ``<bra|P|ket>`` for every term of a Pauli sum, in one pass over the two
  states, without forming ``P|ket>``.
- :data:`PAULI_ACCUMULATE`: ``out += O state`` for a Pauli sum ``O`` in one pass.
- :data:`ADJOINT_BLOCK`: the reverse sweep of a gate block on the pair (ψ, λ) in one pass over
  each state: the forward block kernel (:mod:`.numba_block_kernels`) run backwards on two
  states at once, on the steps that :mod:`.adjoint_encoding` encodes.

Each is a range body paired with its threaded driver (:mod:`.numba_ranges`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..lang.observables import parity
from .adjoint_encoding import (
    A_DENSE1,
    A_DIAGRUN,
    A_PERM,
    A_ROT1,
    A_ROT2,
    G_DENSE1,
    G_DENSEK,
    G_DIAG,
)
from .numba_block_kernels import (
    block_chunk,
    block_dense1,
    block_densek,
    block_gather,
    block_low,
    block_perm,
    block_quad,
    block_scale,
    block_scatter,
    block_start,
    block_touch,
    block_workspace,
    local_offsets,
    quad_rows,
    row_pattern,
    target_rows,
)
from .numba_ranges import jit_range as _jit
from .numba_ranges import range_kernel, summed_range_kernel

__all__ = ["PAULI_CROSS", "PAULI_ACCUMULATE", "ADJOINT_BLOCK"]

# Derivative sums may reassociate, so that they vectorize: they are sums of many products,
# whose rounding does not depend on one order more than on another.
_jit_sum = njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
# The column loops of the fused steps: inlined into the step, so they take its flags, and a
# literal flag argument leaves one loop per call site.
_jit_row = njit(cache=True, nogil=True, inline="always")

_parity = njit(inline="always", cache=True)(parity)

_ROW_PAD = 72  # doubles


# ---------------------------------------------------------------------------------------------
# <bra|P|ket> for every term, in one pass
# ---------------------------------------------------------------------------------------------

@_jit_sum
def _cross_body(ket, c0, c1, out, bra, L, xs, zs, starts, signs):
    # out[k] += sum_i conj(bra[i^x_k]) (-1)^parity(i & z_k) ket[i] over the chunks c0..c1 of
    # 2^L amplitudes: per group of terms with one x, the products conj(bra[i^x]) ket[i] of
    # the chunk once, then per term a signed sum (the sign table of the low bits, times the
    # sign of the chunk's high bits)
    size = np.int64(1) << L
    vr, vi = np.empty(size), np.empty(size)
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



# ---------------------------------------------------------------------------------------------
# out += O state, in one pass
# ---------------------------------------------------------------------------------------------

@_jit
def _accumulate_body(out, c0, c1, state, L, xs, zs, fs, starts, signs):
    # out[i] += sum_k fs[k] (-1)^parity(i & z_k) state[i ^ x_k] over the chunks c0..c1 of 2^L
    # amplitudes (fs carry (-1)^parity(x_k & z_k)). Terms are grouped by x: a group's
    # coefficient of every amplitude in the chunk is a sum of rows of the sign table of the
    # low bits, each scaled by the sign of the chunk's high bits; then one pass over the chunk.
    size = np.int64(1) << L
    cr, ci = np.empty(size), np.empty(size)
    for hi in range(c0 << L, c1 << L, size):
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



# ---------------------------------------------------------------------------------------------
# the block kernel. Batches, their gather and scatter, and the inverse gates (2x2, 2^m x 2^m,
# permutations) on both states' buffers are the forward block kernel's (numba_block_kernels):
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
        g = gpool[go + row_pattern(r, tgt, m)].real
        if g != 0.0:
            p = rowmap[r] * B
            total += g * _im_rows(lr[p:p + B], li[p:p + B], pr[p:p + B], pi[p:p + B])
    return total


@_jit_row
def _generator2x2(gpool, go):
    # a Hermitian 2x2 generator's g00, g11 and g01 = gr + i gi
    return gpool[go].real, gpool[go + 3].real, gpool[go + 1].real, gpool[go + 1].imag


# -- fused steps: a one-target gate with its derivative, a run of diagonal gates with theirs --
# Every λ of the stack is read against the same ψ: per row pair, each λ_j gets one pass that
# sums its derivative (reading ψ) and applies the inverse to λ_j, and the last of them also
# applies it to ψ (`write_psi`: a literal at every call, so each inlined copy keeps one loop).
# The loops over a row's B columns sit in the functions that slice the rows (a call per row
# pair costs about as much as the arithmetic); one-target gates whose matrix is real and whose
# generator has only Im g01 (ry, cry's base: the ansatz workhorses) have their own loops.
# A diagonal run followed (in the sweep) by a pair of such rotations on two wires is applied
# in the pair's pass (_diag_rot2): each quad of rows is scaled by the run's entries and its
# row sums read on the way into the rotations, so the run costs no pass over the buffers.
@_jit_row
def _real_pair(m, a, b):
    # the real 2x2 m = (m00, m01, m10, m11) on the pair (a, b)
    return m[0] * a + m[1] * b, m[2] * a + m[3] * b


@_jit_row
def _complex_pair(m, ar, ai, br, bi):
    # the 2x2 m = (m00r, m00i, m01r, m01i, m10r, m10i, m11r, m11i) on the pair (a, b):
    # (re, im) of both results
    m00r, m00i, m01r, m01i, m10r, m10i, m11r, m11i = m
    return (m00r * ar - m00i * ai + m01r * br - m01i * bi,
            m00r * ai + m00i * ar + m01r * bi + m01i * br,
            m10r * ar - m10i * ai + m11r * br - m11i * bi,
            m10r * ai + m10i * ar + m11r * bi + m11i * br)


@_jit_row
def _pair_slices(re, im, p0, p1, B):
    # the rows at buffer offsets p0, p1: (re0, im0, re1, im1)
    return re[p0:p0 + B], im[p0:p0 + B], re[p1:p1 + B], im[p1:p1 + B]


@_jit_row
def _y_rows(x, lam, m, write_psi):
    # Re(l0^* x1) - Re(l1^* x0), then the real 2x2 m on λ (and ψ); x, lam: _pair_slices
    x0r, x0i, x1r, x1i = x
    l0r, l0i, l1r, l1i = lam
    s = 0.0
    for k in range(x0r.shape[0]):
        p0r, p0i, p1r, p1i = x0r[k], x0i[k], x1r[k], x1i[k]
        q0r, q0i, q1r, q1i = l0r[k], l0i[k], l1r[k], l1i[k]
        s += q0r * p1r + q0i * p1i - q1r * p0r - q1i * p0i
        if write_psi:
            x0r[k], x1r[k] = _real_pair(m, p0r, p1r)
            x0i[k], x1i[k] = _real_pair(m, p0i, p1i)
        l0r[k], l1r[k] = _real_pair(m, q0r, q1r)
        l0i[k], l1i[k] = _real_pair(m, q0i, q1i)
    return s


@_jit_row
def _pair_rows(x, lam, m, g00, g11, gr, gi, write_psi, write_lam=True):
    # Im[l0^*(g00 x0 + g01 x1) + l1^*(g01^* x0 + g11 x1)] (g01 = gr + i gi), then the 2x2
    # m (see _complex_pair) on λ (and ψ); x, lam: _pair_slices
    x0r, x0i, x1r, x1i = x
    l0r, l0i, l1r, l1i = lam
    s00 = 0.0
    s11 = 0.0
    a_im = 0.0
    a_re = 0.0
    b_im = 0.0
    b_re = 0.0
    for k in range(x0r.shape[0]):
        p0r, p0i, p1r, p1i = x0r[k], x0i[k], x1r[k], x1i[k]
        q0r, q0i, q1r, q1i = l0r[k], l0i[k], l1r[k], l1i[k]
        s00 += q0r * p0i - q0i * p0r
        s11 += q1r * p1i - q1i * p1r
        a_im += q0r * p1i - q0i * p1r
        a_re += q0r * p1r + q0i * p1i
        b_im += q1r * p0i - q1i * p0r
        b_re += q1r * p0r + q1i * p0i
        if write_psi:
            x0r[k], x0i[k], x1r[k], x1i[k] = _complex_pair(m, p0r, p0i, p1r, p1i)
        if write_lam:
            l0r[k], l0i[k], l1r[k], l1i[k] = _complex_pair(m, q0r, q0i, q1r, q1i)
    return g00 * s00 + g11 * s11 + gr * (a_im + b_im) + gi * (a_re - b_re)


@_jit_sum
def _gdense1_rows(x, lam, g00, g11, gr, gi):
    # Im[l0^*(g00 x0 + g01 x1) + l1^*(g01^* x0 + g11 x1)], g01 = gr + i gi: the derivative
    # of _pair_rows, neither state written
    unused = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)  # no matrix: nothing is written
    return _pair_rows(x, lam, unused, g00, g11, gr, gi, False, False)


@_jit
def _gdense1(pr, pi, lr, li, rowmap, B, tb, cmask, gpool, go):
    g00, g11, gr, gi = _generator2x2(gpool, go)
    total = 0.0
    for r0 in range(rowmap.shape[0]):
        if (r0 & tb) != 0 or (r0 & cmask) != cmask:
            continue
        p0 = rowmap[r0] * B
        p1 = rowmap[r0 | tb] * B
        total += _gdense1_rows(_pair_slices(pr, pi, p0, p1, B), _pair_slices(lr, li, p0, p1, B),
                               g00, g11, gr, gi)
    return total


@_jit_sum
def _gdensek(pr, pi, lr, li, rowmap, B, tgt, m, cmask, gpool, go, toff, rows):
    dim = 1 << m
    tmask = local_offsets(tgt, m, toff)
    total = 0.0
    for r0 in range(rowmap.shape[0]):
        if not target_rows(rowmap, r0, tmask, cmask, toff, dim, B, rows):
            continue
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


@_jit_sum
def _rot1(buf, rowmap, B, tb, cmask, pool, mo, gpool, go, acc, slot):
    # acc[j, slot] += sum over the block of Im[l0^*(g00 x0 + g01 x1) + l1^*(g01^* x0 +
    # g11 x1)] for every λ_j, then the 2x2 m on λ_j and ψ, in one pass per λ
    m00, m01, m10, m11 = pool[mo], pool[mo + 1], pool[mo + 2], pool[mo + 3]
    m = (m00.real, m00.imag, m01.real, m01.imag, m10.real, m10.imag, m11.real, m11.imag)
    m_real = (m00.real, m01.real, m10.real, m11.real)
    real = m00.imag == 0 and m01.imag == 0 and m10.imag == 0 and m11.imag == 0
    g00, g11, gr, gi = _generator2x2(gpool, go)
    y_type = real and g00 == 0 and g11 == 0 and gr == 0
    last = buf.shape[0] // 2 - 2  # the last λ
    pr, pi = buf[0], buf[1]
    for r0 in range(rowmap.shape[0]):
        if (r0 & tb) != 0 or (r0 & cmask) != cmask:
            continue
        p0 = rowmap[r0] * B
        p1 = rowmap[r0 | tb] * B
        x = _pair_slices(pr, pi, p0, p1, B)
        for j in range(last + 1):
            lam = _pair_slices(buf[2 + 2 * j], buf[3 + 2 * j], p0, p1, B)
            if y_type and j < last:
                acc[j, slot] += gi * _y_rows(x, lam, m_real, False)
            elif y_type:
                acc[j, slot] += gi * _y_rows(x, lam, m_real, True)
            elif j < last:
                acc[j, slot] += _pair_rows(x, lam, m, g00, g11, gr, gi, False)
            else:
                acc[j, slot] += _pair_rows(x, lam, m, g00, g11, gr, gi, True)


@_jit_row
def _column(rows, k):
    # column k of the quad of rows `rows` (quad_rows): (re0, im0, ..., re3, im3)
    r0, i0, r1, i1, r2, i2, r3, i3 = rows
    return r0[k], i0[k], r1[k], i1[k], r2[k], i2[k], r3[k], i3[k]


@_jit_row
def _set_column(rows, k, v):
    r0, i0, r1, i1, r2, i2, r3, i3 = rows
    r0[k], i0[k], r1[k], i1[k], r2[k], i2[k], r3[k], i3[k] = v


@_jit_row
def _real_on_adjacent_rows(m, v):
    # the real 2x2 m on the row pairs (0, 1) and (2, 3) of the column v (re0, im0, ..., im3)
    r0, i0, r1, i1, r2, i2, r3, i3 = v
    r0, r1 = _real_pair(m, r0, r1)
    i0, i1 = _real_pair(m, i0, i1)
    r2, r3 = _real_pair(m, r2, r3)
    i2, i3 = _real_pair(m, i2, i3)
    return (r0, i0, r1, i1, r2, i2, r3, i3)


@_jit_row
def _swap_middle_rows(v):
    # rows (0, 1, 2, 3) of a column as (0, 2, 1, 3): pairs (0, 2), (1, 3) become adjacent
    r0, i0, r1, i1, r2, i2, r3, i3 = v
    return (r0, i0, r2, i2, r1, i1, r3, i3)


@_jit_row
def _y_overlap_adjacent_rows(p, q):
    # Σ over the row pairs (0, 1), (2, 3) of Re(q0^* p1 - q1^* p0): Im<λ|Yψ> on those pairs
    p0r, p0i, p1r, p1i, p2r, p2i, p3r, p3i = p
    q0r, q0i, q1r, q1i, q2r, q2i, q3r, q3i = q
    return (q0r * p1r + q0i * p1i - q1r * p0r - q1i * p0i
            + q2r * p3r + q2i * p3i - q3r * p2r - q3i * p2i)


@_jit_row
def _y2_column(p, q, a, b):
    # a (real, Y-type) on row pairs (0,1), (2,3), then b on (0,2), (1,3), on one column of ψ
    # (p) and of λ (q): (ψ', λ', a's derivative sum against (ψ, λ), b's against a^†(ψ, λ))
    sa = _y_overlap_adjacent_rows(p, q)
    t = _swap_middle_rows(_real_on_adjacent_rows(a, p))
    u = _swap_middle_rows(_real_on_adjacent_rows(a, q))
    sb = _y_overlap_adjacent_rows(t, u)
    return (_swap_middle_rows(_real_on_adjacent_rows(b, t)),
            _swap_middle_rows(_real_on_adjacent_rows(b, u)), sa, sb)


@_jit_row
def _y2_rows(x, y, a, b, write_psi):
    # _y2_column over the columns of the quads x (ψ), y (λ) (quad_rows): both derivatives
    sa = 0.0
    sb = 0.0
    for k in range(x[0].shape[0]):
        p, q, da, db = _y2_column(_column(x, k), _column(y, k), a, b)
        sa += da
        sb += db
        if write_psi:
            _set_column(x, k, p)
        _set_column(y, k, q)
    return sa, sb


@_jit_row
def _scale_column(d, v):
    # each of the 4 amplitudes of a column times its row's entry of the diagonal d
    d0r, d0i, d1r, d1i, d2r, d2i, d3r, d3i = d
    v0r, v0i, v1r, v1i, v2r, v2i, v3r, v3i = v
    return (d0r * v0r - d0i * v0i, d0r * v0i + d0i * v0r,
            d1r * v1r - d1i * v1i, d1r * v1i + d1i * v1r,
            d2r * v2r - d2i * v2i, d2r * v2i + d2i * v2r,
            d3r * v3r - d3i * v3i, d3r * v3i + d3i * v3r)


@_jit_row
def _diag_y2_rows(x, y, d, a, b, write_psi):
    # the quads times the diagonal run's entries d of their rows, then _y2_rows, in one
    # loop: (a's, b's derivative sums, the run's row sums Im<λ_r|ψ_r> of the 4 rows)
    sa = 0.0
    sb = 0.0
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    s3 = 0.0
    for k in range(x[0].shape[0]):
        p0r, p0i, p1r, p1i, p2r, p2i, p3r, p3i = _column(x, k)
        q0r, q0i, q1r, q1i, q2r, q2i, q3r, q3i = _column(y, k)
        s0 += q0r * p0i - q0i * p0r
        s1 += q1r * p1i - q1i * p1r
        s2 += q2r * p2i - q2i * p2r
        s3 += q3r * p3i - q3i * p3r
        p, q, da, db = _y2_column(
            _scale_column(d, (p0r, p0i, p1r, p1i, p2r, p2i, p3r, p3i)),
            _scale_column(d, (q0r, q0i, q1r, q1i, q2r, q2i, q3r, q3i)), a, b)
        sa += da
        sb += db
        if write_psi:
            _set_column(x, k, p)
        _set_column(y, k, q)
    return sa, sb, s0, s1, s2, s3


@_jit
def _rot2_fuses(pool, mo, gpool, go):
    # whether both gates of a _rot2 step are real and Y-type (one pass: _y2_rows)
    fused = _real_entries(pool, mo, mo + 8)
    for j in (0, 4):
        fused = fused and gpool[go + j] == 0 and gpool[go + j + 3] == 0 \
            and gpool[go + j + 1].real == 0
    return fused


@_jit_sum
def _rot2(buf, rowmap, B, ta, tb, pool, mo, gpool, go, acc, slot):
    # two _rot1 steps (uncontrolled, different targets): a on row pairs (0,1), (2,3) of each
    # quad of rows, then b on (0,2), (1,3), in one pass per λ when both are real and Y-type
    if not _rot2_fuses(pool, mo, gpool, go):
        _rot1(buf, rowmap, B, ta, 0, pool, mo, gpool, go, acc, slot)
        _rot1(buf, rowmap, B, tb, 0, pool, mo + 4, gpool, go + 4, acc, slot + 1)
        return
    a = (pool[mo].real, pool[mo + 1].real, pool[mo + 2].real, pool[mo + 3].real)
    b = (pool[mo + 4].real, pool[mo + 5].real, pool[mo + 6].real, pool[mo + 7].real)
    ga = gpool[go + 1].imag
    gb = gpool[go + 5].imag
    last = buf.shape[0] // 2 - 2
    pr, pi = buf[0], buf[1]
    for r0 in range(rowmap.shape[0]):
        if (r0 & (ta | tb)) != 0:
            continue
        p0, p1, p2, p3 = block_quad(rowmap, r0, ta, tb, B)
        x = quad_rows(pr, pi, p0, p1, p2, p3, B)
        for j in range(last + 1):
            y = quad_rows(buf[2 + 2 * j], buf[3 + 2 * j], p0, p1, p2, p3, B)
            if j < last:
                sa, sb = _y2_rows(x, y, a, b, False)
            else:
                sa, sb = _y2_rows(x, y, a, b, True)
            acc[j, slot] += ga * sa
            acc[j, slot + 1] += gb * sb


@_jit_sum
def _diag_rot2(buf, rowmap, B, ta, tb, pool, mo, gpool, go, acc, slot, dmo, sums):
    # a diagonal run (its product diagonal at pool[dmo:], row sums into `sums`, see
    # _diagrun) then a _rot2 step that _rot2_fuses, in one pass per λ: the run costs no
    # pass over the buffers of its own
    a = (pool[mo].real, pool[mo + 1].real, pool[mo + 2].real, pool[mo + 3].real)
    b = (pool[mo + 4].real, pool[mo + 5].real, pool[mo + 6].real, pool[mo + 7].real)
    ga = gpool[go + 1].imag
    gb = gpool[go + 5].imag
    last = buf.shape[0] // 2 - 2
    pr, pi = buf[0], buf[1]
    for r0 in range(rowmap.shape[0]):
        if (r0 & (ta | tb)) != 0:
            continue
        r1, r2, r3 = r0 | ta, r0 | tb, r0 | ta | tb
        p0, p1, p2, p3 = block_quad(rowmap, r0, ta, tb, B)
        x = quad_rows(pr, pi, p0, p1, p2, p3, B)
        d0, d1, d2, d3 = pool[dmo + r0], pool[dmo + r1], pool[dmo + r2], pool[dmo + r3]
        d = (d0.real, d0.imag, d1.real, d1.imag, d2.real, d2.imag, d3.real, d3.imag)
        for j in range(last + 1):
            y = quad_rows(buf[2 + 2 * j], buf[3 + 2 * j], p0, p1, p2, p3, B)
            if j < last:
                sa, sb, s0, s1, s2, s3 = _diag_y2_rows(x, y, d, a, b, False)
            else:
                sa, sb, s0, s1, s2, s3 = _diag_y2_rows(x, y, d, a, b, True)
            sums[j, r0] = s0
            sums[j, r1] = s1
            sums[j, r2] = s2
            sums[j, r3] = s3
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
                    block_scale(buf[s][p:p + B], buf[s + 1][p:p + B], d.real, d.imag)
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
    _run_derivatives(dpool, do, count, slots, so, acc, sums)


@_jit_sum
def _run_derivatives(dpool, do, count, slots, so, acc, sums):
    # derivative j of a diagonal run: sum_r G_j[r] sums[λ, r] (the row sums Im<λ_r|ψ_r>)
    R = sums.shape[1]
    for j in range(count):
        base = do + j * R
        for lam in range(sums.shape[0]):
            total = 0.0
            for r in range(R):
                total += dpool[base + r] * sums[lam, r]
            acc[lam, slots[so + j]] += total


# -- one batch, and a range of batches (its drivers: numba_ranges) ---------------------------
@_jit
def _batch(psi, lam, g0, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool, perm,
           poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs, slots, acc,
           buf, rowmap, bases, toff, rows, xr, xi, sums, chunk, sink, heads_outer):
    # buf rows: ψ's re, im, then each λ's re, im
    layout = block_start(g0, B, pos, bases, rowmap, heads_outer)
    if chunk:
        block_touch(psi, bases[0], chunk, offs, sink)
        for j in range(lam.shape[0]):
            block_touch(lam[j], bases[0], chunk, offs, sink)
    block_gather(psi, buf[0], buf[1], B, offs, low, layout, bases, pos)
    for j in range(lam.shape[0]):
        block_gather(lam[j], buf[2 + 2 * j], buf[3 + 2 * j], B, offs, low, layout, bases, pos)
    pr, pi = buf[0], buf[1]
    run = -1  # a diagonal run left for the pass of the next step
    for q in range(kinds.shape[0]):
        kind = kinds[q]
        cm = cmasks[q]
        mo = moffs[q]
        slot = slots[soffs[q]] if scount[q] else 0
        if kind == A_DIAGRUN:
            if q + 1 < kinds.shape[0] and kinds[q + 1] == A_ROT2 \
                    and _rot2_fuses(pool, moffs[q + 1], gpool, goffs[q + 1]):
                run = q  # applied in the pass of the rotation pair that follows
            else:
                _diagrun(buf, rowmap, B, pool, mo, dpool, goffs[q], scount[q], slots,
                         soffs[q], acc, sums)
            continue
        if kind == A_ROT1:
            _rot1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, gpool, goffs[q], acc, slot)
            continue
        if kind == A_ROT2 and run >= 0:
            _diag_rot2(buf, rowmap, B, tgts[q, 0], tgts[q, 1], pool, mo, gpool, goffs[q], acc,
                       slot, moffs[run], sums)
            _run_derivatives(dpool, goffs[run], scount[run], slots, soffs[run], acc, sums)
            run = -1
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
            block_dense1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, _real_entries(pool, mo, mo + 4))
        elif kind == A_PERM:
            block_perm(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, perm, poffs[q], toff, rows)
        else:
            block_densek(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, toff, rows, xr, xi)
    block_scatter(psi, buf[0], buf[1], rowmap, B, offs, low, layout, bases, pos)
    for j in range(lam.shape[0]):
        block_scatter(lam[j], buf[2 + 2 * j], buf[3 + 2 * j], rowmap, B, offs, low, layout,
                     bases, pos)


@_jit
def _range(psi, lo, hi, acc, lam, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm,
           poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs, slots):
    R = offs.shape[0]
    low = block_low(offs)
    # rows a little longer than the R * B they hold: rows a power of two apart would share
    # cache sets (every column loop streams several of them at once)
    buf = np.empty((2 + 2 * lam.shape[0], R * B + _ROW_PAD))
    rowmap, bases, toff, rows, xr, xi, sink = block_workspace(
        R, B, 1 << max(tgts.shape[1], gtgts.shape[1]))
    chunk, touch, heads_outer = block_chunk(B, pos, low)
    chunk = chunk if touch else 0
    sums = np.empty((lam.shape[0], R))
    for batch in range(lo, hi):
        _batch(psi, lam, batch * B, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool,
               perm, poffs, gkinds, gcmasks, gntg, gtgts, goffs, gpool, dpool, scount, soffs,
               slots, acc, buf, rowmap, bases, toff, rows, xr, xi, sums, chunk, sink,
               heads_outer)


PAULI_CROSS = summed_range_kernel(_cross_body)
"""``PAULI_CROSS(items, ket, chunks, out, bra, L, *sign tables)``: ``out[k] +=
<bra|P_k|ket>`` over ``chunks`` chunks of 2^L amplitudes."""

PAULI_ACCUMULATE = range_kernel(_accumulate_body)
"""``PAULI_ACCUMULATE(items, out, chunks, state, L, *sign tables)``: ``out += O state``."""

ADJOINT_BLOCK = summed_range_kernel(_range)
"""``ADJOINT_BLOCK(items, psi, nb, acc, lam, B, pos, offs, *encoded)``: the reverse sweep of
``nb`` batches; ``acc[j, s]`` sums derivative slot ``s`` of adjoint ``j``."""
