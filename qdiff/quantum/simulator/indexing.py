"""Index math every statevector back end shares, and wire checks.

A state is a flat, C-contiguous array of ``2^n`` complex amplitudes in Qiskit's little-endian
order: wire ``k`` is bit ``k`` of the index. A gate on ``targets`` with ``controls`` touches the
amplitudes in groups of ``2^k`` (``k = len(targets)``). Number the groups ``g = 0 .. 2^(n-m)-1``
(``m = len(targets) + len(controls)``); :func:`insert_zero_bits` spreads ``g`` over the bits that
are not gate wires, OR-ing ``cmask`` sets every control to 1, and ``offsets[r]`` adds the target
bits of row ``r`` of the gate matrix. So amplitude ``r`` of group ``g`` lives at
``insert_zero_bits(g, positions) | cmask | offsets[r]``. Controlled gates therefore never build
the big matrix: the groups where a control is 0 are simply never visited.

>>> lay = index_layout(2, (1,), (0,))   # a gate on wire 1 controlled by wire 0
>>> (lay.group_bases() | lay.offsets[1]).tolist()   # its |1> row: amplitude 0b11
[3]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["insert_zero_bits", "IndexLayout", "index_layout", "marginal_probabilities",
           "check_wires", "diagonal_patterns", "DIAGONAL_LOW_BITS", "permutation_tiles",
           "PERMUTATION_TILE_BITS"]


def insert_zero_bits(index: Any, sorted_positions: Any) -> Any:
    """Insert a 0 bit at each of ``sorted_positions`` (ascending, absolute in the result).

    Works on Python ints, int64 NumPy/CuPy arrays and, compiled by Numba, on scalars.

    >>> bin(insert_zero_bits(0b111, [1, 3]))
    '0b10101'
    """
    for p in sorted_positions:
        index = ((index >> p) << (p + 1)) | (index & ((1 << p) - 1))
    return index


@dataclass(frozen=True, eq=False)
class IndexLayout:
    """Where a gate's amplitude groups live (see the module doc). Cached by :func:`index_layout`.

    Attributes:
        num_qubits: register size ``n``.
        targets: wires that carry the gate matrix (matrix bit ``j`` = ``targets[j]``).
        controls: wires that must be 1.
        positions: ``sorted(targets + controls)`` as int64: bits removed from the group counter.
        cmask: OR of the control bits.
        offsets: int64 ``[2^k]``, ``offsets[r]`` = target bits of matrix row ``r``.
        num_groups: ``2^(n - len(positions))``.
    """

    num_qubits: int
    targets: tuple[int, ...]
    controls: tuple[int, ...]
    positions: np.ndarray
    cmask: int
    offsets: np.ndarray
    num_groups: int

    def group_bases(self, xp: Any = np) -> Any:
        """First amplitude index of every group (controls set, targets 0), as int64 ``xp`` array.

        >>> index_layout(3, (0,), (2,)).group_bases().tolist()
        [4, 6]
        """
        g = xp.arange(self.num_groups, dtype=xp.int64)
        return insert_zero_bits(g, [int(p) for p in self.positions]) | self.cmask


@functools.lru_cache(maxsize=4096)
def index_layout(num_qubits: int, targets: tuple[int, ...],
                 controls: tuple[int, ...] = ()) -> IndexLayout:
    """The cached :class:`IndexLayout` of a gate placement (wires must be valid and distinct).

    >>> lay = index_layout(3, (2, 0)); lay.offsets.tolist(), lay.num_groups
    ([0, 4, 1, 5], 2)
    """
    positions = np.array(sorted(targets + controls), dtype=np.int64)
    r = np.arange(1 << len(targets), dtype=np.int64)
    offsets = np.zeros_like(r)
    for j, t in enumerate(targets):
        offsets |= ((r >> j) & 1) << t
    cmask = 0
    for c in controls:
        cmask |= 1 << c
    for arr in (positions, offsets):
        arr.setflags(write=False)
    return IndexLayout(num_qubits, targets, controls, positions, cmask, offsets,
                       1 << (num_qubits - len(positions)))


DIAGONAL_LOW_BITS = 10
"""Index bits of a chunk of a diagonal's sweep (:func:`diagonal_patterns`): 16 KiB of
pattern table, in L1."""


@functools.lru_cache(maxsize=1024)
def diagonal_patterns(num_qubits: int, wires: tuple[int, ...]) -> tuple[int, np.ndarray,
                                                                           np.ndarray]:
    """``(lowbits, lowpat, highpat)``: the entry of a diagonal on ``wires`` (its index bit
    ``j`` is wire ``wires[j]``) for amplitude ``i`` is ``highpat[i >> lowbits] +
    lowpat[i & (2^lowbits - 1)]``, so that one contiguous sweep applies a diagonal on any
    wires (two table reads per amplitude instead of index arithmetic). Cached.

    >>> lowbits, low, high = diagonal_patterns(3, (2, 0))
    >>> lowbits, [int(high[i >> lowbits] + low[i & 7]) for i in range(8)]
    (3, [0, 2, 0, 2, 1, 3, 1, 3])
    """
    lowbits = min(num_qubits, DIAGONAL_LOW_BITS)
    low = np.arange(1 << lowbits, dtype=np.int64)
    high = np.arange(1 << (num_qubits - lowbits), dtype=np.int64)
    lowpat, highpat = np.zeros_like(low), np.zeros_like(high)
    for j, w in enumerate(wires):
        if w < lowbits:
            lowpat |= ((low >> w) & 1) << j
        else:
            highpat |= ((high >> (w - lowbits)) & 1) << j
    for arr in (lowpat, highpat):
        arr.setflags(write=False)
    return lowbits, lowpat, highpat


PERMUTATION_TILE_BITS = 4
"""Low bits of the amplitude index, and of the permuted index, that one tile of
:func:`permutation_tiles` holds: reads and writes in runs of 16 contiguous entries."""


@functools.lru_cache(maxsize=64)
def permutation_tiles(num_qubits: int, wires: tuple[int, ...]
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Tiles of the map from amplitude index ``i`` to the index ``o`` whose bit ``j`` is bit
    ``wires[j]`` of ``i`` (``wires``: a permutation of all wires), so that a kernel reads
    and writes in contiguous runs: tile ``h`` is the indices whose bits outside
    ``tile_pos`` spell ``h`` (``tile_pos``: the lowest ``PERMUTATION_TILE_BITS`` bits and
    the bits that go to the lowest ``PERMUTATION_TILE_BITS`` bits of ``o``). Returns
    ``(tile_pos, in_offs, out_offs, out_bit)``: pattern ``u`` of a tile sits at ``base |
    in_offs[u]`` and goes to ``f(base) | out_offs[u]``, ``f`` taking bit ``b`` to bit
    ``out_bit[b]``.

    >>> pos, ins, outs, out_bit = permutation_tiles(2, (1, 0))
    >>> pos.tolist(), ins.tolist(), outs.tolist(), out_bit.tolist()
    ([0, 1], [0, 1, 2, 3], [0, 2, 1, 3], [1, 0])
    """
    n = num_qubits
    if sorted(wires) != list(range(n)):
        raise ValueError(f"permutation_tiles: {wires} is not a permutation of 0..{n - 1}")
    t = min(n, PERMUTATION_TILE_BITS)
    out_bit = np.empty(n, np.int64)
    out_bit[list(wires)] = np.arange(n)
    tile_pos = np.array(sorted(set(range(t)) | set(wires[:t])), np.int64)
    u = np.arange(1 << tile_pos.size, dtype=np.int64)
    bits = (u[:, None] >> np.arange(tile_pos.size)) & 1
    in_offs = (bits << tile_pos).sum(axis=1)
    out_offs = (bits << out_bit[tile_pos]).sum(axis=1)
    for arr in (tile_pos, in_offs, out_offs, out_bit):
        arr.setflags(write=False)
    return tile_pos, in_offs, out_offs, out_bit


