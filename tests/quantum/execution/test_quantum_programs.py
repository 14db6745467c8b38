"""Quantum programs in the IR: gates against Qiskit, loops on measurements against closed
forms (exact mode) and statistically (sample mode), postselection, errors."""

import numpy as np
import pytest
from quantum_programs_lib import coin_loop, postselected, until_one, von_neumann

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm

THETAS = [0.7, 1.3, 2.2]


@pytest.mark.parametrize("theta", THETAS)
def test_exact_loops_match_closed_forms(theta):
    result = qm.run(coin_loop, theta)
    assert result.values == pytest.approx(np.tan(theta / 2) ** 2, rel=1e-9, abs=1e-9)
    assert result.missing_mass < 1e-9
    assert qm.run(until_one, theta).values == pytest.approx(1 / np.sin(theta / 2) ** 2,
                                                             rel=1e-8)
    fair = qm.run(von_neumann, theta)
    # exactly 1/2, up to the reported probability mass pruned below the tolerance
    assert abs(fair.values - 0.5) <= fair.missing_mass + 1e-14
    assert fair.missing_mass < 1e-9


def test_loops_print_as_while_on_a_measurement():
    text = str(qdiff.trace(coin_loop, 0.5))
    assert "= while" in text and "measure[wire=0" in text and "bit_to_int" in text


@pytest.mark.parametrize("theta", [0.9, 1.7])
def test_sample_mode_is_statistically_right(theta):
    exact = np.tan(theta / 2) ** 2
    small = qm.run(coin_loop, theta, mode="sample", shots=400, seed=3)
    large = qm.run(coin_loop, theta, mode="sample", shots=3200, seed=4)
    for result in (small, large):
        assert abs(result.values - exact) < 4 * result.stderr
    assert large.stderr < small.stderr * 0.5  # 1/sqrt(shots): 8x shots, ~2.8x smaller
    vn = qm.run(von_neumann, theta, mode="sample", shots=1000, seed=5)
    assert abs(vn.values - 0.5) < 4 * vn.stderr


def test_bounded_loop_aborts_and_reports_the_mass():
    theta = 1.0
    p = np.sin(theta / 2) ** 2
    result = qm.run(lambda t: until_one(t, max_iter=2), theta)
    # exits after 1 iteration w.p. p, after 2 w.p. (1-p)p; the rest aborts
    assert result.values == pytest.approx(p + 2 * (1 - p) * p)
    assert result.aborted_mass == pytest.approx((1 - p) ** 2)


def test_loop_that_cannot_terminate_is_reported():
    def stuck():
        q = qm.qubits(1)
        qm.x(q[0])
        qdiff.while_loop(lambda: qm.measure(q[0]) == 1, lambda: qm.z(q[0]))
        return qm.expval("Z", q)

    with pytest.raises(qm.NonTerminatingLoopError, match="exit probability stayed zero"):
        qm.run(stuck)


def test_postselection_conditions_the_value():
    x = 0.512
    result = qm.run(postselected, x)
    # P(q1=1 | q0=0) = sin²(x/2), P(q1=1 | q0=1) = cos²(x/2), each times 1/2
    p0, p1 = np.sin(x / 2) ** 2 / 2, np.cos(x / 2) ** 2 / 2
    assert result.postselection_probability == pytest.approx(p0 + p1)
    assert result.values == pytest.approx((p0 - p1) / (p0 + p1))
    assert result.values == pytest.approx(-np.cos(x))


def test_classical_control_on_a_measured_bit():
    def teleport_like(theta):
        q = qm.qubits(2)
        qm.ry(theta, q[0])
        bit = qm.measure(q[0])
        qdiff.cond(bit, lambda: qm.x(q[1]), lambda: None)  # copy the outcome to q[1]
        return qm.expval("IZ", q), qnp.asarray(bit)

    theta = 1.1
    z1, ones = qdiff.trace(teleport_like, theta)(theta)
    assert float(ones) == pytest.approx(np.sin(theta / 2) ** 2)
    assert float(z1) == pytest.approx(np.cos(theta))


