"""Importing Qiskit circuits: library ansatzes, parameter expressions, dynamic circuits, checked
against Qiskit's Statevector, qiskit_algorithms' gradients, Aer's sampling and closed forms."""

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError

qiskit = pytest.importorskip("qiskit")
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister  # noqa: E402
from qiskit.circuit import Parameter, ParameterVector  # noqa: E402
from qiskit.circuit.classical import expr  # noqa: E402
from qiskit.circuit.library import QAOAAnsatz, efficient_su2, real_amplitudes  # noqa: E402
from qiskit.quantum_info import SparsePauliOp, Statevector  # noqa: E402


def _library_cases():
    maxcut = SparsePauliOp.from_list([("ZZI", 1.0), ("IZZ", 1.0), ("ZIZ", 0.5)])
    return [
        ("EfficientSU2", efficient_su2(4, reps=2),
         SparsePauliOp.from_list([("ZZII", 0.7), ("XIYZ", -0.4)])),
        ("RealAmplitudes", real_amplitudes(3, reps=2),
         SparsePauliOp.from_list([("ZZI", 1.0), ("IXX", 0.5)])),
        ("QAOA", QAOAAnsatz(maxcut, reps=2), maxcut),
    ]


@pytest.mark.parametrize("name,circuit,observable", _library_cases(),
                         ids=[c[0] for c in _library_cases()])
def test_library_circuits_values_and_gradients(name, circuit, observable):
    program = qm.from_qiskit(circuit, observable)
    x = np.random.default_rng(len(name)).uniform(-1.5, 1.5, circuit.num_parameters)
    expected = Statevector(circuit.assign_parameters(x)).expectation_value(observable).real
    assert float(program(x)) == pytest.approx(expected, abs=1e-12)
    adjoint = qdiff.grad(program)(x)
    shift = qdiff.grad(program, method="parameter-shift")(x)
    assert np.allclose(adjoint, shift, atol=1e-10)
    algorithms = pytest.importorskip("qiskit_algorithms.gradients")
    from qiskit.primitives import StatevectorEstimator

    reference = algorithms.ParamShiftEstimatorGradient(StatevectorEstimator()).run(
        [circuit], [observable], [x]).result().gradients[0]
    assert np.allclose(adjoint, reference, atol=1e-8)


def test_parameter_expressions_are_chain_ruled():
    a, b = Parameter("a"), Parameter("b")
    v = ParameterVector("v", 2)
    qc = QuantumCircuit(2)
    qc.rx(a.sin() * b + a ** 2, 0)
    qc.ry((b.exp() - a) / 3, 1)
    qc.crz(2 - a * b + v[0], 0, 1)
    qc.u(a, b, a.cos() * v[1], 1)
    qc.rzz(abs(b) + (a + 1).log() - v[0].arctan(), 0, 1)
    qc.h(0)
    observable = SparsePauliOp.from_list([("XY", 1.0), ("ZI", 0.3)])
    program = qm.from_qiskit(qc, observable)
    assert [p.name for p in qc.parameters] == ["a", "b", "v[0]", "v[1]"]
    x = np.array([0.3, -0.7, 0.2, 1.1])
    expected = Statevector(qc.assign_parameters(x)).expectation_value(observable).real
    assert float(program(x)) == pytest.approx(expected, abs=1e-12)
    h = 1e-6
    differences = [(float(program(x + h * e)) - float(program(x - h * e))) / (2 * h)
                   for e in np.eye(4)]
    assert np.allclose(qdiff.grad(program)(x), differences, atol=1e-7)
    assert np.allclose(qdiff.grad(program, method="parameter-shift")(x), differences,
                       atol=1e-7)


def _repeat_until_success(theta):
    """Prepare the target with ry(θ) on an ancilla-controlled rotation until the ancilla
    reads 1; then measure the target."""
    q, c = QuantumRegister(2, "q"), ClassicalRegister(2, "c")
    qc = QuantumCircuit(q, c)
    qc.h(0)
    qc.ry(theta, 1)
    qc.cry(theta / 2, 1, 0)
    qc.measure(1, 0)
    with qc.while_loop((c[0], 0)):
        qc.reset(0)
        qc.reset(1)
        qc.h(0)
        qc.ry(theta, 1)
        qc.cry(theta / 2, 1, 0)
        qc.measure(1, 0)
    qc.measure(0, 1)
    return qc


