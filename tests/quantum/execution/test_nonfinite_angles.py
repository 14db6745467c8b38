"""A NaN or infinite gate angle is an error naming the gate, in every mode and method.

Regression: a NaN angle before a measurement gave the value 0.0 with remainder_bound 0 (a
certified wrong answer) and gradient 0.0; sample mode failed inside numpy.random.choice; an
infinite angle failed with "math domain error" from the gate table.
"""

import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm


def measured(x):
    q = qm.qubits(1)
    qm.ry(qnp.log(x), q[0])        # NaN for x < 0, -inf for x = 0
    qm.measure(q[0])
    return qm.expval("Z", q)


CALLS = {
    "exact": lambda x: qm.run(measured, x),
    "sample": lambda x: qm.run(measured, x, mode="sample", shots=5, seed=0),
    "density": lambda x: qm.run(measured, x, mode="density"),
    "adjoint": lambda x: qm.gradient(measured, x),
    "parameter-shift": lambda x: qm.gradient(measured, x, method="parameter-shift"),
    "sampled adjoint": lambda x: qm.gradient(measured, x, mode="sample", shots=5, seed=0),
    "grad": lambda x: qdiff.grad(measured)(x),
}


@pytest.mark.parametrize("call", sorted(CALLS))
@pytest.mark.parametrize("x, shown", [(-1.0, "nan"), (0.0, "-inf")])
def test_nan_or_infinite_angle_is_an_error_not_a_certified_zero(call, x, shown):
    with pytest.raises(qdiff.QdiffError, match=f"gate ry on wires \\(0,\\): angle {shown} is "
                                               "not finite"):
        CALLS[call](x)


def test_unknown_mode_lists_every_mode_including_qiskit():
    with pytest.raises(qdiff.QdiffError, match="exact, sample, density, qiskit"):
        qm.run(measured, 1.0, mode="exactly")
