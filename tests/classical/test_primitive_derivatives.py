"""Every differentiable primitive: forward and reverse agree (<vjp(c), t> == <c, jvp(t)>)
and match central finite differences, on random inputs and shapes."""

from __future__ import annotations

import numpy as np
import pytest
from derivative_checks import check_derivatives
from hypothesis import given, settings
from hypothesis import strategies as st

import qdiff
import qdiff.numpy as qnp


def _vec(rng, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=int(rng.integers(1, 5)))


def _mat(rng):
    return rng.normal(size=(int(rng.integers(1, 4)), int(rng.integers(1, 4))))


UNARY = {
    "neg": (qnp.negative, (-2, 2)), "exp": (qnp.exp, (-2, 2)), "log": (qnp.log, (0.5, 2)),
    "log1p": (qnp.log1p, (-0.5, 2)), "expm1": (qnp.expm1, (-2, 2)), "sin": (qnp.sin, (-2, 2)),
    "cos": (qnp.cos, (-2, 2)), "tan": (qnp.tan, (-1, 1)), "asin": (qnp.arcsin, (-0.8, 0.8)),
    "acos": (qnp.arccos, (-0.8, 0.8)), "atan": (qnp.arctan, (-2, 2)),
    "sinh": (qnp.sinh, (-2, 2)), "cosh": (qnp.cosh, (-2, 2)), "tanh": (qnp.tanh, (-2, 2)),
    "sqrt": (qnp.sqrt, (0.5, 2)), "abs": (qnp.abs, (0.2, 2)), "real": (qnp.real, (-1, 1)),
    "conj": (qnp.conj, (-1, 1)),
    # piecewise constant: zero derivative away from the jumps (times x keeps it non-trivial)
    "sign": (lambda x: qnp.sign(x) * x, (0.2, 2)),
    "floor": (lambda x: qnp.floor(x) * x, (0.1, 0.9)),
    "ceil": (lambda x: qnp.ceil(x) * x, (0.1, 0.9)),
    "round": (lambda x: qnp.round(x) * x, (0.1, 0.4)),
}

BINARY = {
    "add": qnp.add, "sub": qnp.subtract, "mul": qnp.multiply, "div": qnp.divide,
    "pow": qnp.power, "max": qnp.maximum, "min": qnp.minimum, "atan2": qnp.arctan2,
    "rem": qnp.remainder,
}

IDX = np.array([0, 2, 0, 1, 7, 2])


def _general_op(a, b):
    return a + b + 0.5 * a * b


