"""``qm.sample(wires, shots)`` inside programs: shapes and dtypes, Born frequencies against
Qiskit's statevector (within 4 standard errors, fixed seeds), the mixture over measurement
branches in exact, density and sample modes, reproducibility, and input errors."""

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.quantum_info import Statevector

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.ir.interpreter import evaluate


def frequencies(rows: np.ndarray) -> np.ndarray:
    """Outcome frequencies, column j of a row being bit j of the outcome index."""
    index = (rows << np.arange(rows.shape[1])).sum(axis=1)
    return np.bincount(index, minlength=2 ** rows.shape[1]) / rows.shape[0]


def assert_born(rows: np.ndarray, p: np.ndarray) -> None:
    shots = rows.shape[0]
    f = frequencies(rows)
    stderr = np.sqrt(p * (1 - p) / shots)
    assert np.all(np.abs(f - p) <= 4 * stderr + 1e-12), (f, p)
    assert np.all(f[p < 1e-12] == 0)


ANGLES = np.array([0.4, 1.9, -0.7, 2.6, 1.1])


def circuit(a, wires=None, shots=3000):
    q = qm.qubits(3)
    qm.ry(a[0], q[0]); qm.rx(a[1], q[1]); qm.cx(q[0], q[2]); qm.crz(a[2], q[2], q[1])
    qm.u(a[3], a[4], a[0], q[2]); qm.h(q[1]); qm.rzz(a[1], q[0], q[1])
    return qm.sample(None if wires is None else [q[w] for w in wires], shots=shots)


def qiskit_probs(a, wires):
    qc = QuantumCircuit(3)
    qc.ry(a[0], 0); qc.rx(a[1], 1); qc.cx(0, 2); qc.crz(a[2], 2, 1)
    qc.u(a[3], a[4], a[0], 2); qc.h(1); qc.rzz(a[1], 0, 1)
    return Statevector(qc).probabilities(qargs=wires)  # bit j of the index is wires[j]


@pytest.mark.parametrize("wires", [None, [2, 0], [1]])
def test_samples_follow_born_probabilities(wires):
    result = qm.run(lambda a: circuit(a, wires), ANGLES, mode="exact", seed=11)
    rows = result.values
    k = 3 if wires is None else len(wires)
    assert rows.shape == (3000, k) and rows.dtype == np.int64
    assert set(np.unique(rows)) <= {0, 1}
    assert_born(rows, qiskit_probs(ANGLES, [0, 1, 2] if wires is None else wires))


def test_columns_are_the_wires_in_the_order_given():
    def basis():
        q = qm.qubits(3)
        qm.x(q[0]); qm.x(q[2])
        return qm.sample([q[1], q[2], q[0]], shots=5), qm.sample(shots=2)

    ordered, everything = qm.run(basis, seed=0).values
    assert ordered.tolist() == [[0, 1, 1]] * 5
    assert everything.tolist() == [[1, 0, 1]] * 2
    traced = qdiff.trace(basis)
    assert "sample[wires=(1, 2, 0), shots=5]" in str(traced)
    assert "i64[5,3]" in str(traced)


def test_seed_makes_draws_reproducible():
    first = qm.run(circuit, ANGLES, seed=5).values
    again = qm.run(circuit, ANGLES, seed=5).values
    other = qm.run(circuit, ANGLES, seed=6).values
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_sampling_does_not_disturb_the_state():
    def both(a):
        q = qm.qubits(2)
        qm.ry(a, q[0]); qm.cx(q[0], q[1])
        drawn = qm.sample(q, shots=10)
        return qm.expval("XX", q), drawn

    value, drawn = qm.run(both, 0.8, seed=1).values
    assert value == pytest.approx(np.sin(0.8))  # still entangled: <XX> = sin a
    assert set(map(tuple, drawn.tolist())) <= {(0, 0), (1, 1)}


def branching(theta):
    """q0 is measured (outcome 1 w.p. sin²(θ/2)); the bit is copied to q1 by a cond; q2 gets
    an H only in the outcome-1 branch. Outcome distribution of (q0, q1, q2):
    000 w.p. cos², 110 and 111 w.p. sin²/2 each."""
    q = qm.qubits(3)
    qm.ry(theta, q[0])
    bit = qm.measure(q[0])

    def one():
        qm.x(q[1])
        qm.h(q[2])

    qdiff.cond(bit, one, lambda: None)
    return qm.sample(shots=4000)


