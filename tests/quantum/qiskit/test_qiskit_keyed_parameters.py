"""An imported circuit's parameter values as a dict ``{Parameter or name: value}`` in
`qm.run`, `qm.gradient` and `qdiff.grad`, not only in a direct call.

Regression for "qm.run(imported_circuit, {Parameter: value}) and
qdiff.grad(imported_circuit)({...}) fail with a structure error": the dict is now the
circuit's parameter array, and the gradient comes back keyed like the dict, checked against
central finite differences of the circuit's value.
"""

import numpy as np
import pytest
from oracles import central_difference

import qdiff
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError

qiskit = pytest.importorskip("qiskit")
from qiskit import QuantumCircuit  # noqa: E402
from qiskit.circuit import Parameter  # noqa: E402
from qiskit.quantum_info import SparsePauliOp  # noqa: E402

A, B, C = Parameter("a"), Parameter("b"), Parameter("c")


def _circuit():
    qc = QuantumCircuit(2)
    qc.ry(A, 0)
    qc.cx(0, 1)
    qc.rx(B * A, 1)
    qc.rz(C, 0)
    qc.h(0)
    return qm.from_qiskit(qc, SparsePauliOp.from_list([("ZZ", 1.0), ("XI", 0.5),
                                                       ("IX", -0.3)]))


# given out of Qiskit's (sorted) order, so that keying by position would be caught
VALUES = {C: 0.25, A: 0.9, B: -0.4}


def _array(program):
    return program.values_of(VALUES)


def _finite_differences(program):
    x = _array(program)
    fd = central_difference(lambda v: program(v), x)
    return {p: fd[k] for k, p in enumerate(program.parameters)}


def test_run_of_imported_circuit_with_parameter_dict_is_no_structure_error():
    program = _circuit()
    result = qm.run(program, VALUES)
    assert np.isclose(result.values, program(_array(program)), atol=1e-12)
    by_name = qm.run(program, {"b": -0.4, "c": 0.25, "a": 0.9})
    assert np.isclose(by_name.values, result.values, atol=1e-12)


@pytest.mark.parametrize("method", ["auto", "parameter-shift"])
def test_grad_of_imported_circuit_with_parameter_dict_is_keyed_like_the_dict(method):
    program = _circuit()
    expected = _finite_differences(program)
    g = qdiff.grad(program, method=method)(VALUES)
    assert isinstance(g, dict) and list(g) == list(VALUES)  # same keys, same order
    for key in VALUES:
        assert np.isclose(g[key], expected[key], atol=1e-7), key
    # at least one derivative is far from zero, so a wrong key order would show
    assert max(abs(v) for v in expected.values()) > 0.1
    result = qm.gradient(program, VALUES, method=method)
    assert list(result.grad) == list(VALUES)
    assert all(np.isclose(result.grad[k], expected[k], atol=1e-7) for k in VALUES)
    assert np.isclose(result.value, program(_array(program)), atol=1e-12)


def test_grad_of_imported_circuit_with_names_as_keys_keys_by_name():
    program = _circuit()
    g = qdiff.grad(program)({"b": -0.4, "a": 0.9, "c": 0.25})
    expected = _finite_differences(program)
    assert list(g) == ["b", "a", "c"]
    assert all(np.isclose(g[p.name], expected[p], atol=1e-7) for p in (A, B, C))


def test_value_and_grad_and_sample_mode_take_the_parameter_dict():
    program = _circuit()
    value, g = qdiff.value_and_grad(program)(VALUES)
    assert np.isclose(value, program(_array(program)), atol=1e-12)
    sampled = qm.gradient(program, VALUES, mode="sample", shots=500, seed=1)
    assert list(sampled.grad) == list(sampled.grad_stderr) == list(VALUES)
    assert all(abs(sampled.grad[k] - g[k]) < 5 * sampled.grad_stderr[k] for k in VALUES)


def test_parameter_dict_with_an_unknown_or_missing_parameter_is_a_clear_error():
    program = _circuit()
    with pytest.raises(QdiffError, match="not a parameter of the circuit"):
        qm.run(program, {**VALUES, Parameter("d"): 1.0})
    with pytest.raises(QdiffError, match="no value for the parameter"):
        qdiff.grad(program)({A: 0.9, B: -0.4})
