"""CuPy GPU back end: the vectorized reference kernels on device arrays, plus CUDA kernels
for the hot paths.

CuPy is imported lazily, inside the constructor, so importing qdiff never needs it. The
kernels are in :mod:`qdiff.quantum.simulator.cupy_kernels` (each beside its NumPy
transcription, which the tests run): dense gates on 1 to 6 targets (every fused block), small
diagonals, 1-qubit permutations (every rotation, every CNOT), ``<bra|O|ket>`` for a Pauli sum
``O`` and ``out += c O state``, each one launch and one pass over the state. What the host
sends per gate is kernel arguments by value, apart from a dense matrix of two or more wires
(one copy); index tables are copied once and kept. Nothing waits for the device inside a
circuit: the adjoint method's derivatives stay on the device until the reverse sweep has
undone a whole run of gates, then come back in one copy. Everything else (Pauli strings,
probabilities, measurement) uses the array-module code of :class:`ArrayModuleBackend`, the
code the NumPy reference runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from qdiff.gpu.array_module import import_cupy

from ..lang.fusion import FusionWidth
from ..lang.gates import gate_spec
from ..lang.observables import PauliSum
from .cupy_kernels import (
    ADJOINT_GATES,
    ADJOINT_ROW,
    KERNELS,
    REDUCTION_BLOCKS,
    THREADS,
    raw_source,
)
from .gate_ops import GateOp
from .indexing import IndexLayout, index_layout
from .numpy_backend import ArrayModuleBackend
from .registry import register_backend

__all__ = ["CupyBackend"]

_DENSE_MAX_TARGETS = 6  # 2^6 amplitudes per group: a block of THREADS threads holds 4 groups
_CACHE_LIMIT = 4096


class CupyBackend(ArrayModuleBackend):
    """GPU statevector back end on CuPy arrays (needs CuPy and a CUDA device).

    ``use_kernels=False`` runs the array-module code of the NumPy reference on device arrays
    instead of the CUDA kernels; ``xp`` is the array module (default: ``cupy``; the tests pass
    a NumPy stand-in that counts transfers and launches).

    >>> be = CupyBackend()                      # doctest: +SKIP
    >>> psi = be.apply_gate(be.zero_state(20), 20, "h", [3])   # doctest: +SKIP
    """

    name = "cupy"
    is_gpu = True

    def __init__(self, use_kernels: bool = True, xp: Any = None) -> None:
        super().__init__(import_cupy() if xp is None else xp)
        self.use_kernels = use_kernels
        self._tables: dict[bytes, Any] = {}
        self._kernels: dict[tuple[str, str], Any] = {}

    # -- device helpers ---------------------------------------------------------------------
    def available_bytes(self) -> int | None:
        free, _total = self.xp.cuda.runtime.memGetInfo()
        return int(free)

    def to_numpy(self, array: Any) -> np.ndarray:
        """Host copy of a device array."""
        return self.xp.asnumpy(array)

    def _device_table(self, *parts: np.ndarray) -> list[Any]:
        # Index and term tables are tiny and reused by every application of the same gate
        # placement or observable: each is copied to the device once (all its parts in one
        # copy, as one int64 buffer) and kept. float64/complex parts come back as views.
        host = [np.ascontiguousarray(p) for p in parts]
        key = b"|".join(p.dtype.str.encode() + p.tobytes() for p in host)
        found = self._tables.get(key)
        if found is None:
            if len(self._tables) > _CACHE_LIMIT:
                self._tables.clear()
            words = [p.view(np.int64).ravel() if p.size else p.astype(np.int64).ravel()
                     for p in host]
            buffer = self.xp.asarray(np.concatenate(words) if words else np.zeros(0, np.int64))
            found, at = [], 0
            for p, w in zip(host, words, strict=True):
                view = buffer[at:at + w.size]
                found.append(view if p.dtype == np.int64 else view.view(np.float64))
                at += w.size
            self._tables[key] = found
        return found

    def _kernel(self, name: str, dtype: Any = None) -> Any:
        kernel = KERNELS[name]
        real = "" if kernel.kind == "elementwise" else (
            "float" if np.dtype(dtype) == np.complex64 else "double")
        found = self._kernels.get((name, real))
        if found is None:
            if kernel.kind == "elementwise":
                found = self.xp.ElementwiseKernel(kernel.params, kernel.outputs, kernel.source,
                                                  kernel.name)
            else:
                found = self.xp.RawKernel(raw_source(kernel, real), f"{kernel.name}_{real}")
            self._kernels[(name, real)] = found
        return found

    def _layout_args(self, layout: IndexLayout) -> tuple[Any, int, int]:
        (positions,) = self._device_table(layout.positions)
        return positions, int(layout.positions.shape[0]), int(layout.cmask)

    # -- gate kernels ---------------------------------------------------------------------------
    def _dense(self, state: Any, layout: IndexLayout, matrix: Any) -> None:
        k = len(layout.targets)
        if not self.use_kernels or k > _DENSE_MAX_TARGETS:
            super()._dense(state, layout, matrix)
            return
        m = np.asarray(matrix)
        if k == 1:
            t = state.dtype.type
            self._kernel("qdiff_dense1")(*self._layout_args(layout), 1 << layout.targets[0],
                                         t(m[0, 0]), t(m[0, 1]), t(m[1, 0]), t(m[1, 1]), state,
                                         size=layout.num_groups)
            return
        positions, npos, cmask = self._layout_args(layout)
        (offsets,) = self._device_table(layout.offsets)
        mt = self.xp.asarray(np.ascontiguousarray(m.T, dtype=state.dtype))  # one copy a gate
        total = layout.num_groups << k
        self._kernel("qdiff_dense", state.dtype)(
            (-(-total // THREADS),), (THREADS,),
            (state, mt, positions, np.int32(npos), np.int64(cmask), offsets, np.int32(k),
             np.int64(total)))

    def _diagonal(self, state: Any, layout: IndexLayout, offsets: Any, diag: Any) -> None:
        if not self.use_kernels:
            super()._diagonal(state, layout, offsets, diag)
            return
        offs = [int(o) for o in np.asarray(offsets)]
        d = np.asarray(diag, dtype=state.dtype)
        if len(offs) <= 4:  # by value: nothing to copy
            t = state.dtype.type
            pad = 4 - len(offs)
            self._kernel("qdiff_diag4")(*self._layout_args(layout), *offs, *[0] * pad,
                                        *[t(v) for v in d], *[t(1)] * pad, len(offs), state,
                                        size=layout.num_groups)
            return
        (device_offsets,) = self._device_table(np.asarray(offsets, np.int64))
        self._kernel("qdiff_diag")(*self._layout_args(layout), device_offsets,
                                   self.xp.asarray(d), len(d), state, size=layout.num_groups)

    def _permutation(self, state: Any, layout: IndexLayout, perm: Any, phases: Any) -> None:
        perm = np.asarray(perm)
        if not self.use_kernels or len(layout.targets) != 1 or perm[0] == 0:
            super()._permutation(state, layout, perm, phases)
            return
        t = state.dtype.type
        ph = np.asarray(phases)
        self._kernel("qdiff_perm1")(*self._layout_args(layout), 1 << layout.targets[0],
                                    t(ph[0]), t(ph[1]), state, size=layout.num_groups)

    # -- Pauli sums: one launch, results left on the device ---------------------------------
    def _pauli_table(self, x_masks: np.ndarray, z_masks: np.ndarray,
                     factors: np.ndarray) -> list[Any]:
        return self._device_table(np.asarray(x_masks, np.int64), np.asarray(z_masks, np.int64),
                                  np.asarray(factors, np.complex128))

    def _pauli_inner_into(self, bra: Any, ket: Any, table: list[Any], nterms: int,
                          out: Any, slot: int) -> None:
        """``out[2 slot : 2 slot + 2] += (re, im) <bra| Σ_t f_t P_t |ket>`` over the table's
        first ``nterms`` terms (``out``: a float64 device vector), one launch, no wait."""
        xs, zs, fs = table
        size = ket.shape[0]
        blocks = max(1, min(REDUCTION_BLOCKS, -(-size // THREADS)))
        self._kernel("qdiff_pauli_inner", ket.dtype)(
            (blocks,), (THREADS,),
            (bra, ket, np.int64(size), np.int32(nterms), xs, zs, fs, out, np.int32(slot)))

    def _fits_kernels(self, *states: Any) -> bool:
        return self.use_kernels and all(s.dtype == states[0].dtype and s.flags.c_contiguous
                                        for s in states)

    def _pauli_cross(self, bra: Any, ket: Any, x_masks: np.ndarray,
                     z_masks: np.ndarray) -> np.ndarray:
        if not self._fits_kernels(bra, ket) or not len(x_masks):
            return super()._pauli_cross(bra, ket, x_masks, z_masks)
        xs, zs, fs = self._pauli_table(x_masks, z_masks, np.ones(len(x_masks), np.complex128))
        out = self.xp.zeros(2 * len(x_masks), np.float64)
        for t in range(len(x_masks)):  # a slot per term; one copy back for all
            self._pauli_inner_into(bra, ket, [xs[t:], zs[t:], fs[2 * t:]], 1, out, t)
        return self.to_numpy(out).view(np.complex128)

    def _pauli_inner(self, bra: Any, ket: Any, x_masks: np.ndarray, z_masks: np.ndarray,
                     factors: np.ndarray) -> complex:
        if not self._fits_kernels(bra, ket):
            return super()._pauli_inner(bra, ket, x_masks, z_masks, factors)
        out = self.xp.zeros(2, np.float64)
        self._pauli_inner_into(bra, ket, self._pauli_table(x_masks, z_masks, factors),
                               len(x_masks), out, 0)
        re, im = self.to_numpy(out).tolist()
        return complex(re, im)

    def _pauli_accumulate(self, out: Any, state: Any, num_qubits: int, x_masks: np.ndarray,
                          z_masks: np.ndarray, factors: np.ndarray) -> None:
        if not self._fits_kernels(out, state):
            super()._pauli_accumulate(out, state, num_qubits, x_masks, z_masks, factors)
            return
        xs, zs, fs = self._pauli_table(x_masks, z_masks, factors)
        size = state.shape[0]
        self._kernel("qdiff_pauli_add", state.dtype)(
            (-(-size // THREADS),), (THREADS,),
            (out, state, np.int64(size), np.int32(len(x_masks)), xs, zs, fs,
             np.float64(1.0), np.float64(0.0)))

    # -- the adjoint method -----------------------------------------------------------------
    def adjoint_width(self, num_qubits: int) -> int:
        """Blocks of up to 5 wires: the block kernel reads and writes ψ and λ once a block,
        and does each gate's arithmetic in shared memory (about 64 multiply-adds per
        amplitude cost a pass over an H100's memory).

        >>> CupyBackend.adjoint_width(None, 20), CupyBackend.adjoint_width(None, 3)
        (5, 3)
        """
        return FusionWidth(min(num_qubits, 5), flops_per_pass=64.0, dense=False)

    def adjoint_block(self, psi: Any, lam: Any, num_qubits: int, wires: Sequence[int],
                      ops: Sequence[GateOp], want: Sequence[bool],
                      filled: dict | None = None) -> Any:
        """As :meth:`StatevectorBackend.adjoint_block`; the derivatives stay on the device.

        One adjoint and gates on at most 2 wires each: one launch of the block kernel per
        :data:`ADJOINT_GATES` gates, its table (every gate's ``U^†`` and generator) copied in
        one transfer. A stack of adjoints: ``<λ_r|G_k ψ>`` by one reduction launch each into
        a device vector, the gates undone by the gate kernels.

        >>> be = CupyBackend()                      # doctest: +SKIP
        """
        stack = [] if lam is None else list(lam) if lam.ndim == 2 else [lam]
        ops = [GateOp(*op) for op in ops]
        specs = [gate_spec(op.gate) for op in ops]
        for spec, flag in zip(specs, want, strict=True):
            if flag and stack and spec.generator is None:
                raise ValueError(f"adjoint_block: gate {spec.name!r} has no generator")
        if not self._fits_kernels(psi, *stack):
            return super().adjoint_block(psi, lam, num_qubits, wires, ops, want, filled)
        n = self._num_qubits_of(psi, num_qubits, "adjoint_block")
        for row in stack:
            self._num_qubits_of(row, n, "adjoint_block")
        if not stack:
            self.apply_circuit(psi, n, [_undone(op, spec) for op, spec in
                                        zip(reversed(ops), reversed(specs), strict=True)])
            return self.xp.zeros(len(ops))
        sums = self.xp.zeros((len(stack), len(ops), 2), np.float64)
        ws = tuple(sorted(int(w) for w in wires))
        if (len(stack) == 1 and len(ws) <= _DENSE_MAX_TARGETS
                and all(len(op.wires) <= 2 for op in ops)):
            self._adjoint_block_kernel(psi, stack[0], n, ws, ops, specs, want, sums[0])
        else:
            for k in range(len(ops) - 1, -1, -1):
                if want[k]:
                    generator = specs[k].generator
                    assert isinstance(generator, PauliSum)
                    xs, zs, fs = generator.masks(self._obs_wires(generator, n, ops[k].wires))
                    table = self._pauli_table(xs, zs, fs)
                    for r, row in enumerate(stack):
                        self._pauli_inner_into(row, psi, table, len(fs), sums[r], k)
                undone = _undone(ops[k], specs[k])
                for state in (psi, *stack):
                    self.apply_gate(state, n, undone.gate, undone.wires, undone.params)
        grads = 2 * sums[:, :, 1]  # 2 Im<λ|Gψ>, 0 where not wanted
        return grads if lam.ndim == 2 else grads[0]

    def _adjoint_block_kernel(self, psi: Any, lam: Any, n: int, wires: tuple[int, ...],
                              ops: list[GateOp], specs: list[Any], want: Sequence[bool],
                              out: Any) -> None:
        local = {w: b for b, w in enumerate(wires)}
        table = np.zeros((len(ops), ADJOINT_ROW))
        for row, k in enumerate(range(len(ops) - 1, -1, -1)):  # the last gate first
            op, spec = ops[k], specs[k]
            bits = [local[int(w)] for w in op.wires]
            undone = _undone(op, spec)
            d = 1 << len(bits)
            m = np.zeros((4, 4), np.complex128)
            m[:d, :d] = gate_spec(undone.gate).matrix(*undone.params)
            g = np.zeros((4, 4), np.complex128)
            if want[k]:
                g[:d, :d] = spec.generator_matrix()
            table[row, :4] = (len(bits), bits[0], bits[-1] if len(bits) == 2 else 0,
                              k if want[k] else -1)
            table[row, 4:36] = m.view(np.float64).ravel()
            table[row, 36:] = g.view(np.float64).ravel()
        device = self.xp.asarray(table.ravel())  # the block's one transfer
        layout = index_layout(n, wires, ())
        positions, npos, _ = self._layout_args(layout)
        (offsets,) = self._device_table(layout.offsets)
        total = layout.num_groups << len(wires)
        blocks = max(1, min(REDUCTION_BLOCKS, -(-total // THREADS)))
        kernel = self._kernel("qdiff_adjoint_block", psi.dtype)
        for first in range(0, len(ops), ADJOINT_GATES):
            count = min(ADJOINT_GATES, len(ops) - first)
            kernel((blocks,), (THREADS,),
                   (psi, lam, positions, np.int32(npos), offsets, np.int32(len(wires)),
                    np.int64(total), device[first * ADJOINT_ROW:], np.int32(count), out))


def _undone(op: GateOp, spec: Any) -> GateOp:
    """The gate that undoes ``op`` (its inverse, same wires)."""
    inverse, params = spec.inverse(*op.params)
    return GateOp(inverse, tuple(op.wires), tuple(params))


register_backend("cupy", CupyBackend)
