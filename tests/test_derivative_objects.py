"""One kind of derivative object for every program, and no silent zeros from quantum ones.

Regressions: a quantum program's ``grad`` was a bare function (no ``.trace``), and its
``.trace``, ``grad(grad(f))`` and ``hessian`` silently differentiated the quantum program
as if it were classical, returning zeros instead of -cos(x); then they were errors; now the
second derivatives are exact (forward mode on jets) and only ``.trace`` is an error.
"""

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.transforms import TransformedFunction


@qdiff.program
def rotated(x):
    q = qm.qubits(1)
    qm.ry(x, q[0])
    return qm.expval("Z", q)


@qdiff.program
def classical(x):
    return qnp.cos(x)


@pytest.mark.parametrize("transform", [qdiff.grad, qdiff.value_and_grad, qdiff.jacobian,
                                       qdiff.hessian])
def test_derivatives_of_quantum_and_classical_programs_are_the_same_kind(transform):
    assert type(transform(rotated)) is type(transform(classical)) is TransformedFunction
    assert type(transform(rotated.trace(0.3))) is TransformedFunction


def test_quantum_and_classical_gradients_agree():
    assert np.isclose(qdiff.grad(rotated)(0.3), qdiff.grad(classical)(0.3))
    value, slope = qdiff.value_and_grad(rotated)(0.3)
    assert np.isclose(value, np.cos(0.3)) and np.isclose(slope, -np.sin(0.3))


@pytest.mark.parametrize("second", [
    lambda: qdiff.grad(qdiff.grad(rotated))(0.3),
    lambda: qdiff.jacfwd(qdiff.grad(rotated))(0.3),
    lambda: qdiff.jacrev(qdiff.grad(rotated))(0.3),
    lambda: qdiff.hessian(rotated)(np.array(0.3)),
    lambda: qdiff.jvp(qdiff.grad(rotated), (0.3,), (1.0,))[1],
], ids=["grad-grad", "jacfwd-grad", "jacrev-grad", "hessian", "jvp-grad"])
def test_second_derivative_of_quantum_program_is_minus_cos_not_zero(second):
    assert np.isclose(second(), -np.cos(0.3), rtol=1e-12, atol=1e-14)


def test_tracing_a_quantum_gradient_is_an_error_that_does_not_call_second_derivatives_unsupported():
    with pytest.raises(qdiff.QdiffError, match="quantum program has no derivative Program") \
            as caught:
        qdiff.grad(rotated).trace(0.3)
    assert "not supported yet" not in str(caught.value)


def test_classical_second_derivatives_still_trace():
    assert np.isclose(qdiff.grad(qdiff.grad(classical))(0.3), -np.cos(0.3))
    assert "cos" in str(qdiff.grad(classical).trace(0.3)) or "sin" in str(
        qdiff.grad(classical).trace(0.3))
