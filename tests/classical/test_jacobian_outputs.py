"""Jacobians of functions with structured outputs (tuples, lists, dicts), forward and
reverse mode, and derivatives with complex values.

Oracles: central finite differences of NumPy versions of the functions, closed forms, and
forward mode against reverse mode.
"""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.ir import pytree
from qdiff.ir.errors import QdiffError


def numeric_jacobian(f, args, argnums, eps=1e-6):
    """``result[out leaf][arg][arg leaf]`` blocks of shape ``out.shape + in.shape``, by
    central differences of the NumPy function ``f``; structured like JAX's jacobian."""
    out_leaves, out_tree = pytree.flatten(f(*args))
    numbers = (argnums,) if isinstance(argnums, int) else argnums
    per_output = [[] for _ in out_leaves]
    for k in numbers:
        leaves, tree = pytree.flatten(args[k])
        blocks = [[] for _ in out_leaves]
        for j, leaf in enumerate(leaves):
            leaf = np.asarray(leaf, dtype=float)
            cols = [np.zeros(np.shape(o) + leaf.shape) for o in out_leaves]
            for index in np.ndindex(leaf.shape):
                moved = []
                for sign in (1, -1):
                    bumped = [np.array(v, dtype=float) for v in leaves]
                    bumped[j][index] += sign * eps
                    new_args = list(args)
                    new_args[k] = pytree.unflatten(tree, bumped)
                    moved.append(pytree.flatten(f(*new_args))[0])
                for o, (p, m) in enumerate(zip(*moved)):
                    cols[o][(...,) + index] = (np.asarray(p) - np.asarray(m)) / (2 * eps)
            for o in range(len(out_leaves)):
                blocks[o].append(cols[o])
        for o in range(len(out_leaves)):
            per_output[o].append(pytree.unflatten(tree, blocks[o]))
    result = [b[0] if isinstance(argnums, int) else tuple(b) for b in per_output]
    return pytree.unflatten(out_tree, result)


def assert_trees_close(got, want, **tol):
    got_leaves, got_tree = pytree.flatten(got)
    want_leaves, want_tree = pytree.flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, **tol)


def model(ns):
    def f(x, p):
        h = ns.tanh(x * p["w"] + p["b"])
        return {"h": h, "stats": (ns.sum(h * h), [ns.exp(p["b"]) * 2.0, x[0] * p["b"]])}

    return f


def args(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, 3))
    return x, {"w": rng.normal(size=(2, 3)), "b": float(rng.normal())}


@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1,)])
@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_structured_outputs_match_finite_differences(argnums, mode):
    x, p = args()
    jac = qdiff.jacobian(model(qnp), argnums=argnums, mode=mode)(x, p)
    assert_trees_close(jac, numeric_jacobian(model(np), (x, p), argnums), rtol=1e-6, atol=1e-8)
    # the block of output leaf k and argument leaf j has shape out_k.shape + in_j.shape
    blocks = jac["h"][1] if argnums == (0, 1) else None
    if blocks is not None:
        assert blocks["w"].shape == (2, 3, 2, 3) and blocks["b"].shape == (2, 3)
        assert jac["stats"][0][0].shape == (2, 3) and jac["stats"][1][1][1]["b"].shape == (3,)


@pytest.mark.parametrize("seed", range(3))
def test_forward_and_reverse_agree_on_programs(seed):
    x, p = args(seed)
    program = qdiff.trace(model(qnp), x, p)
    forward = qdiff.jacobian(program, argnums=(0, 1), mode="forward")
    reverse = qdiff.jacobian(program, argnums=(0, 1), mode="reverse")
    assert isinstance(forward, qdiff.Program) and isinstance(reverse, qdiff.Program)
    assert qdiff.Program.from_json(reverse.verify().to_json()) == reverse
    assert_trees_close(forward(x, p), reverse(x, p), rtol=1e-12, atol=1e-13)
    assert_trees_close(qdiff.jacfwd(program, argnums=(0, 1))(x, p), reverse(x, p), rtol=1e-12,
                       atol=1e-13)


def test_tuple_and_list_outputs_of_scalars_and_rank_zero_arguments():
    def f(ns):
        return lambda a, b: [a * b, (ns.sin(a), b ** 3)]

    for mode in ("forward", "reverse"):
        jac = qdiff.jacobian(f(qnp), argnums=(0, 1), mode=mode)(0.4, -1.5)
        want = [(-1.5, 0.4), ((np.cos(0.4), 0.0), (0.0, 3 * 1.5 ** 2))]
        assert_trees_close(jac, want, rtol=1e-12, atol=1e-15)
        assert isinstance(jac, list) and isinstance(jac[1], tuple)


def test_outputs_of_several_dtypes():
    def f(x):
        return qnp.astype(x * 2.0, "float32"), qnp.sum(x ** 2)

    x = np.array([1.0, -2.0, 0.5])
    for mode in ("forward", "reverse"):
        j32, j64 = qdiff.jacobian(f, mode=mode)(x)
        np.testing.assert_allclose(j32, 2 * np.eye(3))
        np.testing.assert_allclose(j64, 2 * x)


