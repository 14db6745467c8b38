"""`qdiff demo` shows what qdiff exists for: a hybrid program and its gradient four ways.

Regression for "the main command shows half of the toolkit": the demo printed classical code
only. The four gradients of its hybrid program must agree: the two exact ones to the cut-off,
the two sampled ones within a few standard errors (fixed seeds).
"""

import numpy as np

from qdiff.demo import gradient_rows, hybrid_loss, run_demo


def test_demo_shows_a_hybrid_program_and_its_gradient_four_ways():
    text = run_demo(shots=40)
    for needed in ("measure", "while", "loop[", "expval", "adjoint, exact",
                   "parameter shift, exact", "sampled runs", "samples", "certified",
                   "std. error", "gradient program"):
        assert needed in text


def test_demo_gradients_agree():
    rows = dict(gradient_rows(shots=400))
    exact = rows["adjoint, exact"]
    assert np.all(np.asarray(exact.remainder_bound) < 1e-6)
    np.testing.assert_allclose(rows["parameter shift, exact"].grad, exact.grad, atol=1e-4)
    for label in ("adjoint, 400 sampled runs", "parameter shift, 100 samples"):
        sampled = rows[label]
        error = np.abs(np.asarray(sampled.grad) - exact.grad)
        assert np.all(error <= 4 * np.asarray(sampled.grad_stderr) + 1e-9), label


def test_demo_program_value_is_its_closed_form():
    # theta from the classical recurrence; E[rounds] = 1/sin²(θ/2); <Z> of wire 1 = cos(w1 θ)
    w = np.array([0.3, -0.8])
    s = 0.0
    for _ in range(4):
        s = np.tanh(s + w[0])
    theta = 2.0 * s + 1.0
    expected = 0.5 / np.sin(theta / 2) ** 2 - np.cos(w[1] * theta)
    assert np.isclose(hybrid_loss(w), expected, atol=1e-9)
