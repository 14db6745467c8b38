"""First and second derivatives of the classical primitives against JAX (x64), at generic
points and edge points (zeros, ties, ±inf, NaN, empty arrays): ``grad``, ``hessian``,
``jacobian(grad)``, ``jvp(grad)`` and ``grad(grad)``.

Primitives outside the table are listed with the reason; conventions where qdiff and JAX
differ on purpose are written down and checked.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.ir.primitives import all_primitives, get_primitive
from qdiff.ir.tracer import bind

jax.config.update("jax_enable_x64", True)

GENERIC = np.array([0.3, -0.7, 1.2])
EDGE = np.array([0.0, 1.0, -1.0, 0.0])
# log and sqrt are compared away from their singular point 0 (JAX: inf/NaN there too)
POSITIVE = np.array([0.4, 1.3, 2.0, 1e-3])

# primitive -> (qdiff function, JAX function, points); elementwise ones applied to vectors
UNARY = {
    "neg": (qnp.negative, jnp.negative, (GENERIC, EDGE)),
    "exp": (qnp.exp, jnp.exp, (GENERIC, EDGE)),
    "log": (qnp.log, jnp.log, (POSITIVE,)),
    "log1p": (qnp.log1p, jnp.log1p, (GENERIC, EDGE * 0.5)),
    "expm1": (qnp.expm1, jnp.expm1, (GENERIC, EDGE)),
    "sin": (qnp.sin, jnp.sin, (GENERIC, EDGE)),
    "cos": (qnp.cos, jnp.cos, (GENERIC, EDGE)),
    "tan": (qnp.tan, jnp.tan, (GENERIC, EDGE)),
    "asin": (qnp.arcsin, jnp.arcsin, (GENERIC * 0.5, EDGE * 0.5)),
    "acos": (qnp.arccos, jnp.arccos, (GENERIC * 0.5, EDGE * 0.5)),
    "atan": (qnp.arctan, jnp.arctan, (GENERIC, EDGE)),
    "sinh": (qnp.sinh, jnp.sinh, (GENERIC, EDGE)),
    "cosh": (qnp.cosh, jnp.cosh, (GENERIC, EDGE)),
    "tanh": (qnp.tanh, jnp.tanh, (GENERIC, EDGE)),
    "sqrt": (qnp.sqrt, jnp.sqrt, (POSITIVE,)),
    # qdiff's convention: |x|' = sign(x), 0 at 0 (JAX: 1); checked in test_abs_at_zero
    "abs": (qnp.abs, jnp.abs, (GENERIC, EDGE[1:3])),
    "sign": (lambda x: qnp.sign(x) * x, lambda x: jnp.sign(x) * x, (GENERIC, EDGE)),
    "floor": (lambda x: qnp.floor(x) * x, lambda x: jnp.floor(x) * x, (GENERIC, EDGE)),
    "ceil": (lambda x: qnp.ceil(x) * x, lambda x: jnp.ceil(x) * x, (GENERIC, EDGE)),
    "round": (lambda x: qnp.round(x) * x, lambda x: jnp.round(x) * x, (GENERIC, EDGE)),
    "real": (qnp.real, jnp.real, (GENERIC,)),
    "conj": (qnp.conj, jnp.conj, (GENERIC,)),
    "imag": (lambda x: qnp.imag(x) + x, lambda x: jnp.imag(x) + x, (GENERIC,)),
    "convert": (lambda x: qnp.astype(x, np.float32) * x, lambda x: x.astype(jnp.float32) * x,
                (GENERIC,)),
}
TIES = np.array([1.0, 1.0, -2.0]), np.array([1.0, 3.0, -2.0])
BINARY = {
    "add": (qnp.add, jnp.add), "sub": (qnp.subtract, jnp.subtract),
    "mul": (qnp.multiply, jnp.multiply), "div": (qnp.divide, jnp.divide),
    "pow": (qnp.power, jnp.power), "max": (qnp.maximum, jnp.maximum),
    "min": (qnp.minimum, jnp.minimum), "atan2": (qnp.arctan2, jnp.arctan2),
    "rem": (qnp.remainder, jnp.remainder),
    "select": (lambda x, y: qnp.where(x > 0, x * y, y), lambda x, y: jnp.where(x > 0, x * y, y)),
}
BINARY_POINTS = {"pow": [(POSITIVE[:3] + 0.5, GENERIC), (np.array([0.0, 2.0, 1.5]),
                                                         np.array([2.0, 3.0, 0.0]))],
                 "div": [(GENERIC, GENERIC[::-1] + 2.0)], "rem": [(GENERIC + 3.0, GENERIC + 2.0)],
                 "atan2": [(GENERIC, GENERIC[::-1] + 0.5)]}
REDUCTIONS = {
    "reduce_sum": (lambda x: qnp.sum(x, axis=0), lambda x: jnp.sum(x, axis=0)),
    "reduce_prod": (lambda x: qnp.prod(x, axis=1), lambda x: jnp.prod(x, axis=1)),
    "reduce_max": (lambda x: qnp.max(x, axis=1), lambda x: jnp.max(x, axis=1)),
    "reduce_min": (lambda x: qnp.min(x, axis=0), lambda x: jnp.min(x, axis=0)),
}
MATRICES = (np.array([[0.3, -1.2, 2.0], [1.5, 0.4, -0.6]]),
            np.array([[2.0, 0.0, 3.0], [0.0, 0.0, 1.5]]))
# qdiff's convention at ties of reduce_max/min: the whole derivative goes to the FIRST index
# attaining the extremum (as argmax); JAX splits it evenly. Checked against a first-index
# reference below.
TIED_MATRIX = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, -1.0]])
VECTOR = np.array([0.3, -0.7, 1.2, 0.5])
IDX = np.array([0, 2, 0, 3])
DISTINCT = np.array([2, 0])


def _unpack(x):
    return qnp.stack(bind(get_primitive("unpack"), x, indices=(0, 2, 0)))


def _fold(op, neutral, xs):
    """A left fold in JAX: the reference of qdiff's reduce with a general operator."""
    acc = neutral
    for k in range(xs.shape[0]):
        acc = op(acc, xs[k])
    return acc


