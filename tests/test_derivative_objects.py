"""One kind of derivative object for every program, and no silent zeros from quantum ones.

Regressions: a quantum program's ``grad`` was a bare function (no ``.trace``), and its
``.trace``, ``grad(grad(f))`` and ``hessian`` silently differentiated the quantum program
as if it were classical, returning zeros instead of -cos(x).
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
    lambda: qdiff.grad(rotated).trace(0.3),
    lambda: qdiff.grad(qdiff.grad(rotated))(0.3),
    lambda: qdiff.jacfwd(qdiff.grad(rotated))(0.3),
    lambda: qdiff.hessian(rotated)(np.array(0.3)),
], ids=["trace", "grad-grad", "jacfwd-grad", "hessian"])
def test_second_derivative_of_quantum_program_is_an_error_not_zero(second):
    with pytest.raises(qdiff.QdiffError, match="quantum program"):
        second()


def test_classical_second_derivatives_still_trace():
    assert np.isclose(qdiff.grad(qdiff.grad(classical))(0.3), -np.cos(0.3))
    assert "cos" in str(qdiff.grad(classical).trace(0.3)) or "sin" in str(
        qdiff.grad(classical).trace(0.3))