def test_hessian_of_a_dict_argument_is_a_dict_of_dicts():
    def f(p):
        return qnp.sum(p["a"] ** 2 * p["b"]) + qnp.sin(p["b"])

    p = {"a": np.array([0.5, -1.0]), "b": 0.3}
    h = qdiff.hessian(f)(p)
    a, b = p["a"], p["b"]
    want = {"a": {"a": 2 * b * np.eye(2), "b": 2 * a},
            "b": {"a": 2 * a, "b": -np.sin(b)}}
    assert_trees_close(h, want, rtol=1e-12, atol=1e-15)


def test_non_float_outputs_are_refused_with_their_position():
    with pytest.raises(QdiffError, match="output 1 is i64"):
        qdiff.jacobian(lambda x: (x * 2.0, qnp.argmax(x)))(np.ones(3))


# ---------------------------------------------------------------------------- complex values
def complex_fd(f, z, eps=1e-6):
    """df/dx + i df/dy per element of z = x + iy, for real-valued f (NumPy)."""
    grad = np.zeros(z.shape, complex)
    for index in np.ndindex(z.shape):
        for direction in (1.0, 1j):
            d = np.zeros(z.shape, complex)
            d[index] = direction * eps
            slope = (f(z + d) - f(z - d)) / (2 * eps)
            grad[index] += slope if direction == 1.0 else 1j * slope
    return grad


def test_gradient_of_a_real_function_of_complex_inputs():
    def f(ns):
        return lambda z: ns.sum(ns.abs(z * z + 1.0) ** 2) + ns.sum(ns.real(ns.conj(z) * z))

    z = np.array([0.3 + 0.8j, -1.2 + 0.1j, 0.5 - 0.4j])
    for fuse in (True, False):
        g = qdiff.grad(f(qnp), fuse=fuse)(z)
        np.testing.assert_allclose(g, complex_fd(f(np), z), rtol=1e-6)
    # |z|^2 has the closed-form gradient 2z in this convention
    np.testing.assert_allclose(qdiff.grad(lambda z: qnp.sum(qnp.abs(z) ** 2))(z), 2 * z,
                               rtol=1e-14)


def test_complex_jvp_and_vjp_are_adjoint_for_non_holomorphic_functions():
    def f(z, x):
        return qnp.exp(z) * qnp.conj(z) + x * z, qnp.abs(z) * x

    rng = np.random.default_rng(5)
    z = rng.normal(size=4) + 1j * rng.normal(size=4)
    x = rng.normal(size=4)
    tz = rng.normal(size=4) + 1j * rng.normal(size=4)
    tx = rng.normal(size=4)
    _, (t_out_c, t_out_r) = qdiff.jvp(f, (z, x), (tz, tx))
    c_c = rng.normal(size=4) + 1j * rng.normal(size=4)
    c_r = rng.normal(size=4)
    _, back = qdiff.vjp(f, z, x)
    bz, bx = back((c_c, c_r))

    def inner(a, b):  # the real inner product Re Σ conj(a) b
        return float(np.real(np.vdot(a, b)))

    lhs = inner(c_c, t_out_c) + inner(c_r, t_out_r)
    rhs = inner(bz, tz) + inner(bx, tx)
    assert lhs == pytest.approx(rhs, rel=1e-12)
    eps = 1e-6
    plus, minus = f_np(z + eps * tz, x + eps * tx), f_np(z - eps * tz, x - eps * tx)
    np.testing.assert_allclose(t_out_c, (plus[0] - minus[0]) / (2 * eps), rtol=1e-6)
    np.testing.assert_allclose(t_out_r, (plus[1] - minus[1]) / (2 * eps), rtol=1e-6)


def f_np(z, x):
    return np.exp(z) * np.conj(z) + x * z, np.abs(z) * x


def test_complex_jacobians():
    z = np.array([0.3 + 0.8j, -1.2 + 0.1j])
    # holomorphic: both modes give the complex derivative
    for mode in ("forward", "reverse"):
        sq, s = qdiff.jacobian(lambda z: (z * z, qnp.sin(z)), mode=mode, holomorphic=True)(z)
        np.testing.assert_allclose(sq, np.diag(2 * z), rtol=1e-14)
        np.testing.assert_allclose(s, np.diag(np.cos(z)), rtol=1e-14)
    # reverse mode, real outputs of complex arguments: rows are gradients
    jac = qdiff.jacobian(lambda z: qnp.abs(z) ** 2 * 3.0, mode="reverse")(z)
    np.testing.assert_allclose(jac, np.diag(6 * z), rtol=1e-14)
    # forward mode, complex outputs of real arguments: columns are d/dx
    x = np.array([0.4, -0.7])
    jac = qdiff.jacobian(lambda x: qnp.exp(1j * x), mode="forward")(x)
    np.testing.assert_allclose(jac, np.diag(1j * np.exp(1j * x)), rtol=1e-14)


def test_complex_cases_without_a_definition_raise_clear_errors():
    z = np.array([0.3 + 0.8j, -1.2 + 0.1j])
    with pytest.raises(QdiffError, match="forward mode needs real arguments"):
        qdiff.jacobian(lambda z: qnp.abs(z), mode="forward")(z)
    with pytest.raises(QdiffError, match="reverse mode needs real outputs"):
        qdiff.jacobian(lambda x: qnp.exp(1j * x))(np.array([0.4, 0.1]))
    with pytest.raises(QdiffError, match="holomorphic=True.*needs complex"):
        qdiff.jacobian(lambda z: qnp.abs(z), holomorphic=True)(z)
    with pytest.raises(QdiffError, match="grad needs a real-valued function"):
        qdiff.grad(lambda z: qnp.sum(z * z))(z)