def marginal_probabilities(p: Any, num_qubits: int, wires: Sequence[int], xp: Any = np) -> Any:
    """Marginal of a full probability vector ``p`` on ``wires`` (``wires[0]`` least significant).

    >>> marginal_probabilities(np.array([0.1, 0.2, 0.3, 0.4]), 2, [1]).round(12).tolist()
    [0.3, 0.7]
    """
    n = num_qubits
    ws = tuple(int(w) for w in wires)
    if ws == tuple(range(n)):
        return p
    # View p as a tensor whose axes are, from the most significant wire down, either one kept
    # wire (size 2) or a run of dropped wires merged into one axis (so a 40-qubit register
    # never needs 40 axes); sum the dropped axes, then order the kept ones so that wires[0]
    # ends up least significant.
    shape: list[int] = []
    dropped_axes: list[int] = []
    kept_axis_wire: list[int] = []
    run = 0
    for w in range(n - 1, -1, -1):
        if w in ws:
            if run:
                dropped_axes.append(len(shape))
                shape.append(1 << run)
                run = 0
            kept_axis_wire.append(w)
            shape.append(2)
        else:
            run += 1
    if run:
        dropped_axes.append(len(shape))
        shape.append(1 << run)
    marg = p.reshape(shape)
    if dropped_axes:
        marg = xp.sum(marg, axis=tuple(dropped_axes))
    order = [kept_axis_wire.index(w) for w in reversed(ws)]
    return xp.ascontiguousarray(xp.transpose(marg, order)).reshape(-1)



def check_wires(wires: Any, num_qubits: int, what: str) -> tuple[int, ...]:
    """Validate wires (ints, in range, distinct) and return them as a tuple; ``what`` names the
    operation in the error message.

    >>> check_wires([2, 0], 3, "cx")
    (2, 0)
    >>> check_wires([0, 0], 3, "cx")
    Traceback (most recent call last):
    ...
    ValueError: cx: repeated wires (0, 0); each wire may appear once
    """
    try:
        ws = tuple(int(w) for w in wires)
    except TypeError as exc:
        raise TypeError(f"{what}: wires must be a sequence of ints, got {wires!r}") from exc
    for w, orig in zip(ws, wires, strict=True):
        if w != orig:
            raise TypeError(f"{what}: wires must be integers, got {orig!r}")
        if not 0 <= w < num_qubits:
            raise ValueError(
                f"{what}: wire {w} is out of range for a {num_qubits}-qubit register "
                f"(valid wires are 0..{num_qubits - 1})"
            )
    if len(set(ws)) != len(ws):
        raise ValueError(f"{what}: repeated wires {ws}; each wire may appear once")
    return ws
