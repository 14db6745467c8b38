"""A batch of statevectors with the members along the SIMD lanes: the kernels of
``qdiff.vmap`` over a straight circuit (`execution.batched`).

The batch is split into tiles of at most `MAX_LANES` members, each stored with the members
along the last axis: ``state[t, 0, i, l]`` and ``state[t, 1, i, l]`` (a C-contiguous
``(tiles, 2, 2**n, lanes)`` float64 array) are the real and imaginary parts of amplitude
``i`` of member ``t * lanes + l``. A gate applied to an amplitude pair is then one loop over
the tile's members with contiguous loads and stores and each member's own matrix entries
(also contiguous: ``mats[t, e, part, row, column, lane]``), which the compiler turns into
vector instructions whatever wire the gate acts on.

Each step of the circuit has a kind: ``DENSE1`` (a 2x2 matrix on ``wire0``), ``DENSE2`` (a
4x4 matrix on ``wire0, wire1``; bit ``j`` of its index is wire ``j``), ``CONTROLLED1`` (a
2x2 matrix on ``wire1`` where ``wire0`` is 1) or ``PERMUTE`` (amplitudes moved by the table
``tables[wire0]``: ``state[i] := state[table[i]]``, a product of permutation gates, or
one on three or more wires). Wider and multi-angle gates arrive lowered into these
(`execution.batched.lowered_gates`).

>>> psi = np.zeros((2, 2), complex); psi[:, 0] = 1
>>> mats = np.zeros((2, 1, 4, 4), complex)
>>> mats[0, 0, :2, :2] = np.eye(2); mats[1, 0, :2, :2] = [[0, 1], [1, 0]]
>>> state = run_circuit(to_lanes(psi), np.array([DENSE1]), np.array([0]), np.array([0]),
...                     to_lanes(mats), np.zeros((0, 2), np.int64), np.array([0, 1]),
...                     *NO_CHECKPOINTS)
>>> from_lanes(state, 2).real.tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .batched_kernels import _FAST, CONTROLLED1, DENSE1, DENSE2, PERMUTE, _pair_layout

# the most members in one tile: the loop over a tile's members vectorizes behind a run-time
# check that its loads and stores do not overlap, paid once per amplitude pair, so wide
# tiles pay off (at n = 12, tiles of 32 took 1.5x the time of tiles of 64)
MAX_LANES = 64

# a cache line's bytes: every array of the layout starts on one (`line_aligned`)
LINE_BYTES = 64
# the float64 elements a buffer holds beyond its array's, for `line_aligned` to skip
LINE_SPARE = LINE_BYTES // 8


@njit(cache=True)
def line_aligned(buffer, shape):  # pragma: no cover - compiled
    """The first elements of the 1-D float64 ``buffer`` (at least ``LINE_SPARE`` more than
    ``shape`` holds) that start a cache line, as a C-contiguous array of ``shape`` (a
    tuple): with a multiple of 8 lanes, every row of a state then starts one too. The
    kernels' 32-byte vector loads and stores of rows that start elsewhere straddle two
    lines one time in two, each then costing two accesses (NumPy's 4 MiB arrays start 16
    bytes past a page): at n = 12 and 64 lanes, a pass of one-wire steps took 0.7-0.85x
    the time on aligned rows, the forward run 0.8x and the adjoint sweep 0.9x.

    >>> line_aligned(np.empty(6 + LINE_SPARE), (3, 2)).ctypes.data % LINE_BYTES
    0
    """
    count = 1
    for extent in shape:
        count *= extent
    start = (-buffer.ctypes.data % LINE_BYTES) // 8
    return buffer[start:start + count].reshape(shape)


@njit(cache=True)
def aligned_empty(shape):  # pragma: no cover - compiled
    """An uninitialized float64 array of ``shape`` (a tuple) that starts a cache line
    (`line_aligned`).

    >>> aligned_empty((3, 2)).shape
    (3, 2)
    """
    count = 1
    for extent in shape:
        count *= extent
    return line_aligned(np.empty(count + LINE_SPARE), shape)


def aligned_zeros(shape: tuple[int, ...]) -> np.ndarray:
    """`aligned_empty`, zero: NumPy's zeros, whose pages the system maps (zero) only when
    first written, so that a state written over anyway costs no pass of its own.

    >>> aligned_zeros((2, 2)).tolist()
    [[0.0, 0.0], [0.0, 0.0]]
    """
    return line_aligned(np.zeros(int(np.prod(shape)) + LINE_SPARE), tuple(shape))


def to_lanes(batch: np.ndarray) -> np.ndarray:
    """A ``(members, ...)`` complex array as tiles of members along the last axis, the real
    and imaginary parts on a new axis: ``(tiles, 2, 2**n, lanes)`` for ``(members, 2**n)``
    states, ``(tiles, steps, 2, 4, 4, lanes)`` for ``(members, steps, 4, 4)`` matrices.
    The tiles are as even as `MAX_LANES` allows; members that pad the last one are zero.

    >>> to_lanes(np.array([[1 + 2j, 3j]])).shape
    (1, 2, 2, 1)
    """
    members = batch.shape[0]
    tiles = max(1, -(-members // MAX_LANES))
    lanes = -(-members // tiles)
    padded = np.asarray(batch, np.complex128)
    if tiles * lanes != members:
        padded = np.zeros((tiles * lanes, *batch.shape[1:]), np.complex128)
        padded[:members] = batch
    rows = np.moveaxis(padded.reshape(tiles, lanes, *batch.shape[1:]), 1, -1)
    # one strided copy per part into the layout (states: part first; matrices: the step
    # axis first, then the part)
    split = aligned_empty((tiles, 2, *rows.shape[1:])) if batch.ndim <= 2 \
        else aligned_empty((tiles, rows.shape[1], 2, *rows.shape[2:]))
    parts = split if batch.ndim <= 2 else split.swapaxes(1, 2)
    parts[:, 0] = rows.real
    parts[:, 1] = rows.imag
    return split


def from_lanes(state: np.ndarray, members: int) -> np.ndarray:
    """The ``(members, 2**n)`` complex states of a ``(tiles, 2, 2**n, lanes)`` batch.

    >>> from_lanes(to_lanes(np.array([[1 + 2j, 3j]])), 1).tolist()
    [[(1+2j), 3j]]
    """
    rows = np.moveaxis(state, 3, 1).reshape(-1, 2, state.shape[2])[:members]
    return rows[:, 0] + 1j * rows[:, 1]


@njit(inline="always", cache=True, fastmath=_FAST)
def _pair(s, i, j, m):  # pragma: no cover - compiled
    # (s_i, s_j) := m (s_i, s_j) for every lane, m the lanes' 2x2 blocks
    for lane in range(s.shape[2]):
        xr, xi, yr, yi = s[0, i, lane], s[1, i, lane], s[0, j, lane], s[1, j, lane]
        ar, ai, br, bi = m[0, 0, 0, lane], m[1, 0, 0, lane], m[0, 0, 1, lane], m[1, 0, 1, lane]
        cr, ci, dr, di = m[0, 1, 0, lane], m[1, 1, 0, lane], m[0, 1, 1, lane], m[1, 1, 1, lane]
        s[0, i, lane] = ar * xr - ai * xi + br * yr - bi * yi
        s[1, i, lane] = ar * xi + ai * xr + br * yi + bi * yr
        s[0, j, lane] = cr * xr - ci * xi + dr * yr - di * yi
        s[1, j, lane] = cr * xi + ci * xr + dr * yi + di * yr


@njit(inline="always", cache=True, fastmath=_FAST)
def _overlap_im(g, xr, xi, yr, yi, ur, ui, vr, vi):  # pragma: no cover - compiled
    # Im <(u, v)| G (x, y)>, G's entries as (re00, im00, re01, im01, re10, ...) scalars
    g00r, g00i, g01r, g01i, g10r, g10i, g11r, g11i = g
    top_r = g00r * xr - g00i * xi + g01r * yr - g01i * yi
    top_i = g00r * xi + g00i * xr + g01r * yi + g01i * yr
    bottom_r = g10r * xr - g10i * xi + g11r * yr - g11i * yi
    bottom_i = g10r * xi + g10i * xr + g11r * yi + g11i * yr
    return ur * top_i - ui * top_r + vr * bottom_i - vi * bottom_r


@njit(inline="always", cache=True)
def _entries(g):  # pragma: no cover - compiled
    # a 2x2 block's entries as real scalars, hoisted out of the loops over the lanes
    return (g[0, 0].real, g[0, 0].imag, g[0, 1].real, g[0, 1].imag,
            g[1, 0].real, g[1, 0].imag, g[1, 1].real, g[1, 1].imag)


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_pair(p, a, i, j, m, g_later, g_earlier, acc):  # pragma: no cover - compiled
    # Im<lam|G psi> of the step's later gate on the incoming states, both states through
    # m, the same of its earlier gate on the outgoing ones: no branch in the loop over
    # the lanes (a step without such a gate has G = 0), so it vectorizes
    for lane in range(p.shape[2]):
        xr, xi, yr, yi = p[0, i, lane], p[1, i, lane], p[0, j, lane], p[1, j, lane]
        ur, ui, vr, vi = a[0, i, lane], a[1, i, lane], a[0, j, lane], a[1, j, lane]
        late = _overlap_im(g_later, xr, xi, yr, yi, ur, ui, vr, vi)
        ar, ai, br, bi = m[0, 0, 0, lane], m[1, 0, 0, lane], m[0, 0, 1, lane], m[1, 0, 1, lane]
        cr, ci, dr, di = m[0, 1, 0, lane], m[1, 1, 0, lane], m[0, 1, 1, lane], m[1, 1, 1, lane]
        xr, xi, yr, yi = (ar * xr - ai * xi + br * yr - bi * yi,
                          ar * xi + ai * xr + br * yi + bi * yr,
                          cr * xr - ci * xi + dr * yr - di * yi,
                          cr * xi + ci * xr + dr * yi + di * yr)
        ur, ui, vr, vi = (ar * ur - ai * ui + br * vr - bi * vi,
                          ar * ui + ai * ur + br * vi + bi * vr,
                          cr * ur - ci * ui + dr * vr - di * vi,
                          cr * ui + ci * ur + dr * vi + di * vr)
        acc[0, lane] += late
        acc[1, lane] += _overlap_im(g_earlier, xr, xi, yr, yi, ur, ui, vr, vi)
        p[0, i, lane], p[1, i, lane], p[0, j, lane], p[1, j, lane] = xr, xi, yr, yi
        a[0, i, lane], a[1, i, lane], a[0, j, lane], a[1, j, lane] = ur, ui, vr, vi


@njit(inline="always", cache=True, fastmath=_FAST)
def _quad_indices(i, w0, w1):  # pragma: no cover - compiled
    return i, i + (1 << w0), i + (1 << w1), i + (1 << w0) + (1 << w1)


@njit(inline="always", cache=True, fastmath=_FAST)
def _row4(m, r, lane, x0r, x0i, x1r, x1i, x2r, x2i, x3r, x3i):  # pragma: no cover
    # row r of a lane's 4x4 block times the four amplitudes, as (real, imaginary)
    ar, ai, br, bi = m[0, r, 0, lane], m[1, r, 0, lane], m[0, r, 1, lane], m[1, r, 1, lane]
    cr, ci, dr, di = m[0, r, 2, lane], m[1, r, 2, lane], m[0, r, 3, lane], m[1, r, 3, lane]
    return (ar * x0r - ai * x0i + br * x1r - bi * x1i + cr * x2r - ci * x2i + dr * x3r
            - di * x3i,
            ar * x0i + ai * x0r + br * x1i + bi * x1r + cr * x2i + ci * x2r + dr * x3i
            + di * x3r)


@njit(inline="always", cache=True, fastmath=_FAST)
def _quad(s, i, w0, w1, m):  # pragma: no cover - compiled
    # the four amplitudes of a two-wire gate through the lanes' 4x4 blocks
    q0, q1, q2, q3 = _quad_indices(i, w0, w1)
    for lane in range(s.shape[2]):
        x0r, x0i, x1r, x1i = s[0, q0, lane], s[1, q0, lane], s[0, q1, lane], s[1, q1, lane]
        x2r, x2i, x3r, x3i = s[0, q2, lane], s[1, q2, lane], s[0, q3, lane], s[1, q3, lane]
        s[0, q0, lane], s[1, q0, lane] = _row4(m, 0, lane, x0r, x0i, x1r, x1i, x2r, x2i,
                                               x3r, x3i)
        s[0, q1, lane], s[1, q1, lane] = _row4(m, 1, lane, x0r, x0i, x1r, x1i, x2r, x2i,
                                               x3r, x3i)
        s[0, q2, lane], s[1, q2, lane] = _row4(m, 2, lane, x0r, x0i, x1r, x1i, x2r, x2i,
                                               x3r, x3i)
        s[0, q3, lane], s[1, q3, lane] = _row4(m, 3, lane, x0r, x0i, x1r, x1i, x2r, x2i,
                                               x3r, x3i)


@njit(inline="always", cache=True, fastmath=_FAST)
def _overlap_quad(p, a, i, w0, w1, g, acc):  # pragma: no cover - compiled
    # <lam| G psi> over the four amplitudes of a two-wire gate, G a 4x4 generator
    q = _quad_indices(i, w0, w1)
    for lane in range(p.shape[2]):
        total = 0j
        for r in range(4):
            row = 0j
            for k in range(4):
                row += g[r, k] * complex(p[0, q[k], lane], p[1, q[k], lane])
            total += complex(a[0, q[r], lane], -a[1, q[r], lane]) * row
        acc[0, lane] += total.imag


@njit(inline="always", cache=True)
def _quad_starts(n, w0, w1):  # pragma: no cover - compiled
    # the lowest amplitude of each group of four a two-wire gate mixes (both bits 0)
    lo, hi = min(w0, w1), max(w0, w1)
    starts = np.empty(n >> 2, np.int64)
    k = 0
    for a in range(0, n, 2 << hi):
        for c in range(a, a + (1 << hi), 2 << lo):
            for i in range(c, c + (1 << lo)):
                starts[k] = i
                k += 1
    return starts


@njit(inline="always", cache=True)
def _gather(s, table, scratch):  # pragma: no cover - compiled
    # s[i] := s[table[i]]: a copy of each amplitude's contiguous lanes, both parts
    for part in range(2):
        for i in range(s.shape[1]):
            source = table[i]
            for lane in range(s.shape[2]):
                scratch[i, lane] = s[part, source, lane]
        s[part] = scratch


@njit(inline="always", cache=True)
def _gather_into(s, source, table):  # pragma: no cover - compiled
    # s[i] := source[table[i]], source another array
    for part in range(2):
        for i in range(s.shape[1]):
            row = table[i]
            for lane in range(s.shape[2]):
                s[part, i, lane] = source[part, row, lane]


def one_wire_blocks(kinds: np.ndarray, wire0: np.ndarray, max_wires: int) -> np.ndarray:
    """Step boundaries ``[0, ..., len(kinds)]`` that group each run of consecutive one-wire
    steps (``DENSE1``) into blocks on at most ``max_wires`` distinct wires; every other step
    is a block of its own. The kernels apply a block's steps to the ``2**k`` amplitudes that
    differ only on its ``k`` wires while they are in cache, one pass over the state for
    the block rather than one per step.

    >>> one_wire_blocks(np.array([DENSE1, DENSE1, DENSE1, PERMUTE, DENSE1]),
    ...                 np.array([0, 1, 2, 0, 3]), 2).tolist()
    [0, 2, 3, 4, 5]
    """
    bounds = [0]
    wires: set[int] = set()
    for e, (kind, wire) in enumerate(zip(kinds.tolist(), wire0.tolist())):
        if e > 0 and not (kind == DENSE1 and kinds[e - 1] == DENSE1
                          and len(wires | {wire}) <= max_wires):
            bounds.append(e)
            wires = set()
        wires.add(wire)
    if len(kinds):
        bounds.append(len(kinds))
    return np.array(bounds, np.int64)


def block_wires(lanes: int, states: int) -> int:
    """How many wires a block of one-wire steps spans: its amplitudes of ``states`` states
    (2 for the adjoint sweep's psi and lam), 16 bytes a lane, fill about `BLOCK_BYTES`.

    >>> block_wires(64, 1)
    5
    """
    return max(1, int(np.log2(BLOCK_BYTES // (16 * lanes * states))))


# the bytes a block's amplitudes take: within the L1 data cache (48 KiB), so that every
# step of the block after the first reads them from there
BLOCK_BYTES = 32 * 1024


@njit(inline="always", cache=True)
def _block_layout(wire0, e0, e1):  # pragma: no cover - compiled
    # the distinct wires of steps e0..e1 ascending, each step's bit among them, and each
    # of the block's 2**k amplitudes' offset from its first
    wires = np.unique(wire0[e0:e1])
    bits = np.searchsorted(wires, wire0[e0:e1])
    offsets = np.zeros(1 << wires.shape[0], np.int64)
    for r in range(offsets.shape[0]):
        for b in range(wires.shape[0]):
            if r >> b & 1:
                offsets[r] += 1 << wires[b]
    return wires, bits, offsets


@njit(inline="always", cache=True)
def _insert_zero(value, bit):  # pragma: no cover - compiled
    # value with a 0 inserted at position `bit` (the higher bits move up one)
    low = value & ((1 << bit) - 1)
    return ((value ^ low) << 1) | low


@njit(inline="always", cache=True)
def _block_base(counter, wires):  # pragma: no cover - compiled
    # the first amplitude of block `counter`: a 0 at each of its wires (ascending)
    for w in wires:
        counter = _insert_zero(counter, w)
    return counter


@njit(inline="always", cache=True, fastmath=_FAST)
def _run_block(s, wire0, mats, e0, e1, source):  # pragma: no cover - compiled
    # one-wire steps e0..e1 block by block; each block's amplitudes are first copied from
    # `source` when it is another array (the copy costs no pass of its own: the block is
    # then in cache for its steps)
    wires, bits, offsets = _block_layout(wire0, e0, e1)
    k = wires.shape[0]
    apart = source is not s
    for counter in range(s.shape[1] >> k):
        base = _block_base(counter, wires)
        if apart:
            for r in range(offsets.shape[0]):
                s[0, base + offsets[r]] = source[0, base + offsets[r]]
                s[1, base + offsets[r]] = source[1, base + offsets[r]]
        for e in range(e0, e1):
            b, stride, m = bits[e - e0], 1 << wire0[e], mats[e]
            for h in range(1 << (k - 1)):
                i = base + offsets[_insert_zero(h, b)]
                _pair(s, i, i + stride, m)


# `run_circuit`'s saves and saved when it keeps no checkpoints
NO_CHECKPOINTS = (np.zeros(0, np.int64), np.zeros((1, 1, 2, 1, 1)))


@njit(inline="always", cache=True, fastmath=_FAST)
def _apply_steps(s, kinds, wire0, wire1, mats, tables, e0, e1, scratch,
                 source):  # pragma: no cover
    # steps e0..e1 of one tile (a block of one-wire steps, or one other step) on the
    # states in `source`, written to `s` (the same array, or another one)
    n = s.shape[1]
    kind, m = kinds[e0], mats[e0]
    if kind == DENSE1:
        _run_block(s, wire0, mats, e0, e1, source)
        return
    if kind == PERMUTE:
        if source is s:
            _gather(s, tables[wire0[e0]], scratch)
        else:
            _gather_into(s, source, tables[wire0[e0]])
        return
    if source is not s:
        s[:] = source
    if kind == DENSE2:
        for i in _quad_starts(n, wire0[e0], wire1[e0]):
            _quad(s, i, wire0[e0], wire1[e0], m)
    else:
        stride, lo, hi, on, outer, inner = _pair_layout(wire1[e0], wire0[e0])
        for a in range(0, n, outer):
            for c in range(a + on, a + on + (1 << hi), inner):
                for i in range(c, c + (1 << lo)):
                    _pair(s, i, i + stride, m)


@njit(cache=True, fastmath=_FAST)
def run_circuit(state, kinds, wire0, wire1, mats, tables, bounds, saves,
                saved):  # pragma: no cover - compiled
    """Apply steps ``e = 0, 1, ...`` (``mats[t, e]`` the lanes' matrices) to every tile of
    ``state``, block by block (``bounds``: `one_wire_blocks`); returns ``state``.
    ``saves`` holds one entry per block boundary (or none at all): where it is not -1,
    the state before block ``q`` (after the last one for ``q = len(bounds) - 1``) is kept
    in ``saved[t, saves[q]]``, the checkpoints of `adjoint_sweep_checkpointed`. The run
    goes on inside ``saved``: the block after a kept state reads it and writes the next
    kept slot (or ``state`` when none follows), so keeping the states costs no copies.
    ``state`` then ends at the final states only when the last boundary is not kept."""
    scratch = aligned_empty((state.shape[2], state.shape[3]))
    last = bounds.shape[0] - 1
    for t in range(state.shape[0]):
        s, slot, kept = state[t], -1, False
        for q in range(bounds.shape[0]):
            if q < saves.shape[0] and saves[q] >= 0:
                if slot != saves[q]:        # not written there by the block before
                    saved[t, saves[q]][:] = s
                    slot = saves[q]
                    s = saved[t, slot]
                kept = True
            if q == last:
                break
            target = s
            if kept:    # leave the kept state: write the next kept slot, or `state`
                target, slot = state[t], -1
                for r in range(q + 1, min(saves.shape[0], bounds.shape[0])):
                    if saves[r] >= 0:
                        target, slot = saved[t, saves[r]], saves[r]
                        break
                kept = False
            _apply_steps(target, kinds, wire0, wire1, mats[t], tables, bounds[q],
                         bounds[q + 1], scratch, s)
            s = target
    return state


@njit(inline="always", cache=True, fastmath=_FAST)
def _undo_block(p, a, wire0, mats, gens, acc, e0, e1):  # pragma: no cover - compiled
    # the sweep's one-wire steps e0..e1 block by block
    wires, bits, offsets = _block_layout(wire0, e0, e1)
    k = wires.shape[0]
    for counter in range(p.shape[1] >> k):
        base = _block_base(counter, wires)
        for e in range(e0, e1):
            b, stride, m = bits[e - e0], 1 << wire0[e], mats[e]
            g_later, g_earlier, step_acc = _entries(gens[e, 0]), _entries(gens[e, 1]), acc[e]
            for h in range(1 << (k - 1)):
                i = base + offsets[_insert_zero(h, b)]
                _undo_pair(p, a, i, i + stride, m, g_later, g_earlier, step_acc)


@njit(cache=True, fastmath=_FAST)
def adjoint_sweep(psi, lam, kinds, wire0, wire1, mats, tables, bounds, gens,
                  out):  # pragma: no cover - compiled
    """The reverse sweep of a circuit, tile by tile: ``psi`` holds the final states, ``lam``
    the adjoint vectors of the objectives (``dJ = 2 Re<lam|dpsi>``), both
    ``(tiles, 2, 2**n, lanes)``. Steps run in the order given (blocks as in `run_circuit`),
    each undoing part of the circuit: ``mats[t, e]`` is the inverse of the gates it undoes
    (for ``PERMUTE``, ``tables[wire0[e]]`` is the inverse of the forward table).
    ``out[t, e, 0] = 2 Im<lam|G psi>`` on the incoming states with ``G = gens[e, 0]``, the
    generator of the step's last gate (``U = exp(-iθG)``, its 2x2 base block for a
    controlled gate), and ``out[t, e, 1]`` the same on the outgoing states with
    ``gens[e, 1]``, its first gate's when the step undoes two one-wire gates: each rotation
    commutes with its own generator, so the state between the two is never formed. A
    zero generator stands for no gate. Both states end at those before the circuit."""
    n = psi.shape[2]
    scratch = aligned_empty((n, psi.shape[3]))
    for t in range(psi.shape[0]):
        p, a, acc = psi[t], lam[t], out[t]
        acc[:] = 0.0
        for q in range(bounds.shape[0] - 1):
            e = bounds[q]
            kind, m = kinds[e], mats[t, e]
            if kind == DENSE1:
                _undo_block(p, a, wire0, mats[t], gens, acc, e, bounds[q + 1])
            elif kind == PERMUTE:
                _gather(p, tables[wire0[e]], scratch)
                _gather(a, tables[wire0[e]], scratch)
            elif kind == DENSE2:
                for i in _quad_starts(n, wire0[e], wire1[e]):
                    _overlap_quad(p, a, i, wire0[e], wire1[e], gens[e, 0], acc[e])
                    _quad(p, i, wire0[e], wire1[e], m)
                    _quad(a, i, wire0[e], wire1[e], m)
            else:
                stride, lo, hi, on, outer, inner = _pair_layout(wire1[e], wire0[e])
                g_later, g_earlier = _entries(gens[e, 0]), _entries(gens[e, 1])
                for base in range(0, n, outer):
                    for c in range(base + on, base + on + (1 << hi), inner):
                        for i in range(c, c + (1 << lo)):
                            _undo_pair(p, a, i, i + stride, m, g_later, g_earlier, acc[e])
    out *= 2.0
    return out


@njit(cache=True, fastmath=_FAST)
def diagonal_expectations(state, diagonals):  # pragma: no cover - compiled
    """``(values, norms)`` of every tile's members in one pass over ``state``
    (``(tiles, 2, 2**n, lanes)``): ``values[r, t, l] = Σ_i diagonals[r, i] |ψ_i|²`` and
    ``norms[t, l] = Σ_i |ψ_i|²``, for real diagonals ``(readouts, 2**n)``.

    >>> values, norms = diagonal_expectations(to_lanes(np.array([[0.6, 0.8j]])),
    ...                                       np.array([[1.0, -1.0]]))
    >>> np.round(values[0, 0], 12).tolist(), np.round(norms[0], 12).tolist()
    ([-0.28], [1.0])
    """
    tiles, n, lanes = state.shape[0], state.shape[2], state.shape[3]
    values = np.zeros((diagonals.shape[0], tiles, lanes))
    norms = np.zeros((tiles, lanes))
    weight = np.empty(lanes)
    for t in range(tiles):
        for i in range(n):
            for lane in range(lanes):
                weight[lane] = state[t, 0, i, lane] ** 2 + state[t, 1, i, lane] ** 2
                norms[t, lane] += weight[lane]
            for r in range(diagonals.shape[0]):
                d = diagonals[r, i]
                for lane in range(lanes):
                    values[r, t, lane] += d * weight[lane]
    return values, norms


@njit(inline="always", cache=True, fastmath=_FAST)
def _overlap_lanes(p, a, i, j, g, acc):  # pragma: no cover - compiled
    # acc += Im<lam|G psi> over the pair (i, j), lane by lane, G's entries as scalars
    for lane in range(p.shape[2]):
        acc[lane] += _overlap_im(g, p[0, i, lane], p[1, i, lane], p[0, j, lane],
                                 p[1, j, lane], a[0, i, lane], a[1, i, lane], a[0, j, lane],
                                 a[1, j, lane])


@njit(inline="always", cache=True)
def _has_generator(g):  # pragma: no cover - compiled
    found = False
    for r in range(g.shape[0]):
        for c in range(g.shape[1]):
            found = found or g[r, c] != 0
    return found


# the rows of `_pauli_coefficients`: a Hermitian 2x2 block is c_I I + c_X X + c_Y Y + c_Z Z
PAULI_I, PAULI_X, PAULI_Y, PAULI_Z = 0, 1, 2, 3


@njit(cache=True)
def _pauli_coefficients(mats, gens, e0, e1, coef):  # pragma: no cover - compiled
    # coef[e - e0, slot, P, lane]: the Pauli expansion of the generator each overlap of the
    # one-wire steps e0..e1 is taken with on the states entering the step. Slot 0 is the
    # later gate's own G; slot 1 is V^† G V for the earlier gate's G, V the step's matrix
    # (lane by lane): <V lam|G V psi> = <lam|V^† G V psi>, the earlier gate's overlap on the
    # leaving states moved onto the entering ones, so that those are never needed
    for e in range(e0, e1):
        m = mats[e]
        for slot in range(2):
            g = gens[e, slot]
            for lane in range(m.shape[3]):
                g00, g01, g10, g11 = g[0, 0], g[0, 1], g[1, 0], g[1, 1]
                if slot == 1:
                    v00 = complex(m[0, 0, 0, lane], m[1, 0, 0, lane])
                    v01 = complex(m[0, 0, 1, lane], m[1, 0, 1, lane])
                    v10 = complex(m[0, 1, 0, lane], m[1, 1, 0, lane])
                    v11 = complex(m[0, 1, 1, lane], m[1, 1, 1, lane])
                    t00, t01 = g00 * v00 + g01 * v10, g00 * v01 + g01 * v11     # G V
                    t10, t11 = g10 * v00 + g11 * v10, g10 * v01 + g11 * v11
                    g00 = v00.conjugate() * t00 + v10.conjugate() * t10       # V^† (G V)
                    g01 = v00.conjugate() * t01 + v10.conjugate() * t11
                    g10 = v01.conjugate() * t00 + v11.conjugate() * t10
                    g11 = v01.conjugate() * t01 + v11.conjugate() * t11
                c = coef[e - e0, slot]
                c[PAULI_I, lane] = (g00.real + g11.real) / 2
                c[PAULI_X, lane] = (g01.real + g10.real) / 2
                c[PAULI_Y, lane] = (g10.imag - g01.imag) / 2
                c[PAULI_Z, lane] = (g00.real - g11.real) / 2


@njit(cache=True, fastmath=_FAST)
def _xy_overlaps(p, a, wire0, e0, e1, ovx, ovy):  # pragma: no cover - compiled
    # ovx[e - e0] += Im<lam|X psi> and ovy[e - e0] += Im<lam|Y psi> on the wire of each
    # one-wire step e0..e1 (distinct wires), block by block, reading both states only
    wires, bits, offsets = _block_layout(wire0, e0, e1)
    k = wires.shape[0]
    for counter in range(p.shape[1] >> k):
        base = _block_base(counter, wires)
        for e in range(e0, e1):
            b, stride = bits[e - e0], 1 << wire0[e]
            x_acc, y_acc = ovx[e - e0], ovy[e - e0]
            for h in range(1 << (k - 1)):
                i = base + offsets[_insert_zero(h, b)]
                j = i + stride
                for lane in range(p.shape[2]):
                    xr, xi, yr, yi = p[0, i, lane], p[1, i, lane], p[0, j, lane], p[1, j, lane]
                    ur, ui, vr, vi = a[0, i, lane], a[1, i, lane], a[0, j, lane], a[1, j, lane]
                    x_acc[lane] += ur * yi - ui * yr + vr * xi - vi * xr   # Im(u* y + v* x)
                    y_acc[lane] += vr * xr + vi * xi - ur * yr - ui * yi   # Re(v* x - u* y)


@njit(cache=True, fastmath=_FAST)
def _z_overlaps(p, a, fold, sums, total, source, table):  # pragma: no cover - compiled
    # sums[w] = Im<lam|Z_w psi> for every wire w and total = Im<lam|psi>, all at once: the
    # products q_i = Im(lam_i* psi_i) in one pass, then wire by wire from the highest the
    # sums over its 0 half minus its 1 half, folding the 1 half onto the 0 half (about
    # 2**n additions for all wires, against 2 products an amplitude for each). When
    # `source` is another array, lam is first gathered from it (a[i] := source[table[i]],
    # a permutation step's undoing) in the same pass.
    n = p.shape[1]
    for i in range(n):
        if source is not a:
            row = table[i]
            for lane in range(p.shape[2]):
                a[0, i, lane] = source[0, row, lane]
                a[1, i, lane] = source[1, row, lane]
        for lane in range(p.shape[2]):
            fold[i, lane] = a[0, i, lane] * p[1, i, lane] - a[1, i, lane] * p[0, i, lane]
    size, wire = n, sums.shape[0] - 1
    while size > 1:
        half = size >> 1
        sums[wire] = 0.0
        for i in range(half):
            for lane in range(p.shape[2]):
                low, high = fold[i, lane], fold[i + half, lane]
                sums[wire, lane] += low - high
                fold[i, lane] = low + high
        size, wire = half, wire - 1
    total[:] = fold[0]


@njit(inline="always", cache=True)
def _uses(coef, count, first, second):  # pragma: no cover - compiled
    # whether any of the first `count` steps' coefficients in rows first or second is not 0
    found = False
    for s in range(count):
        for slot in range(2):
            for lane in range(coef.shape[3]):
                found = found or coef[s, slot, first, lane] != 0 \
                    or coef[s, slot, second, lane] != 0
    return found


@njit(cache=True, fastmath=_FAST)
def _layer_overlaps(p, a, wire0, mats, gens, acc, e0, e1, overlap_wires, coef, ovx, ovy,
                    fold, sums, total, source, table):  # pragma: no cover - compiled
    # acc[e, slot] += Im<lam|G psi> of both gates of each one-wire step e0..e1 (distinct
    # wires), all on the states entering the layer (`_pauli_coefficients`), from the
    # Pauli overlaps on each step's wire: Z and I for all wires in one pass
    # (`_z_overlaps`, which also gathers lam from `source` when it is another array), X
    # and Y in blocks of `overlap_wires` wires; passes no coefficient needs are skipped
    count = e1 - e0
    _pauli_coefficients(mats, gens, e0, e1, coef)
    sums[:] = 0.0
    total[:] = 0.0
    if _uses(coef, count, PAULI_I, PAULI_Z):
        _z_overlaps(p, a, fold, sums, total, source, table)
    elif source is not a:
        _gather_into(a, source, table)
    ovx[:count] = 0.0
    ovy[:count] = 0.0
    if _uses(coef, count, PAULI_X, PAULI_Y):
        for b0 in range(e0, e1, overlap_wires):
            b1 = min(b0 + overlap_wires, e1)
            _xy_overlaps(p, a, wire0, b0, b1, ovx[b0 - e0:b1 - e0], ovy[b0 - e0:b1 - e0])
    for e in range(e0, e1):
        for slot in range(2):
            c = coef[e - e0, slot]
            for lane in range(p.shape[2]):
                acc[e, slot, lane] += c[PAULI_I, lane] * total[lane] \
                    + c[PAULI_X, lane] * ovx[e - e0, lane] \
                    + c[PAULI_Y, lane] * ovy[e - e0, lane] \
                    + c[PAULI_Z, lane] * sums[wire0[e], lane]


@njit(cache=True, fastmath=_FAST)
def adjoint_sweep_checkpointed(saved, slots, lam, kinds, wire0, wire1, mats, tables,
                               segments, undo_wires, overlap_wires, gens,
                               out):  # pragma: no cover - compiled
    """The reverse sweep of a circuit from the forward run's checkpoints, tile by tile:
    only ``lam`` is undone. Steps are as in `adjoint_sweep`, grouped by ``segments``
    (step boundaries): a segment is one step, or a run of one-wire steps on distinct
    wires, each undoing at most two gates (a layer). ``saved[t, slots[k]]`` is the states
    entering segment ``k`` (``slots[k]`` is -1 for a segment that takes no overlap, a
    permutation step: its states are not kept). Every overlap is taken on the states
    entering its segment: a two-wire or controlled step's gate commutes with its
    generator; a one-wire step's later gate does too, and its earlier gate's overlap is
    that of ``V^† G V`` there (`_pauli_coefficients`), ``lam`` then undone in blocks of
    ``undo_wires`` wires. ``out[t, e, slot]`` is ``2 Im<lam|G psi>`` with ``G = gens[e,
    slot]`` (Hermitian). A permutation step before a layer (in the sweep's order) is undone
    by the layer's first pass over ``lam``, gathering it into a second buffer.
    ``lam`` ends at the initial states'."""
    n = lam.shape[2]
    lanes = lam.shape[3]
    scratch = aligned_empty((n, lanes))
    bits = 0
    while (2 << bits) <= n:
        bits += 1
    sums = aligned_empty((max(1, bits), lanes))      # one row per wire
    total = aligned_empty((lanes,))
    widest = 1
    for k in range(segments.shape[0] - 1):
        widest = max(widest, segments[k + 1] - segments[k])
    coef = aligned_empty((widest, 2, 4, lanes))
    ovx, ovy = aligned_empty((widest, lanes)), aligned_empty((widest, lanes))
    spare, no_table = aligned_empty(lam[0].shape), np.zeros(0, np.int64)
    for t in range(lam.shape[0]):
        a, other, acc, step_mats = lam[t], spare, out[t], mats[t]
        acc[:] = 0.0
        deferred = -1
        for k in range(segments.shape[0] - 1):
            e0, e1 = segments[k], segments[k + 1]
            kind = kinds[e0]
            if kind == PERMUTE and k + 2 < segments.shape[0] \
                    and kinds[segments[k + 1]] == DENSE1:
                deferred = e0       # gathered by the next layer's first pass over lam
                continue
            if kind == PERMUTE:
                _apply_steps(a, kinds, wire0, wire1, step_mats, tables, e0, e1, scratch, a)
                continue
            entering = saved[t, slots[k]]
            if kind == DENSE1:
                source, table = a, no_table
                if deferred >= 0:   # into the other buffer, read from this one
                    source, table, a, other = a, tables[wire0[deferred]], other, a
                    deferred = -1
                _layer_overlaps(entering, a, wire0, step_mats, gens, acc, e0, e1,
                                overlap_wires, coef, ovx, ovy, scratch, sums, total, source,
                                table)
                for b0 in range(e0, e1, undo_wires):
                    _run_block(a, wire0, step_mats, b0, min(b0 + undo_wires, e1), a)
                continue
            if kind == DENSE2 and _has_generator(gens[e0, 0]):
                for i in _quad_starts(n, wire0[e0], wire1[e0]):
                    _overlap_quad(entering, a, i, wire0[e0], wire1[e0], gens[e0, 0], acc[e0])
            elif kind == CONTROLLED1 and _has_generator(gens[e0, 0]):
                g = _entries(gens[e0, 0])
                stride, lo, hi, on, outer, inner = _pair_layout(wire1[e0], wire0[e0])
                for base in range(0, n, outer):
                    for c in range(base + on, base + on + (1 << hi), inner):
                        for i in range(c, c + (1 << lo)):
                            _overlap_lanes(entering, a, i, i + stride, g, acc[e0, 0])
            _apply_steps(a, kinds, wire0, wire1, step_mats, tables, e0, e1, scratch, a)
        if a is not lam[t]:
            lam[t][:] = a
    out *= 2.0
    return out


__all__ = ["BLOCK_BYTES", "CONTROLLED1", "DENSE1", "DENSE2", "LINE_BYTES",
           "LINE_SPARE", "MAX_LANES",
           "NO_CHECKPOINTS", "PAULI_I", "PAULI_X", "PAULI_Y", "PAULI_Z", "PERMUTE",
           "adjoint_sweep", "adjoint_sweep_checkpointed", "aligned_empty", "aligned_zeros",
           "block_wires", "diagonal_expectations", "from_lanes", "line_aligned",
           "one_wire_blocks", "run_circuit", "to_lanes"]
