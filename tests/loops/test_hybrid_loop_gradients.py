"""Gate angles computed by classical loops: every gradient method, loop kind and checkpoint.

Regression for "hybrid programs with classical loops cannot be differentiated": the
reversal of a classical loop ran on concrete values inside a quantum program's reverse
sweep, and indexed its concrete checkpoint buffers with the traced slot of the traced
reverse loop (TracerConversionError).
"""

import numpy as np
import pytest
from oracles import central_difference

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm

X0 = np.array([0.3, -1.2])


def _fori(steps, checkpoint):
    def angle(x):
        return qdiff.fori_loop(0, steps, lambda i, s: qnp.tanh(1.3 * s + x[1]), 0.0,
                               checkpoint=checkpoint)
    return angle


def _while(checkpoint):
    def angle(x):
        def body(c):
            k, s = c
            return k + 1, qnp.tanh(1.3 * s + x[1]) * qnp.cos(x[0])
        _, s = qdiff.while_loop(lambda c: c[0] < 4, body, (0, 0.0), max_iter=8,
                                checkpoint=checkpoint)
        return s
    return angle


def _traced_bounds(checkpoint):
    def angle(x):
        steps = qnp.astype(qnp.floor(x[0] * 10.0 + 0.5), np.int64)   # 3 at X0
        return qdiff.fori_loop(0, steps, lambda i, s: qnp.sin(s * x[1] + 0.5), 0.1,
                               checkpoint=checkpoint)
    return angle


ANGLES = {
    "fori-3": _fori(3, None), "fori-1": _fori(1, None), "fori-6-checkpoint-2": _fori(6, 2),
    "fori-27-checkpoint-3": _fori(27, 3), "while": _while(None),
    "while-checkpoint-2": _while(2), "traced-bounds": _traced_bounds(None),
    "traced-bounds-checkpoint-2": _traced_bounds(2),
}


def _hybrid(angle):
    @qdiff.program
    def f(x):
        q = qm.qubits(1)
        qm.ry(angle(x), q[0])
        return qm.expval("Z", q)
    return f


def _hybrid_loss(angle):
    # the loop's result feeds the classical loss only; the gate angle is x[0]
    @qdiff.program
    def f(x):
        q = qm.qubits(1)
        qm.ry(x[0], q[0])
        return qm.expval("Z", q) * angle(x) ** 2
    return f


@pytest.mark.parametrize("name", sorted(ANGLES))
@pytest.mark.parametrize("build", [_hybrid, _hybrid_loss], ids=["gate-angle", "loss"])
def test_hybrid_program_with_classical_loop_differentiates(name, build):
    f = build(ANGLES[name])
    expected = central_difference(f, X0)
    np.testing.assert_allclose(qdiff.grad(f)(X0), expected, atol=1e-7)
    np.testing.assert_allclose(qdiff.jacobian(f)(X0), expected, atol=1e-7)
    shifted = qm.gradient(f, X0, method="parameter-shift").grad
    np.testing.assert_allclose(shifted, expected, atol=1e-7)


def test_hybrid_fori_loop_gradient_closed_form():
    # the reproduction: s3 = tanh(1.3 s2 + b), f = cos(s3)
    f = _hybrid(_fori(3, None))
    np.testing.assert_allclose(qdiff.grad(f)(X0), [0.0, 0.02509782], atol=1e-8)
