"""Nested transformations that close over traced values of the enclosing trace, as in JAX:
a directional derivative inside a gradient, a gradient inside a gradient, a VJP or a
Jacobian of a closure. Checked against closed forms, central finite differences and JAX.
"""

from __future__ import annotations

import numpy as np
import pytest
from oracles import central_difference

import qdiff
import qdiff.numpy as qnp

jax = pytest.importorskip("jax")
jnp = jax.numpy
jax.config.update("jax_enable_x64", True)


def test_jvp_closing_over_an_outer_tracer_escaped_its_scope():
    # qdiff.grad(lambda x: qdiff.jvp(lambda y: sin(x*y), (x,), (1,))[1]) failed with "a
    # traced value escaped the scope it was defined in"; f(x) = x cos(x²)
    def f(x):
        return qdiff.jvp(lambda y: qnp.sin(x * y), (x,), (1.0,))[1]

    x = 0.3
    assert np.isclose(f(x), x * np.cos(x * x))
    assert np.isclose(qdiff.grad(f)(x), np.cos(x * x) - 2 * x * x * np.sin(x * x))
    assert np.isclose(qdiff.grad(qdiff.grad(f))(x), central_difference(qdiff.grad(f), x))


def _programs(ns, grad, jvp, vjp, jacobian, hessian):
    """The same nested programs for qdiff (ns = qnp) and JAX (ns = jnp)."""
    def directional(x):  # a JVP of a gradient of a closure, inside the outer derivative
        inner = grad(lambda y: ns.sum(ns.sin(x * y) * y))
        return ns.sum(jvp(inner, (x,), (ns.cos(x),))[1])

    def nested_grad(x):
        return ns.sum(grad(lambda y: ns.sum(ns.exp(x * y) * x))(x * x))

    def through_vjp(x):
        _, back = vjp(lambda y: ns.tanh(y * x[::-1]), x)
        return ns.sum(back(ns.sin(x))[0] ** 2)

    def through_jacobian(x):
        return ns.sum(jacobian(lambda y: ns.cos(x * y[0]) * y)(x) * x)

    def through_hessian(x):
        return ns.sum(hessian(lambda y: ns.sum(ns.sin(y * x) ** 2))(x) ** 2)

    return {"directional": directional, "nested_grad": nested_grad,
            "through_vjp": through_vjp, "through_jacobian": through_jacobian,
            "through_hessian": through_hessian}


OURS = _programs(qnp, qdiff.grad, qdiff.jvp, qdiff.vjp, qdiff.jacobian, qdiff.hessian)
THEIRS = _programs(jnp, jax.grad, jax.jvp, jax.vjp, jax.jacobian, jax.hessian)


@pytest.mark.parametrize("name", OURS)
def test_nested_transformation_of_a_closure_matches_jax(name):
    x = np.array([0.3, -0.7, 1.1])
    ours, theirs = OURS[name], THEIRS[name]
    np.testing.assert_allclose(ours(x), theirs(jnp.asarray(x)), rtol=1e-10)
    np.testing.assert_allclose(qdiff.grad(ours)(x), jax.grad(theirs)(jnp.asarray(x)),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(qdiff.grad(ours)(x), central_difference(ours, x), rtol=1e-6,
                               atol=1e-8)


def test_closure_inside_a_loop_body():
    # the inner JVP reads the loop's carry: d/dt sin(c (c + t)) = c cos(c²) per step
    def f(x):
        return qdiff.fori_loop(0, 3, lambda i, c: c + qdiff.jvp(
            lambda y: qnp.sin(c * y), (c,), (1.0,))[1], x)

    def reference(x):
        for _ in range(3):
            x = x + x * np.cos(x * x)
        return x

    assert np.isclose(f(0.4), reference(0.4))
    assert np.isclose(qdiff.grad(f)(0.4), central_difference(reference, np.array(0.4)))


def test_a_value_stored_outside_its_scope_is_still_refused():
    kept = []

    def body(i, c):
        kept.append(c * 2.0)
        return c + 1.0

    def f(x):
        qdiff.fori_loop(0, 2, body, x)
        return kept[0] + x

    with pytest.raises(qdiff.QdiffError, match="escaped the scope"):
        qdiff.grad(f)(1.0)


def test_negative_argnums_of_a_closure_count_the_callers_arguments():
    # the values a closure reads travel as one extra argument; argnums=-1 still names the
    # caller's last argument, not them
    def f(x):
        g = qdiff.grad(lambda a, b: a * b * x, argnums=-1)
        h = qdiff.hessian(lambda a, b: a * b * b * x, argnums=-1)
        return g(2.0, 3.0) + h(2.0, 3.0)  # 2x + 4x

    assert np.isclose(f(0.5), 3.0)
    assert np.isclose(qdiff.grad(f)(0.5), 6.0)