def test_dynamic_while_loop_matches_the_closed_form_and_differentiates():
    theta = Parameter("θ")
    qc = _repeat_until_success(theta)
    program = qm.from_qiskit(qc)
    t = 0.8
    dist = np.asarray(program(np.array([t])))
    # success leaves the target in ry(θ/2) H|0>: P(target = 1) = (1 + sin(θ/2)) / 2
    p1 = (1 + np.sin(t / 2)) / 2
    assert dist == pytest.approx([0, 1 - p1, 0, p1], abs=1e-9)
    jac = qdiff.jacobian(program)(np.array([t]))
    assert jac[3, 0] == pytest.approx(np.cos(t / 2) / 4, abs=1e-8)
    # the same loop with Z of the target as the output: -sin(θ/2)
    unmeasured = qc.copy_empty_like()
    for instruction in qc.data[:-1]:
        unmeasured.append(instruction)
    z_target = qm.from_qiskit(unmeasured, SparsePauliOp("IZ"))
    assert float(z_target(np.array([t]))) == pytest.approx(-np.sin(t / 2), abs=1e-9)
    g = qdiff.grad(z_target)(np.array([t]))
    assert float(g[0]) == pytest.approx(-np.cos(t / 2) / 2, abs=1e-9)
    # parameter shift: one shifted program per iteration; at θ = 2 the loop exits with
    # probability sin²(1) = 0.71 per iteration, a short series
    g = qdiff.grad(z_target, method="parameter-shift", tol=1e-9)(np.array([2.0]))
    assert float(g[0]) == pytest.approx(-np.cos(1.0) / 2, abs=1e-7)


def test_dynamic_circuit_distribution_matches_aer_sampling():
    aer = pytest.importorskip("qiskit_aer")
    qc = _repeat_until_success(0.8)
    exact = np.asarray(qm.from_qiskit(qc)())
    shots = 4000
    counts = aer.AerSimulator(seed_simulator=7).run(qc, shots=shots).result().get_counts()
    observed = np.zeros(4)
    for key, n in counts.items():
        observed[int(key.replace(" ", ""), 2)] = n / shots
    stderr = np.sqrt(np.maximum(exact * (1 - exact), 1e-12) / shots)
    assert np.all(np.abs(observed - exact) <= 4.5 * stderr + 1e-12)


def test_if_else_for_loop_and_switch_case():
    theta = Parameter("θ")
    k = Parameter("k")
    q, c = QuantumRegister(3, "q"), ClassicalRegister(2, "c")
    qc = QuantumCircuit(q, c)
    qc.ry(theta, 0)
    qc.measure(0, 0)
    with qc.if_test((c[0], 1)) as otherwise:
        qc.x(1)
    with otherwise:
        qc.ry(2 * theta, 1)
    with qc.for_loop(range(1, 4), k):
        qc.rz(k * theta, 2)
        qc.ry(theta / k, 2)
    qc.measure(1, 1)
    with qc.switch(c) as case:
        with case(0):
            qc.x(2)
        with case(1, 2):
            qc.h(2)
        with case(case.DEFAULT):
            qc.rx(theta, 2)
    with qc.if_test(expr.logic_and(expr.equal(c[0], True), expr.lift(c[1]))):
        qc.z(2)
    observable = SparsePauliOp("ZII")  # Z on qubit 2
    program = qm.from_qiskit(qc, observable)
    t = 0.6

    def reference(t):  # the branches written out, each simulated by Statevector
        total = 0.0
        p0 = np.sin(t / 2) ** 2  # P(c0 = 1)
        for c0, w0 in ((0, 1 - p0), (1, p0)):
            branch = QuantumCircuit(3)
            if c0:
                branch.x(0)
                branch.x(1)
            else:
                branch.ry(2 * t, 1)
            for kk in (1, 2, 3):
                branch.rz(kk * t, 2)
                branch.ry(t / kk, 2)
            probs1 = Statevector(branch).probabilities([1])
            for c1, w1 in ((0, probs1[0]), (1, probs1[1])):
                tail = QuantumCircuit(3)
                tail.append(branch, [0, 1, 2])
                value = c0 + 2 * c1
                if value == 0:
                    tail.x(2)
                elif value in (1, 2):
                    tail.h(2)
                else:
                    tail.rx(t, 2)
                if c0 and c1:
                    tail.z(2)
                state = Statevector(tail)
                z2 = state.expectation_value(SparsePauliOp("ZII")).real
                total += w0 * w1 * z2 if w1 > 1e-15 else 0.0
        return total

    assert float(program(np.array([t]))) == pytest.approx(reference(t), abs=1e-10)
    h = 1e-5
    fd = (reference(t + h) - reference(t - h)) / (2 * h)
    assert float(qdiff.grad(program)(np.array([t]))[0]) == pytest.approx(fd, abs=1e-6)
    assert float(qdiff.grad(program, method="parameter-shift")(np.array([t]))[0]) == \
        pytest.approx(fd, abs=1e-6)


