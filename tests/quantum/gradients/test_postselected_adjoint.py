"""Regression: the adjoint gradient of a postselected value F/P used Σ_b c·g_b for F in the
quotient rule instead of Σ_b w_b c·g_b, so it was wrong whenever P < 1 (a value that does
not depend on an angle got a nonzero derivative)."""

import numpy as np
import pytest
from quantum_programs_lib import entangled_postselected

import qdiff
from qdiff import quantum as qm


@qdiff.program
def conditioned(w):
    q = qm.qubits(2)
    qm.ry(w[0], q[0])
    qm.ry(w[1], q[1])
    qm.postselect(q[1], 1)
    return qm.expval("ZI", q), qm.expval("IZ", q)   # cos w0 and -1, whatever w1


entangled = qdiff.program(entangled_postselected)


def test_postselected_adjoint_gradient_does_not_depend_on_an_angle_the_value_ignores():
    w = np.array([1.1, 0.6])
    jac = qdiff.jacobian(conditioned)(w)
    np.testing.assert_allclose(jac[0], [-np.sin(w[0]), 0.0], atol=1e-12)
    np.testing.assert_allclose(jac[1], [0.0, 0.0], atol=1e-12)


@pytest.mark.parametrize("method", ["parameter-shift", "finite-diff"])
def test_postselected_adjoint_gradient_matches_the_other_methods(method):
    w = np.array([1.1, 0.6])
    np.testing.assert_allclose(qm.gradient(entangled, w).grad,
                               qm.gradient(entangled, w, method=method).grad, atol=1e-7)