def branching_probs(theta):
    p1 = np.sin(theta / 2) ** 2
    p = np.zeros(8)
    p[0] = 1 - p1
    p[0b011] = p[0b111] = p1 / 2  # index bits: q0 is bit 0
    return p


@pytest.mark.parametrize("mode", ["exact", "density"])
def test_exact_and_density_modes_draw_from_the_mixture_of_branches(mode):
    theta = 1.3
    result = qm.run(branching, theta, mode=mode, seed=21)
    assert result.values.shape == (4000, 3)
    assert_born(result.values, branching_probs(theta))


def test_sample_mode_mixes_the_trajectories():
    theta = 1.3
    result = qm.run(branching, theta, mode="sample", shots=300, seed=4)
    assert result.values.shape == (4000, 3) and result.values.dtype == np.int64
    assert_born(result.values, branching_probs(theta))
    assert result.stderr is None  # a sample array has no standard error
    # each trajectory drew from its own branch: q0 and q1 are the same bit in every row
    for drawn in result.trajectories[:50]:
        assert drawn.shape == (4000, 3)
        assert len(set(drawn[:, 0].tolist())) == 1 and np.all(drawn[:, 0] == drawn[:, 1])
    ones = [t[0, 0] for t in result.trajectories]
    p1 = np.sin(theta / 2) ** 2
    assert abs(np.mean(ones) - p1) <= 4 * np.sqrt(p1 * (1 - p1) / len(ones))


def test_values_computed_from_samples_are_averaged_over_branches():
    def mean_of_q2(theta):
        q = qm.qubits(3)
        qm.ry(theta, q[0])
        bit = qm.measure(q[0])
        qdiff.cond(bit, lambda: qm.h(q[2]), lambda: qm.x(q[2]))
        rows = qm.sample([q[2]], shots=2000)
        return qnp.mean(rows[:, 0] * 1.0)

    theta = 2.1
    p1 = np.sin(theta / 2) ** 2
    want = (1 - p1) * 1.0 + p1 * 0.5
    got = qm.run(mean_of_q2, theta, seed=3).values
    # branch 0 draws q2 = 1 exactly; branch 1 averages 2000 fair coins
    assert abs(got - want) <= 4 * p1 * np.sqrt(0.25 / 2000)
    assert got != pytest.approx(want, abs=1e-9)  # it is a random estimate, not an expectation


def test_postselected_samples_are_conditioned():
    def kept():
        q = qm.qubits(2)
        qm.h(q[0]); qm.cx(q[0], q[1]); qm.ry(0.9, q[1])
        qm.postselect(q[1], 1)
        return qm.sample(shots=3000)

    qc = QuantumCircuit(2)
    qc.h(0); qc.cx(0, 1); qc.ry(0.9, 1)
    p = Statevector(qc).probabilities()
    p = np.where([0, 0, 1, 1], p, 0.0)
    for mode in ("exact", "density"):
        assert_born(qm.run(kept, mode=mode, seed=8).values, p / p.sum())


def test_reference_interpreter_draws_too():
    def one():
        q = qm.qubits(2)
        qm.x(q[1])
        return qm.sample(shots=4)

    (rows,) = evaluate(qdiff.trace(one))
    assert rows.dtype == np.int64 and rows.tolist() == [[0, 1]] * 4


def test_sample_errors_are_clear():
    def shots(n):
        def f():
            return qm.sample(qm.qubits(1), shots=n)
        return f

    for bad in (0, -3, 2.5, True):
        with pytest.raises(qdiff.QdiffError, match="shots must be a positive int"):
            qdiff.trace(shots(bad))
    with pytest.raises(qdiff.QdiffError, match="is not a qubit"):
        qdiff.trace(lambda: (qm.qubits(2), qm.sample([0, 1], shots=3)))
    with pytest.raises(qdiff.QdiffError, match="no qubit 2"):
        def out_of_range():
            q = qm.qubits(2)
            return qm.sample([q[2]], shots=3)
        qdiff.trace(out_of_range)
    with pytest.raises(qdiff.QdiffError, match="appears twice"):
        def twice():
            q = qm.qubits(2)
            return qm.sample([q[0], q[0]], shots=3)
        qdiff.trace(twice)
    with pytest.raises(qdiff.QdiffError, match="no qubits"):
        qdiff.trace(lambda: qm.sample(shots=3))
