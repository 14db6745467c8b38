"""Programs and gradients on Qiskit samplers: estimates within a few standard errors of the
exact values, one sampler call per gradient, loops on measurements natively or on the host."""

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError
from qdiff.quantum.qiskit.execution import run_on_sampler

pytest.importorskip("qiskit")
from qiskit.primitives import StatevectorSampler  # noqa: E402


class CountingSampler(StatevectorSampler):
    """The reference sampler, counting its calls."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls = 0

    def run(self, pubs, *, shots=None):
        self.calls += 1
        return super().run(pubs, shots=shots)


def _static(w):
    q = qm.qubits(3)
    for i in range(3):
        qm.ry(w[i], q[i])
    qm.cx(q[0], q[1])
    qm.crz(w[3] * 2, q[1], q[2])
    qm.rx(w[0] + w[1], q[2])
    return qm.expval("0.5*ZZI + XIY", q) - 0.2 * qm.expval("IIZ", q), qm.expval("YYX", q)


W = np.array([0.3, -0.8, 1.1, 0.5])


def _within(estimate, exact, stderr, k=4.0):
    estimate, exact, stderr = (np.asarray(x, np.float64) for x in (estimate, exact, stderr))
    assert np.all(stderr > 0)
    assert np.all(np.abs(estimate - exact) < k * stderr), (estimate, exact, stderr)


def test_values_on_the_reference_sampler():
    exact = qm.run(_static, W).values
    sampled = qm.run(_static, W, mode="qiskit", shots=4000, seed=3, sampler=StatevectorSampler(
        seed=3))
    for value, reference, error in zip(sampled.values, exact, sampled.stderr):
        _within(value, reference, error)

    def distribution(w):
        q = qm.qubits(2)
        qm.ry(w[0], q[0])
        qm.cry(w[1], q[0], q[1])
        return qm.probs([q[0], q[1]])

    exact = qm.run(distribution, W).values
    sampled = qm.run(distribution, W, mode="qiskit", shots=4000, seed=5,
                     sampler=StatevectorSampler(seed=5))
    _within(sampled.values[exact > 0], exact[exact > 0], sampled.stderr[exact > 0])


def test_gradient_on_the_reference_sampler_in_one_call():
    sampler = CountingSampler(seed=4)
    cotangent = (np.array(1.0), np.array(-0.5))
    sampled = qm.gradient(_static, W, cotangent=cotangent, method="parameter-shift",
                          mode="qiskit", shots=8000, seed=4, sampler=sampler)
    exact = qm.gradient(_static, W, cotangent=cotangent)
    assert sampler.calls == 1
    _within(sampled.grad, exact.grad, sampled.grad_stderr)
    assert sampled.num_derivative_programs == 5 and sampled.num_evaluations == 12
    # four times the shots, half the standard error
    more = qm.gradient(_static, W, cotangent=cotangent, method="parameter-shift", mode="qiskit",
                       shots=32000, seed=5, sampler=StatevectorSampler(seed=5))
    assert np.all(np.abs(more.grad_stderr / sampled.grad_stderr - 0.5) < 0.1)


def _rus(t):
    q = qm.qubits(2)
    qm.h(q[0])
    qdiff.while_loop(lambda: qm.measure(q[1]) == 0,
                     lambda: (qm.reset(q[1]), qm.ry(t, q[1]), qm.cry(t / 2, q[1], q[0])))
    return qm.expval("ZZ", q), qm.expval("ZI", q)


def test_loops_on_measurements_natively_and_on_the_host():
    aer = pytest.importorskip("qiskit_aer.primitives")
    program = qdiff.trace(_rus, 0.0)
    exact = qm.run(program, 1.3).values
    native = run_on_sampler(program, [1.3], sampler=aer.SamplerV2(seed=1), shots=4000)
    assert native.sampler_calls == 1
    host = run_on_sampler(program, [1.3], sampler=aer.SamplerV2(seed=2), shots=4000,
                          loops="host")
    for result in (native, host):
        for value, reference, error in zip(result.values, exact, result.stderr):
            _within(value, reference, error)
    assert host.sampler_calls > 1 and host.unterminated_mass < 1e-3
    # a cap: the runs still going after 3 tests are reported, not dropped silently
    capped = run_on_sampler(program, [1.3], sampler=aer.SamplerV2(seed=3), shots=4000,
                            loops="host", max_iterations=3)
    going = (1 - np.sin(0.65) ** 2) ** 2  # the first test always goes on
    _within(capped.unterminated_mass, going, capped.unterminated_stderr)


def test_gradient_through_a_loop_run_on_the_host():
    aer = pytest.importorskip("qiskit_aer.primitives")

    class NoLoops(aer.SamplerV2):
        """Aer, as a backend that runs mid-circuit measurements but no while_loop."""

        supports_control_flow = False

    def rus(t):
        q = qm.qubits(2)
        qm.h(q[0])
        qdiff.while_loop(lambda: qm.measure(q[1]) == 0,
                         lambda: (qm.reset(q[1]), qm.ry(t, q[1]), qm.cry(t / 2, q[1], q[0])))
        return qm.expval("ZI", q)

    # at θ = 2.6 a round exits with probability sin²(1.3) = 0.93: few unrolled depths
    exact = qm.gradient(rus, 2.6)
    assert exact.grad == pytest.approx(-np.cos(1.3) / 2, abs=1e-9)
    sampled = qm.gradient(rus, 2.6, method="parameter-shift", mode="qiskit", shots=1500,
                          seed=3, sampler=NoLoops(seed=3))
    _within(sampled.grad, exact.grad, sampled.grad_stderr)
    _within(sampled.value, exact.value, sampled.value_stderr)
    assert sampled.unterminated_mass < 1e-3


def test_gradient_of_a_dynamic_circuit_on_aer():
    aer = pytest.importorskip("qiskit_aer.primitives")

    def branchy(w):
        q = qm.qubits(2)
        qm.ry(w[0], q[0])
        bit = qm.measure(q[0])
        qdiff.cond(bit == 1, lambda: qm.rx(w[1], q[1]), lambda: qm.ry(2 * w[1], q[1]))
        return qm.expval("IZ", q) + 0.5 * qm.expval("ZZ", q)

    w = np.array([0.9, 0.4])
    sampled = qm.gradient(branchy, w, method="parameter-shift", mode="qiskit", shots=8000,
                          seed=1, sampler=aer.SamplerV2(seed=1))
    _within(sampled.grad, qm.gradient(branchy, w).grad, sampled.grad_stderr)


def test_what_a_sampler_cannot_run_is_a_clear_error():
    def measured(t):
        q = qm.qubits(1)
        qm.ry(t, q[0])
        qm.measure(q[0])
        qm.ry(t, q[0])
        return qm.expval("Z", q)

    with pytest.raises(QdiffError, match="mid-circuit measurements"):
        qm.run(measured, 0.3, mode="qiskit", sampler=StatevectorSampler())
    with pytest.raises(QdiffError, match="mid-circuit"):
        qm.gradient(_rus, 0.3, method="parameter-shift", mode="qiskit", cotangent=(1.0, 0.0),
                    sampler=StatevectorSampler())
    with pytest.raises(QdiffError, match="mode='qiskit'"):
        qm.run(measured, 0.3, sampler=StatevectorSampler())
    with pytest.raises(QdiffError, match="parameter-shift"):
        qm.gradient(measured, 0.3, method="finite-diff", mode="qiskit")


def test_values_and_gradients_on_the_reference_estimator():
    from qiskit.primitives import StatevectorEstimator

    exact = qm.run(_static, W).values
    estimated = qm.run(_static, W, mode="qiskit", shots=10_000,
                       estimator=StatevectorEstimator(seed=1))
    for value, reference, error in zip(estimated.values, exact, estimated.stderr):
        _within(value, reference, error)
    cotangent = (np.array(1.0), np.array(-0.5))
    gradient = qm.gradient(_static, W, cotangent=cotangent, method="parameter-shift",
                           mode="qiskit", shots=10_000, estimator=StatevectorEstimator(seed=2))
    _within(gradient.grad, qm.gradient(_static, W, cotangent=cotangent).grad,
            gradient.grad_stderr)


def test_a_backend_runs_transpiled_circuits():
    aer = pytest.importorskip("qiskit_aer")
    from qiskit.circuit.library import real_amplitudes
    from qiskit.quantum_info import SparsePauliOp

    ansatz = real_amplitudes(3, reps=1)
    observable = SparsePauliOp.from_list([("ZZI", 1.0), ("IXY", 0.5)])
    program = qm.from_qiskit(ansatz, observable)  # a Qiskit circuit, imported
    x = np.linspace(-1.0, 1.0, ansatz.num_parameters)
    exact = qm.run(program, x).values
    sampled = qm.run(program, x, mode="qiskit", shots=4000,
                     sampler=aer.AerSimulator(seed_simulator=1))
    _within(sampled.values, exact, sampled.stderr)
    gradient = qm.gradient(program, x, method="parameter-shift", mode="qiskit", shots=4000,
                           sampler=aer.AerSimulator(seed_simulator=2))
    _within(gradient.grad, qm.gradient(program, x).grad, gradient.grad_stderr)


def test_gradient_of_an_imported_qiskit_loop_on_aer():
    aer = pytest.importorskip("qiskit_aer.primitives")
    import sys
    from pathlib import Path

    from qiskit.circuit import Parameter
    from qiskit.quantum_info import SparsePauliOp

    sys.path.insert(0, str(Path(__file__).parents[3] / "case_studies"))
    from repeat_until_success import qiskit_circuit  # the case study's Qiskit loop

    program = qm.from_qiskit(qiskit_circuit(Parameter("θ")), SparsePauliOp("IZ"))
    x = np.array([2.6])  # exits with probability 0.93 per round
    sampled = qm.gradient(program, x, method="parameter-shift", mode="qiskit", shots=1500,
                          sampler=aer.SamplerV2(seed=4))
    _within(sampled.grad, [-np.cos(1.3) / 2], sampled.grad_stderr)


def test_an_imported_circuit_s_clbit_distribution_on_aer():
    aer = pytest.importorskip("qiskit_aer.primitives")
    from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister

    qc = QuantumCircuit(QuantumRegister(2), ClassicalRegister(2))
    qc.h(0)
    qc.ry(0.8, 1)
    qc.measure(1, 0)
    with qc.while_loop((qc.clbits[0], 0)):
        qc.reset(1)
        qc.ry(0.8, 1)
        qc.cry(0.4, 1, 0)
        qc.measure(1, 0)
    qc.measure(0, 1)
    program = qm.from_qiskit(qc)  # returns the distribution of the two clbits
    exact = np.asarray(program())
    sampled = qm.run(program, mode="qiskit", shots=4000, sampler=aer.SamplerV2(seed=6))
    support = exact > 0
    _within(sampled.values[support], exact[support], sampled.stderr[support])
    assert np.all(sampled.values[~support] == 0)