def test_gates_without_a_table_twin_go_through_definitions_and_matrices():
    from qiskit.circuit.library import UnitaryGate

    a = Parameter("a")
    qc = QuantumCircuit(3)
    qc.h([0, 1, 2])
    qc.ccx(0, 1, 2)
    qc.cswap(2, 0, 1)
    qc.cu(a, 0.2, a / 2, 0.1, 0, 1)  # a controlled U with a phase: its definition
    qc.append(UnitaryGate(np.array([[0, 1j], [1j, 0]])), [2])
    qc.cx(1, 2, ctrl_state=0)  # an open control: its definition
    qc.rccx(0, 1, 2)
    qc.r(a, 0.3, 1)
    observable = SparsePauliOp.from_list([("XZY", 1.0), ("ZZZ", 0.5)])
    program = qm.from_qiskit(qc, observable)
    for value in (0.3, -1.2):
        expected = Statevector(qc.assign_parameters([value])).expectation_value(observable).real
        assert float(program(np.array([value]))) == pytest.approx(expected, abs=1e-12)


def test_unsupported_instructions_and_wrong_parameters_are_clear_errors():
    from qiskit.circuit import Instruction

    qc = QuantumCircuit(1)
    qc.h(0)
    qc.append(Instruction("mystery", 1, 0, []), [0])
    with pytest.raises(QdiffError, match=r"'mystery' at circuit.data\[1\]"):
        qm.from_qiskit(qc)
    loop = QuantumCircuit(1, 1)
    with loop.while_loop((loop.clbits[0], 0)):
        loop.measure(0, 0)
        loop.break_loop()
    with pytest.raises(QdiffError, match=r"'break_loop' at circuit.data\[0\].body.data\[1\]"):
        qm.from_qiskit(loop)
    a = Parameter("a")
    qc = QuantumCircuit(1)
    qc.rx(a, 0)
    program = qm.from_qiskit(qc, SparsePauliOp("Z"))
    with pytest.raises(QdiffError):
        program(np.array([0.1, 0.2]))
    # the parameters are unbound: calling without their values says so, on every path
    for call in (program, lambda: qm.run(program), lambda: qm.gradient(program),
                 lambda: qdiff.grad(program)()):
        with pytest.raises(QdiffError, match=r"takes 1 argument\(s\) .*\(f64\[1\]\); got 0"):
            call()
    with pytest.raises(QdiffError, match="observable 0 acts on 2 qubits"):
        qm.from_qiskit(qc, SparsePauliOp("ZZ"))


def test_imported_dynamic_circuits_export_back_with_their_loop():
    theta = Parameter("θ")
    qc = _repeat_until_success(theta)
    unmeasured = qc.copy_empty_like()
    for instruction in qc.data[:-1]:
        unmeasured.append(instruction)
    program = qm.from_qiskit(unmeasured, SparsePauliOp("IZ"))
    export = qm.to_qiskit(program)
    # the clbit the loop reads is measured again in the body: a while_loop, as in Qiskit
    assert "while_loop" in [i.operation.name for i in export.circuit.data]
    back = qm.from_qiskit(export.circuit, export.observables[0])
    x = np.array([0.8])
    assert float(back(export.parameter_values(x))) == pytest.approx(float(program(x)),
                                                                    abs=1e-12)


def test_circuit_imported_in_complex64_runs_in_single_precision():
    # dtype=complex64: the register, every gate and the state in single precision, the
    # probabilities within single-precision rounding of Qiskit's Statevector
    from qiskit.circuit.random import random_circuit

    qc = random_circuit(10, 6, max_operands=3, seed=11)
    program = qm.from_qiskit(qc, dtype=np.complex64)
    assert "dtype='complex64'" in str(program)
    probs = np.asarray(qm.run(program, backend="numba").values)
    expected = Statevector(qc).probabilities()
    assert np.max(np.abs(probs - expected)) < 1e-5
    assert np.max(np.abs(probs - expected)) > 0  # single precision: not exactly double's
    assert "complex64" not in str(qm.from_qiskit(qc))
