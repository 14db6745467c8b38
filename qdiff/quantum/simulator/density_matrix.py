"""A small NumPy density-matrix simulator (up to ``MAX_DENSITY_QUBITS`` qubits).

It exists to cross-check the statevector machinery, so it deliberately shares none of the
statevector kernels: gates act through ``numpy.tensordot`` on the ``(2,)*2n`` tensor view of
``rho``, using only each gate's matrix from the gate table. Measurement projections are
unnormalized (``P rho P``), so a sum over branches of ``expval`` reproduces the weighted-branch
semantics of the statevector simulators, and ``reset`` is the trace-preserving channel
``P0 rho P0 + X P1 rho P1 X``.

Qiskit's little-endian order: wire ``k`` is bit ``k`` of the row and column indices.

>>> rho = zero_density(2)
>>> rho = apply_gate(rho, 2, "h", [0]); rho = apply_gate(rho, 2, "cx", [0, 1])
>>> probs(rho, 2).round(3).tolist()
[0.5, 0.0, 0.0, 0.5]
>>> rho0 = project(rho, 2, 0, 0); round(trace(rho0), 12), round(expval(rho0, 2, "ZZ"), 12)
(0.5, 0.5)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..lang.gates import GateSpec, gate_spec
from ..lang.observables import PauliSum
from .indexing import check_wires, marginal_probabilities
from .memory import check_statevector_memory

__all__ = [
    "MAX_DENSITY_QUBITS",
    "zero_density",
    "density_from_statevector",
    "apply_gate",
    "apply_matrix",
    "project",
    "reset",
    "expval",
    "probs",
    "trace",
]

MAX_DENSITY_QUBITS = 10
"""A 10-qubit density matrix is 16 MiB; cross-checks never need more."""


def _check_n(num_qubits: int) -> int:
    if not 0 <= num_qubits <= MAX_DENSITY_QUBITS:
        raise ValueError(
            f"the density-matrix simulator handles 0..{MAX_DENSITY_QUBITS} qubits, got "
            f"{num_qubits}"
        )
    return num_qubits


def _check_rho(rho: np.ndarray, num_qubits: int, what: str) -> int:
    n = _check_n(num_qubits)
    dim = 1 << n
    if not isinstance(rho, np.ndarray) or rho.shape != (dim, dim):
        shape = getattr(rho, "shape", None)
        raise ValueError(f"{what}: expected a ({dim}, {dim}) density matrix for {n} qubits, got "
                         f"shape {shape}")
    return n


def zero_density(num_qubits: int, dtype: Any = np.complex128) -> np.ndarray:
    """``|0..0><0..0|`` as a ``2^n x 2^n`` array.

    >>> zero_density(1).real.tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    n = _check_n(num_qubits)
    check_statevector_memory(2 * n, dtype, what="density matrix")
    rho = np.zeros((1 << n, 1 << n), dtype=dtype)
    rho[0, 0] = 1
    return rho


def density_from_statevector(state: Any) -> np.ndarray:
    """``|psi><psi|`` (kept unnormalized if ``psi`` is).

    >>> density_from_statevector(np.array([0, 1j])).real.tolist()
    [[0.0, 0.0], [0.0, 1.0]]
    """
    psi = np.asarray(state)
    if psi.ndim != 1 or psi.size & (psi.size - 1) or psi.size == 0:
        raise ValueError(f"expected a flat statevector of length 2^n, got shape {psi.shape}")
    _check_n(psi.size.bit_length() - 1)
    return np.outer(psi, psi.conj())


def _apply_to_axes(tensor: np.ndarray, u: np.ndarray, axes: list[int]) -> np.ndarray:
    """Contract ``u`` (gate bit j = axes[j]'s wire) into ``tensor`` along ``axes``."""
    k = len(axes)
    ut = u.reshape((2,) * (2 * k))
    # Reshaped C-order, the first tensor axis of a 2^k index is its most significant bit, i.e.
    # gate bit k-1: list the tensor axes in that order too.
    target = list(reversed(axes))
    out = np.tensordot(ut, tensor, axes=(list(range(k, 2 * k)), target))
    return np.moveaxis(out, list(range(k)), target)


def apply_matrix(rho: np.ndarray, num_qubits: int, matrix: Any,
                 wires: Sequence[int]) -> np.ndarray:
    """``U rho U^dagger`` for a ``2^k x 2^k`` matrix on ``wires`` (bit j = ``wires[j]``).

    >>> apply_matrix(zero_density(1), 1, np.array([[0, 1], [1, 0]]), [0]).real.tolist()
    [[0.0, 0.0], [0.0, 1.0]]
    """
    n = _check_rho(rho, num_qubits, "apply_matrix")
    ws = check_wires(wires, n, "apply_matrix")
    u = np.asarray(matrix, dtype=rho.dtype)
    dim = 1 << len(ws)
    if u.shape != (dim, dim):
        raise ValueError(f"apply_matrix: a matrix of shape {u.shape} cannot act on "
                         f"{len(ws)} wire(s); expected ({dim}, {dim})")
    t = rho.reshape((2,) * (2 * n))
    t = _apply_to_axes(t, u, [n - 1 - w for w in ws])               # rows: U rho
    t = _apply_to_axes(t, u.conj(), [2 * n - 1 - w for w in ws])    # columns: (.) U^dagger
    return np.ascontiguousarray(t).reshape(1 << n, 1 << n)


