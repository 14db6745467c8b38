"""Hybrid programs compiled around their quantum parts (`qdiff.quantum.compiled`).

Compiled values and gradients are checked against the simulator's (1e-12), values against
Qiskit's `Statevector` (a circuit built here from the same angles), gradients against
central differences; programs outside the compiled subset run on the simulator with the
simulator's numbers, and say why.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.quantum_info import SparsePauliOp, Statevector

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.compiler import NotCompilableError
from qdiff.compiler.claimed import compiled_version
from qdiff.ir.errors import QdiffError
from qdiff.quantum.compiled import compile_reason
from qdiff.quantum.compiled.block import differentiable_form
from tests.oracles import central_difference

N = 3
OBSERVABLE = [(0.5, "ZZI"), (-0.3, "XIY"), (0.8, "IYX")]


def _angles(w):
    """Classical pre-processing: a loop feeds the angles (the same code in NumPy below)."""
    s = qdiff.fori_loop(0, 3, lambda i, s: qnp.tanh(s * 0.7 + w), qnp.zeros(4))
    return s * 2.0 + w


def _numpy_angles(w):
    s = np.zeros(4)
    for _ in range(3):
        s = np.tanh(s * 0.7 + w)
    return s * 2.0 + w


def _circuit(a):
    q = qm.qubits(N)
    qm.h(q[0]); qm.ry(a[0], q[1]); qm.rx(a[1], q[2])
    qm.cx(q[0], q[1]); qm.crx(a[2], q[1], q[2]); qm.rzz(a[3], q[0], q[2])
    qm.phase(a[0] * a[1], q[1]); qm.s(q[2]); qm.cry(a[1], q[2], q[0]); qm.swap(q[0], q[2])
    qm.rz(a[2], q[0]); qm.ryy(a[3], q[1], q[2])
    return q


@qdiff.program
def readouts(w):
    q = _circuit(_angles(w))
    return qm.expval(OBSERVABLE, q), qm.probs([q[0], q[2]])


@qdiff.program
def loss(w):
    energy, p = readouts(w)
    return (energy - 0.2) ** 2 + qnp.sum(p * qnp.array([0.1, -0.4, 0.3, 0.9]))


def _qiskit_readouts(w):
    a = _numpy_angles(w)
    qc = QuantumCircuit(N)
    qc.h(0); qc.ry(a[0], 1); qc.rx(a[1], 2)
    qc.cx(0, 1); qc.crx(a[2], 1, 2); qc.rzz(a[3], 0, 2)
    qc.p(a[0] * a[1], 1); qc.s(2); qc.cry(a[1], 2, 0); qc.swap(0, 2)
    qc.rz(a[2], 0); qc.ryy(a[3], 1, 2)
    state = Statevector(qc)
    # qdiff's labels put wire k at character k: spell each term out by wire for Qiskit
    terms = [(label.replace("I", ""), [k for k, c in enumerate(label) if c != "I"], c)
             for c, label in OBSERVABLE]
    energy = state.expectation_value(SparsePauliOp.from_sparse_list(terms, N)).real
    return energy, state.probabilities([0, 2])


W = np.array([0.3, -0.7, 1.1, 0.2])


def test_compiled_readouts_equal_the_simulator_and_qiskit():
    compiled = qdiff.jit(readouts)
    energy, p = compiled(W)
    sim_energy, sim_p = qm.run(readouts, W).values
    assert compiled_version(readouts.trace(W)) is compiled.last  # compiled, not fallen back
    assert float(energy) == pytest.approx(float(sim_energy), abs=1e-12)
    np.testing.assert_allclose(p, sim_p, atol=1e-12)
    q_energy, q_p = _qiskit_readouts(W)
    assert float(energy) == pytest.approx(q_energy, abs=1e-12)
    np.testing.assert_allclose(p, q_p, atol=1e-12)


def test_compiled_gradient_equals_the_simulator_and_central_differences():
    value_and_grad = qdiff.value_and_grad(loss, jit=True)
    value, grad = value_and_grad(W)
    assert float(value) == pytest.approx(float(qm.run(loss, W).values), abs=1e-12)
    reference = qm.gradient(loss, W).grad
    np.testing.assert_allclose(grad, reference, atol=1e-12)
    np.testing.assert_allclose(qdiff.grad(loss, jit=True)(W), reference, atol=1e-12)
    energy_of = lambda v: _qiskit_readouts(v)[0]  # noqa: E731
    p_of = lambda v: _qiskit_readouts(v)[1]  # noqa: E731
    fd = central_difference(lambda v: (energy_of(v) - 0.2) ** 2
                            + p_of(v) @ np.array([0.1, -0.4, 0.3, 0.9]), W)
    np.testing.assert_allclose(grad, fd, atol=1e-7)


def test_plain_calls_take_the_compiled_path_once_compiled():
    w = np.array([0.1, 0.5, -0.4, 0.9])
    before_value, before_grad = float(loss(w)), qdiff.grad(loss)(w)
    qdiff.jit(loss)(w)
    qdiff.grad(loss, jit=True)(w)
    program = loss.trace(w)
    assert compiled_version(program) is not None
    assert compiled_version(program, ("grad", 0)) is not None
    assert float(loss(w)) == pytest.approx(before_value, abs=1e-12)
    np.testing.assert_allclose(qdiff.grad(loss)(w), before_grad, atol=1e-12)


def test_every_gate_of_the_table_applies_as_on_the_simulator():
    fixed = ["h", "x", "y", "z", "s", "sdg", "t", "tdg", "sx", "sxdg"]
    one = ["rx", "ry", "rz", "phase"]
    two_fixed = ["cx", "cy", "cz", "ch", "swap", "iswap"]
    two = ["crx", "cry", "crz", "cphase", "rxx", "ryy", "rzz", "rzx"]

    def every_gate(t):
        q = qm.qubits(3)
        for k, name in enumerate(fixed + one):
            getattr(qm, name)(*([t[k % 4] * (k + 1)] if name in one else []), q[k % 3])
        for k, name in enumerate(two_fixed + two):
            a, b = ((0, 1), (1, 2), (2, 0), (1, 0), (2, 1), (0, 2))[k % 6]
            wires = (q[a], q[b])
            getattr(qm, name)(*([t[k % 4] - k] if name in two else []), *wires)
        qm.mcx([q[0], q[2]], q[1]); qm.pauli_rot(t[1], "XYZ", q)
        return qm.state(q), qm.expval("0.4*XYZ + ZIZ - 0.7*IXY", q)

    t = np.array([0.31, -1.2, 2.5, 0.77])
    state, energy = qdiff.jit(every_gate)(t)
    ref_state, ref_energy = qm.run(every_gate, t).values
    np.testing.assert_allclose(state, ref_state, atol=1e-12)
    assert float(energy) == pytest.approx(float(ref_energy), abs=1e-12)


def test_programs_outside_the_compiled_subset_compile_around_the_simulator(caplog):
    def measured(t):
        q = qm.qubits(2)
        qm.ry(t, q[0]); qm.cx(q[0], q[1])
        bit = qm.measure(q[0], reset=True)
        qm.rx(t * bit, q[1])
        return qm.expval("ZZ", q)

    def wide(t):
        q = qm.qubits(13)
        qm.ry(t, q[12])
        return qm.expval("Z", [q[12]])

    for f, why in ((measured, "measure"), (wide, "13 qubits")):
        with caplog.at_level(logging.DEBUG, logger="qdiff.compiler"):
            compiled = qdiff.jit(f)
            assert float(compiled(0.4)) == pytest.approx(float(qm.run(f, 0.4).values),
                                                         abs=1e-12)
            assert float(qdiff.grad(f, jit=True)(0.4)) == pytest.approx(
                float(qm.gradient(f, 0.4).grad), abs=1e-12)
        assert why in caplog.text and "compiled around its quantum part" in caplog.text
        assert any(line.startswith("simulator:") for line in compiled.plan)


def test_gates_in_counted_loops_compile_and_differentiate():
    def layered(t):
        q = qm.qubits(2)
        qdiff.fori_loop(0, 3, lambda i: (qm.ry(t * (i + 1), q[0]), qm.cx(q[0], q[1]),
                                         qm.rz(t * t, q[1])))
        return qm.expval("ZZ + 0.5*XY", q)

    assert float(qdiff.jit(layered)(0.3)) == pytest.approx(float(qm.run(layered, 0.3).values),
                                                           abs=1e-12)
    g = qdiff.grad(layered, jit=True)(0.3)
    assert float(g) == pytest.approx(float(qm.gradient(layered, 0.3).grad), abs=1e-12)
    fd = central_difference(lambda v: float(qm.run(layered, float(v[0])).values),
                            np.array([0.3]))
    assert float(g) == pytest.approx(fd[0], abs=1e-7)


def test_gates_in_a_traced_loop_compile_forward_and_differentiate_on_the_simulator():
    def layered(t, n):
        q = qm.qubits(2)
        qdiff.fori_loop(0, n, lambda i: (qm.ry(t, q[0]), qm.cx(q[0], q[1])))
        return qm.expval("ZZ", q)

    program = qdiff.trace(layered, 0.3, 3)
    assert compile_reason(program) is None
    assert "loops whose bounds are traced" in differentiable_form(program)
    assert float(qdiff.jit(layered)(0.3, 3)) == pytest.approx(
        float(qm.run(layered, 0.3, 3).values), abs=1e-12)
    g = qdiff.jit(qdiff.grad(layered), fallback="interpret")(0.3, 3)
    assert float(g) == pytest.approx(float(qm.gradient(layered, 0.3, 3).grad), abs=1e-12)


def test_a_non_finite_angle_is_an_error_naming_the_gate():
    def bad(t):
        q = qm.qubits(1)
        qm.ry(qnp.log(t), q[0])
        return qm.expval("Z", q)

    with pytest.raises(QdiffError, match="gate ry on wires .0,.: angle is not finite"):
        qdiff.jit(bad)(-1.0)


def test_a_readout_feeding_a_gate_has_no_differentiable_form():
    def feedback(t):
        q = qm.qubits(1)
        qm.ry(t, q[0])
        qm.rx(qm.expval("Z", q) * 2.0, q[0])
        return qm.expval("Z", q)

    assert "a readout feeds" in differentiable_form(qdiff.trace(feedback, 0.3))
    value = qdiff.jit(feedback)(0.3)  # forward it compiles
    assert float(value) == pytest.approx(float(qm.run(feedback, 0.3).values), abs=1e-12)


def test_derivative_settings_of_the_simulator_are_not_compiled_away():
    def turn(t):
        q = qm.qubits(1)
        qm.ry(t, q[0])
        return qm.expval("Z", q)

    assert float(qdiff.grad(turn, jit=True, method="adjoint")(0.3)) == pytest.approx(
        -np.sin(0.3), abs=1e-12)
    with pytest.raises(NotCompilableError, match="method and options are the simulator's"):
        qdiff.grad(turn, jit=True, method="parameter-shift")(0.3)
    shifted = qdiff.jit(qdiff.grad(turn, method="parameter-shift"), fallback="interpret")
    assert float(shifted(0.3)) == pytest.approx(-np.sin(0.3), abs=1e-12)


def test_hessian_with_jit_of_a_quantum_program_names_jets_instead_of_tracing():
    """A Hessian (or grad of grad) of a quantum program is evaluated on jets by the
    simulator: with ``jit=True`` the error says so (it used to say the derivative "cannot
    be traced"), and ``fallback="interpret"`` gives the simulator's exact numbers."""
    def energy(t):
        q = qm.qubits(2)
        qm.ry(t[0], q[0])
        qm.ry(t[1], q[1])
        return qm.expval("ZZ", q)

    t = np.array([0.3, 0.7])
    # <ZZ> = cos(t0) cos(t1)
    exact = np.array([[-np.cos(0.3) * np.cos(0.7), np.sin(0.3) * np.sin(0.7)],
                      [np.sin(0.3) * np.sin(0.7), -np.cos(0.3) * np.cos(0.7)]])
    second = qdiff.grad(qdiff.grad(lambda a: energy(qnp.stack([a, 0.7]))))
    for nested, argument in ((qdiff.hessian(energy, jit=True), t), (qdiff.jit(second), 0.3)):
        with pytest.raises(NotCompilableError, match="forward mode on jets"):
            nested(argument)
    fallback = qdiff.jit(qdiff.hessian(energy), fallback="interpret")
    np.testing.assert_allclose(fallback(t), exact, atol=1e-12)


def test_compiled_gradient_runs_the_circuit_forward_once():
    """The backward sweep starts from the primal block's last state (no second forward
    run: half the gate calls to compile and to run); a Jacobian's second row, which has
    no state left to take, runs its own."""
    source = qdiff.grad(loss, jit=True).compiled(W).source
    assert source.count(f"= np.zeros({2 ** N}, np.complex128)") == 1
    assert float(qdiff.grad(loss, jit=True)(W)[0]) == pytest.approx(
        float(qm.gradient(loss, W).grad[0]), rel=1e-12, abs=1e-12)

    def two(w):
        q = _circuit(w)
        return qnp.stack([qm.expval("ZZI", q), qm.expval("IXY", q)])

    jacobian = qdiff.jacobian(two, jit=True)(W)
    np.testing.assert_allclose(jacobian, qdiff.jacobian(two)(W), rtol=1e-12, atol=1e-12)
