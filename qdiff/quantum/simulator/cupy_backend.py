"""CuPy GPU back end: the array-module code of the NumPy reference on device arrays, plus
CUDA kernels for the hot paths.

CuPy is imported lazily, inside the constructor, so importing qdiff never needs it. The
kernels are in :mod:`qdiff.quantum.simulator.cupy_kernels` (each beside its NumPy
transcription, which the tests run): a fused block of gates on at most 2 wires each, applied
gate after gate in shared memory (also the adjoint's reverse sweep over ψ and λ, with the
derivatives), dense gates on 1 to 6 targets, small diagonals, 1-qubit permutations,
``<bra|O|ket>`` for a Pauli sum ``O`` and ``out += c O state``, each one launch and one pass
over the state. What the host sends per gate is kernel arguments by value, per block one
table of its gates' matrices; index tables are copied once and kept. Nothing waits for the
device inside a circuit: the adjoint method's derivatives stay on the device until the
reverse sweep has undone a whole run of gates, then come back in one copy. Everything else
(Pauli strings, probabilities, measurement) uses the array-module code of
:class:`ArrayModuleBackend`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from qdiff.gpu.array_module import import_cupy

from ..lang.fusion import FusionWidth
from ..lang.gates import gate_spec
from ..lang.observables import PauliSum
from .cupy_kernels import (
    BLOCK_GATES,
    BLOCK_ROW,
    KERNELS,
    REDUCTION_BLOCKS,
    THREADS,
    raw_source,
)
from .gate_ops import GateOp
from .indexing import IndexLayout, check_wires, index_layout
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
        self._fixed: dict[tuple[int, str], tuple[Any, np.ndarray]] = {}
        self._no_sums: Any = None

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

    # -- blocks of gates: one launch ---------------------------------------------------------
    def fusion_width(self, num_qubits: int) -> int:
        """Blocks of up to 5 wires at every size: :meth:`apply_fused` applies a block's gates
        one after another in shared memory in one pass (about 64 multiply-adds per amplitude
        cost a pass over an H100's memory), so a wider block saves passes and launches.

        >>> int(CupyBackend.fusion_width(None, 20)), int(CupyBackend.fusion_width(None, 3))
        (5, 3)
        """
        return FusionWidth(min(num_qubits, 5), flops_per_pass=64.0, dense=False)

    adjoint_width = fusion_width  # the reverse sweep's blocks: the same kernel

    def apply_fused(self, state: Any, num_qubits: int, wires: Sequence[int],
                    ops: Iterable[GateOp]) -> Any:
        """As :meth:`StatevectorBackend.apply_fused`: gates on at most 2 wires each in a block
        of up to 6 wires take the gate-block kernel (their matrices in one copy, one launch);
        others a dense matrix."""
        ops = [GateOp(*op) for op in ops]
        n = self._num_qubits_of(state, num_qubits, "apply_fused")
        ws = tuple(sorted(check_wires(wires, n, "fused gate")))
        if not (self.use_kernels and state.flags.c_contiguous and _fits_gate_block(ws, ops)):
            return super().apply_fused(state, num_qubits, wires, ops)
        specs = [None if isinstance(op.gate, np.ndarray) else gate_spec(op.gate) for op in ops]
        if self._no_sums is None:  # the kernel's sums argument, never written here
            self._no_sums = self.xp.zeros(2, np.float64)
        self._run_gate_block(state, None, n, ws, self._gate_table(ops, specs, ws),
                             self._no_sums)
        return state

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

    def expval_pauli_sum_batch(self, state: Any, num_qubits: int,
                               observables: Sequence[PauliSum | str],
                               wires: Sequence[int] | None = None) -> np.ndarray:
        """As :meth:`StatevectorBackend.expval_pauli_sum_batch`, each observable in one
        launch (all its terms in one pass), the values back in one copy."""
        if not self._fits_kernels(state):
            return super().expval_pauli_sum_batch(state, num_qubits, observables, wires)
        n = self._num_qubits_of(state, num_qubits, "expval")
        masks = self._hermitian_masks(n, observables, wires)
        if not masks:
            return np.zeros(0)
        out = self.xp.zeros(2 * len(masks), np.float64)
        for k, (xs, zs, fs) in enumerate(masks):
            if len(fs):
                self._pauli_inner_into(state, state, self._pauli_table(xs, zs, fs), len(fs),
                                       out, k)
        return self.to_numpy(out)[0::2].copy()

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
    def adjoint_block(self, psi: Any, lam: Any, num_qubits: int, wires: Sequence[int],
                      ops: Sequence[GateOp], want: Sequence[bool],
                      filled: dict | None = None) -> Any:
        """As :meth:`StatevectorBackend.adjoint_block`; the derivatives stay on the device.

        One adjoint and gates on at most 2 wires each: one launch of the gate-block kernel per
        ``BLOCK_GATES`` gates, its table (every gate's ``U^†`` and generator) copied in
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
        if len(stack) == 1 and _fits_gate_block(ws, ops):
            self._run_gate_block(psi, stack[0], n, ws,
                                 self._gate_table(ops, specs, ws, undo=True, want=want),
                                 sums[0])
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

    def _gate_table(self, ops: Sequence[GateOp], specs: Sequence[Any],
                    wires: tuple[int, ...], undo: bool = False,
                    want: Sequence[bool] | None = None) -> np.ndarray:
        """The gate-block kernel's table of ``ops`` on the block ``wires``: each gate's
        matrix in application order, or (``undo``) each ``U^†`` from the last gate, with the
        generator of each wanted one and its slot (its index in ``ops``). A spec of ``None``:
        the op's gate is its matrix."""
        local = {w: b for b, w in enumerate(wires)}
        order = range(len(ops) - 1, -1, -1) if undo else range(len(ops))
        rows = np.zeros((len(ops), BLOCK_ROW // 2), np.complex128)  # M at 2:18, G at 18:34
        table = rows.view(np.float64)
        for row, k in enumerate(order):
            op, spec = ops[k], specs[k]
            bits = [local[int(w)] for w in op.wires]
            d = 1 << len(bits)
            u = np.asarray(op.gate) if spec is None else self._gate_matrix(spec, op.params)
            rows[row, 2:18].reshape(4, 4)[:d, :d] = u.conj().T if undo else u
            wanted = want is not None and want[k]
            if wanted:
                rows[row, 18:34].reshape(4, 4)[:d, :d] = self._of_spec(spec, "generator")
            table[row, :4] = (len(bits), bits[0], bits[-1] if len(bits) == 2 else 0,
                              k if wanted else -1)
        return table

    def _gate_matrix(self, spec: Any, params: Sequence[float]) -> np.ndarray:
        return spec.matrix(*params) if spec.num_params else self._of_spec(spec, "matrix")

    def _of_spec(self, spec: Any, what: str) -> np.ndarray:
        # a fixed gate's matrix or a gate's generator matrix, built once per gate spec
        found = self._fixed.get((id(spec), what))
        if found is None or found[0] is not spec:
            if len(self._fixed) > _CACHE_LIMIT:
                self._fixed.clear()
            found = (spec, spec.matrix() if what == "matrix" else spec.generator_matrix())
            self._fixed[(id(spec), what)] = found
        return found[1]

    def _run_gate_block(self, psi: Any, lam: Any, n: int, wires: tuple[int, ...],
                        table: np.ndarray, out: Any) -> None:
        # the table in one copy; one launch per BLOCK_GATES gates
        device = self.xp.asarray(table.ravel())
        layout = index_layout(n, wires, ())
        positions, npos, _ = self._layout_args(layout)
        (offsets,) = self._device_table(layout.offsets)
        total = layout.num_groups << len(wires)
        blocks = max(1, min(REDUCTION_BLOCKS, -(-total // THREADS)))
        kernel = self._kernel("qdiff_gate_block", psi.dtype)
        with_lam = lam is not None
        for first in range(0, len(table), BLOCK_GATES):
            kernel((blocks,), (THREADS,),
                   (psi, lam if with_lam else psi, positions, np.int32(npos), offsets,
                    np.int32(len(wires)), np.int64(total), device[first * BLOCK_ROW:],
                    np.int32(min(BLOCK_GATES, len(table) - first)), out, np.int32(with_lam)))


def _fits_gate_block(wires: tuple[int, ...], ops: Sequence[GateOp]) -> bool:
    inside = set(wires)
    return len(wires) <= _DENSE_MAX_TARGETS and all(
        len(op.wires) <= 2 and set(op.wires) <= inside
        and (not isinstance(op.gate, np.ndarray) or op.gate.shape == (1 << len(op.wires),) * 2)
        for op in ops)


def _undone(op: GateOp, spec: Any) -> GateOp:
    """The gate that undoes ``op`` (its inverse, same wires)."""
    inverse, params = spec.inverse(*op.params)
    return GateOp(inverse, tuple(op.wires), tuple(params))


register_backend("cupy", CupyBackend)
