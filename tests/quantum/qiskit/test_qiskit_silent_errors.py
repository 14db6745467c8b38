"""Regression tests of the Qiskit bridge's silent errors (issue 21): one value per circuit for
evolution gates, sampler gradients of unbounded loops without a hidden cut-off bias,
observables and parameter values in Qiskit's own types, and clear errors for bad input."""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg
from qiskit import QuantumCircuit
from qiskit.circuit import Gate, Parameter
from qiskit.circuit.library import HamiltonianGate, PauliEvolutionGate
from qiskit.quantum_info import Operator, Pauli, SparsePauliOp, Statevector

import qdiff
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "case_studies"))
from repeat_until_success import rus_rounds_and_z  # noqa: E402  (the case study's program)

pytestmark = pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")

NONCOMMUTING = SparsePauliOp.from_list([("XZY", 0.5), ("ZZI", 1.0)])
OBSERVABLE = SparsePauliOp("ZXI")


def _evolution_circuit(time, hamiltonian=NONCOMMUTING):
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.ry(0.4, 1)
    qc.append(PauliEvolutionGate(hamiltonian, time=time), [0, 1, 2])
    return qc


def _statevector_value(time, hamiltonian=NONCOMMUTING):
    state = Statevector(_evolution_circuit(time, hamiltonian))
    return float(state.expectation_value(OBSERVABLE).real)


def test_pauli_evolution_with_noncommuting_terms_has_one_value_bound_or_parameter():
    # before: 0.0796123 with t = 0.7 bound, 0.0661883 (one Trotter step) with t a Parameter
    t = Parameter("t")
    exact = _statevector_value(0.7)
    assert exact == pytest.approx(0.0796122852904632, abs=1e-12)
    bound = qm.from_qiskit(_evolution_circuit(0.7), OBSERVABLE)
    free = qm.from_qiskit(_evolution_circuit(t), OBSERVABLE)
    assert float(bound()) == pytest.approx(exact, abs=1e-12)
    assert float(free(np.array([0.7]))) == pytest.approx(exact, abs=1e-12)
    # differentiable in t, by every method, and equal to the derivative of exp(-itH)
    h = 1e-5
    slope = (_statevector_value(0.7 + h) - _statevector_value(0.7 - h)) / (2 * h)
    adjoint = qdiff.grad(free)(np.array([0.7]))
    shift = qdiff.grad(free, method="parameter-shift")(np.array([0.7]))
    assert adjoint[0] == pytest.approx(slope, abs=1e-8)
    assert shift[0] == pytest.approx(slope, abs=1e-8)


def test_pauli_evolution_of_an_operator_list_is_the_exact_evolution_of_their_sum():
    a, b = SparsePauliOp("XZI", 0.5), SparsePauliOp.from_list([("ZZI", 1.0), ("IYX", 0.3)])
    t = Parameter("t")
    qc = QuantumCircuit(3)
    qc.append(PauliEvolutionGate([a, b], time=2 * t), [0, 1, 2])
    unitary = scipy.linalg.expm(-1.4j * (a + b).to_matrix())
    state = unitary[:, 0]
    expected = float(np.real(state.conj() @ OBSERVABLE.to_matrix() @ state))
    assert float(qm.from_qiskit(qc, OBSERVABLE)(np.array([0.7]))) == \
        pytest.approx(expected, abs=1e-12)


def test_commuting_pauli_evolution_with_a_parameter_is_exact_and_differentiable():
    commuting = SparsePauliOp.from_list([("ZZI", 0.8), ("IZZ", -0.3), ("XYY", 0.2)])
    terms = [Pauli(label).to_matrix() for label in commuting.paulis.to_labels()]
    assert all(np.allclose(a @ b, b @ a) for a in terms for b in terms)  # they do commute
    t = Parameter("t")
    program = qm.from_qiskit(_evolution_circuit(t, commuting), OBSERVABLE)
    # the commuting path: one Pauli rotation per term, no eigenbasis change
    rotations = [e for e in program.all_eqns() if e.primitive.name == "gate"
                 and e.params["name"] == "pauli_rot"]
    assert len(rotations) == len(terms)
    assert float(program(np.array([1.1]))) == pytest.approx(
        _statevector_value(1.1, commuting), abs=1e-12)
    h = 1e-5
    slope = (_statevector_value(1.1 + h, commuting) - _statevector_value(1.1 - h, commuting)) \
        / (2 * h)
    assert qdiff.grad(program)(np.array([1.1]))[0] == pytest.approx(slope, abs=1e-8)


def test_hamiltonian_gate_with_a_parameter_time_imports_exactly():
    # before: TypeError "Unable to generate Unitary matrix for unbound t parameter"
    t = Parameter("t")
    hamiltonian = NONCOMMUTING.to_matrix()
    qc = QuantumCircuit(3)
    qc.h(0)
    qc.append(HamiltonianGate(hamiltonian, t), [0, 1, 2])
    program = qm.from_qiskit(qc, OBSERVABLE)
    bound = Statevector(qc.assign_parameters([0.9])).expectation_value(OBSERVABLE).real
    assert float(program(np.array([0.9]))) == pytest.approx(bound, abs=1e-12)


def test_controlled_evolution_with_a_parameter_is_exact():
    # Qiskit controls an evolution by a projector term (a SparseObservable operator)
    t = Parameter("t")
    qc = QuantumCircuit(4)
    qc.h(3)
    qc.append(PauliEvolutionGate(NONCOMMUTING, time=t).control(1), [3, 0, 1, 2])
    observable = SparsePauliOp("XZXI")
    expected = Statevector(qc.assign_parameters([0.6])).expectation_value(observable).real
    program = qm.from_qiskit(qc, observable)
    assert float(program(np.array([0.6]))) == pytest.approx(expected, abs=1e-12)


