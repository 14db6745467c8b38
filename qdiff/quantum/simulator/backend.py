"""The statevector back-end interface: what every back end offers, on top of five kernels.

A state is a flat, C-contiguous array of ``2^n`` complex amplitudes (``complex128`` or
``complex64``) in Qiskit's little-endian order: wire ``k`` is bit ``k`` of the index (the index
math is in :mod:`qdiff.quantum.simulator.indexing`). Every operation works in place where that
makes sense and returns the state, so calls chain. The back ends are in ``numpy_backend``,
``numba_backend`` and ``cupy_backend``; :func:`qdiff.quantum.simulator.get_backend` picks one.

>>> from qdiff.quantum.simulator import get_backend
>>> be = get_backend("numpy")
>>> psi = be.zero_state(2)
>>> be.apply_gate(psi, 2, "h", [0]); be.apply_gate(psi, 2, "cx", [0, 1])  # doctest: +ELLIPSIS
array(...)
>>> be.probs(psi, 2).round(3).tolist()
[0.5, 0.0, 0.0, 0.5]
>>> round(be.expval_pauli_sum(psi, 2, "ZZ"), 12)
1.0
"""

from __future__ import annotations

import abc
import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..lang.fusion import FusionWidth
from ..lang.gate_forms import gate_form
from ..lang.gates import GateSpec, gate_spec
from ..lang.observables import PauliSum, parity, pauli_masks
from .gate_ops import GateOp, fused_matrix
from .indexing import IndexLayout, check_wires, index_layout, marginal_probabilities
from .memory import check_statevector_memory

__all__ = ["StatevectorBackend", "SUPPORTED_DTYPES", "checked_table_gate"]

SUPPORTED_DTYPES = (np.dtype(np.complex128), np.dtype(np.complex64))

DENSE_FLOPS_PER_PASS = 16.0
"""Complex multiply-adds per amplitude that cost about one pass over the state when an
array module applies a dense matrix (calibrated so that a 5-wire block, 32 per amplitude,
costs three passes: the widths measured on the hardware-efficient ansatz stay the ones
chosen)."""


def _as_pauli_sum(obs: PauliSum | str | Sequence[tuple[Any, str]]) -> PauliSum:
    return obs if isinstance(obs, PauliSum) else PauliSum(obs)


_INFER_CONTROLS = frozenset({"mcx", "mcz"})


def checked_table_gate(gate: str | GateSpec, wires: Sequence[int], num_qubits: int,
                       params: Sequence[float], static: dict[str, Any]
                       ) -> tuple[GateSpec, tuple[int, ...], tuple[float, ...]]:
    """``(spec, wires, params)`` of a table gate named ``gate`` (or given as a spec) with its
    static arguments ``static``, as ``apply_gate`` takes them, checked against a register of
    ``num_qubits`` (wires in range, distinct, as many as the gate acts on; its parameter
    count): ``mcx``/``mcz`` infer ``num_controls`` from the wires when it is not given.

    >>> spec, ws, params = checked_table_gate("mcx", [0, 2, 3, 1], 4, (), {})
    >>> spec.num_qubits, spec.static, ws
    (4, {'num_controls': 3}, (0, 2, 3, 1))
    """
    if static or gate in _INFER_CONTROLS:
        if gate in _INFER_CONTROLS and "num_controls" not in static:
            static = {**static, "num_controls": len(wires) - 1}
        spec = gate_spec(gate, **static)
    else:
        spec = gate if isinstance(gate, GateSpec) else gate_spec(gate)
    ws = _gate_wires(tuple(wires), num_qubits, spec.name, spec.num_qubits)
    params = tuple(params)
    spec._check_params(params)
    return spec, ws, params


@functools.lru_cache(maxsize=8192)
def _gate_wires(wires: tuple[Any, ...], num_qubits: int, name: str,
                width: int) -> tuple[int, ...]:
    # Cached because every gate application validates its wires; errors are not cached.
    what = f"gate {name!r}"
    ws = check_wires(wires, num_qubits, what)
    if len(ws) != width:
        raise ValueError(f"{what} acts on {width} wire(s), got {len(ws)}: {ws}")
    return ws


@functools.lru_cache(maxsize=4096)
def _perm_array(perm: tuple[int, ...]) -> np.ndarray:
    return np.asarray(perm, dtype=np.int64)  # the kernels only read it


