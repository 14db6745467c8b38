"""Reverse mode through loops: long counted loops, data-dependent while loops, and the
measured memory of plain reversal, strip-mined checkpoints and increment-only carries."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.loops.memory import measure_checkpoint_memory
from qdiff.loops.reversal import slots_per_level


def _recurrence(steps, checkpoint=None):
    def f(x, w):
        step = lambda i, s: qnp.tanh(w * s + x[i % 3]) + 0.1 * s  # noqa: E731
        return qnp.sum(qdiff.fori_loop(0, steps, step, x * 0.5, checkpoint=checkpoint))

    return f


def _numeric_grad(f, x, w, eps=1e-6):
    program = qdiff.trace(f, x, w)
    gx = [(program(x + eps * e, w) - program(x - eps * e, w)) / (2 * eps) for e in np.eye(3)]
    gw = (program(x, w + eps) - program(x, w - eps)) / (2 * eps)
    return np.array(gx), gw


def test_thousand_step_nonlinear_recurrence():
    x, w = np.array([0.2, -0.4, 0.3]), 0.7
    f = _recurrence(1000)
    gx, gw = qdiff.grad(f, argnums=(0, 1))(x, w)
    nx, nw = _numeric_grad(f, x, w)
    np.testing.assert_allclose(gx, nx, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(gw, nw, rtol=1e-5, atol=1e-8)
    _, tangent = qdiff.jvp(f, (x, w), (np.ones(3), 0.0))
    np.testing.assert_allclose(tangent, nx.sum(), rtol=1e-5)


@pytest.mark.parametrize("checkpoint", [None, 2, 3])
def test_stored_carries_are_n_s_or_k_n_to_the_one_over_k(checkpoint):
    x, w = np.array([0.2, -0.4, 0.3]), 0.7
    steps, carry_size = 1000, 3
    gradient = qdiff.grad(_recurrence(steps, checkpoint), argnums=(0, 1))
    with measure_checkpoint_memory() as memory:
        gx, gw = gradient(x, w)
    k = checkpoint or 1
    if checkpoint is None:
        assert memory.elements == steps * carry_size
    else:
        assert memory.elements == k * slots_per_level(steps, k) * carry_size
        assert memory.elements <= k * np.ceil(steps ** (1 / k)) * carry_size
    plain_x, plain_w = qdiff.grad(_recurrence(steps), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(gx, plain_x, rtol=1e-12)
    np.testing.assert_allclose(gw, plain_w, rtol=1e-12)


def test_increment_only_carry_is_not_stored():
    def total(x):
        return qdiff.fori_loop(0, 200, lambda i, acc: acc + qnp.sin(x * i), qnp.zeros(4))

    x = np.array([0.1, 0.2, 0.3, 0.4])
    with measure_checkpoint_memory() as memory:
        g = qdiff.jacobian(total)(x)
    assert memory.elements == 0
    np.testing.assert_allclose(g, np.diag(sum(i * np.cos(x * i) for i in range(200))))

    def mixed(x):
        s, acc = qdiff.fori_loop(0, 50, lambda i, c: (qnp.sin(c[0]), c[1] + c[0] ** 2), (x, x))
        return qnp.sum(acc)

    with measure_checkpoint_memory() as memory:
        qdiff.grad(mixed)(x)
    assert memory.elements == 50 * 4  # only the sine carry


def test_newton_iteration_to_tolerance_in_a_while_loop():
    def sqrt(a):
        return qdiff.while_loop(lambda s: qnp.abs(s * s - a) > 1e-12 * a,
                                lambda s: 0.5 * (s + a / s), a)

    for a in (2.0, 50.0, 1e4):  # the trip count grows with a
        np.testing.assert_allclose(qdiff.grad(sqrt)(a), 0.5 / np.sqrt(a), rtol=1e-9)
        np.testing.assert_allclose(qdiff.jvp(sqrt, (a,), (1.0,))[1], 0.5 / np.sqrt(a),
                                   rtol=1e-9)


def test_while_loop_with_free_variables_and_a_bound():
    def f(x, rate):
        return qdiff.while_loop(lambda s: s[1] < 7, lambda s: (s[0] * rate + x, s[1] + 1),
                                (x, 0), max_iter=10)[0]

    g = qdiff.grad(f, argnums=(0, 1))(0.3, 1.1)
    expected_x = sum(1.1 ** k for k in range(8))
    expected_rate = sum(k * 1.1 ** (k - 1) * 0.3 for k in range(1, 8))
    np.testing.assert_allclose(g, (expected_x, expected_rate))


def test_loop_with_traced_bounds():
    def f(x, n):
        return qdiff.fori_loop(0, n, lambda i, s: s * x, 1.0)

    np.testing.assert_allclose(qdiff.grad(f)(1.5, 4), 4 * 1.5 ** 3)
