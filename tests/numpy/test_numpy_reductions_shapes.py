"""Reductions, shape ops and products against NumPy on random shapes (hypothesis)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import qdiff
import qdiff.numpy as qnp

REDUCTIONS = {
    "sum": (qnp.sum, np.sum), "prod": (qnp.prod, np.prod), "max": (qnp.max, np.max),
    "min": (qnp.min, np.min), "mean": (qnp.mean, np.mean),
}


def _axes(shape):
    return st.one_of(st.none(), st.sets(st.integers(0, len(shape) - 1)).map(tuple)
                     if shape else st.none())


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@settings(max_examples=20, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
       keepdims=st.booleans())
def test_reductions_match_numpy(name, data, shape, keepdims):
    ours, theirs = REDUCTIONS[name]
    x = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-2, 2)))
    axis = data.draw(_axes(shape))
    p = qdiff.trace(lambda v: ours(v, axis, keepdims=keepdims), x)
    np.testing.assert_allclose(p(x), theirs(x, axis=axis, keepdims=keepdims), rtol=1e-12)


@settings(max_examples=20, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
def test_logsumexp_argmax_argmin(data, shape):
    from scipy.special import logsumexp

    x = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-50, 50)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    np.testing.assert_allclose(qdiff.trace(lambda v: qnp.logsumexp(v, axis), x)(x),
                               logsumexp(x, axis=axis), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(qdiff.trace(lambda v: qnp.argmax(v, axis), x)(x),
                                  np.argmax(x, axis=axis))
    np.testing.assert_array_equal(qdiff.trace(qnp.argmin, x)(x), np.argmin(x))


@settings(max_examples=30, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=4, max_side=4))
def test_shape_ops_match_numpy(data, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    perm = data.draw(st.permutations(range(len(shape))))
    cases = [
        (lambda v: qnp.transpose(v, perm), lambda v: np.transpose(v, perm)),
        (lambda v: qnp.reshape(v, (-1,)), lambda v: v.reshape(-1)),
        (lambda v: v.T, lambda v: v.T),
        (lambda v: qnp.expand_dims(v, 0), lambda v: np.expand_dims(v, 0)),
        (lambda v: qnp.squeeze(qnp.expand_dims(v, -1)), lambda v: np.squeeze(v[..., None])),
        (lambda v: qnp.concatenate([v, v], axis=-1), lambda v: np.concatenate([v, v], -1)),
        (lambda v: qnp.stack([v, 2 * v], axis=1), lambda v: np.stack([v, 2 * v], 1)),
        (lambda v: qnp.broadcast_to(v, (2, *shape)), lambda v: np.broadcast_to(v, (2, *shape))),
        (lambda v: qnp.moveaxis(v, 0, -1), lambda v: np.moveaxis(v, 0, -1)),
    ]
    for ours, theirs in cases:
        np.testing.assert_array_equal(qdiff.trace(ours, x)(x), theirs(x))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 4), m=st.integers(1, 4), k=st.integers(1, 4), b=st.integers(1, 3))
def test_products_match_numpy(n, m, k, b):
    rng = np.random.default_rng(n * 100 + m * 10 + k)
    A, B = rng.normal(size=(n, m)), rng.normal(size=(m, k))
    v, w = rng.normal(size=m), rng.normal(size=m)
    T = rng.normal(size=(b, n, m))
    checks = [
        (qnp.dot, np.dot, (A, B)), (qnp.dot, np.dot, (A, v)), (qnp.dot, np.dot, (v, w)),
        (qnp.matmul, np.matmul, (T, B)), (qnp.matmul, np.matmul, (v, B)),
        (qnp.outer, np.outer, (v, w)), (qnp.inner, np.inner, (A, v)),
        (lambda x, y: qnp.einsum("bij,jk->bki", x, y), lambda x, y: np.einsum("bij,jk->bki", x, y),
         (T, B)),
        (lambda x, y: qnp.einsum("ij,ij", x, y), lambda x, y: np.einsum("ij,ij", x, y), (A, A)),
        (lambda x, y: qnp.einsum("...ij,j->...", x, y),
         lambda x, y: np.einsum("...ij,j->...", x, y), (T, v)),
        (lambda x, y: qnp.einsum("ij,kl->ik", x, y), lambda x, y: np.einsum("ij,kl->ik", x, y),
         (A, B)),
    ]
    for ours, theirs, args in checks:
        np.testing.assert_allclose(qdiff.trace(ours, *args)(*args), theirs(*args), rtol=1e-12,
                                   atol=1e-12)
    np.testing.assert_allclose(qdiff.trace(lambda x: qnp.einsum("ij->j", x), A)(A), A.sum(0))
    np.testing.assert_allclose(qdiff.trace(lambda x, y: x @ y, A, B)(A, B), A @ B)


def test_product_errors_name_the_problem():
    with pytest.raises(qdiff.TypeCheckError, match="inner dimensions"):
        qdiff.trace(qnp.matmul, np.zeros((2, 3)), np.zeros((2, 3)))
    with pytest.raises(qdiff.TypeCheckError, match="repeated index"):
        qnp.einsum("ii->i", np.eye(2))
    with pytest.raises(qdiff.TypeCheckError, match="cannot reshape"):
        qdiff.trace(lambda v: qnp.reshape(v, (4, 2)), np.zeros(6))
