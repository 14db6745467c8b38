"""Regression tests of issue 21: NumPy semantics that qdiff.numpy got wrong."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.special import logsumexp as jax_logsumexp

import qdiff
import qdiff.numpy as qnp

jax.config.update("jax_enable_x64", True)

INF = np.inf


def test_take_without_axis_takes_from_the_flattened_array():
    a = np.arange(12.0).reshape(4, 3)
    assert qnp.take(a, [1, 3]).tolist() == np.take(a, [1, 3]).tolist()
    traced = qdiff.trace(lambda x: qnp.take(x, np.array([1, 3])), a)
    assert traced(a).tolist() == [1.0, 3.0]
    expected = np.zeros(12)
    expected[[1, 3]] = 1.0
    grad = qdiff.grad(lambda x: qnp.sum(qnp.take(x, np.array([1, 3]))))(a)
    np.testing.assert_array_equal(grad, expected.reshape(4, 3))


def test_take_with_axis_still_takes_along_it():
    a = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(qnp.take(a, [1, 3], axis=0), np.take(a, [1, 3], axis=0))
    np.testing.assert_array_equal(qnp.take(a, [2, 0], axis=-1), np.take(a, [2, 0], axis=-1))


PROD_FUNCTIONS = {
    "prod": lambda x: qnp.prod(x),
    "reduce_mul": lambda x: qdiff.reduce(lambda a, b: a * b, 1.0, x),
    "prod_axis_1": lambda x: qnp.sum(qnp.prod(qnp.reshape(x, (1, 3)), axis=1)),
}


@pytest.mark.parametrize("name", PROD_FUNCTIONS)
@pytest.mark.parametrize("point", [[2.0, 0.0, 3.0], [0.0, 0.0, 3.0], [0.0, 0.0, 0.0],
                                   [2.0, -1.0, 3.0]])
def test_hessian_of_prod_with_zero_entries_is_symmetric_and_right(name, point):
    f = PROD_FUNCTIONS[name]
    x = np.array(point)
    expected = np.asarray(jax.hessian(jnp.prod)(jnp.asarray(x)))
    for second in (qdiff.hessian(f), qdiff.jacobian(qdiff.grad(f))):
        np.testing.assert_allclose(second(x), expected, atol=1e-12)
    for i in range(3):
        unit = np.eye(3)[i]
        _, column = qdiff.jvp(qdiff.grad(f), (x,), (unit,))
        np.testing.assert_allclose(column, expected[:, i], atol=1e-12)


def test_third_derivative_of_prod_at_two_zeros():
    f = qdiff.grad(lambda x: qnp.prod(x))
    x = np.array([0.0, 0.0, 3.0, 2.0])
    third = qdiff.jacobian(qdiff.jacobian(f))(x)
    expected = np.asarray(jax.jacfwd(jax.hessian(jnp.prod))(jnp.asarray(x)))
    np.testing.assert_allclose(third, expected, atol=1e-12)


@pytest.mark.parametrize("values", [[-INF, -INF], [INF, 1.0], [-INF, 1.0], [INF, INF],
                                    [2.0, 2.0], [np.nan, 1.0], [1000.0, 1000.0]])
def test_logsumexp_with_infinities_matches_jax(values):
    x = np.array(values)
    np.testing.assert_array_equal(qnp.logsumexp(x), jax_logsumexp(jnp.asarray(x)))
    np.testing.assert_allclose(qdiff.trace(qnp.logsumexp, x)(x), jax_logsumexp(x))
    expected = np.asarray(jax.grad(jax_logsumexp)(jnp.asarray(x)))
    if np.all(x == -INF):
        expected = np.zeros_like(x)  # qdiff's convention: a fully masked group gets 0, not NaN
    for fuse in (True, False):
        np.testing.assert_allclose(qdiff.grad(qnp.logsumexp, fuse=fuse)(x), expected,
                                   atol=1e-12)


def test_logsumexp_of_a_fully_masked_row_is_minus_inf_not_nan():
    m = np.array([[1.0, 2.0, -INF], [-INF, -INF, -INF]])
    rows = qdiff.trace(lambda v: qnp.logsumexp(v, axis=1), m)(m)
    np.testing.assert_array_equal(rows, jax_logsumexp(m, axis=1))
    assert rows[1] == -INF
    # JAX gives NaN in the masked row, even when only the other row is differentiated;
    # qdiff's convention: a fully masked row gets the derivative 0
    expected = np.asarray(jax.grad(lambda v: jax_logsumexp(v[:1], axis=1)[0])(jnp.asarray(m)))
    for fuse in (True, False):
        for objective in (lambda v: qnp.logsumexp(v, axis=1)[0],
                          lambda v: qnp.sum(qnp.where(qnp.isfinite(v[:, 0]),
                                                      qnp.logsumexp(v, axis=1), 0.0))):
            grad = qdiff.grad(objective, fuse=fuse)(m)
            np.testing.assert_allclose(grad, expected, atol=1e-12)
    full = qdiff.grad(lambda v: qnp.sum(qnp.logsumexp(v, axis=1)))(m)
    assert not np.isnan(full).any() and full[1].tolist() == [0.0, 0.0, 0.0]
    kept = qnp.logsumexp(m, axis=-1, keepdims=True)
    assert kept.shape == (2, 1) and kept[1, 0] == -INF


@pytest.mark.parametrize("x, y", [(-INF, -INF), (INF, INF), (INF, 1.0), (-INF, 1.0),
                                  (1.0, 1.0), (INF, -INF), (0.0, -40.0)])
def test_logaddexp_with_infinities_matches_numpy(x, y):
    np.testing.assert_allclose(qnp.logaddexp(x, y), np.logaddexp(x, y), atol=1e-15)
    traced = qdiff.trace(qnp.logaddexp, x, y)
    np.testing.assert_allclose(traced(x, y), np.logaddexp(x, y), atol=1e-15)


def test_logaddexp_derivatives_at_finite_points_and_ties_match_jax():
    for x, y in ((1.0, 1.0), (0.3, -2.0), (-INF, 1.0)):
        np.testing.assert_allclose(qdiff.grad(qnp.logaddexp, argnums=(0, 1))(x, y),
                                   jax.grad(jnp.logaddexp, (0, 1))(x, y), atol=1e-12)
    np.testing.assert_allclose(qdiff.hessian(qnp.logaddexp)(1.0, 1.0),
                               jax.hessian(jnp.logaddexp)(1.0, 1.0), atol=1e-12)


def test_array_and_asarray_stack_traced_scalars():
    for make in (qnp.array, qnp.asarray):
        f = qdiff.trace(lambda a, b, make=make: make([[a, b], [b, 2.0]]), 1.0, 3.0)
        np.testing.assert_array_equal(f(1.0, 3.0), [[1.0, 3.0], [3.0, 2.0]])
    g = qdiff.grad(lambda a, b: qnp.sum(qnp.array([a, b, a]) * np.array([1.0, 2.0, 3.0])),
                   argnums=(0, 1))
    assert [float(v) for v in g(1.0, 3.0)] == [4.0, 2.0]
    typed = qdiff.trace(lambda a: qnp.asarray((a, a), dtype=np.float32), 1.0)(1.0)
    assert typed.dtype == np.float32 and typed.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("n, m, k", [(3, None, 1), (3, 4, -1), (2, 5, 3), (4, 2, -5)])
def test_eye_takes_numpys_k(n, m, k):
    np.testing.assert_array_equal(qnp.eye(n, m, k=k), np.eye(n, m, k=k))
    assert qnp.eye(n, m, k, dtype=np.int32).dtype == np.int32


@pytest.mark.parametrize("source, destination", [([0, 1], [-1, -2]), (0, -1), ((2, 0), (0, 1)),
                                                 ([], []), ([0, 1, 2], [2, 0, 1])])
def test_moveaxis_takes_sequences_of_axes(source, destination):
    x = np.arange(24.0).reshape(2, 3, 4)
    expected = np.moveaxis(x, source, destination)
    np.testing.assert_array_equal(qnp.moveaxis(x, source, destination), expected)
    traced = qdiff.trace(lambda v: qnp.moveaxis(v, source, destination), x)
    np.testing.assert_array_equal(traced(x), expected)


def test_moveaxis_rejects_repeated_or_unmatched_axes():
    with pytest.raises(qdiff.TypeCheckError, match="repeated"):
        qnp.moveaxis(np.zeros((2, 3)), [0, 0], [0, 1])
    with pytest.raises(qdiff.TypeCheckError, match="same number"):
        qnp.moveaxis(np.zeros((2, 3)), [0, 1], [0])


def test_numpy_ufuncs_on_tracers_dispatch_to_qdiff_numpy():
    x = np.array([0.1, 0.7, 2.0])
    f = qdiff.trace(lambda v: np.sin(v) * np.exp(v) + np.maximum(v, 0.5) + np.ones(3) * v, x)
    expected = np.sin(x) * np.exp(x) + np.maximum(x, 0.5) + x
    np.testing.assert_allclose(f(x), expected)
    g = qdiff.grad(lambda v: np.sum(np.sin(v)))(x)
    np.testing.assert_allclose(g, np.cos(x))


def test_numpy_functions_on_tracers_dispatch_to_qdiff_numpy():
    x = np.arange(6.0).reshape(2, 3)
    f = qdiff.trace(lambda v: (np.sum(v), np.sum(v, axis=0, keepdims=True), np.mean(v, 1),
                               np.where(v > 2, v, 0.0), np.transpose(v), np.concatenate([v, v]),
                               np.shape(v)), x)
    total, columns, rows, masked, flipped, joined, shape = f(x)
    assert float(total) == 15.0 and shape == (2, 3)
    np.testing.assert_array_equal(columns, np.sum(x, axis=0, keepdims=True))
    np.testing.assert_array_equal(rows, np.mean(x, 1))
    np.testing.assert_array_equal(masked, np.where(x > 2, x, 0.0))
    np.testing.assert_array_equal(flipped, x.T)
    np.testing.assert_array_equal(joined, np.concatenate([x, x]))


@pytest.mark.parametrize("call, message", [
    (lambda v: np.sum(v, out=np.zeros(())), "use qdiff.numpy.sum"),
    (lambda v: np.sin(v, dtype=np.float32), "use qdiff.numpy.sin"),
    (lambda v: np.cumsum(v), "numpy.cumsum has no qdiff.numpy counterpart"),
    (lambda v: np.add.reduce(v), "numpy.add.reduce is a ufunc method"),
])
def test_numpy_calls_qdiff_cannot_honour_say_what_to_use(call, message):
    with pytest.raises(qdiff.QdiffError, match=message):
        qdiff.trace(call, np.ones(3))