def _cumulative(op, neutral, xs):
    acc, out = neutral, []
    for k in range(xs.shape[0]):
        acc = op(acc, xs[k])
        out.append(acc)
    return jnp.stack(out)


def _associative(a, b):
    return a + b + a * b  # (1 + a)(1 + b) - 1: associative, not one of the named monoids


def _step(i, c, x):
    return c * x[i % 4] + qnp.sin(c)


def _jax_step(i, c, x):
    return c * x[i % 4] + jnp.sin(c)


# structural, SOAC and control-flow primitives: (qdiff f, JAX g) of one vector, scalar valued
STRUCTURAL = {
    "dynamic_slice": (lambda x: qnp.sin(x[qnp.argmax(x)]) * x[0],
                      lambda x: jnp.sin(x[jnp.argmax(x)]) * x[0]),
    "dynamic_update_slice": (lambda x: qnp.sum(qnp.sin(x.at[qnp.argmin(x)].set(x[0] * x[1]))),
                             lambda x: jnp.sum(jnp.sin(x.at[jnp.argmin(x)].set(x[0] * x[1])))),
    "gather": (lambda x: qnp.sum(qnp.sin(x[IDX]) * x[IDX]),
               lambda x: jnp.sum(jnp.sin(x[IDX]) * x[IDX])),
    "unpack": (lambda x: qnp.sum(qnp.sin(_unpack(x)) * _unpack(x)),
               lambda x: jnp.sum(jnp.sin(x[np.array([0, 2, 0])]) * x[np.array([0, 2, 0])])),
    "einsum": (lambda x: qnp.sum(qnp.sin(qnp.einsum("i,j->ij", x, x * x))),
               lambda x: jnp.sum(jnp.sin(jnp.einsum("i,j->ij", x, x * x)))),
    "reshape": (lambda x: qnp.sum(qnp.sin(qnp.reshape(x, (2, 2))[0]) * x[:2]),
                lambda x: jnp.sum(jnp.sin(jnp.reshape(x, (2, 2))[0]) * x[:2])),
    "transpose": (lambda x: qnp.sum(qnp.sin(qnp.reshape(x, (2, 2)).T[0]) * x[:2]),
                  lambda x: jnp.sum(jnp.sin(jnp.reshape(x, (2, 2)).T[0]) * x[:2])),
    "broadcast_in_dim": (lambda x: qnp.sum(qnp.sin(qnp.broadcast_to(x, (4, 4)) * x[:, None])),
                         lambda x: jnp.sum(jnp.sin(jnp.broadcast_to(x, (4, 4)) * x[:, None]))),
    "concatenate": (
        lambda x: qnp.sum(qnp.sin(qnp.concatenate([x, x * x])) * qnp.concatenate([x, x])),
        lambda x: jnp.sum(jnp.sin(jnp.concatenate([x, x * x])) * jnp.concatenate([x, x]))),
    "slice": (lambda x: qnp.sum(qnp.sin(x[1:4:2]) * x[0:2]),
              lambda x: jnp.sum(jnp.sin(x[1:4:2]) * x[0:2])),
    "rev": (lambda x: qnp.sum(qnp.sin(x[::-1]) * x), lambda x: jnp.sum(jnp.sin(x[::-1]) * x)),
    "scatter": (lambda x: qnp.sum(qnp.sin(x.at[DISTINCT].set(x[:2] * x[3]))),
                lambda x: jnp.sum(jnp.sin(x.at[DISTINCT].set(x[:2] * x[3])))),
    # JAX differentiates a multiplying scatter only at indices it is told are distinct
    "hist": (lambda x: qnp.sum(qnp.sin(x.at[IDX].add(x * x)) + x.at[DISTINCT].multiply(x[1:3])),
             lambda x: jnp.sum(jnp.sin(x.at[IDX].add(x * x))
                               + x.at[DISTINCT].multiply(x[1:3], unique_indices=True))),
    "map": (lambda x: qnp.sum(qdiff.map(lambda v: qnp.sin(v) * v, x)),
            lambda x: jnp.sum(jax.vmap(lambda v: jnp.sin(v) * v)(x))),
    "reduce": (lambda x: qdiff.reduce(_associative, 0.0, qnp.sin(x)),
               lambda x: _fold(_associative, 0.0, jnp.sin(x))),
    "scan": (lambda x: qnp.sum(qdiff.scan(_associative, 0.0, x) ** 2),
             lambda x: jnp.sum(_cumulative(_associative, 0.0, x) ** 2)),
    "loop": (lambda x: qdiff.fori_loop(0, 3, lambda i, c: _step(i, c, x), x[1]),
             lambda x: jax.lax.fori_loop(0, 3, lambda i, c: _jax_step(i, c, x), x[1])),
    # JAX's while_loop has no reverse mode: the reference is its fori_loop (3 iterations here)
    "while": (lambda x: qdiff.while_loop(lambda c: c[0] < 3, lambda c: (
        c[0] + 1, _step(c[0], c[1], x)), (0, x[1]))[1],
        lambda x: jax.lax.fori_loop(0, 3, lambda i, c: _jax_step(i, c, x), x[1])),
    "cond": (lambda x: qdiff.cond(x[0] > 0, lambda v: qnp.sin(v) * v, lambda v: v * v, x[2]),
             lambda x: jax.lax.cond(x[0] > 0, lambda v: jnp.sin(v) * v, lambda v: v * v, x[2])),
    "stop_gradient": (lambda x: qnp.sum(qdiff.stop_gradient(x * x) * qnp.sin(x)),
                      lambda x: jnp.sum(jax.lax.stop_gradient(x * x) * jnp.sin(x))),
}


