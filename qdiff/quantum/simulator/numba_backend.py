"""Numba CPU back end: compiled kernels over amplitude groups, threaded for large states.

The kernels are range bodies (:mod:`.numba_ranges`): single gates in :mod:`.numba_gate_kernels`,
fused blocks of gates in :mod:`.numba_block_kernels`, the adjoint method's in
:mod:`.numba_adjoint`. Each runs serially or split across threads; states below
``parallel_threshold`` amplitudes run serially, because waking the thread pool costs more
than a pass over a small state.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from ..lang.fusion import FusionWidth
from ..lang.gate_forms import gate_form
from ..lang.gates import GateSpec, gate_spec
from . import numba_adjoint
from .backend import StatevectorBackend, checked_table_gate
from .block_encoding import OP_DIAG, encode_block, in_precision
from .gate_ops import GateOp
from .indexing import (
    IndexLayout,
    check_wires,
    diagonal_patterns,
    index_layout,
    permutation_tiles,
)
from .numba_block_kernels import BLOCK, BLOCK_AMPS, FUSION_MIN_QUBITS, MAX_BLOCK_WIRES, MIN_BATCH
from .numba_gate_kernels import (
    ABS_SQUARED,
    ABS_SQUARED_PERMUTED,
    DENSE2,
    DENSEK,
    DIAGONAL,
    DIAGONAL_TABLE,
    GROUPS_PER_ITEM,
    PAIR,
    PAULI,
    PAULI_SUMS,
    PERMUTATION,
    Z_PAULI,
)
from .numba_ranges import spread_items
from .registry import register_backend

__all__ = ["NumbaBackend", "DEFAULT_PARALLEL_THRESHOLD", "encode_block", "all_diagonal",
           "zero_register_qubits"]

DEFAULT_PARALLEL_THRESHOLD = 1 << 15
"""Amplitudes at and above which the threaded drivers are used."""

# The block kernel's price list (see fusion_width), measured at n = 20, one thread, against
# a copy of the state (one pass): a dense 4x4 in a block about 2.5 passes, a complex 2x2
# about one, so 2 multiply-adds per amplitude per pass; a block on wires 0-2 4 passes
# (transposed batches), on wire 3 2, from wire 4 on one.
BLOCK_FLOPS_PER_PASS = 2.0
LOW_PASS_COST = 3.5
LOW_BITS = 3
# blocks of diagonal gates: one table of 2^12 entries (64 KiB, in L2) swept in one pass
DIAGONAL_WIDTH = 12


def _block_wires(num_qubits: int, wires: tuple[int, ...]) -> tuple[int, ...]:
    """The wires the block kernel runs a block on: ``wires``, or below ``FUSION_MIN_QUBITS``
    qubits the whole register (one group, the only batch layout such a register has)."""
    return tuple(range(num_qubits)) if num_qubits < FUSION_MIN_QUBITS else wires


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
        # the last zero_state's state while no operation but apply_fused has seen it, and the
        # wires m it may have left |0>: its amplitudes past 2^m are all zero
        self._fresh: tuple[weakref.ref, int] | None = None

    def zero_state(self, num_qubits: int, dtype: Any = np.complex128) -> Any:
        """``|0...0>`` on ``num_qubits`` qubits; remembered until an operation other than
        :meth:`apply_fused` sees it, so that fused blocks on wires still in ``|0>`` run on the
        part of the state that is not zero.

        >>> NumbaBackend().zero_state(2).tolist()
        [(1+0j), 0j, 0j, 0j]
        """
        state = super().zero_state(num_qubits, dtype)
        self._fresh = (weakref.ref(state), 0)
        return state

    def _num_qubits_of(self, state: Any, num_qubits: int | None, what: str) -> int:
        # every operation on a state passes here: the remembered state it sees may change
        if self._fresh is not None and self._fresh[0]() is state:
            self._fresh = None
        return super()._num_qubits_of(state, num_qubits, what)

    def _take_support(self, state: Any) -> int:
        # m when `state` is the remembered one, zero past amplitude 2^m, else -1 (forgotten
        # either way); at m = 0, psi[0] == 1 is checked too (an in-place change made outside
        # the back end's operations moves it)
        fresh, self._fresh = self._fresh, None
        if fresh is None or fresh[0]() is not state or (fresh[1] == 0 and state[0] != 1):
            return -1
        return fresh[1]

    def apply_gate(self, state: Any, num_qubits: int, gate: str | GateSpec | Any,
                   wires: Sequence[int], params: Sequence[float] = (), **static: Any) -> Any:
        """Apply a gate in place (the base class has the contract). A table gate on the
        state :meth:`zero_state` returned, still remembered, runs as a block of its own
        (:meth:`apply_fused`), so that it too runs on the part of the state that is not
        zero: a circuit that opens with a lone gate (a 4-wire gate, say, that no block
        takes) keeps the blocks after it on part of the state.

        >>> be = NumbaBackend(); psi = be.zero_state(10)
        >>> be.apply_gate(psi, 10, "mcx", [0, 1, 9])[[0, 512]].real.tolist()
        [1.0, 0.0]
        """
        fresh = self._fresh
        if (fresh is not None and fresh[0]() is state and num_qubits >= FUSION_MIN_QUBITS
                and isinstance(gate, (str, GateSpec)) and len(wires) <= MAX_BLOCK_WIRES):
            spec, ws, params = checked_table_gate(gate, wires, num_qubits, params, static)
            op = GateOp(spec.static["matrix"] if spec.name == "unitary" else spec, ws, params)
            return self.apply_fused(state, num_qubits, ws, [op])
        return super().apply_gate(state, num_qubits, gate, wires, params, **static)

    def _parallel(self, size: int) -> bool:
        return size >= self.parallel_threshold and numba.get_num_threads() > 1

    def _items(self, state: Any, total: int) -> int | None:
        """The work items of a kernel over ``total`` groups of ``state``: None (serial) for a
        small state, else chunks of ``GROUPS_PER_ITEM`` groups."""
        if not self._parallel(state.shape[0]):
            return None
        return (total + GROUPS_PER_ITEM - 1) // GROUPS_PER_ITEM

    def _dense(self, state: Any, layout: IndexLayout, matrix: Any) -> None:
        pos, cm, ng = layout.positions, layout.cmask, layout.num_groups
        items = self._items(state, ng)
        k = len(layout.targets)
        if k == 1:
            m = matrix
            PAIR(items, state, ng, pos, cm, 1 << layout.targets[0], False,
                 m[0, 0], m[0, 1], m[1, 0], m[1, 1])
        elif k == 2:
            b0, b1 = 1 << layout.targets[0], 1 << layout.targets[1]
            DENSE2(items, state, ng, pos, cm, b0, b1, np.ascontiguousarray(matrix))
        else:
            DENSEK(items, state, ng, pos, cm, layout.offsets, np.ascontiguousarray(matrix))

    def _diagonal(self, state: Any, layout: IndexLayout, offsets: Any, diag: Any) -> None:
        ng = layout.num_groups
        DIAGONAL(self._items(state, ng), state, ng, layout.positions, layout.cmask,
                 np.ascontiguousarray(offsets), diag)

    def _apply_diagonal(self, state: Any, layout: IndexLayout, diag: np.ndarray) -> None:
        # a diagonal that changes every amplitude (rz, rzz, ...) in one contiguous table sweep
        # from FUSION_MIN_QUBITS on: on low wires the group loops run scalar (rzz on wires 0
        # and 7, n = 20: 1.7 ms against 3.4 ms); one that leaves most amplitudes alone (cz,
        # cphase) touches only the rows that change
        n = layout.num_qubits
        if n < FUSION_MIN_QUBITS or layout.cmask or not np.all(diag != 1):
            super()._apply_diagonal(state, layout, diag)
            return
        self._sweep_diagonal(state, n, tuple(layout.targets), diag)

    def _sweep_diagonal(self, state: Any, n: int, wires: tuple[int, ...],
                        table: np.ndarray) -> None:
        # amplitude i times table[entry of i on `wires`], in one contiguous sweep; the table
        # in the state's precision (a complex64 state multiplies in complex64)
        table = np.ascontiguousarray(table, state.dtype)
        lowbits, lowpat, highpat = diagonal_patterns(n, wires)
        chunks = highpat.shape[0]
        DIAGONAL_TABLE(spread_items(chunks, self._parallel(state.shape[0]) and chunks > 1),
                       state, chunks, lowbits, lowpat, highpat, table)

    def _abs_squared(self, state: Any) -> Any:
        out = np.empty(state.shape[0], np.float64)
        ABS_SQUARED(self._items(state, state.shape[0]), state, state.shape[0], out)
        return out

    def probs(self, state: Any, num_qubits: int, wires: Sequence[int] | None = None) -> Any:
        """Marginal probabilities of ``wires`` (the base class has the contract); every wire
        in another order (a register whose wires were renamed: a QFT's swaps) in one
        tiled pass over the state instead of ``|psi|^2`` and a transpose of it (n = 20,
        wires reversed: 31 ms for the transpose alone).

        >>> be = NumbaBackend(); psi = be.apply_gate(be.zero_state(3), 3, "x", [0])
        >>> be.probs(psi, 3, [2, 1, 0]).tolist()
        [0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
        """
        n = self._num_qubits_of(state, num_qubits, "probs")
        ws = tuple(range(n)) if wires is None else check_wires(wires, n, "probs")
        if len(ws) < n or ws == tuple(range(n)):
            return super().probs(state, n, ws)
        tile_pos, in_offs, out_offs, out_bit = permutation_tiles(n, ws)
        out = np.empty(state.shape[0], np.float64)
        tiles = state.shape[0] >> tile_pos.shape[0]
        ABS_SQUARED_PERMUTED(spread_items(tiles, self._parallel(state.shape[0]) and tiles > 1),
                             state, tiles, out, tile_pos, in_offs, out_offs, out_bit)
        return out

    def _permutation(self, state: Any, layout: IndexLayout, perm: Any, phases: Any) -> None:
        pos, cm, ng = layout.positions, layout.cmask, layout.num_groups
        items = self._items(state, ng)
        if len(layout.targets) == 1:
            if perm[0] == 0:  # identity permutation with phases: a diagonal gate
                self._diagonal(state, layout, layout.offsets, phases)
                return
            zero = state.dtype.type(0)
            PAIR(items, state, ng, pos, cm, 1 << layout.targets[0], True,
                 zero, phases[1], phases[0], zero)
        else:
            PERMUTATION(items, state, ng, pos, cm, layout.offsets, perm, phases)

    def _pauli(self, state: Any, num_qubits: int, x_mask: int, z_mask: int,
               alpha: complex, beta: complex) -> None:
        a = state.dtype.type(alpha)
        b = state.dtype.type(beta)
        if x_mask == 0:
            size = state.shape[0]
            Z_PAULI(self._items(state, size), state, size, z_mask, a, b)
            return
        hpos = np.array([x_mask.bit_length() - 1], dtype=np.int64)
        ng = state.shape[0] >> 1
        PAULI(self._items(state, ng), state, ng, x_mask, z_mask, hpos, a, b)

    def _pauli_sums(self, state: Any, x_masks: np.ndarray, z_masks: np.ndarray) -> np.ndarray:
        size = state.shape[0]
        return PAULI_SUMS(self._items(state, size), state, size,
                          np.zeros(x_masks.shape[0], np.complex128), x_masks, z_masks)

    # -- the adjoint method (kernels in numba_adjoint) ----------------------------------------
    def _pauli_cross(self, bra: Any, ket: Any, x_masks: np.ndarray,
                     z_masks: np.ndarray) -> np.ndarray:
        return numba_adjoint.pauli_cross(bra, ket, x_masks, z_masks,
                                         self._parallel(ket.shape[0]))

    def _pauli_accumulate(self, out: Any, state: Any, num_qubits: int, x_masks: np.ndarray,
                          z_masks: np.ndarray, factors: np.ndarray) -> None:
        numba_adjoint.pauli_accumulate(out, state, num_qubits, x_masks, z_masks, factors,
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

    def adjoint_register_qubits(self, num_qubits: int, support: int, width: int) -> int:
        """The register a reverse block on ψ zero past ``2^support`` runs on (the base class
        has the contract): at least ``MIN_BATCH`` groups of the block's other wires, as a
        first block on ``|0...0>`` is computed (:func:`zero_register_qubits`), so the block
        kernel runs it and not the gate-by-gate fallback.

        >>> be = NumbaBackend()
        >>> be.adjoint_register_qubits(20, 9, 8), be.adjoint_register_qubits(20, 16, 8)
        (13, 16)
        """
        return min(num_qubits, max(support, zero_register_qubits(width)))

    def fusion_width(self, num_qubits: int) -> int:
        """Blocks up to ``MAX_BLOCK_WIRES`` wide while a batch of ``MIN_BATCH`` groups is left
        for the block kernel's rows; below ``FUSION_MIN_QUBITS`` qubits the whole register,
        one kernel call per run of gates (n = 4, 55 gates: 0.34 ms against 0.54 ms gate by
        gate, the Python cost per gate being most of a small register's time).

        From ``FUSION_MIN_QUBITS`` on, the width carries the block kernel's price list
        (:class:`~qdiff.quantum.lang.fusion.FusionWidth`), by which the planner chooses each
        block's width: the kernel applies a block's gates one by one in cache in their sparse
        forms, ``BLOCK_FLOPS_PER_PASS`` complex multiply-adds per amplitude cost about one pass
        over the state, and a block whose lowest wire is below ``LOW_BITS`` costs
        ``LOW_PASS_COST`` passes (its batches are transposed, not copied as runs).

        >>> NumbaBackend().fusion_width(20), NumbaBackend().fusion_width(10)
        (8, 5)
        >>> NumbaBackend().fusion_width(4)  # the register
        4
        """
        if num_qubits < FUSION_MIN_QUBITS:
            return num_qubits
        return FusionWidth(max(2, min(MAX_BLOCK_WIRES, num_qubits - MIN_BATCH.bit_length() + 1)),
                           flops_per_pass=BLOCK_FLOPS_PER_PASS, dense=False,
                           low_pass_cost=LOW_PASS_COST, low_bits=LOW_BITS,
                           diagonal_width=min(num_qubits, DIAGONAL_WIDTH))

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
        support = self._take_support(state)
        n = self._num_qubits_of(state, num_qubits, "apply_fused")
        ws = tuple(sorted(check_wires(wires, n, "fused gate")))
        if (support >= 0 and n >= FUSION_MIN_QUBITS
                and all(w in ws for op in ops for w in op[1])):
            ops = [GateOp(*op) for op in ops]
            m = max(support, ws[-1] + 1)
            on_zero = support == 0 and (m == n or zero_register_qubits(len(ws)) < m)
            if on_zero:  # the first block: U|0> written into its 2^k amplitudes
                self._fused_on_zero(state, n, ws, ops)
            elif m < n:  # the block on the wires below m: a register of 2^m amplitudes
                self.apply_fused(state[:1 << m], m, ws, ops)
            if m < n:
                self._fresh = (weakref.ref(state), m)
            if on_zero or m < n:
                return state
        if n >= FUSION_MIN_QUBITS and all_diagonal(ops):
            return self._diagonal_block(state, n, ws, ops)
        ws = _block_wires(n, ws)
        k = len(ws)
        groups = 1 << (n - k)
        batch = min(groups, max(MIN_BATCH, BLOCK_AMPS >> k))
        if 1 < groups < MIN_BATCH:
            return super().apply_fused(state, n, wires, ops)
        layout = index_layout(n, ws)
        arrays = in_precision(encode_block(ws, ops), state.dtype)  # checks that the ops
        # stay on the block's wires
        nb = groups // batch
        BLOCK(spread_items(nb, self._parallel(state.shape[0]) and nb > 1), state, nb, batch,
              layout.positions, layout.offsets, *arrays)
        return state

    def _fused_on_zero(self, state: Any, n: int, ws: tuple[int, ...],
                       ops: Sequence[GateOp]) -> Any:
        # the block on |0...0>: only the group where the other wires are 0 becomes nonzero,
        # U|0> on the block's wires, computed on a register of those wires and MIN_BATCH
        # groups and written into its 2^k amplitudes; the rest of the state stays the zeros
        # it is (a pass saved: on wires 0-2 the most expensive, transposed, one)
        k = len(ws)
        local = {w: j for j, w in enumerate(ws)}
        small_n = zero_register_qubits(k)
        small = np.zeros(1 << small_n, state.dtype)
        small[0] = 1
        self.apply_fused(small, small_n, tuple(range(k)),
                         [GateOp(op.gate, tuple(local[w] for w in op.wires), op.params)
                          for op in ops])
        state[index_layout(n, ws).offsets] = small[:1 << k]
        return state

    def _diagonal_block(self, state: Any, n: int, ws: tuple[int, ...],
                        ops: Sequence[GateOp]) -> Any:
        # diagonal gates only: their product, one table over the wires it depends on (the
        # block encoding merges them), applied in one contiguous sweep
        kinds, _, ntg, tgts, moffs, pool, _, _ = encode_block(ws, ops)
        if kinds.shape[0] == 0:
            return state
        assert kinds.shape[0] == 1 and kinds[0] == OP_DIAG
        m = int(ntg[0])
        table_wires = tuple(ws[int(mask).bit_length() - 1] for mask in tgts[0, :m])
        self._sweep_diagonal(state, n, table_wires, pool[moffs[0]:moffs[0] + (1 << m)])
        return state


def zero_register_qubits(width: int) -> int:
    """Qubits of the register a first block of ``width`` wires on ``|0...0>`` is computed on
    (its wires and ``MIN_BATCH`` groups), before ``U|0>`` is written into the state.

    >>> zero_register_qubits(8)
    13
    """
    return width + MIN_BATCH.bit_length() - 1


def all_diagonal(ops: Sequence[Any]) -> bool:
    """Whether every gate of ``ops`` (``GateOp``s or ``(gate, wires, ...)``) is diagonal in its
    sparse form (``rz``, ``cp``, ``rzz``, ``cz``, diagonal matrices, ...).

    >>> all_diagonal([GateOp("cp", (0, 3), (0.2,)), GateOp("rz", (1,), (0.1,))])
    True
    >>> all_diagonal([GateOp("cp", (0, 3), (0.2,)), GateOp("h", (1,))])
    False
    """
    return bool(ops) and all(not isinstance(op[0], np.ndarray)
                             and gate_form(op[0]).kind == "diagonal" for op in ops)


register_backend("numba", NumbaBackend)
