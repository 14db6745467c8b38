"""The Numba block kernel: a gate sequence confined to k wires, one pass over the state.

The state splits into 2^(n-k) groups of 2^k amplitudes (one per setting of the other wires).
A batch of B consecutive groups is gathered into a split real/imaginary buffer of 2^k rows
by B columns (row r = amplitude r of each group), every gate of the block is applied to the
buffer, and the batch is scattered back. Each gate then works on whole rows, contiguous
runs of B doubles, so the inner loops vectorize whatever the gate's wires are. Permutation
gates (x, cx, swap, mcx, ...) only permute a row map; rows move once, at the scatter.
One-qubit runs on two wires share one sweep (real ones, and ``rx``-like ones with the
arithmetic of real ones), over contiguous spans of rows while the row map leaves them in
place, and a diagonal op that opens or closes the block is multiplied in at the gather or
the scatter.
:mod:`qdiff.quantum.simulator.block_encoding` turns a gate sequence into the op arrays
this kernel reads.

The adjoint block kernel (:mod:`qdiff.quantum.simulator.numba_adjoint_kernels`) runs the same
batches on two states at once, with the gather, the scatter and the ops below: an op takes
``buf``, a tuple of the split buffers of one or more states (buf[2s] and buf[2s + 1]: the real
and imaginary parts of state s, each 2^k rows of B columns), and applies itself to every
state in it, under one row map.

>>> import numpy as np
>>> from qdiff.quantum.simulator.block_encoding import encode_block
>>> from qdiff.quantum.simulator.indexing import index_layout
>>> psi = np.zeros(64, complex); psi[0] = 1; lay = index_layout(6, (0,))
>>> BLOCK(None, psi, 1, 32, lay.positions, lay.offsets, *encode_block([0], [("x", (0,))]))
>>> psi[:2].real.tolist()
[0.0, 1.0]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .block_encoding import (
    OP_DENSE1,
    OP_DENSE2,
    OP_DENSEK,
    OP_DIAG,
    OP_PERM,
    OP_REAL1,
    OP_REAL2,
    OP_XPAIR,
)
from .indexing import insert_zero_bits
from .numba_ranges import range_kernel
from .subnormals import flush_subnormals, restore_float_mode

__all__ = ["BLOCK", "MAX_BLOCK_WIRES", "MIN_BATCH", "FUSION_MIN_QUBITS", "BLOCK_AMPS",
           "TRANSPOSE_FROM_TWO", "block_chunk", "block_touch",
           "block_gather", "block_scatter", "block_start", "transposes_from_two",
           "block_workspace", "block_low",
           "block_dense1", "block_densek", "block_perm", "block_quad", "block_scale",
           "local_offsets", "row_pattern", "target_rows", "quad_rows"]

MAX_BLOCK_WIRES = 8
"""Widest block of gates the block kernel is given (see ``NumbaBackend.fusion_width``)."""

MIN_BATCH = 32
"""Fewest groups of the other wires the block kernel needs (its rows' length)."""

FUSION_MIN_QUBITS = 9
"""Registers below this size have fewer than ``MIN_BATCH`` groups for any block: the block
kernel takes the whole register as one block (one group), a call per run of gates."""

BLOCK_AMPS = 1 << 15
"""Amplitudes per gathered batch (512 KiB as split re/im): in L2."""

# the block kernels: FMA contraction only (a product rounds once instead of twice), so that
# the complex 2x2 and 4x4 arithmetic compiles to fused multiply-adds
_jit_blk = njit(cache=True, nogil=True, fastmath={"contract"})
# the block ops that the adjoint kernel shares: inlined where they are called, so that each
# kernel compiles them with its own flags (the adjoint's rounding stays its own)
_jit_op = njit(cache=True, nogil=True, inline="always")

_insert = njit(inline="always", cache=True)(insert_zero_bits)


@_jit_blk
def block_low(offs):
    # the block's wires 0, 1, ..., log2(low) - 1 are wires 0, 1, ... of the state: each group
    # is 2^k / low runs of `low` contiguous amplitudes
    low = 1
    while low < offs.shape[0] and offs[low] == low:
        low *= 2
    return low


@_jit_blk
def block_workspace(R, B, dim):
    # what a range of batches needs besides its buffers: the row map, the group bases, the
    # scratch of an op on up to `dim` rows (row numbers, row offsets, a column's re, im), and
    # where block_touch leaves its sum
    return (np.empty(R, np.int64), np.empty(B, np.int64), np.empty(dim, np.int64),
            np.empty(dim, np.int64), np.empty(dim), np.empty(dim), np.zeros(1))


@_jit_blk
def block_chunk(B, pos, low):
    """(chunk, touch, heads_outer): a batch of ``B`` groups lies in chunks of ``chunk``
    contiguous amplitudes (the wires its groups vary, the block wires among them, and every
    wire below), one per setting of the block wires above. ``touch``: the block wires inside
    a chunk leave gaps, so that the gather would read each chunk in several strided sweeps
    (see :func:`block_touch`). ``heads_outer``: otherwise, when at most two row heads (runs of
    ``low`` rows the transpose reads together) share a chunk, the transpose takes one row
    head at a time across all its tiles, reading its chunk in order, instead of a tile at a
    time across all row heads (n = 20, gather and scatter alone: wires 0, 14, 17, 18 and 0,
    1, 14-19 0.7-0.8x the time; but wires 1-8, 256 row heads in one chunk, 2x).

    >>> block_chunk(128, np.array([0, 2, 3, 10, 11, 12, 14, 16]), 2)  # wires 0, 2, 3 in 0-9
    (1024, True, False)
    >>> block_chunk(128, np.arange(1, 9), 1)  # wires 1-8 in 0-14: each row next to the last
    (32768, False, False)
    >>> block_chunk(128, np.array([0, 1, 14, 15, 16, 17, 18, 19]), 4)  # a head per chunk
    (512, False, True)
    """
    span = _insert(B - 1, pos)  # the bits that vary across the batch's groups
    chunk = np.int64(1)
    while chunk <= span:
        chunk <<= 1
    inside = 0
    for j in range(pos.shape[0]):
        if (np.int64(1) << pos[j]) < chunk:
            inside += 1
    touch = inside >= 2 and pos[inside - 1] - pos[0] >= inside
    return chunk, touch, not touch and (np.int64(1) << inside) <= 2 * low


@_jit_blk
def block_touch(psi, base, chunk, offs, sink):
    # one read per cache line of each chunk of the batch at `base`, in address order: the
    # hardware prefetcher streams the chunks in at full bandwidth, and the gather's strided
    # reads and the scatter's writes then find their lines in cache (n = 20, gather and
    # scatter of 8-wire blocks with scattered wires: 1.3-1.9x faster); the sum goes to `sink`
    # so that the reads are kept
    step = 64 // psi.itemsize
    acc = psi[base].real  # typed as the state's real parts (float32 for complex64)
    for r in range(offs.shape[0]):
        if (offs[r] & (chunk - 1)) != 0:
            continue  # its chunk is the chunk of a row before it
        first = base | offs[r]
        for i in range(first, first + chunk, step):
            acc += psi[i].real
    sink[0] += acc


TRANSPOSE_FROM_TWO = 6
"""Fewest wires of a block on wires 2, 3, ... (contiguous) whose batches transpose instead of
gathering runs of 4 groups."""


@_jit_blk
def transposes_from_two(pos):
    """Whether a block on wires ``pos`` (sorted) transposes its batches though its lowest wire
    is 2: its wires are 2, 3, ..., 2 + k - 1 with k >= ``TRANSPOSE_FROM_TWO``.

    >>> transposes_from_two(np.arange(2, 10)), transposes_from_two(np.array([2, 3, 4, 8]))
    (True, False)
    """
    # n = 20, copies of the state per block (a `ry` per wire, a `cx` chain; median of 15
    # interleaved rounds): wires 2-9 3.3-3.4 transposed against 3.9-4.1 in runs of 4, 2-7
    # 3.1-3.6 against 3.9-4.8; but 2-5 and 2-3 (2048 and 8192 groups a batch) 3.0-3.3
    # against 2.5-2.8, and blocks with a gap or a far wire up to 1.3x slower transposed
    if pos.shape[0] < TRANSPOSE_FROM_TWO:
        return False
    for j in range(pos.shape[0]):
        if pos[j] != 2 + j:
            return False
    return True


@_jit_blk
def block_start(g0, B, pos, bases, rowmap, heads_outer):
    # A batch of groups g0..g0+B-1: the identity row map, and the layout of the groups, with
    # their bases: 0, contiguous, when B is below the lowest block wire (bases[0]); 1, runs of
    # 2^pos[0] >= 4 contiguous groups (bases[b] at the start of each run; runs of 4, the
    # lowest block wire 2: 0.83-0.85x the transpose's time, n = 20; runs of 2 ran 1.4x
    # slower); 2, a transpose (every bases[b]; also wide contiguous blocks from wire 2, see
    # transposes_from_two), by tiles of groups; 3, the same by row heads (`heads_outer`, see
    # block_chunk).
    for r in range(rowmap.shape[0]):
        rowmap[r] = r
    if (np.int64(1) << pos[0]) >= B:
        bases[0] = _insert(g0, pos)
        return 0
    if pos[0] >= 2 and not transposes_from_two(pos):
        run = np.int64(1) << pos[0]
        for b in range(0, B, run):
            bases[b] = _insert(g0 + b, pos)
        return 1
    for b in range(B):
        bases[b] = _insert(g0 + b, pos)
    return 3 if heads_outer else 2


@_jit_op
def _transpose_steps(B, R, low, layout):
    # (outer, inner) step counts of a transpose: layout 3 has the R / low row heads outside
    # and the B / 8 tiles of 8 groups inside, layout 2 the other way round
    if layout == 3:
        return R // low, B // 8
    return B // 8, R // low


@_jit_op
def _tile(i, j, layout, low):
    # (first row, first group) of step (i, j) of a transpose (see _transpose_steps)
    if layout == 3:
        return i * low, j * 8
    return j * low, i * 8


@_jit_op
def _gather(psi, re, im, B, offs, low, layout, bases, pos, rowd, scaled):
    # the batch of `psi` into re/im: row r = amplitude r of each group (`low` as block_low);
    # `scaled` (a constant where inlined): row r times rowd[r] on the way (a diagonal that
    # opens the block, at no pass of its own)
    R = offs.shape[0]
    if layout == 0:
        for r in range(R):
            o = bases[0] | offs[r]
            src = psi[o:o + B]
            dr = re[r * B:(r + 1) * B]
            di = im[r * B:(r + 1) * B]
            d = rowd[r] if scaled else 1
            for b in range(B):
                v = src[b] * d if scaled else src[b]
                dr[b] = v.real
                di[b] = v.imag
    elif layout == 1:
        run = np.int64(1) << pos[0]
        for r in range(R):
            o = offs[r]
            d = rowd[r] if scaled else 1
            for b0 in range(0, B, run):
                s = bases[b0] | o
                src = psi[s:s + run]
                dr = re[r * B + b0:r * B + b0 + run]
                di = im[r * B + b0:r * B + b0 + run]
                for b in range(run):
                    v = src[b] * d if scaled else src[b]
                    dr[b] = v.real
                    di[b] = v.imag
    else:  # a transpose, by tiles of 8 groups so that buffer writes fill cache lines
        outer, inner = _transpose_steps(B, R, low, layout)
        for i in range(outer):
            for j in range(inner):
                rh, b0 = _tile(i, j, layout, low)
                oh = offs[rh]
                for rl in range(low):
                    p = (rh + rl) * B + b0
                    d = rowd[rh + rl] if scaled else 1
                    for t in range(8):
                        v = psi[(bases[b0 + t] | oh) + rl]
                        if scaled:
                            v = v * d
                        re[p + t] = v.real
                        im[p + t] = v.imag


@_jit_blk
def block_gather(psi, re, im, B, offs, low, layout, bases, pos):
    # the batch of `psi` into re/im: row r = amplitude r of each group (`low` as block_low)
    _gather(psi, re, im, B, offs, low, layout, bases, pos, psi, False)  # psi: unread


@_jit_blk
def _gather_scaled(psi, re, im, B, offs, low, layout, bases, pos, rowd):
    _gather(psi, re, im, B, offs, low, layout, bases, pos, rowd, True)


@_jit_op
def _scatter(psi, re, im, rowmap, B, offs, low, layout, bases, pos, rowd, scaled):
    # re/im back into the batch of `psi`, reading each logical row from where the row map put
    # it; `scaled` (a constant where inlined): logical row r times rowd[r] on the way (a
    # diagonal that closes the block, at no pass of its own)
    R = offs.shape[0]
    if layout == 0:
        for r in range(R):
            o = bases[0] | offs[r]
            p = rowmap[r] * B
            dst = psi[o:o + B]
            sr = re[p:p + B]
            si = im[p:p + B]
            d = rowd[r] if scaled else 1
            for b in range(B):
                dst[b] = complex(sr[b], si[b]) * d if scaled else complex(sr[b], si[b])
    elif layout == 1:
        run = np.int64(1) << pos[0]
        for r in range(R):
            o = offs[r]
            p = rowmap[r] * B
            d = rowd[r] if scaled else 1
            for b0 in range(0, B, run):
                s = bases[b0] | o
                dst = psi[s:s + run]
                sr = re[p + b0:p + b0 + run]
                si = im[p + b0:p + b0 + run]
                for b in range(run):
                    dst[b] = complex(sr[b], si[b]) * d if scaled else complex(sr[b], si[b])
    else:
        outer, inner = _transpose_steps(B, R, low, layout)
        for i in range(outer):
            for j in range(inner):
                rh, b0 = _tile(i, j, layout, low)
                oh = offs[rh]
                for rl in range(low):
                    p = rowmap[rh + rl] * B + b0
                    d = rowd[rh + rl] if scaled else 1
                    for t in range(8):
                        v = complex(re[p + t], im[p + t])
                        psi[(bases[b0 + t] | oh) + rl] = v * d if scaled else v


@_jit_blk
def block_scatter(psi, re, im, rowmap, B, offs, low, layout, bases, pos):
    # re/im back into the batch of `psi`, reading each logical row from where the row map put it
    _scatter(psi, re, im, rowmap, B, offs, low, layout, bases, pos, psi, False)  # psi: unread


@_jit_blk
def _scatter_scaled(psi, re, im, rowmap, B, offs, low, layout, bases, pos, rowd):
    _scatter(psi, re, im, rowmap, B, offs, low, layout, bases, pos, rowd, True)


@_jit_op
def block_scale(xr, xi, dr, di):
    # one row times d = dr + i di
    for b in range(xr.shape[0]):
        ar = xr[b]
        ai = xi[b]
        xr[b] = dr * ar - di * ai
        xi[b] = dr * ai + di * ar


@_jit_blk
def local_offsets(tgt, m, out):
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
def row_pattern(r, tgt, m):
    # the target pattern of row r (bit j set where r has target bit tgt[j])
    t = 0
    for j in range(m):
        if r & tgt[j]:
            t |= 1 << j
    return t


@_jit_op
def block_dense1(buf, rowmap, B, tb, cmask, pool, mo, real):
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
def block_quad(rowmap, r0, ta, tb, B):
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
def _consecutive(rowmap, r, count):
    # whether logical rows r..r+count-1 sit in consecutive buffer rows (no permutation moved
    # them apart): then they are one contiguous span
    for j in range(1, count):
        if rowmap[r + j] != rowmap[r] + j:
            return False
    return True


@_jit_blk
def quad_spans(rowmap, r0, ta, tb, B):
    """(count, span): the quads of rows from r0 (bits ta and tb clear) that one call takes as
    four contiguous spans of ``span`` columns, ``count`` such calls; ``ta`` < ``tb``. The
    rows r0 .. r0 + ta - 1 make one span when the row map keeps each of the four row sets
    consecutive (no permutation yet in the block), else a call per row."""
    if (_consecutive(rowmap, r0, ta) and _consecutive(rowmap, r0 | ta, ta)
            and _consecutive(rowmap, r0 | tb, ta) and _consecutive(rowmap, r0 | ta | tb, ta)):
        return 1, ta * B
    return ta, B


@_jit_blk
def _blk_real2(buf, rowmap, B, ta, tb, pool, mo):
    # two real 2x2 on two wires in one sweep (A on ta, then B on tb): half the buffer traffic
    a00, a01, a10, a11 = pool[mo].real, pool[mo + 1].real, pool[mo + 2].real, pool[mo + 3].real
    b00, b01, b10, b11 = (pool[mo + 4].real, pool[mo + 5].real, pool[mo + 6].real,
                          pool[mo + 7].real)
    lo, hi = min(ta, tb), max(ta, tb)
    if ta > tb:  # the rows of A's and B's pairs swap with them
        a00, a01, a10, a11, b00, b01, b10, b11 = b00, b01, b10, b11, a00, a01, a10, a11
    for r0 in range(0, rowmap.shape[0], lo):
        if (r0 & (lo | hi)) != 0:
            continue
        count, span = quad_spans(rowmap, r0, lo, hi, B)
        for j in range(count):
            p0, p1, p2, p3 = block_quad(rowmap, r0 + j, lo, hi, B)
            for s in range(len(buf)):  # a real matrix: re and im alike
                _real2_rows(buf[s][p0:p0 + span], buf[s][p1:p1 + span],
                            buf[s][p2:p2 + span], buf[s][p3:p3 + span], span,
                            a00, a01, a10, a11, b00, b01, b10, b11)


@_jit_blk
def _xpair_rows(r0, i0, r1, i1, r2, i2, r3, i3, a00, a01, a10, a11, b00, b01, b10, b11):
    # [[a00, i a01], [i a10, a11]] on the row pairs (0, 1), (2, 3), then the same form of b
    # on (0, 2), (1, 3): two multiply-adds per output, as for real matrices
    for k in range(r0.shape[0]):
        x0r, x0i, x1r, x1i = r0[k], i0[k], r1[k], i1[k]
        x2r, x2i, x3r, x3i = r2[k], i2[k], r3[k], i3[k]
        y0r = a00 * x0r - a01 * x1i
        y0i = a00 * x0i + a01 * x1r
        y1r = a11 * x1r - a10 * x0i
        y1i = a11 * x1i + a10 * x0r
        y2r = a00 * x2r - a01 * x3i
        y2i = a00 * x2i + a01 * x3r
        y3r = a11 * x3r - a10 * x2i
        y3i = a11 * x3i + a10 * x2r
        r0[k] = b00 * y0r - b01 * y2i
        i0[k] = b00 * y0i + b01 * y2r
        r2[k] = b11 * y2r - b10 * y0i
        i2[k] = b11 * y2i + b10 * y0r
        r1[k] = b00 * y1r - b01 * y3i
        i1[k] = b00 * y1i + b01 * y3r
        r3[k] = b11 * y3r - b10 * y1i
        i3[k] = b11 * y3i + b10 * y1r


@_jit_blk
def _blk_xpair(buf, rowmap, B, ta, tb, pool, mo):
    # two rx-like 2x2 (real diagonal, imaginary off-diagonal) on two wires in one sweep (A on
    # ta, then B on tb): the buffer traffic and arithmetic of a pair of real ones
    a00, a01, a10, a11 = pool[mo].real, pool[mo + 1].imag, pool[mo + 2].imag, pool[mo + 3].real
    b00, b01, b10, b11 = (pool[mo + 4].real, pool[mo + 5].imag, pool[mo + 6].imag,
                          pool[mo + 7].real)
    lo, hi = min(ta, tb), max(ta, tb)
    if ta > tb:  # the rows of A's and B's pairs swap with them
        a00, a01, a10, a11, b00, b01, b10, b11 = b00, b01, b10, b11, a00, a01, a10, a11
    for r0 in range(0, rowmap.shape[0], lo):
        if (r0 & (lo | hi)) != 0:
            continue
        count, span = quad_spans(rowmap, r0, lo, hi, B)
        for j in range(count):
            p0, p1, p2, p3 = block_quad(rowmap, r0 + j, lo, hi, B)
            _xpair_rows(*quad_rows(buf[0], buf[1], p0, p1, p2, p3, span),
                        a00, a01, a10, a11, b00, b01, b10, b11)


@_jit_op
def quad_rows(re, im, p0, p1, p2, p3, B):
    """The real and imaginary rows at buffer offsets p0..p3 (B columns each), interleaved:
    (re0, im0, re1, im1, re2, im2, re3, im3)."""
    return (re[p0:p0 + B], im[p0:p0 + B], re[p1:p1 + B], im[p1:p1 + B],
            re[p2:p2 + B], im[p2:p2 + B], re[p3:p3 + B], im[p3:p3 + B])


@_jit_blk
def _dense2_rows(ar, ai, br, bi, cr, ci, dr, di, mr, mi):
    # a 4x4 (mr + i mi, row-major) on four rows; the entries in locals, so that the loop
    # over the columns keeps them in registers and vectorizes
    r00, r01, r02, r03 = mr[0], mr[1], mr[2], mr[3]
    i00, i01, i02, i03 = mi[0], mi[1], mi[2], mi[3]
    r10, r11, r12, r13 = mr[4], mr[5], mr[6], mr[7]
    i10, i11, i12, i13 = mi[4], mi[5], mi[6], mi[7]
    r20, r21, r22, r23 = mr[8], mr[9], mr[10], mr[11]
    i20, i21, i22, i23 = mi[8], mi[9], mi[10], mi[11]
    r30, r31, r32, r33 = mr[12], mr[13], mr[14], mr[15]
    i30, i31, i32, i33 = mi[12], mi[13], mi[14], mi[15]
    for b in range(ar.shape[0]):
        x0r = ar[b]
        x0i = ai[b]
        x1r = br[b]
        x1i = bi[b]
        x2r = cr[b]
        x2i = ci[b]
        x3r = dr[b]
        x3i = di[b]
        ar[b] = (r00 * x0r + r01 * x1r + r02 * x2r + r03 * x3r
                 - i00 * x0i - i01 * x1i - i02 * x2i - i03 * x3i)
        ai[b] = (r00 * x0i + r01 * x1i + r02 * x2i + r03 * x3i
                 + i00 * x0r + i01 * x1r + i02 * x2r + i03 * x3r)
        br[b] = (r10 * x0r + r11 * x1r + r12 * x2r + r13 * x3r
                 - i10 * x0i - i11 * x1i - i12 * x2i - i13 * x3i)
        bi[b] = (r10 * x0i + r11 * x1i + r12 * x2i + r13 * x3i
                 + i10 * x0r + i11 * x1r + i12 * x2r + i13 * x3r)
        cr[b] = (r20 * x0r + r21 * x1r + r22 * x2r + r23 * x3r
                 - i20 * x0i - i21 * x1i - i22 * x2i - i23 * x3i)
        ci[b] = (r20 * x0i + r21 * x1i + r22 * x2i + r23 * x3i
                 + i20 * x0r + i21 * x1r + i22 * x2r + i23 * x3r)
        dr[b] = (r30 * x0r + r31 * x1r + r32 * x2r + r33 * x3r
                 - i30 * x0i - i31 * x1i - i32 * x2i - i33 * x3i)
        di[b] = (r30 * x0i + r31 * x1i + r32 * x2i + r33 * x3i
                 + i30 * x0r + i31 * x1r + i32 * x2r + i33 * x3r)


@_jit_blk
def _blk_dense2(buf, rowmap, B, t0, t1, cmask, pool, mo):
    mr = np.empty(16, buf[0].dtype)  # the buffers' precision: float32 lanes stay float32
    mi = np.empty(16, buf[0].dtype)
    for e in range(16):
        mr[e] = pool[mo + e].real
        mi[e] = pool[mo + e].imag
    for r0 in range(rowmap.shape[0]):
        if (r0 & (t0 | t1)) != 0 or (r0 & cmask) != cmask:
            continue
        p0, p1, p2, p3 = block_quad(rowmap, r0, t0, t1, B)
        for s in range(0, len(buf), 2):
            _dense2_rows(*quad_rows(buf[s], buf[s + 1], p0, p1, p2, p3, B), mr, mi)


@_jit_op
def target_rows(rowmap, r0, tmask, cmask, toff, dim, scale, rows):
    """False unless row r0 starts a group an op acts on (its targets 0, its controls 1);
    then ``rows[t]`` = the buffer row of the group's target pattern t, times ``scale``."""
    if (r0 & tmask) != 0 or (r0 & cmask) != cmask:
        return False
    for t in range(dim):
        rows[t] = rowmap[r0 | toff[t]] * scale
    return True


@_jit_op
def block_densek(buf, rowmap, B, tgt, m, cmask, pool, mo, toff, rows, xr, xi):
    dim = 1 << m
    tmask = local_offsets(tgt, m, toff)
    for r0 in range(rowmap.shape[0]):
        if not target_rows(rowmap, r0, tmask, cmask, toff, dim, B, rows):
            continue
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
        d = pool[mo + row_pattern(r, tgt, m)]
        if d == 1:
            continue
        p = rowmap[r] * B
        for s in range(0, len(buf), 2):
            block_scale(buf[s][p:p + B], buf[s + 1][p:p + B], d.real, d.imag)


@_jit_op
def block_perm(buf, rowmap, B, tgt, m, cmask, pool, mo, perm, po, toff, rows):
    # U|t> = phases[t] |perm[t]>: logical row t moves to perm[t] (only the row map changes)
    tmask = local_offsets(tgt, m, toff)
    dim = 1 << m
    for r0 in range(rowmap.shape[0]):
        if not target_rows(rowmap, r0, tmask, cmask, toff, dim, 1, rows):
            continue
        for t in range(dim):
            rowmap[r0 | toff[perm[po + t]]] = rows[t]
            d = pool[mo + t]
            if d != 1:
                p = rows[t] * B
                for s in range(0, len(buf), 2):
                    block_scale(buf[s][p:p + B], buf[s + 1][p:p + B], d.real, d.imag)


@_jit_blk
def _edge_diagonal(kinds, cmasks, ntg, tgts, moffs, pool, q, rowd):
    # whether op q is a diagonal on every row: then rowd[r] = its entry of logical row r (the
    # gather or the scatter multiplies by it, and the op takes no sweep of its own)
    if q < 0 or q >= kinds.shape[0] or kinds[q] != OP_DIAG or cmasks[q] != 0:
        return False
    for r in range(rowd.shape[0]):
        rowd[r] = pool[moffs[q] + row_pattern(r, tgts[q], ntg[q])]
    return True


@_jit_blk
def _blk_batch(psi, g0, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs,
               buf, rowmap, bases, toff, rows, xr, xi, rowd, first, last, rowd_last, chunk,
               sink, heads_outer):
    layout = block_start(g0, B, pos, bases, rowmap, heads_outer)
    if chunk:
        block_touch(psi, bases[0], chunk, offs, sink)
    if first:
        _gather_scaled(psi, buf[0], buf[1], B, offs, low, layout, bases, pos, rowd)
    else:
        block_gather(psi, buf[0], buf[1], B, offs, low, layout, bases, pos)
    for q in range(first, last):
        kind = kinds[q]
        cm = cmasks[q]
        mo = moffs[q]
        if kind == OP_DENSE1:  # `real` constant: the inlined op keeps one of its two loops
            block_dense1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, False)
        elif kind == OP_REAL1:
            block_dense1(buf, rowmap, B, tgts[q, 0], cm, pool, mo, True)
        elif kind == OP_DENSE2:
            _blk_dense2(buf, rowmap, B, tgts[q, 0], tgts[q, 1], cm, pool, mo)
        elif kind == OP_DENSEK:
            block_densek(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, toff, rows, xr, xi)
        elif kind == OP_DIAG:
            _blk_diag(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo)
        elif kind == OP_REAL2:
            _blk_real2(buf, rowmap, B, tgts[q, 0], tgts[q, 1], pool, mo)
        elif kind == OP_XPAIR:
            _blk_xpair(buf, rowmap, B, tgts[q, 0], tgts[q, 1], pool, mo)
        elif kind == OP_PERM:
            block_perm(buf, rowmap, B, tgts[q], ntg[q], cm, pool, mo, perm, poffs[q], toff, rows)
    if last < kinds.shape[0]:
        _scatter_scaled(psi, buf[0], buf[1], rowmap, B, offs, low, layout, bases, pos, rowd_last)
    else:
        block_scatter(psi, buf[0], buf[1], rowmap, B, offs, low, layout, bases, pos)


