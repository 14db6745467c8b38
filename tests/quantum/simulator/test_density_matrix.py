"""The density-matrix simulator: agreement with statevectors (unitary circuits and measurement
branches), with Qiskit's DensityMatrix (reset), and its input errors."""

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qiskit.quantum_info import DensityMatrix

import qdiff.quantum.simulator.density_matrix as dm
from qdiff.quantum.lang.observables import PauliSum
from qdiff.quantum.simulator import GateOp, get_backend, random_circuit

pytestmark = pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")


def _apply_ops(rho: np.ndarray, n: int, ops: list[GateOp]) -> np.ndarray:
    for op in ops:
        rho = dm.apply_gate(rho, n, op.gate, op.wires, op.params)
    return rho


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2**32 - 1))
def test_unitary_circuits_agree_with_statevector(n: int, seed: int) -> None:
    ops = random_circuit(n, 20, rng=seed)
    be = get_backend("numba")
    psi = be.apply_circuit(be.zero_state(n), n, ops)
    rho = _apply_ops(dm.zero_density(n), n, ops)
    np.testing.assert_allclose(rho, dm.density_from_statevector(psi), atol=1e-10)
    assert dm.trace(rho) == pytest.approx(1.0)
    obs = PauliSum([(0.7, "X" * n), (-0.4, "Z" + "I" * (n - 1))])
    assert dm.expval(rho, n, obs) == pytest.approx(be.expval_pauli_sum(psi, n, obs), abs=1e-10)
    wires = list(range(n))[::-1][: max(1, n - 1)]
    np.testing.assert_allclose(dm.probs(rho, n, wires), be.probs(psi, n, wires), atol=1e-12)


def test_measurement_branches_sum_to_the_dephased_state() -> None:
    """Summing unnormalized statevector branches reproduces the density-matrix projections."""
    n = 4
    ops = random_circuit(n, 30, rng=5)
    be = get_backend("numpy")
    psi = be.apply_circuit(be.zero_state(n), n, ops)
    rho = dm.density_from_statevector(psi)
    obs = PauliSum("0.5*ZXIY - XXZZ + IIIZ")
    total_dm = np.zeros_like(rho)
    total_value = 0.0
    for outcome in (0, 1):
        branch = be.project(psi.copy(), n, 2, outcome)
        rho_b = dm.project(rho, n, 2, outcome)
        np.testing.assert_allclose(rho_b, dm.density_from_statevector(branch), atol=1e-12)
        assert dm.trace(rho_b) == pytest.approx(be.norm_squared(branch))
        total_dm += rho_b
        total_value += be.expval_pauli_sum(branch, n, obs)
    assert dm.expval(total_dm, n, obs) == pytest.approx(total_value, abs=1e-12)
    # and reset = sum of the two reset branches
    reset_dm = dm.reset(rho, n, 2)
    branches = [be.reset_branch(psi.copy(), n, 2, b) for b in (0, 1)]
    np.testing.assert_allclose(
        reset_dm, sum(dm.density_from_statevector(b) for b in branches), atol=1e-12)


def test_reset_matches_qiskit() -> None:
    n = 3
    ops = random_circuit(n, 25, rng=2)
    rho = _apply_ops(dm.zero_density(n), n, ops)
    ours = dm.reset(rho, n, 1)
    theirs = DensityMatrix(rho).reset([1]).data
    np.testing.assert_allclose(ours, theirs, atol=1e-12)
    assert dm.trace(ours) == pytest.approx(1.0)


def test_expval_on_wire_subset_and_errors() -> None:
    rho = dm.apply_gate(dm.zero_density(3), 3, "x", [2])
    assert dm.expval(rho, 3, "Z", [2]) == pytest.approx(-1.0)
    assert dm.expval(rho, 3, "ZZ", [0, 2]) == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="1 qubits but 2 wires"):
        dm.expval(rho, 3, "Z", [0, 1])
    with pytest.raises(ValueError, match="handles 0..10 qubits"):
        dm.zero_density(11)
    with pytest.raises(ValueError, match=r"expected a \(8, 8\) density matrix"):
        dm.probs(np.eye(4), 3)
    with pytest.raises(ValueError, match=r"acts on 2 wire\(s\), got 1"):
        dm.apply_gate(rho, 3, "cx", [0])
    with pytest.raises(ValueError, match="repeated wires"):
        dm.apply_gate(rho, 3, "cx", [1, 1])
    with pytest.raises(ValueError, match="cannot act on 1 wire"):
        dm.apply_gate(rho, 3, np.eye(4), [0])
    with pytest.raises(ValueError, match="outcome must be 0 or 1"):
        dm.project(rho, 3, 0, 3)


def test_docstring_examples() -> None:
    result = doctest.testmod(dm)
    assert result.attempted > 0 and result.failed == 0