def test_counted_loop_carries_the_state():
    def trotter(t):
        q = qm.qubits(2)
        qm.h(q[0])
        qdiff.fori_loop(0, 10, lambda i: (qm.rzz(t / 10, q[0], q[1]), qm.rx(t / 10, q[1])))
        return qm.expval("XZ", q)

    p = qdiff.trace(trotter, 0.3)
    assert str(p).count("= gate[name='rzz'") == 1  # the layer is not unrolled
    from qiskit import QuantumCircuit
    from qiskit.quantum_info import SparsePauliOp, Statevector

    qc = QuantumCircuit(2)
    qc.h(0)
    for _ in range(10):
        qc.rzz(0.3 / 10, 0, 1)
        qc.rx(0.3 / 10, 1)
    want = Statevector(qc).expectation_value(SparsePauliOp("ZX")).real  # qiskit: right = wire 0
    assert float(p(0.3)) == pytest.approx(want, abs=1e-12)


def test_gates_through_the_ir_match_qiskit_statevector():
    from qiskit import QuantumCircuit
    from qiskit.quantum_info import Statevector

    rng = np.random.default_rng(7)
    angles = rng.uniform(-np.pi, np.pi, size=12)

    def circuit(a):
        q = qm.qubits(3)
        qm.h(q[0]); qm.rx(a[0], q[1]); qm.ry(a[1], q[2]); qm.cx(q[0], q[2])
        qm.u(a[2], a[3], a[4], q[1]); qm.crz(a[5], q[1], q[0]); qm.rzz(a[6], q[0], q[2])
        qm.cphase(a[7], q[2], q[1]); qm.swap(q[0], q[1]); qm.rzx(a[8], q[1], q[2])
        qm.pauli_rot(a[9], "XYZ", [q[0], q[1], q[2]]); qm.mcx([q[0], q[1]], q[2])
        qm.iswap(q[2], q[0]); qm.sx(q[1]); qm.cry(a[10], q[0], q[1]); qm.phase(a[11], q[2])
        return qm.state(q)

    qc = QuantumCircuit(3)
    a = angles
    qc.h(0); qc.rx(a[0], 1); qc.ry(a[1], 2); qc.cx(0, 2)
    qc.u(a[2], a[3], a[4], 1); qc.crz(a[5], 1, 0); qc.rzz(a[6], 0, 2)
    qc.cp(a[7], 2, 1); qc.swap(0, 1); qc.rzx(a[8], 1, 2)
    from qiskit.circuit.library import PauliEvolutionGate
    from qiskit.quantum_info import SparsePauliOp

    qc.append(PauliEvolutionGate(SparsePauliOp("ZYX"), time=a[9] / 2), [0, 1, 2])
    qc.ccx(0, 1, 2); qc.iswap(2, 0); qc.sx(1); qc.cry(a[10], 0, 1); qc.p(a[11], 2)
    got = qdiff.trace(circuit, angles)(angles)
    np.testing.assert_allclose(got, Statevector(qc).data, atol=1e-10)


def test_quantum_errors_are_clear():
    with pytest.raises(qdiff.QdiffError, match="top level"):
        qdiff.trace(lambda: qdiff.fori_loop(0, 2, lambda i: qm.qubits(1)))
    with pytest.raises(qdiff.TypeCheckError, match="acts on 2 wire"):
        qdiff.trace(lambda: qm.apply("cx", (), [qm.qubits(1)[0]]))
    with pytest.raises(qdiff.QdiffError, match="appears twice"):
        def twice():
            q = qm.qubits(2)
            qm.cx(q[0], q[0])
        qdiff.trace(twice)
    with pytest.raises(qdiff.TypeCheckError, match="Hermitian"):
        qdiff.trace(lambda: qm.expval("1j*Z", qm.qubits(1)))


def test_register_too_big_for_memory_is_refused():
    def huge():
        q = qm.qubits(45)
        return qm.expval("Z", q[0])

    with pytest.raises(MemoryError, match="45-qubit complex128 statevector needs"):
        qm.run(huge)