class StatevectorBackend(abc.ABC):
    """Statevector simulator interface; subclasses supply the array module and five kernels.

    Public operations (all back ends, same results up to rounding):
    ``zero_state``, ``basis_state``, ``asarray``, ``to_numpy``, ``copy``, ``apply_gate``,
    ``apply_circuit``, ``apply_pauli_string``, ``apply_pauli_rotation``, ``apply_pauli_sum``,
    ``expval_pauli_sum``, ``expval_pauli_sum_batch``, ``inner``, ``norm_squared``, ``probs``,
    ``project``, ``reset_branch``, ``sample``.
    """

    name: str = "abstract"
    is_gpu: bool = False

    def __init__(self, xp: Any) -> None:
        self.xp = xp

    # -- kernels a back end provides ------------------------------------------------------
    @abc.abstractmethod
    def _dense(self, state: Any, layout: IndexLayout, matrix: Any) -> None:
        """state <- (matrix on layout.targets, only where controls are 1); matrix in state dtype."""

    @abc.abstractmethod
    def _diagonal(self, state: Any, layout: IndexLayout, offsets: Any, diag: Any) -> None:
        """Multiply amplitude ``base | offsets[r]`` by ``diag[r]`` for every group base."""

    @abc.abstractmethod
    def _permutation(self, state: Any, layout: IndexLayout, perm: Any, phases: Any) -> None:
        """Move amplitude ``r`` of every group to ``perm[r]``, times ``phases[r]``."""

    @abc.abstractmethod
    def _pauli(self, state: Any, num_qubits: int, x_mask: int, z_mask: int,
               alpha: complex, beta: complex) -> None:
        """``state[i] <- alpha*state[i] + beta*(-1)^parity((i^x)&z) * state[i^x]`` for all i."""

    def _pauli_sums(self, state: Any, x_masks: np.ndarray, z_masks: np.ndarray) -> np.ndarray:
        """Per term: ``sum_i conj(state[i^x]) (-1)^parity(i&z) state[i]`` (host complex128):
        the cross term `_pauli_cross` with bra = ket."""
        return self._pauli_cross(state, state, x_masks, z_masks)

    # -- array handling ---------------------------------------------------------------------
    def available_bytes(self) -> int | None:
        """Free memory where this back end keeps states; ``None``: host memory (see
        ``memory.available_memory_bytes``).

        >>> from qdiff.quantum.simulator import get_backend
        >>> get_backend("numpy").available_bytes() is None
        True
        """
        return None

    def _check_dtype(self, dtype: Any) -> np.dtype:
        dt = np.dtype(dtype)
        if dt not in SUPPORTED_DTYPES:
            raise TypeError(f"state dtype must be complex128 or complex64, got {dt}")
        return dt

    def zero_state(self, num_qubits: int, dtype: Any = np.complex128) -> Any:
        """``|0...0>`` on ``num_qubits`` qubits; refuses registers that do not fit in memory.

        >>> from qdiff.quantum.simulator import get_backend
        >>> get_backend("numpy").zero_state(2).tolist()
        [(1+0j), 0j, 0j, 0j]
        """
        return self.basis_state(num_qubits, 0, dtype)

    def basis_state(self, num_qubits: int, index: int, dtype: Any = np.complex128) -> Any:
        """Computational basis state ``|index>`` (bit k of ``index`` = wire k).

        >>> from qdiff.quantum.simulator import get_backend
        >>> get_backend("numpy").basis_state(2, 2).real.tolist()
        [0.0, 0.0, 1.0, 0.0]
        """
        dt = self._check_dtype(dtype)
        check_statevector_memory(num_qubits, dt, available=self.available_bytes(),
                                 where="device memory" if self.is_gpu else "memory")
        if not 0 <= index < (1 << num_qubits):
            raise ValueError(f"basis index {index} out of range for {num_qubits} qubits")
        state = self.xp.zeros(1 << num_qubits, dtype=dt)
        state[index] = 1
        return state

    def asarray(self, state: Any, dtype: Any = None) -> Any:
        """A state in this back end's array type (copied only when needed).

        >>> from qdiff.quantum.simulator import get_backend
        >>> get_backend("numpy").asarray([1, 0]).dtype
        dtype('complex128')
        """
        arr = self.xp.ascontiguousarray(self.xp.asarray(state, dtype=dtype))
        if arr.dtype not in SUPPORTED_DTYPES:
            arr = arr.astype(np.complex128)
        return arr

    def to_numpy(self, array: Any) -> np.ndarray:
        """Host NumPy copy/view of a back-end array.

        >>> from qdiff.quantum.simulator import get_backend
        >>> type(get_backend("numpy").to_numpy(np.zeros(2))).__name__
        'ndarray'
        """
        return np.asarray(array)

    def copy(self, state: Any) -> Any:
        """A copy of ``state``.

        >>> from qdiff.quantum.simulator import get_backend
        >>> get_backend("numpy").copy(np.ones(2, complex)).tolist()
        [(1+0j), (1+0j)]
        """
        return state.copy()

    def _num_qubits_of(self, state: Any, num_qubits: int | None, what: str) -> int:
        if not hasattr(state, "dtype") or not hasattr(state, "ndim"):
            raise TypeError(f"{what}: state must be a {self.name} array, got {type(state)!r}")
        if state.ndim != 1:
            raise ValueError(f"{what}: state must be 1-D (a flat 2^n vector), got shape "
                             f"{state.shape}")
        if state.dtype not in SUPPORTED_DTYPES:
            raise TypeError(f"{what}: state dtype must be complex128 or complex64, got "
                            f"{state.dtype}")
        if not state.flags.c_contiguous:
            raise ValueError(f"{what}: state must be C-contiguous (kernels work in place)")
        size = state.shape[0]
        n = size.bit_length() - 1
        if size != 1 << n:
            raise ValueError(f"{what}: state length {size} is not a power of two")
        if num_qubits is not None and num_qubits != n:
            raise ValueError(f"{what}: state has {size} amplitudes = {n} qubits, but "
                             f"num_qubits={num_qubits}")
        return n

    # -- gates ------------------------------------------------------------------------------
    def apply_gate(self, state: Any, num_qubits: int, gate: str | GateSpec | Any,
                   wires: Sequence[int], params: Sequence[float] = (), **static: Any) -> Any:
        """Apply a table gate (name or :class:`GateSpec`) or a raw matrix to ``wires``, in place.

        Dispatches on the gate's structure: dense (specialised 1- and 2-qubit kernels),
        diagonal (multiplies only, entries equal to 1 are skipped), permutation, controlled
        (the base gate on the targets, only where every control is 1). A raw matrix is applied
        as given, unchecked for unitarity, so projectors and generators can be applied too;
        bit ``j`` of its index is ``wires[j]``. ``mcx``/``mcz`` infer ``num_controls`` from
        the wires; other families take their static arguments as keywords
        (``pauli="XZ"``, ``matrix=M``).

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); psi = be.zero_state(3)
        >>> be.apply_gate(psi, 3, "x", [0]).real.tolist()[:2]
        [0.0, 1.0]
        >>> be.apply_gate(psi, 3, "mcx", [0, 1, 2]) is psi
        True
        """
        n = self._num_qubits_of(state, num_qubits, "apply_gate")
        if not isinstance(gate, (str, GateSpec)):
            return self._apply_matrix(state, n, gate, wires)
        spec, ws, params = checked_table_gate(gate, wires, n, params, static)
        if spec.pauli_word is not None and spec.num_qubits > 2:
            # A wide Pauli rotation would need a 2^k matrix; the pair kernel needs none.
            return self.apply_pauli_rotation(state, n, params[0], spec.pauli_word, ws)
        form = gate_form(spec)  # read off the matrix once per gate: see lang.gate_forms
        layout = index_layout(n, tuple(ws[j] for j in form.targets),
                              tuple(ws[j] for j in form.controls))
        data = form.data(*params)
        if form.kind == "diagonal":
            self._apply_diagonal(state, layout, data)
        elif form.kind == "permutation":
            assert form.perm is not None
            self._permutation(state, layout, _perm_array(form.perm),
                              np.asarray(data, dtype=state.dtype))
        else:
            self._dense(state, layout, data.astype(state.dtype, copy=False))
        return state

    def _apply_diagonal(self, state: Any, layout: IndexLayout, diag: np.ndarray) -> None:
        # Entries equal to 1 leave their amplitudes alone: cz, cphase, t, s, ... touch only the
        # rows that change, which is a quarter or half of the memory traffic.
        nontrivial = diag != 1
        if nontrivial.all():
            offsets = layout.offsets
        else:
            keep = np.flatnonzero(nontrivial)
            if not keep.size:
                return
            offsets, diag = layout.offsets[keep], diag[keep]
            offsets.setflags(write=False)  # same array type as layout.offsets: one compilation
        self._diagonal(state, layout, offsets, np.ascontiguousarray(diag, dtype=state.dtype))

    def _apply_matrix(self, state: Any, n: int, matrix: Any, wires: Sequence[int]) -> Any:
        m = np.asarray(matrix)
        ws = check_wires(wires, n, "matrix gate")
        dim = 1 << len(ws)
        if m.shape != (dim, dim):
            raise ValueError(
                f"matrix gate: a matrix of shape {m.shape} cannot act on {len(ws)} wire(s) "
                f"{ws}: expected shape ({dim}, {dim})"
            )
        m = m.astype(state.dtype)
        layout = index_layout(n, ws, ())
        diag = np.diagonal(m)
        if np.count_nonzero(m) == np.count_nonzero(diag):
            self._apply_diagonal(state, layout, np.ascontiguousarray(diag))
        else:
            self._dense(state, layout, m)
        return state

    dense_fusion_limit: int = 6
    """Widest fused gate :meth:`apply_fused` turns into one dense matrix (wider ones run gate by
    gate unless a back end overrides it)."""

    def fusion_width(self, num_qubits: int) -> int:
        """The widest block of gates the fusion pass should merge for this back end.

        0 means no fusion. Measured on the hardware-efficient ansatz of
        ``benchmarks/statevector.py`` with the array-module kernels (one gather/scatter of the
        state per pass): none below 11 qubits, where building the fused matrices costs more
        than the passes they save, 4x4 matrices up to 13 qubits, 5-qubit blocks (32x32) from
        14 qubits on, where fewer passes over the state win.

        The width carries the price list the planner chooses each block's width by
        (:class:`~qdiff.quantum.lang.fusion.FusionWidth`): a block here is one dense
        ``2^k x 2^k`` matrix, and ``DENSE_FLOPS_PER_PASS`` complex multiply-adds per
        amplitude cost about one pass over the state.

        >>> from qdiff.quantum.simulator import get_backend
        >>> [get_backend("numpy").fusion_width(n) for n in (4, 12, 20)]
        [0, 2, 5]
        """
        width = 0 if num_qubits < 11 else 2 if num_qubits < 14 else 5
        return FusionWidth(width, flops_per_pass=DENSE_FLOPS_PER_PASS, dense=True)

    def apply_fused(self, state: Any, num_qubits: int, wires: Sequence[int],
                    ops: Iterable[GateOp]) -> Any:
        """Apply a gate sequence confined to ``wires`` in order, in place, in as few passes
        over the state as the back end can (one here, as a dense matrix, up to
        ``dense_fusion_limit`` wires; gate by gate beyond).

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> psi = be.apply_fused(be.zero_state(2), 2, [0, 1], [("h", (0,)), ("cx", (0, 1))])
        >>> be.probs(psi, 2).round(3).tolist()
        [0.5, 0.0, 0.0, 0.5]
        """
        n = self._num_qubits_of(state, num_qubits, "apply_fused")
        ws = check_wires(wires, n, "fused gate")
        ops = [GateOp(*op) for op in ops]
        if len(ws) <= self.dense_fusion_limit:
            return self._apply_matrix(state, n, fused_matrix(ws, ops), ws)
        inside = set(ws)
        for op in ops:
            if not set(op.wires) <= inside:
                raise ValueError(f"fused gate on wires {ws}: a gate acts on {op.wires}, "
                                 "outside them")
        return self.apply_circuit(state, n, ops)

    def apply_circuit(self, state: Any, num_qubits: int, ops: Iterable[GateOp]) -> Any:
        """Apply a sequence of :class:`GateOp` (or ``(gate, wires, params)`` tuples) in order.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> psi = be.apply_circuit(be.zero_state(2), 2, [("h", (0,)), ("cx", (0, 1))])
        >>> be.probs(psi, 2).round(3).tolist()
        [0.5, 0.0, 0.0, 0.5]
        """
        for op in ops:
            op = GateOp(*op)
            self.apply_gate(state, num_qubits, op.gate, op.wires, op.params)
        return state

    # -- Pauli strings ----------------------------------------------------------------------
    def apply_pauli_string(self, state: Any, num_qubits: int, pauli: str,
                           wires: Sequence[int] | None = None, coeff: complex = 1.0) -> Any:
        """``state <- coeff * P state`` in place; letter ``k`` of ``pauli`` acts on ``wires[k]``.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> bool(np.allclose(be.apply_pauli_string(be.zero_state(2), 2, "YI"), [0, 1j, 0, 0]))
        True
        """
        n = self._num_qubits_of(state, num_qubits, "apply_pauli_string")
        ws = check_wires(range(len(pauli)) if wires is None else wires, n, "apply_pauli_string")
        x, z, ny = pauli_masks(pauli, ws)
        self._pauli(state, n, x, z, 0.0, complex(coeff) * 1j ** ny)
        return state

    def apply_pauli_rotation(self, state: Any, num_qubits: int, theta: float, pauli: str,
                             wires: Sequence[int] | None = None) -> Any:
        """``state <- exp(-i theta P / 2) state`` in place, without a matrix.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> be.apply_pauli_rotation(be.zero_state(1), 1, math.pi, "X").round(12).tolist()
        [0j, -1j]
        """
        n = self._num_qubits_of(state, num_qubits, "apply_pauli_rotation")
        ws = check_wires(range(len(pauli)) if wires is None else wires, n,
                          "apply_pauli_rotation")
        x, z, ny = pauli_masks(pauli, ws)
        theta = float(theta)
        self._pauli(state, n, x, z, math.cos(theta / 2),
                    -1j * math.sin(theta / 2) * 1j ** ny)
        return state

    def apply_pauli_sum(self, state: Any, num_qubits: int, obs: PauliSum | str,
                        wires: Sequence[int] | None = None) -> Any:
        """Return the NEW state ``O state`` for a Pauli sum ``O`` (input left unchanged).

        Used for ``O|psi>`` and ``G|psi>`` in adjoint differentiation.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> be.apply_pauli_sum(be.zero_state(1), 1, "0.5*Z + 2*X").real.tolist()
        [0.5, 2.0]
        """
        n = self._num_qubits_of(state, num_qubits, "apply_pauli_sum")
        obs = _as_pauli_sum(obs)
        xs, zs, fs = obs.masks(self._obs_wires(obs, n, wires))
        out = self.xp.zeros_like(state)
        for x, z, f in zip(xs.tolist(), zs.tolist(), fs.tolist(), strict=True):
            tmp = state.copy()
            self._pauli(tmp, n, x, z, 0.0, f)
            out += tmp
        return out

    def _obs_wires(self, obs: PauliSum, n: int, wires: Sequence[int] | None) -> tuple[int, ...]:
        if wires is None:
            if obs.num_qubits != n:
                raise ValueError(f"observable acts on {obs.num_qubits} qubits but the state has "
                                 f"{n}; pass wires= to place it")
            wires = range(n)
        ws = check_wires(wires, n, "observable")
        if len(ws) != obs.num_qubits:
            raise ValueError(f"observable acts on {obs.num_qubits} qubits but {len(ws)} wires "
                             "were given")
        return ws

    # -- expectation values -----------------------------------------------------------------
    def expval_pauli_sum(self, state: Any, num_qubits: int, obs: PauliSum | str,
                         wires: Sequence[int] | None = None) -> float:
        """``<state| O |state>`` for a Hermitian Pauli sum, computed without matrices.

        For an unnormalized branch state this is the branch's weighted contribution.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> be.expval_pauli_sum(be.zero_state(2), 2, "0.5*ZI - X1")
        0.5
        """
        return float(self.expval_pauli_sum_batch(state, num_qubits, [obs], wires)[0])

    def expval_pauli_sum_batch(self, state: Any, num_qubits: int,
                               observables: Sequence[PauliSum | str],
                               wires: Sequence[int] | None = None) -> np.ndarray:
        """Expectation values of many observables; each distinct Pauli string is measured once.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> be.expval_pauli_sum_batch(be.zero_state(1), 1, ["Z", "X", "2*Z + 1"]).tolist()
        [1.0, 0.0, 3.0]
        """
        n = self._num_qubits_of(state, num_qubits, "expval")
        key_of: dict[tuple[int, int], int] = {}
        per_obs: list[list[tuple[int, complex]]] = []
        for xs, zs, fs in self._hermitian_masks(n, observables, wires):
            entries = []
            for x, z, f in zip(xs.tolist(), zs.tolist(), fs.tolist(), strict=True):
                entries.append((key_of.setdefault((x, z), len(key_of)), f))
            per_obs.append(entries)
        if key_of:
            keys = list(key_of)
            raw = self._pauli_sums(state, np.array([k[0] for k in keys], dtype=np.int64),
                                   np.array([k[1] for k in keys], dtype=np.int64))
        else:
            raw = np.zeros(0, dtype=np.complex128)
        return np.array([sum((f * raw[k]).real for k, f in entries) for entries in per_obs],
                        dtype=np.float64)

    def _hermitian_masks(self, n: int, observables: Sequence[PauliSum | str],
                         wires: Sequence[int] | None
                         ) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Each observable's ``(x_masks, z_masks, factors)`` placed on ``wires``; refuses an
        observable that is not Hermitian."""
        out = []
        for o in observables:
            obs = _as_pauli_sum(o)
            if not obs.is_hermitian(atol=1e-10):
                raise ValueError(f"expval needs a Hermitian observable (real coefficients), got "
                                 f"{obs}")
            out.append(obs.masks(self._obs_wires(obs, n, wires)))
        return out

    # -- overlaps, probabilities, measurement ---------------------------------------------
    def inner(self, a: Any, b: Any) -> complex:
        """``<a|b>`` (conjugating ``a``).

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); be.inner(np.array([1j, 0]), np.array([1, 0j]))
        -1j
        """
        return complex(self.xp.vdot(a, b))

    def norm_squared(self, state: Any) -> float:
        """``<state|state>``: the probability weight of an unnormalized branch state.

        >>> from qdiff.quantum.simulator import get_backend
        >>> get_backend("numpy").norm_squared(np.array([0.6, 0.8j]))
        1.0
        """
        return float(self.xp.vdot(state, state).real)

    def probs(self, state: Any, num_qubits: int, wires: Sequence[int] | None = None) -> Any:
        """Marginal probabilities of ``wires`` (float64, ``wires[0]`` = least significant bit).

        Same order as Qiskit's ``Statevector.probabilities(qargs=wires)``; unnormalized states
        give unnormalized (branch-weighted) probabilities.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); psi = be.apply_gate(be.zero_state(2), 2, "x", [1])
        >>> be.probs(psi, 2, [1]).tolist(), be.probs(psi, 2, [1, 0]).tolist()
        ([0.0, 1.0], [0.0, 1.0, 0.0, 0.0])
        """
        n = self._num_qubits_of(state, num_qubits, "probs")
        ws = tuple(range(n)) if wires is None else check_wires(wires, n, "probs")
        return marginal_probabilities(self._abs_squared(state), n, ws, self.xp)

    def _abs_squared(self, state: Any) -> Any:
        # |amplitude|^2 in float64 (a back end with a one-pass kernel overrides this)
        p = self.xp.square(state.real, dtype=self.xp.float64)
        p += self.xp.square(state.imag, dtype=self.xp.float64)
        return p

    def project(self, state: Any, num_qubits: int, wire: int, outcome: int) -> Any:
        """Zero the amplitudes where ``wire`` differs from ``outcome``; NO renormalization.

        The result is the unnormalized branch state whose squared norm is the outcome's
        probability, which is the semantics of measurement branches in qdiff.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); psi = be.apply_gate(be.zero_state(1), 1, "h", [0])
        >>> round(be.norm_squared(be.project(psi, 1, 0, 1)), 12)
        0.5
        """
        n = self._num_qubits_of(state, num_qubits, "project")
        (w,) = check_wires([wire], n, "project")
        if outcome not in (0, 1):
            raise ValueError(f"project: outcome must be 0 or 1, got {outcome!r}")
        view = state.reshape(1 << (n - 1 - w), 2, 1 << w)
        view[:, 1 - outcome, :] = 0
        return state

    def reset_branch(self, state: Any, num_qubits: int, wire: int, outcome: int) -> Any:
        """Branch ``outcome`` of a reset: project on ``outcome``, then flip the wire to 0.

        A reset is the sum of both branches (``rho -> P0 rho P0 + X P1 rho P1 X``); a sampler
        picks one with probability ``norm_squared`` of the branch.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); psi = be.apply_gate(be.zero_state(1), 1, "x", [0])
        >>> be.reset_branch(psi, 1, 0, 1).real.tolist()
        [1.0, 0.0]
        """
        self.project(state, num_qubits, wire, outcome)
        if outcome == 1:
            view = state.reshape(1 << (num_qubits - 1 - wire), 2, 1 << wire)
            view[:, 0, :] = view[:, 1, :]
            view[:, 1, :] = 0
        return state

    @staticmethod
    def sample(probs: Any, shots: int, rng: np.random.Generator | int | None = None
               ) -> np.ndarray:
        """Draw ``shots`` outcome indices from ``probs`` (normalized by their sum).

        Unnormalized branch probabilities therefore sample the conditional distribution.

        >>> StatevectorBackend.sample(np.array([0.0, 1.0]), 3, rng=1).tolist()
        [1, 1, 1]
        """
        p = np.asarray(probs.get() if hasattr(probs, "get") else probs, dtype=np.float64)
        if p.ndim != 1 or p.size == 0:
            raise ValueError(f"sample: probs must be a non-empty 1-D array, got shape {p.shape}")
        if not np.all(np.isfinite(p)) or p.min() < -1e-12:
            raise ValueError("sample: probs must be finite and non-negative")
        total = float(p.sum())
        if total <= 0:
            raise ValueError("sample: probs sum to zero; nothing to sample from")
        if shots < 0:
            raise ValueError(f"sample: shots must be >= 0, got {shots}")
        gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        cdf = np.cumsum(np.clip(p, 0.0, None)) / total
        out = np.searchsorted(cdf, gen.random(int(shots)), side="right")
        return np.minimum(out, p.size - 1).astype(np.int64)

    # -- the adjoint method ------------------------------------------------------------------
    def _pauli_cross(self, bra: Any, ket: Any, x_masks: np.ndarray,
                     z_masks: np.ndarray) -> np.ndarray:
        """Per term: ``sum_i conj(bra[i^x]) (-1)^parity(i&z) ket[i]`` (host complex128)."""
        xp = self.xp
        i = xp.arange(ket.shape[0], dtype=xp.int64)
        out = np.empty(len(x_masks), dtype=np.complex128)
        for k, (x, z) in enumerate(zip(x_masks.tolist(), z_masks.tolist(), strict=True)):
            sign = (1 - 2 * parity(i & z)).astype(ket.real.dtype)
            terms = xp.conj(bra[i ^ x] if x else bra) * sign * ket
            out[k] = complex(xp.sum(terms.astype(xp.complex128)))
        return out

    def _pauli_accumulate(self, out: Any, state: Any, num_qubits: int, x_masks: np.ndarray,
                          z_masks: np.ndarray, factors: np.ndarray) -> None:
        """``out += sum_k factors[k] (-1)^parity((i^x_k)&z_k) state[i^x_k]`` for all i."""
        tmp = None
        for x, z, f in zip(x_masks.tolist(), z_masks.tolist(), factors.tolist(), strict=True):
            if tmp is None:
                tmp = state.copy()
            else:
                tmp[...] = state
            self._pauli(tmp, num_qubits, x, z, 0.0, f)
            out += tmp

    def inner_pauli_sum(self, bra: Any, ket: Any, num_qubits: int, obs: PauliSum | str,
                        wires: Sequence[int] | None = None) -> complex:
        """``<bra| O |ket>`` for a Pauli sum ``O``, without forming ``O|ket>``.

        The adjoint method's derivative of a gate ``exp(-iθG)`` is ``2 Im<λ|G ψ>``; this
        reads the two states once per term (the Numba back end: once for all terms).

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); psi = be.apply_gate(be.zero_state(1), 1, "h", [0])
        >>> round(be.inner_pauli_sum(be.zero_state(1), psi, 1, "X - 2*Z").real, 6)
        -0.707107
        """
        n = self._num_qubits_of(ket, num_qubits, "inner_pauli_sum")
        self._num_qubits_of(bra, n, "inner_pauli_sum")
        obs = _as_pauli_sum(obs)
        xs, zs, fs = obs.masks(self._obs_wires(obs, n, wires))
        if not len(fs):
            return 0j
        return self._pauli_inner(bra, ket, np.asarray(xs, np.int64), np.asarray(zs, np.int64),
                                 np.asarray(fs, np.complex128))

    def _pauli_inner(self, bra: Any, ket: Any, x_masks: np.ndarray, z_masks: np.ndarray,
                     factors: np.ndarray) -> complex:
        """``Σ_k factors[k] <bra|P_k|ket>`` (P_k: the masks' Pauli string), on the host."""
        return complex(np.dot(factors, self._pauli_cross(bra, ket, x_masks, z_masks)))

    def add_pauli_sum(self, out: Any, state: Any, num_qubits: int, obs: PauliSum | str,
                      wires: Sequence[int] | None = None, scale: complex = 1.0) -> Any:
        """``out <- out + scale * O state`` in place (``out`` and ``state`` distinct arrays);
        returns ``out``. The adjoint of a readout ``<ψ|O|ψ>`` with cotangent ``ē`` adds
        ``ē O ψ`` to ``λ`` this way (the Numba back end in one pass, no temporaries).

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); out = np.ones(2, complex)
        >>> be.add_pauli_sum(out, be.zero_state(1), 1, "0.5*Z + 2*X", scale=2.0).real.tolist()
        [2.0, 5.0]
        """
        n = self._num_qubits_of(state, num_qubits, "add_pauli_sum")
        self._num_qubits_of(out, n, "add_pauli_sum")
        obs = _as_pauli_sum(obs)
        xs, zs, fs = obs.masks(self._obs_wires(obs, n, wires))
        if len(fs):
            self._pauli_accumulate(out, state, n, np.asarray(xs, np.int64),
                                   np.asarray(zs, np.int64),
                                   np.asarray(fs, np.complex128) * complex(scale))
        return out

    def adjoint_width(self, num_qubits: int) -> int:
        """The widest block of gates :meth:`adjoint_block` should be given (the fusion width
        unless a back end knows better).

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy"); be.adjoint_width(20) == be.fusion_width(20)
        True
        """
        return self.fusion_width(num_qubits)

    def adjoint_register_qubits(self, num_qubits: int, support: int, width: int) -> int:
        """The qubits of the register the reverse sweep runs a block of ``width`` wires on
        when ψ is zero past amplitude ``2^support`` and the block's wires are below
        ``support`` (a run of gates from ``|0...0>``): the first ``2^m`` amplitudes of ψ and
        λ, m at least ``support`` and at most ``num_qubits``. Here the whole register: a back
        end whose kernels are checked on such views says so (NumPy, Numba).

        >>> from qdiff.quantum.simulator.numpy_backend import ArrayModuleBackend
        >>> ArrayModuleBackend(np).adjoint_register_qubits(20, 9, 8)  # CuPy's class
        20
        """
        return num_qubits

    def adjoint_block(self, psi: Any, lam: Any, num_qubits: int, wires: Sequence[int],
                      ops: Sequence[GateOp], want: Sequence[bool],
                      filled: dict | None = None) -> np.ndarray:
        """Undo a gate sequence on the adjoint method's pair (ψ, λ), with derivatives.

        ``ops`` are the forward gates (table gates by name or :class:`GateSpec`) in
        application order, all inside ``wires``; ``want[k]`` asks for the derivative of op
        ``k``, a one-parameter gate ``U_k = exp(-iθ G_k)``. For ``k`` from last to first:
        ``g[k] = 2 Im<λ|G_k ψ>``, then ``ψ <- U_k^† ψ`` and ``λ <- U_k^† λ``, in place.
        Returns ``g`` (float64, 0 where not wanted), an array of the back end's module
        (a GPU back end's stays on the device). ``lam=None`` undoes ψ only.
        ``lam`` may also be a stack of adjoints (one per row, shape ``(rows, 2^n)``), all
        undone against the one ψ: then ``g`` has a row per adjoint.
        ``filled`` is a dict the back end may keep what it prepared for a block in, for a
        later sweep over the same blocks (a Jacobian's rows); this one prepares nothing.

        Here gate by gate: one pass over each state per gate and one over both per
        derivative (:meth:`inner_pauli_sum`); the Numba back end does a block in one pass.

        >>> from qdiff.quantum.simulator import get_backend
        >>> be = get_backend("numpy")
        >>> psi = be.apply_gate(be.zero_state(1), 1, "ry", [0], [0.4]); lam = psi * [1, -1]
        >>> g = be.adjoint_block(psi, lam, 1, [0], [GateOp("ry", (0,), (0.4,))], [True])
        >>> round(float(g[0]), 12) == round(-math.sin(0.4), 12), bool(np.allclose(psi, [1, 0]))
        (True, True)
        """
        n = self._num_qubits_of(psi, num_qubits, "adjoint_block")
        stack = [] if lam is None else list(lam) if lam.ndim == 2 else [lam]
        for row in stack:
            self._num_qubits_of(row, n, "adjoint_block")
        grads = np.zeros((len(stack), len(ops)))
        for k in range(len(ops) - 1, -1, -1):
            op = GateOp(*ops[k])
            spec = gate_spec(op.gate)
            if want[k] and stack:
                if spec.generator is None:
                    raise ValueError(f"adjoint_block: gate {spec.name!r} has no generator")
                for r, row in enumerate(stack):
                    grads[r, k] = 2 * self.inner_pauli_sum(row, psi, n, spec.generator,
                                                           op.wires).imag
            inverse, params = spec.inverse(*op.params)
            for state in (psi, *stack):
                self.apply_gate(state, n, inverse, op.wires, params)
        if lam is None:
            return np.zeros(len(ops))
        return self.xp.asarray(grads if lam.ndim == 2 else grads[0])

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
