"""Sample-mode gradients of programs without mid-circuit measurements honour ``shots``.

Regression for "qm.gradient(program, x, mode='sample', shots=N, seed=s) returns the exact
gradient with zero standard error": every trajectory of such a program is the same run, so
sampling trajectories sampled nothing. The gradient is now the parameter-shift estimate from
shot-estimated readouts of the shifted programs; the adjoint method, which cannot use shots
there, is refused by name.
"""

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError

W = np.array([0.7, -0.4])


def rotated(w):
    q = qm.qubits(1)
    qm.ry(w[0], q[0])
    qm.rx(w[1], q[0])
    # nonlinear post-processing of one readout, linear in the other
    return (qm.expval("Z", q) - 0.2) ** 2 + 0.5 * qm.expval("X", q)


def closed_form_gradient(w):
    # Bloch vector after ry(a), rx(b): (sin a, -cos a sin b, cos a cos b)
    a, b = w
    z = np.cos(a) * np.cos(b)
    return 2 * (z - 0.2) * np.array([-np.sin(a) * np.cos(b), -np.cos(a) * np.sin(b)]) \
        + 0.5 * np.array([np.cos(a), 0.0])


def test_sample_mode_gradient_without_measurements_is_no_longer_exact_with_zero_error():
    seeds = range(8)
    results = [qm.gradient(rotated, W, mode="sample", shots=400, seed=s) for s in seeds]
    grads = np.array([r.grad for r in results])
    errors = np.array([r.grad_stderr for r in results])
    exact = closed_form_gradient(W)
    assert np.allclose(qm.gradient(rotated, W).grad, exact, atol=1e-12)
    # two seeds give different numbers, each with a nonzero standard error
    assert not np.allclose(grads[0], grads[1])
    assert np.all(errors > 1e-3)
    assert all(r.shots == 400 and r.method == "parameter-shift" for r in results)
    # the mean over seeds is within 4 standard errors of the exact gradient
    mean_error = np.sqrt((errors ** 2).sum(0)) / len(seeds)
    assert np.all(np.abs(grads.mean(0) - exact) < 4 * mean_error)
    # the reported standard error is the spread the estimates really have
    ratio = grads.std(0, ddof=1) / errors.mean(0)
    assert np.all((ratio > 0.4) & (ratio < 2.5)), ratio
    # four times the shots, half the standard error
    more = qm.gradient(rotated, W, mode="sample", shots=1600, seed=0)
    assert np.all(np.abs(more.grad_stderr / errors.mean(0) - 0.5) < 0.2)


def test_sample_mode_value_without_measurements_is_estimated_from_shots():
    a, b = W
    exact = (np.cos(a) * np.cos(b) - 0.2) ** 2 + 0.5 * np.sin(a)
    results = [qm.gradient(rotated, W, mode="sample", shots=400, seed=s) for s in (1, 2)]
    assert results[0].value != results[1].value
    assert all(abs(r.value - exact) < 5 * r.value_stderr for r in results)


def test_grad_with_sample_mode_without_measurements_samples_too():
    first = qdiff.grad(rotated, mode="sample", shots=300, seed=3)(W)
    again = qdiff.grad(rotated, mode="sample", shots=300, seed=3)(W)
    other = qdiff.grad(rotated, mode="sample", shots=300, seed=4)(W)
    assert np.array_equal(first, again)  # seeded
    assert not np.allclose(first, other)
    assert not np.allclose(first, closed_form_gradient(W), atol=1e-6)


def test_adjoint_sample_mode_without_measurements_says_it_would_ignore_shots():
    with pytest.raises(QdiffError, match="method='adjoint' with mode='sample' would ignore"):
        qm.gradient(rotated, W, method="adjoint", mode="sample", shots=100, seed=0)


def test_jacobian_in_sample_mode_says_it_would_ignore_shots():
    # it returned the exact Jacobian whatever shots and seed were
    with pytest.raises(QdiffError, match="mode='sample' would ignore shots"):
        qm.jacobian(rotated, W, mode="sample", shots=100, seed=0)
    with pytest.raises(QdiffError, match="mode='sample' would ignore shots"):
        qdiff.jvp(rotated, (W,), (np.ones(2),), mode="sample", shots=100, seed=0)
