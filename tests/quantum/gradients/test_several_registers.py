"""Programs with several quantum registers differentiate by every method.

Regression: the value worked, but every gradient method failed with "apply_gate: state must
be 1-D ... got shape (2, 2)" (the second register's extended state was a view of a 2-D
buffer, and the adjoint recorder applied its gates to that buffer).
"""

import numpy as np
import pytest
from oracles import central_difference
from quantum_programs_lib import registers_and_a_branch

import qdiff
from qdiff import quantum as qm

two_registers = qdiff.program(registers_and_a_branch)


@pytest.mark.parametrize("settings", [dict(), dict(method="parameter-shift"),
                                      dict(method="finite-diff")],
                         ids=["adjoint", "parameter-shift", "finite-diff"])
def test_two_registers_differentiate_by_every_method(settings):
    x = np.array([0.4, -0.7])
    expected = central_difference(two_registers, x)
    np.testing.assert_allclose(qm.gradient(two_registers, x, **settings).grad, expected,
                               atol=1e-6)


def test_two_registers_grad_jacobian_and_sampled_gradient():
    x = np.array([0.4, -0.7])
    expected = central_difference(two_registers, x)
    np.testing.assert_allclose(qdiff.grad(two_registers)(x), expected, atol=1e-6)
    np.testing.assert_allclose(qdiff.jacobian(two_registers)(x), expected, atol=1e-6)
    sampled = qm.gradient(two_registers, x, mode="sample", shots=500, seed=3)
    assert np.all(np.abs(sampled.grad - expected) <= 4 * sampled.grad_stderr + 1e-9)


def test_shots_in_exact_mode_are_refused_not_ignored():
    with pytest.raises(qdiff.QdiffError, match="shots=10 counts samples"):
        qm.run(two_registers, np.array([0.4, -0.7]), shots=10)
    with pytest.raises(qdiff.QdiffError, match="shots=10 counts samples"):
        qdiff.grad(two_registers, shots=10)(np.array([0.4, -0.7]))