def _shifted(x):
    """A 2x2 matrix from a 4-vector, kept invertible at every test point."""
    return x.reshape(2, 2) + 3.0 * np.eye(2)


def _spd(x, ns):
    m = ns.reshape(x, (2, 2))
    return ns.matmul(m, m.T) + np.eye(2)


B = np.array([[1.0, -2.0], [0.5, 3.0]])
STRUCTURAL.update({
    "solve": (lambda x: qnp.sum(qnp.sin(qnp.linalg.solve(_shifted(x), B * x[0]))),
              lambda x: jnp.sum(jnp.sin(jnp.linalg.solve(_shifted(x), B * x[0])))),
    "cholesky": (lambda x: qnp.sum(qnp.sin(qnp.linalg.cholesky(_spd(x, qnp)))),
                 lambda x: jnp.sum(jnp.sin(jnp.linalg.cholesky(_spd(x, jnp))))),
    "logabsdet": (lambda x: qnp.linalg.slogdet(_shifted(x))[1] * x[1],
                  lambda x: jnp.linalg.slogdet(_shifted(x))[1] * x[1]),
    "det_sign": (lambda x: qnp.linalg.det(_shifted(x) * (x[2] + 2.5)),
                 lambda x: jnp.linalg.det(_shifted(x) * (x[2] + 2.5))),
})
MATRIX = np.array([[0.3, -1.2, 2.0], [1.5, 0.0, 0.0]])
SQUARE = np.array([[2.0, 0.3, -0.5], [0.1, 1.5, 0.2], [-0.4, 0.6, 3.0]])
# the NumPy functions built from primitives, on a 2x3 matrix (qdiff f, JAX g, point)
NUMPY_FUNCTIONS = {
    "roll": (lambda x: qnp.roll(x, (1, -1), (0, 1)), lambda x: jnp.roll(x, (1, -1), (0, 1))),
    "cumsum": (lambda x: qnp.cumsum(x, axis=1), lambda x: jnp.cumsum(x, axis=1)),
    "cumprod": (lambda x: qnp.cumprod(x), lambda x: jnp.cumprod(x)),
    "repeat": (lambda x: qnp.repeat(x, [2, 0, 1], axis=1),
               lambda x: jnp.repeat(x, np.array([2, 0, 1]), axis=1, total_repeat_length=3)),
    "tile": (lambda x: qnp.tile(x, (2, 1)), lambda x: jnp.tile(x, (2, 1))),
    "diff": (lambda x: qnp.diff(x, n=2), lambda x: jnp.diff(x, n=2)),
    "triu": (lambda x: qnp.triu(x, 1), lambda x: jnp.triu(x, 1)),
    "tril": (lambda x: qnp.tril(x), lambda x: jnp.tril(x)),
    "triu_indices": (lambda x: x[qnp.triu_indices(2, 0, 3)],
                     lambda x: x[jnp.triu_indices(2, 0, 3)]),
    "tril_indices": (lambda x: x[qnp.tril_indices(2, 0, 3)],
                     lambda x: x[jnp.tril_indices(2, 0, 3)]),
    "take_along_axis": (lambda x: qnp.take_along_axis(x, qnp.argmax(x, axis=1)[:, None], 1),
                        lambda x: jnp.take_along_axis(x, jnp.argmax(x, axis=1)[:, None], 1)),
    "cross": (lambda x: qnp.cross(x, x[::-1] * x), lambda x: jnp.cross(x, x[::-1] * x)),
    "trace": (lambda x: qnp.trace(x, 1) * x, lambda x: jnp.trace(x, 1) * x),
    "diagonal": (lambda x: qnp.diagonal(x), lambda x: jnp.diagonal(x)),
    "diag": (lambda x: qnp.diag(x[0], 1) @ qnp.diag(x[1] * x[0], -1),
             lambda x: jnp.diag(x[0], 1) @ jnp.diag(x[1] * x[0], -1)),
    "linalg.solve": (lambda x: qnp.linalg.solve(SQUARE * (x[0, 0] + 2.0), x[1]),
                     lambda x: jnp.linalg.solve(SQUARE * (x[0, 0] + 2.0), x[1])),
    "linalg.inv": (lambda x: qnp.linalg.inv(SQUARE + qnp.diag(x[0])),
                   lambda x: jnp.linalg.inv(SQUARE + jnp.diag(x[0]))),
    "linalg.det": (lambda x: qnp.linalg.det(SQUARE + qnp.outer(x[0], x[1])),
                   lambda x: jnp.linalg.det(SQUARE + jnp.outer(x[0], x[1]))),
    "linalg.slogdet": (lambda x: qnp.linalg.slogdet(SQUARE - qnp.outer(x[1], x[0]))[1],
                       lambda x: jnp.linalg.slogdet(SQUARE - jnp.outer(x[1], x[0]))[1]),
    "linalg.cholesky": (lambda x: qnp.linalg.cholesky(SQUARE @ SQUARE.T + qnp.outer(x[0], x[0])),
                        lambda x: jnp.linalg.cholesky(SQUARE @ SQUARE.T + jnp.outer(x[0], x[0]))),
}
NOT_IN_TABLE = {
    # no derivative: boolean-valued or integer-valued (their zero derivative is checked by
    # tests/classical/test_primitive_derivatives.py)
    **dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "not",
                     "argmax", "argmin", "floor_div", "iota"), "integer/boolean valued"),
    # made only by reverse-mode loops (a zero buffer for checkpoints), never by user code
    "checkpoint_buffer": "internal to the derivative of loops; no JAX counterpart",
    # made only by qdiff.jit around a quantum part: a compiled run of other primitives, whose
    # values and derivatives tests/compiler/test_compiled_around_quantum.py checks
    "compiled_segment": "a compiled run of other primitives; no JAX counterpart",
}


