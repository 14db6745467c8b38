"""A straight circuit's batch (`execution.batched`) run with the array-module simulator
(`simulator.array_batched`) on NumPy or CuPy: the same steps as the lane kernels (one
matrix per member for each run of one-wire gates, a gather for each run of permutation
gates), the states one ``(members, 2**n)`` array on the array module, and the readouts
computed there, only the values returning to the host.

>>> import qdiff
>>> from qdiff.quantum.execution.batched import batched_circuit, fused_one_wire_runs
>>> from qdiff.quantum.execution.batched import member_matrices
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> circuit = batched_circuit(qdiff.trace(rotation, 0.1))
>>> theta = np.array([0.0, 0.5])
>>> steps = fused_one_wire_runs(circuit, member_matrices(circuit, [theta], 2))
>>> psi = final_states(np, circuit.num_qubits, steps)
>>> np.allclose(readout_values(np, circuit, psi)[0], np.cos(theta))
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..lang.observables import PauliSum
from ..simulator import array_batched

__all__ = ["final_states", "observable_rows", "readout_values", "to_host"]


def to_host(array: Any) -> np.ndarray:
    """A NumPy copy of an array of any array module (CuPy's ``.get()``).

    >>> to_host(np.ones(2)).tolist()
    [1.0, 1.0]
    """
    return array.get() if hasattr(array, "get") else np.asarray(array)


def final_states(xp: ModuleType, num_qubits: int, steps: Sequence[Any]) -> Any:
    """Every member's state after the circuit from |0…0>, ``(members, 2**n)`` on ``xp``;
    ``steps``: `batched.fused_one_wire_runs`'s kinds, wires, matrices and tables."""
    kinds, first, last, mats, tables = steps
    psi = xp.zeros((mats.shape[0], 1 << num_qubits), xp.complex128)
    psi[:, 0] = 1.0
    return array_batched.run_circuit(xp, psi, kinds, first, last, mats, xp.asarray(tables))


@functools.lru_cache(maxsize=64)
def _flips(num_qubits: int, obs: PauliSum, wires: tuple[int, ...]) -> list[tuple[int, Any]]:
    return array_batched.flip_coefficients(num_qubits, *obs.masks(wires))


def observable_rows(xp: ModuleType, psi: Any, num_qubits: int, obs: PauliSum,
                    wires: Sequence[int]) -> Any:
    """``O ψ_b`` for every row of ``psi`` on ``xp`` (one product per flip pattern of
    ``O``'s terms: one for Σ Z_i)."""
    flips = _flips(num_qubits, obs, tuple(int(w) for w in wires))
    return array_batched.observable_rows(xp, psi, [(x, xp.asarray(c)) for x, c in flips])


def readout_values(xp: ModuleType, circuit: Any, psi: Any) -> list[np.ndarray]:
    """Each readout of ``circuit`` (a `batched.BatchedCircuit`) for every member, on the
    host: an expectation ``(members,)`` or probabilities ``(members, 2**k)``, normalized
    like the single-member readouts."""
    norms = xp.sum((xp.conj(psi) * psi).real, axis=1)
    values = []
    for obs, wires in circuit.readouts:
        if obs is None:
            value = array_batched.probabilities(xp, psi, wires) / norms[:, None]
        else:
            rows = observable_rows(xp, psi, circuit.num_qubits, obs, wires)
            value = xp.sum(xp.conj(psi) * rows, axis=1).real / norms
        values.append(to_host(value))
    return values