STRUCTURAL = {
    "select": (lambda x, y: qnp.where(x > 0, x * y, y), lambda r: (_vec(r), None)),
    "convert": (lambda x: qnp.real(qnp.astype(x, np.complex128) * x) + qnp.astype(x > 0, float),
                lambda r: (_vec(r),)),
    "reduce_sum": (lambda x: qnp.sum(x, axis=0), lambda r: (_mat(r),)),
    "reduce_prod": (lambda x: qnp.prod(x, axis=1), lambda r: (_mat(r),)),
    "reduce_max": (lambda x: qnp.max(x, axis=(0, 1)), lambda r: (_mat(r),)),
    "reduce_min": (lambda x: qnp.min(x, axis=0), lambda r: (_mat(r),)),
    "argmax": (lambda x: x[qnp.argmax(x)] * qnp.sum(x), lambda r: (_vec(r),)),
    "argmin": (lambda x: x[qnp.argmin(x)] * qnp.sum(x), lambda r: (_vec(r),)),
    "reshape": (lambda x: qnp.reshape(x, (-1,)) * 2.0, lambda r: (_mat(r),)),
    "transpose": (lambda x: x.T @ x, lambda r: (_mat(r),)),
    "broadcast_in_dim": (lambda x: qnp.broadcast_to(x, (3, *x.shape)) * np.arange(3.0)[:, None],
                         lambda r: (_vec(r),)),
    "concatenate": (lambda x, y: qnp.concatenate([x, y * y]), lambda r: (_vec(r), _vec(r))),
    "slice": (lambda x: x[1::2, :] * x[:-1:2, :] if x.shape[0] > 1 else x[::2],
              lambda r: (r.normal(size=(int(r.integers(1, 6)), 3)),)),
    "rev": (lambda x: x[::-1] * x, lambda r: (_vec(r),)),
    "iota": (lambda x: x * qnp.arange(x.shape[0]), lambda r: (_vec(r),)),
    "dynamic_slice": (lambda x, i: x[i] * x, lambda r: (_vec(r), np.int64(0))),
    "dynamic_update_slice": (lambda x, v, i: x.at[i].set(v * v) * x,
                             lambda r: (_vec(r), 1.5, np.int64(0))),
    "gather": (lambda x: x[np.array([0, 0, -1])] * 3.0, lambda r: (_vec(r),)),
    "einsum": (lambda a, b: qnp.einsum("ij,jk->ik", a, b),
               lambda r: (r.normal(size=(2, 3)), r.normal(size=(3, 2)))),
    "map": (lambda x, c: qdiff.map(lambda v: qnp.sin(v) * c + v * v, x),
            lambda r: (_mat(r), 0.7)),
    "map_mixed": (lambda x, c: qdiff.map(lambda v: qnp.sin(v) * c, x, ad_mode="mixed"),
                  lambda r: (_vec(r), 0.7)),
    "reduce_add": (lambda x: qdiff.reduce("add", qnp.zeros(x.shape[1]), x), lambda r: (_mat(r),)),
    "reduce_mul": (lambda x: qdiff.reduce("mul", 1.0, x), lambda r: (_vec(r),)),
    "reduce_maxop": (lambda x: qdiff.reduce("max", -np.inf, x), lambda r: (_vec(r),)),
    "reduce_general": (lambda x: qdiff.reduce(_general_op, 0.0, x), lambda r: (_vec(r),)),
    "reduce_free_variable": (lambda x, w: qdiff.reduce(lambda a, b: a + w * b, 0.0, x),
                             lambda r: (_vec(r), 0.8)),
    "scan_add": (lambda x: qdiff.scan("add", 0.0, x), lambda r: (_vec(r),)),
    "scan_mul": (lambda x: qdiff.scan("mul", 1.0, x), lambda r: (_vec(r),)),
    "scan_general": (lambda x: qdiff.scan(_general_op, 0.0, x), lambda r: (_vec(r),)),
    "scan_pair": (lambda x, y: qdiff.scan(lambda a, b: (a[0] * b[0], a[1] * b[0] + b[1]),
                                          (1.0, 0.0), (x, y))[1],
                  lambda r: (r.normal(size=4), r.normal(size=4))),
    "hist_add": (lambda d, v: qdiff.hist(d, "add", 0.0, IDX, v),
                 lambda r: (r.normal(size=3), r.normal(size=6))),
    "hist_mul": (lambda d, v: qdiff.hist(d, "mul", 1.0, IDX, v),
                 lambda r: (r.normal(size=3), r.normal(size=6))),
    "hist_max": (lambda d, v: qdiff.hist(d, "max", -np.inf, IDX, v),
                 lambda r: (r.normal(size=3), r.normal(size=6))),
    "hist_min": (lambda d, v: qdiff.hist(d, "min", np.inf, IDX, v),
                 lambda r: (r.normal(size=3), r.normal(size=6))),
    "hist_general": (lambda d, v: qdiff.hist(d, lambda a, b: a + b * b, 0.0, IDX, v),
                     lambda r: (r.normal(size=3), r.normal(size=6))),
    "scatter": (lambda d, v: qdiff.scatter(d, IDX, v) * d,
                lambda r: (r.normal(size=3), r.normal(size=6))),
    "loop": (lambda x, w: qdiff.fori_loop(0, 6, lambda i, s: qnp.tanh(w * s + x[i % 2]), 0.1),
             lambda r: (_vec(r)[:1].repeat(2) + np.array([0.0, 0.3]), 0.8)),
    "while": (lambda a: qdiff.while_loop(lambda s: qnp.abs(s * s - a) > 1e-13,
                                         lambda s: 0.5 * (s + a / s), a),
              lambda r: (r.uniform(1.0, 4.0),)),
    "cond": (lambda x: qdiff.cond(qnp.sum(x) > 0, lambda v: qnp.sin(v) * v, lambda v: -v, x),
             lambda r: (_vec(r),)),
}

SEEDS = given(seed=st.integers(0, 2 ** 16))
FEW = settings(max_examples=4, deadline=None)


@pytest.mark.parametrize("name", sorted(UNARY))
@FEW
@SEEDS
def test_unary(name, seed):
    fn, (low, high) = UNARY[name]
    rng = np.random.default_rng(seed)
    check_derivatives(fn, rng.uniform(low, high, size=int(rng.integers(1, 5))), seed=seed)


@pytest.mark.parametrize("name", sorted(BINARY))
@FEW
@SEEDS
def test_binary(name, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5))
    x, y = rng.uniform(0.5, 2.0, size=n), rng.uniform(0.5, 2.0, size=n)
    if name == "rem":
        x = y * (rng.integers(0, 3, size=n) + rng.uniform(0.2, 0.8, size=n))
    check_derivatives(BINARY[name], x, y, seed=seed)
    check_derivatives(BINARY[name], x, np.float64(y[0]), seed=seed)  # rank-0 operand


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
@FEW
@SEEDS
def test_structural(name, seed):
    fn, make = STRUCTURAL[name]
    rng = np.random.default_rng(seed)
    args = make(rng)
    if name == "select":
        args = (args[0], rng.normal(size=args[0].shape))
    check_derivatives(fn, *args, seed=seed)


def test_stop_gradient_treats_its_value_as_a_constant():
    x = np.array([1.0, -2.0])
    f = lambda v: qnp.sum(qdiff.stop_gradient(v) * v)  # noqa: E731
    np.testing.assert_allclose(qdiff.grad(f)(x), x)
    np.testing.assert_allclose(qdiff.jvp(f, (x,), (np.ones(2),))[1], np.sum(x))