def apply_gate(rho: np.ndarray, num_qubits: int, gate: str | GateSpec | Any,
               wires: Sequence[int], params: Sequence[float] = (), **static: Any) -> np.ndarray:
    """Apply a table gate (or a raw matrix) as ``U rho U^dagger``; returns a new array.

    >>> apply_gate(zero_density(1), 1, "ry", [0], [np.pi]).real.round(12).tolist()
    [[0.0, 0.0], [0.0, 1.0]]
    """
    if not isinstance(gate, str | GateSpec):
        return apply_matrix(rho, num_qubits, gate, wires)
    if isinstance(gate, str) and gate in ("mcx", "mcz") and "num_controls" not in static:
        static["num_controls"] = len(wires) - 1
    spec = gate_spec(gate, **static)
    if len(wires) != spec.num_qubits:
        raise ValueError(f"gate {spec.name!r} acts on {spec.num_qubits} wire(s), got "
                         f"{len(wires)}: {tuple(wires)}")
    return apply_matrix(rho, num_qubits, spec.matrix(*params), wires)


def project(rho: np.ndarray, num_qubits: int, wire: int, outcome: int) -> np.ndarray:
    """``P rho P`` with ``P`` the projector on ``wire = outcome``; NOT renormalized.

    >>> round(trace(project(apply_gate(zero_density(1), 1, "h", [0]), 1, 0, 1)), 12)
    0.5
    """
    n = _check_rho(rho, num_qubits, "project")
    (w,) = check_wires([wire], n, "project")
    if outcome not in (0, 1):
        raise ValueError(f"project: outcome must be 0 or 1, got {outcome!r}")
    bits = (np.arange(1 << n) >> w) & 1
    keep = bits == outcome
    return rho * np.outer(keep, keep)


def reset(rho: np.ndarray, num_qubits: int, wire: int) -> np.ndarray:
    """Reset ``wire`` to 0: ``P0 rho P0 + X P1 rho P1 X`` (trace preserving).

    >>> reset(apply_gate(zero_density(1), 1, "h", [0]), 1, 0).real.round(12).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    branch1 = project(rho, num_qubits, wire, 1)
    return project(rho, num_qubits, wire, 0) + apply_gate(branch1, num_qubits, "x", [wire])


def trace(rho: np.ndarray) -> float:
    """Real part of ``Tr rho``: the total probability weight.

    >>> trace(zero_density(2))
    1.0
    """
    return float(np.trace(rho).real)


def expval(rho: np.ndarray, num_qubits: int, obs: PauliSum | str,
           wires: Sequence[int] | None = None) -> float:
    """``Re Tr(rho O)`` for a Pauli sum placed on ``wires`` (all wires by default).

    >>> expval(zero_density(2), 2, "Z0 + 0.5*X1")
    1.0
    """
    n = _check_rho(rho, num_qubits, "expval")
    o = obs if isinstance(obs, PauliSum) else PauliSum(obs)
    ws = tuple(range(n)) if wires is None else check_wires(wires, n, "expval")
    if len(ws) != o.num_qubits:
        raise ValueError(f"expval: observable acts on {o.num_qubits} qubits but {len(ws)} "
                         "wires were given")
    # Place every label on the full register, then use the dense matrix: independent of the
    # bit-mask kernels that the statevector back ends use.
    terms = []
    for coef, label in o.terms:
        letters = ["I"] * n
        for letter, w in zip(label, ws, strict=True):
            letters[w] = letter
        terms.append((coef, "".join(letters)))
    full = PauliSum(terms, n).to_matrix() if terms else np.zeros_like(rho)
    return float(np.sum(rho * full.T).real)


def probs(rho: np.ndarray, num_qubits: int, wires: Sequence[int] | None = None) -> np.ndarray:
    """Marginal probabilities of ``wires`` from the diagonal (``wires[0]`` least significant).

    >>> probs(apply_gate(zero_density(2), 2, "x", [1]), 2, [1]).tolist()
    [0.0, 1.0]
    """
    n = _check_rho(rho, num_qubits, "probs")
    ws = tuple(range(n)) if wires is None else check_wires(wires, n, "probs")
    return marginal_probabilities(np.ascontiguousarray(np.diagonal(rho).real), n, ws)