@_jit_blk
def _blk_range(psi, lo, hi, B, pos, offs, kinds, cmasks, ntg, tgts, moffs, pool, perm, poffs):
    R = offs.shape[0]
    low = block_low(offs)
    # the buffers in the state's precision (float32 for complex64: a SIMD register holds
    # twice the amplitudes, and the pool's entries are complex64 too, see apply_fused);
    # separate arrays: rows of one 2-D array ran slower
    buf = (np.empty(R * B, psi.real.dtype), np.empty(R * B, psi.real.dtype))
    rowmap, bases, toff, rows, xr, xi, sink = block_workspace(R, B, 1 << tgts.shape[1])
    chunk, touch, heads_outer = block_chunk(B, pos, low)
    chunk = chunk if touch else 0
    # a diagonal op first or last: multiplied in at the gather or the scatter (the last one
    # only when it is not the first too)
    rowd = np.empty(R, psi.dtype)
    rowd_last = np.empty(R, psi.dtype)
    first = 1 if _edge_diagonal(kinds, cmasks, ntg, tgts, moffs, pool, 0, rowd) else 0
    last = kinds.shape[0]
    if last > first and _edge_diagonal(kinds, cmasks, ntg, tgts, moffs, pool, last - 1,
                                       rowd_last):
        last -= 1
    # subnormals flushed to zero while the batches run (see .subnormals: a complex64 QFT's
    # noise amplitudes reach them, and each such multiply costs many cycles)
    saved = flush_subnormals()
    for batch in range(lo, hi):
        _blk_batch(psi, batch * B, B, pos, offs, low, kinds, cmasks, ntg, tgts, moffs, pool,
                   perm, poffs, buf, rowmap, bases, toff, rows, xr, xi, rowd, first, last,
                   rowd_last, chunk, sink, heads_outer)
    restore_float_mode(saved)


BLOCK = range_kernel(_blk_range)
"""The block kernel over a range of batches:
``BLOCK(items, psi, nb, B, pos, offs, *encode_block(wires, ops))`` (``items``: None, serial;
else the number of threaded work items)."""

_blk_par = BLOCK.threaded
