"""Exact time evolution exp(-itH) for Qiskit's evolution gates, differentiable in t.

Qiskit's ``PauliEvolutionGate`` and ``HamiltonianGate`` mean the exact exp(-itH) (their
matrices), but the definition of a ``PauliEvolutionGate`` is a product formula, which
differs from it when the terms of H do not commute. An imported circuit must have one value
whether t is a number or a ``Parameter``, so both evolve exactly:

- terms that commute pairwise: one ``pauli_rot`` per term, exp(-i t c P) =
  ``pauli_rot(2ct, P)``;
- otherwise H = V diag(e) V† with constant V: ``unitary(V†)``, then the diagonal
  exp(-i t diag(e)) as commuting Z-string rotations (the Walsh–Hadamard coefficients of e),
  then ``unitary(V)``.

The time enters only rotation angles, so every engine differentiates it (adjoint, parameter
shift).

>>> from qdiff import quantum as qm
>>> import qdiff
>>> def f(t):
...     q = qm.qubits(2)
...     evolve_hermitian(np.array([[0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, -1]]),
...                      t, list(q), "example")
...     return qm.expval("ZI", q)
>>> bool(abs(float(qdiff.trace(f, 0.0)(0.3)) - np.cos(0.6)) < 1e-12)  # exp(-itX) on |0>
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.errors import QdiffError
from ..lang import frontend as qm

_TINY = 1e-13  # coefficients below this are rounding noise of eigh and the transform


def evolve_paulis(terms: Sequence[tuple[str, complex]], time: Any, wires: Sequence[Any],
                  what: str) -> None:
    """exp(-i t Σ c_k P_k) on ``wires`` for terms ``(Qiskit label, coefficient)`` (label
    character -1 acts on ``wires[0]``); ``time`` a number or a traced scalar."""
    real = [(label, _real_coefficient(c, label, what)) for label, c in terms]
    real = [(label, c) for label, c in real if c != 0.0 and set(label) != {"I"}]
    if all(_commute(a, b) for i, (a, _) in enumerate(real) for b, _ in real[i + 1:]):
        for label, coefficient in real:
            qm.pauli_rot(time * (2.0 * coefficient), label[::-1], wires)
        return
    evolve_hermitian(_pauli_matrix(real, len(wires)), time, wires, what)


def evolve_hermitian(matrix: Any, time: Any, wires: Sequence[Any], what: str) -> None:
    """exp(-i t H) on ``wires`` for a constant Hermitian ``matrix`` (bit j of its index is
    ``wires[j]``, Qiskit's order)."""
    h = np.asarray(matrix, np.complex128)
    dim = 2 ** len(wires)
    if h.shape != (dim, dim):
        raise QdiffError(f"{what}: the Hamiltonian is {h.shape}, the gate acts on "
                         f"{len(wires)} qubit(s) ({dim}x{dim})")
    if not np.all(np.isfinite(h)) or not np.allclose(h, h.conj().T, atol=1e-10):
        raise QdiffError(f"{what}: the Hamiltonian is not Hermitian (finite, H = H†)")
    energies, basis = np.linalg.eigh(h)
    weights = _walsh(energies)
    qm.unitary(basis.conj().T, wires)
    for subset in range(1, dim):  # subset 0 is the global phase
        if abs(weights[subset]) > _TINY * max(1.0, float(np.max(np.abs(energies)))):
            label = "".join("Z" if subset >> j & 1 else "I" for j in range(len(wires)))
            qm.pauli_rot(time * (2.0 * float(weights[subset])), label, wires)
    qm.unitary(basis, wires)


def _walsh(values: np.ndarray) -> np.ndarray:
    """w with values[k] = Σ_S w[S] (-1)^popcount(k & S): the Z-string coefficients of a
    diagonal."""
    w = np.array(values, np.float64)
    half = 1
    while half < len(w):
        for start in range(0, len(w), 2 * half):
            a, b = w[start:start + half].copy(), w[start + half:start + 2 * half].copy()
            w[start:start + half], w[start + half:start + 2 * half] = a + b, a - b
        half *= 2
    return w / len(w)


def _commute(a: str, b: str) -> bool:
    clashes = sum(1 for x, y in zip(a, b) if x != "I" and y != "I" and x != y)
    return clashes % 2 == 0


def _real_coefficient(value: Any, label: str, what: str) -> float:
    try:
        c = complex(value)
    except TypeError:
        raise QdiffError(f"{what}: the coefficient of {label} is {value}, not a number "
                         "(parameterized coefficients are not supported; put the parameter "
                         "in the time)") from None
    if abs(c.imag) > 1e-12:
        raise QdiffError(f"{what}: the coefficient of {label} is {c}; a Hamiltonian needs "
                         "real coefficients")
    return c.real


_PAULI = {"I": np.eye(2), "X": np.array([[0, 1], [1, 0]]),
          "Y": np.array([[0, -1j], [1j, 0]]), "Z": np.diag([1.0, -1.0])}


def _pauli_matrix(terms: Sequence[tuple[str, float]], num_qubits: int) -> np.ndarray:
    total = np.zeros((2 ** num_qubits, 2 ** num_qubits), np.complex128)
    for label, coefficient in terms:
        term = np.eye(1)
        for letter in label:  # Qiskit labels put the most significant qubit first
            term = np.kron(term, _PAULI[letter])
        total += coefficient * term
    return total