def test_observables_as_pauli_strings_paulis_and_lists():
    # before: AttributeError "'str' object has no attribute 'to_list'"
    qc = QuantumCircuit(2)
    qc.ry(0.3, 0)
    qc.rx(-0.9, 1)
    state = Statevector(qc)
    for label in ("XI", "IZ", "YZ"):
        expected = float(state.expectation_value(SparsePauliOp(label)).real)
        assert float(qm.from_qiskit(qc, label)()) == pytest.approx(expected, abs=1e-12)
        assert float(qm.from_qiskit(qc, Pauli(label))()) == pytest.approx(expected, abs=1e-12)
    values = qm.from_qiskit(qc, ["XI", Pauli("IZ"), SparsePauliOp("YZ", 0.5),
                                 Operator(Pauli("ZZ"))])()
    expected = [float(state.expectation_value(op).real) for op in
                (SparsePauliOp("XI"), SparsePauliOp("IZ"), SparsePauliOp("YZ", 0.5),
                 SparsePauliOp("ZZ"))]
    assert np.allclose(values, expected, atol=1e-12)


def test_parameter_dict_in_any_order():
    # before: TypeError "'<' not supported between instances of 'Parameter' and 'Parameter'"
    a, b = Parameter("a"), Parameter("b")
    qc = QuantumCircuit(2)
    qc.rx(a, 0)
    qc.ry(b, 1)
    qc.cx(0, 1)
    program = qm.from_qiskit(qc, "ZZ")
    expected = float(program(np.array([0.4, 1.2])))
    assert float(program({a: 0.4, b: 1.2})) == expected
    assert float(program({b: 1.2, a: 0.4})) == expected
    assert float(program({"b": 1.2, "a": 0.4})) == expected
    with pytest.raises(QdiffError, match="no value for the parameter"):
        program({a: 0.4})
    with pytest.raises(QdiffError, match="not a parameter of the circuit"):
        program({a: 0.4, b: 1.2, Parameter("c"): 0.0})


def test_bad_input_errors_name_the_problem():
    t = Parameter("t")
    qc = QuantumCircuit(2)
    qc.append(Gate("mystery", 1, [t]), [0])
    with pytest.raises(QdiffError, match="'mystery'"):
        qm.from_qiskit(qc)
    qc = QuantumCircuit(2)
    qc.rx(t, 0)
    program = qm.from_qiskit(qc, "ZZ")
    with pytest.raises(QdiffError, match=r"has 1 parameter\(s\) \(t\)"):
        program(np.array([0.1, 0.2]))
    with pytest.raises(QdiffError, match="acts on 3 qubits"):
        qm.from_qiskit(qc, "ZZZ")
    with pytest.raises(QdiffError, match="not Hermitian"):
        qm.from_qiskit(qc, SparsePauliOp("ZZ", 1j))
    with pytest.raises(QdiffError, match="not a Pauli operator"):
        qm.from_qiskit(qc, "ZQ")
    with pytest.raises(QdiffError, match="is a int"):
        qm.from_qiskit(qc, 3)


# ----------------------------------------------------- sampler gradients of unbounded loops
def _rus(theta):
    """Repeat-until-success's rounds (the case study's program): E[rounds] = 1/sin²(θ/2),
    d/dθ = -cos(θ/2)/sin³(θ/2)."""
    return rus_rounds_and_z(theta)[0]


def _rounds_slope(theta):
    s, c = np.sin(theta / 2), np.cos(theta / 2)
    return -c / s ** 3


def _sampler_gradient(theta, shots, seed, **options):
    sampler = pytest.importorskip("qiskit_aer.primitives").SamplerV2(seed=seed)
    program = qdiff.trace(_rus, theta)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = qm.gradient(program, theta, method="parameter-shift", mode="qiskit",
                             shots=shots, sampler=sampler, **options)
    return float(result.grad), float(result.grad_stderr), caught


@pytest.mark.slow
def test_sampler_gradient_of_unbounded_loop_adds_the_occurrences_shots_do_not_reach():
    # before: occurrences reached by less than one shot in 400 (from the 9th on) were
    # silently dropped (about 40 s on Aer)
    grad, stderr, _ = _sampler_gradient(1.6, shots=400, seed=3)
    assert abs(grad - _rounds_slope(1.6)) < 4 * stderr  # -1.8873


def test_sampler_gradient_cut_off_by_max_loop_iterations_warns_of_its_bias():
    # before: the cap was 16 tests whatever max_loop_iterations said, without a warning
    _, _, caught = _sampler_gradient(1.6, shots=200, seed=3, max_loop_iterations=3)
    assert any("cut off after 3 tests" in str(w.message) for w in caught)


@pytest.mark.slow
def test_sampler_gradient_of_repeat_until_success_matches_the_closed_form():
    # the case: θ = 1.3, closed form -3.5916; before: -3.3175 ± 0.086
    grad, stderr, _ = _sampler_gradient(1.3, shots=4000, seed=2)
    assert abs(grad - _rounds_slope(1.3)) < 4 * stderr


def test_circuit_without_parameters_takes_no_argument_or_an_empty_array():
    # the README says the program takes one array: for no parameters, an empty one works too
    qc = QuantumCircuit(1)
    qc.h(0)
    program = qm.from_qiskit(qc, "Z")
    assert program() == program(np.zeros(0)) == program([]) == 0.0