def _sum_of(fn):
    return lambda *xs: qnp.sum(fn(*xs))


def _jax_sum_of(fn):
    return lambda *xs: jnp.sum(fn(*xs))


def _jax_derivatives(g):
    """The gradient and Hessian in ``v`` of the scalar JAX function ``g(v, *rest)``, as one
    jitted program: much faster than op-by-op dispatch, and made once per function so that
    points of one shape share its compilation (XLA's compile is most of this file's time)."""
    return jax.jit(lambda v, *rest: (jax.grad(g)(v, *rest), jax.hessian(g)(v, *rest)))


def _compare(f, derivatives, x, where, *rest):
    """grad, hessian, jacobian(grad), jvp(grad), grad(grad of a sum) of scalar f vs JAX's
    ``derivatives(x, *rest)`` (from `_jax_derivatives`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        grad, hess = (np.asarray(a) for a in derivatives(
            jnp.asarray(x), *(jnp.asarray(r) for r in rest)))
        rtol = 1e-6 if "convert" in where else 1e-9  # convert goes through float32
        ok = dict(rtol=rtol, atol=1e-12, equal_nan=True, err_msg=where)
        np.testing.assert_allclose(qdiff.grad(f)(x), grad, **ok)
        np.testing.assert_allclose(qdiff.hessian(f)(x), hess, **ok)
        np.testing.assert_allclose(qdiff.jacobian(qdiff.grad(f))(x), hess, **ok)
        square = hess.reshape(x.size, x.size)
        tangent = np.linspace(1.0, 2.0, x.size).reshape(x.shape)
        _, column = qdiff.jvp(qdiff.grad(f), (x,), (tangent,))
        np.testing.assert_allclose(column, (square @ tangent.ravel()).reshape(x.shape), **ok)
        # grad of Σ_i ∂f/∂x_i: the Hessian's column sums
        second = qdiff.grad(lambda v: qnp.sum(qdiff.grad(f)(v)))(x)
        np.testing.assert_allclose(second, square.sum(axis=0).reshape(x.shape), **ok)


@pytest.mark.parametrize("name", UNARY)
def test_unary_primitive_derivatives_match_jax(name):
    ours, theirs, points = UNARY[name]
    derivatives = _jax_derivatives(_jax_sum_of(theirs))
    for x in points:
        _compare(_sum_of(ours), derivatives, x, f"{name} at {x}")


@pytest.mark.parametrize("name", BINARY)
def test_binary_primitive_derivatives_match_jax(name):
    ours, theirs = BINARY[name]
    in_x = _jax_derivatives(lambda v, y: jnp.sum(theirs(v, y)))
    in_y = _jax_derivatives(lambda v, x: jnp.sum(theirs(x, v)))
    for x, y in BINARY_POINTS.get(name, [(GENERIC, GENERIC[::-1]), TIES, (EDGE[:3], TIES[0])]):
        _compare(lambda v, y=y: qnp.sum(ours(v, y)), in_x, x, f"{name} d/dx at {x}, {y}", y)
        _compare(lambda v, x=x: qnp.sum(ours(x, v)), in_y, y, f"{name} d/dy at {x}, {y}", x)


@pytest.mark.parametrize("name", STRUCTURAL)
def test_structural_primitive_derivatives_match_jax(name):
    ours, theirs = STRUCTURAL[name]
    program = qdiff.trace(ours, VECTOR)
    used = {e.primitive.name for e in program.eqns}
    assert name in used or name == "unpack" or any(
        name in {s.primitive.name for s in sub.eqns} for e in program.eqns
        for sub in e.params.values() if isinstance(sub, qdiff.Program)), (name, used)
    derivatives = _jax_derivatives(theirs)
    for x in (VECTOR, np.zeros(4), np.array([1.0, 1.0, -2.0, 0.0])):
        _compare(ours, derivatives, x, f"{name} at {x}")


@pytest.mark.parametrize("name", NUMPY_FUNCTIONS)
def test_numpy_function_derivatives_match_jax(name):
    ours, theirs = NUMPY_FUNCTIONS[name]
    # a generic point, one with zeros (cumprod's zero products) and one with ties
    derivatives = _jax_derivatives(lambda v: jnp.sum(jnp.sin(theirs(v)) * theirs(v)))
    for x in (MATRIX, np.zeros((2, 3)), np.array([[1.0, 1.0, -2.0], [0.5, 0.5, 0.5]])):
        _compare(lambda v: qnp.sum(qnp.sin(ours(v)) * ours(v)), derivatives, x,
                 f"{name} at {x}")


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_derivatives_match_jax(name):
    ours, theirs = REDUCTIONS[name]
    derivatives = _jax_derivatives(lambda v: jnp.sum(theirs(v) ** 2))
    for x in MATRICES if name != "reduce_min" else MATRICES[:1]:  # ties: see below
        _compare(lambda v: qnp.sum(ours(v) ** 2), derivatives, x, f"{name} at {x}")


@pytest.mark.parametrize("name, kind", [("reduce_max", "max"), ("reduce_min", "min")])
def test_extremum_ties_give_the_first_index(name, kind):
    ours, _ = REDUCTIONS[name]
    x = TIED_MATRIX if kind == "max" else -TIED_MATRIX.T
    grad = qdiff.grad(lambda v: qnp.sum(ours(v)))(x)
    axis = 1 if kind == "max" else 0
    first = np.argmax(x if kind == "max" else -x, axis=axis)
    expected = np.zeros_like(x)
    np.put_along_axis(expected, np.expand_dims(first, axis), 1.0, axis)
    np.testing.assert_array_equal(grad, expected)
    assert np.all(qdiff.hessian(lambda v: qnp.sum(ours(v)))(x) == 0)


def test_empty_and_infinite_inputs():
    empty = np.zeros((0,))
    assert qdiff.grad(lambda v: qnp.sum(qnp.exp(v)))(empty).shape == (0,)
    assert qdiff.hessian(lambda v: qnp.sum(qnp.sin(v)))(empty).shape == (0, 0)
    x = np.array([np.inf, -np.inf, np.nan, 1.0])
    for ours, theirs in ((qnp.exp, jnp.exp), (qnp.tanh, jnp.tanh), (qnp.arctan, jnp.arctan),
                         (qnp.sin, jnp.sin), (lambda v: v * v, lambda v: v * v)):
        np.testing.assert_allclose(qdiff.grad(_sum_of(ours))(x),
                                   jax.grad(_jax_sum_of(theirs))(jnp.asarray(x)),
                                   equal_nan=True)
        np.testing.assert_allclose(qdiff.hessian(_sum_of(ours))(x),
                                   jax.hessian(_jax_sum_of(theirs))(jnp.asarray(x)),
                                   equal_nan=True)


def test_integer_inputs_have_no_derivative():
    # JAX refuses integer inputs to grad; qdiff refuses an integer-valued function and
    # gives a float argument's gradient when another argument is an integer array
    ints = np.array([1, 2])
    with pytest.raises(TypeError):
        jax.grad(lambda v: jnp.sum(v * v))(jnp.asarray(ints))
    with pytest.raises(qdiff.QdiffError, match="float scalar"):
        qdiff.grad(lambda v: qnp.sum(v * v))(ints)
    grad = qdiff.grad(lambda x, n: qnp.sum(x * x * n))(np.array([1.0, 2.0]), ints)
    np.testing.assert_array_equal(grad, jax.grad(lambda x: jnp.sum(x * x * ints))(
        jnp.array([1.0, 2.0])))


def test_every_classical_primitive_is_compared_or_listed():
    classical = {name for name, p in all_primitives().items()
                 if p.impls.get("numpy") is not None and not p.impls["numpy"].__module__
                 .startswith("qdiff.quantum")} | {"stop_gradient", "checkpoint_buffer"}
    # derivative_call: a quantum program's derivative inside classical code (its
    # derivatives are checked in tests/quantum/gradients/test_higher_derivatives.py)
    classical -= {"bit_to_int", "qextend", "derivative_call"}
    compared = set(UNARY) | set(BINARY) | set(REDUCTIONS) | set(STRUCTURAL)
    assert compared | set(NOT_IN_TABLE) <= classical
    assert classical - compared - set(NOT_IN_TABLE) == set()


def test_abs_at_zero_has_derivative_zero():
    assert float(qdiff.grad(qnp.abs)(0.0)) == 0.0
    assert float(qdiff.grad(qdiff.grad(qnp.abs))(0.0)) == 0.0
