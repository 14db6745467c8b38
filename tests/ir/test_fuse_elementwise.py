"""Elementwise fusion before differentiation: programs, values and derivatives.

Oracles: NumPy versions of the same functions, closed-form gradients, central finite
differences, and the derivative of the unfused program.
"""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
import qdiff.transforms as transforms
from qdiff.ir.passes import count_primitives, fuse_elementwise
from qdiff.loops.increments import increment_only_carries

ELEMENTWISE = ("sin", "cos", "exp", "mul", "add", "sub", "neg", "tanh", "select", "gt", "max")


def example(ns):
    return lambda x, y: ns.sum(ns.exp(ns.sin(x) * y) + x)


def top_level(program: qdiff.Program) -> list[str]:
    return [e.primitive.name for e in program.eqns]


def elementwise_outside_maps(program: qdiff.Program) -> int:
    """Elementwise equations not inside a map lambda (recursing into other sub-programs)."""
    total = 0
    for eqn in program.eqns:
        total += eqn.primitive.name in ELEMENTWISE
        if eqn.primitive.name != "map":
            total += sum(elementwise_outside_maps(sub) for _, sub in eqn.subprograms())
    return total


def central_differences(f, args, k, eps=1e-6):
    """d f / d args[k] by central differences, one element at a time (f scalar, NumPy)."""
    base = [np.array(a, dtype=float) for a in args]
    grad = np.zeros_like(base[k])
    for index in np.ndindex(base[k].shape):
        plus = [a.copy() for a in base]
        minus = [a.copy() for a in base]
        plus[k][index] += eps
        minus[k][index] -= eps
        grad[index] = (f(*plus) - f(*minus)) / (2 * eps)
    return grad


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 1, 3), (1,), ()])
@pytest.mark.parametrize("seed", [0, 1])
def test_gradient_of_the_example_is_one_fused_map(shape, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.normal(size=shape), rng.normal(size=shape)
    program = qdiff.trace(example(qnp), x, y)
    fused = qdiff.grad(program, argnums=(0, 1))
    unfused = qdiff.grad(program, argnums=(0, 1), fuse=False)
    fused.verify()

    if shape:
        primal = fuse_elementwise(program)
        assert [n for n in top_level(primal) if n != "reshape"] == ["map", "reduce_sum"]
        # the gradient: one map holding all the elementwise work (and reshapes for rank > 1)
        assert count_primitives(fused, "map") == 1
        assert elementwise_outside_maps(fused) == 0
        assert set(top_level(fused)) <= {"map", "reshape"}
        body = next(e for e in fused.eqns if e.primitive.name == "map").params["body"]
        assert {"sin", "cos", "exp"} <= {e.primitive.name for e in body.eqns}
        assert count_primitives(unfused, "map") == 0
    else:  # rank-0 chains are left as they are: they are one pass already
        assert count_primitives(fused, "map") == 0

    gx, gy = fused(x, y)
    ux, uy = unfused(x, y)
    np.testing.assert_allclose(gx, ux, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(gy, uy, rtol=1e-12, atol=1e-14)
    # closed form and central differences
    e = np.exp(np.sin(x) * y)
    np.testing.assert_allclose(gx, e * np.cos(x) * y + 1.0, rtol=1e-12)
    np.testing.assert_allclose(gy, e * np.sin(x), rtol=1e-12)
    f = example(np)
    np.testing.assert_allclose(gx, central_differences(f, (x, y), 0), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gy, central_differences(f, (x, y), 1), rtol=1e-6, atol=1e-7)
    assert np.shape(gx) == shape and np.shape(gy) == shape


def test_forward_mode_and_vjp_programs_are_one_map_too():
    x, y = np.linspace(-1, 1, 6).reshape(2, 3), np.linspace(0.5, 2, 6).reshape(2, 3)
    program = transforms.to_differentiate(qdiff.trace(example(qnp), x, y))
    for derivative in (qdiff.jvp_program(program), qdiff.vjp_program(program)):
        assert count_primitives(derivative, "map") == 2 - (derivative.name.startswith("jvp"))
        assert elementwise_outside_maps(derivative) == 0
    tx, ty = np.ones_like(x), 2 * np.ones_like(y)
    _, tangent = qdiff.jvp(example(qnp), (x, y), (tx, ty))
    _, tangent_plain = qdiff.jvp(example(qnp), (x, y), (tx, ty), fuse=False)
    np.testing.assert_allclose(tangent, tangent_plain, rtol=1e-12)
    e = np.exp(np.sin(x) * y)
    np.testing.assert_allclose(
        tangent, np.sum((e * np.cos(x) * y + 1.0) * tx + e * np.sin(x) * ty), rtol=1e-12)


def test_scalar_operands_become_consts_or_body_literals():
    def f(x, w):
        return qnp.sum(qnp.tanh(w * x + 1.0) ** 2)

    x, w = np.array([[0.1, -0.4], [0.7, 1.3]]), 0.8
    fused = fuse_elementwise(qdiff.trace(f, x, w))
    (m,) = [e for e in fused.eqns if e.primitive.name == "map"]
    assert m.params["num_consts"] == 1 and m.inputs[0] is fused.inputs[1]
    gx, gw = qdiff.grad(f, argnums=(0, 1))(x, w)
    t = np.tanh(w * x + 1.0)
    np.testing.assert_allclose(gx, 2 * t * (1 - t ** 2) * w, rtol=1e-12)
    np.testing.assert_allclose(gw, np.sum(2 * t * (1 - t ** 2) * x), rtol=1e-12)
    gradient = qdiff.grad(qdiff.trace(f, x, w), argnums=(0, 1))
    assert count_primitives(gradient, "map") == 1 and elementwise_outside_maps(gradient) == 0


def test_intermediates_used_elsewhere_are_written_out_not_recomputed():
    def f(x, y):
        a = qnp.sin(x)
        b = qnp.exp(a * y)
        return qnp.sum(b + a) * qnp.sum(a), b

    x, y = np.array([0.3, -1.2, 2.0]), np.array([1.5, 0.2, -0.7])
    program = qdiff.trace(f, x, y)
    fused = fuse_elementwise(program).verify()
    assert count_primitives(fused, "sin") == 1
    (m,) = [e for e in fused.eqns if e.primitive.name == "map"]
    assert len(m.outputs) == 3  # a (read by a reduction), b (returned), b + a
    for got, want in zip(fused(x, y), (np.sum(np.exp(np.sin(x) * y) + np.sin(x))
                                       * np.sum(np.sin(x)), np.exp(np.sin(x) * y))):
        np.testing.assert_allclose(got, want, rtol=1e-13)

    def loss(x, y):
        value, b = f(x, y)
        return value + qnp.sum(b * b)

    def loss_np(x, y):
        a = np.sin(x)
        b = np.exp(a * y)
        return np.sum(b + a) * np.sum(a) + np.sum(b * b)

    g = qdiff.grad(loss, argnums=(0, 1))(x, y)
    for k in range(2):
        np.testing.assert_allclose(g[k], central_differences(loss_np, (x, y), k), rtol=1e-6)


def test_a_group_read_before_its_end_is_split_so_the_program_stays_acyclic():
    def f(x):
        a = qnp.sin(x) * 2.0        # a group ...
        s = qnp.sum(a)              # ... read here, so it closes
        return qnp.cos(a) * s + x   # a second group reading the first one's result

    x = np.array([0.2, 0.9, -1.4, 3.0])
    fused = fuse_elementwise(qdiff.trace(f, x)).verify()
    assert top_level(fused) == ["map", "reduce_sum", "map"]
    a = np.sin(x) * 2.0
    np.testing.assert_allclose(fused(x), np.cos(a) * np.sum(a) + x, rtol=1e-13)
    g = qdiff.grad(lambda x: qnp.sum(f(x) ** 2))(x)
    np.testing.assert_allclose(
        g, central_differences(lambda v: np.sum((np.cos(2 * np.sin(v)) * np.sum(2 * np.sin(v))
                                                 + v) ** 2), (x,), 0), rtol=1e-6)


def _random_program(rng: np.random.Generator, steps: int):
    """A random DAG of elementwise operations, as a function of a NumPy-like namespace."""
    ops = []
    for _ in range(steps):
        kind = rng.choice(["sin", "tanh", "neg", "mul", "add", "sub", "where", "max", "lit",
                           "scalar"])
        ops.append((str(kind), int(rng.integers(0, 1 << 30)), int(rng.integers(0, 1 << 30)),
                    float(rng.normal())))
    outside = sorted({int(k) for k in rng.integers(0, steps, size=2)})

    def build(ns):
        def f(x, y, s):
            values = [x, y]
            extra = 0.0
            for step, (kind, i, j, c) in enumerate(ops):
                a, b = values[i % len(values)], values[j % len(values)]
                if kind in ("sin", "tanh"):
                    v = getattr(ns, kind)(a)
                elif kind == "neg":
                    v = -a
                elif kind == "mul":
                    v = a * b
                elif kind == "add":
                    v = a + b
                elif kind == "sub":
                    v = a - b
                elif kind == "where":
                    v = ns.where(a > b, a, b * 0.5)
                elif kind == "max":
                    v = ns.maximum(a, b)
                elif kind == "lit":
                    v = a * c + 0.25
                else:
                    v = ns.tanh(a * s)
                values.append(v)
                if step in outside:  # read by something other than an elementwise operation
                    extra = extra + ns.sum(v) * 0.1
            return ns.sum(ns.sin(values[-1])) + extra, values[-2]

        return f

    return build


@pytest.mark.parametrize("seed", range(12))
def test_random_elementwise_programs_keep_their_values_and_gradients(seed):
    rng = np.random.default_rng(seed)
    shape = [(6,), (2, 3), (3, 1, 2)][seed % 3]
    build = _random_program(rng, steps=int(rng.integers(3, 9)))
    x, y, s = rng.normal(size=shape), rng.normal(size=shape), float(rng.normal())
    program = qdiff.trace(build(qnp), x, y, s)
    fused = fuse_elementwise(program).verify()
    assert count_primitives(fused, "map") >= 1
    value, last = fused(x, y, s)
    want_value, want_last = build(np)(x, y, s)
    np.testing.assert_allclose(value, want_value, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(last, want_last, rtol=1e-12, atol=1e-12)

    def loss(ns):
        return lambda x, y, s: build(ns)(x, y, s)[0] + ns.sum(build(ns)(x, y, s)[1] ** 2)

    g = qdiff.grad(loss(qnp), argnums=(0, 1, 2))(x, y, s)
    g_plain = qdiff.grad(loss(qnp), argnums=(0, 1, 2), fuse=False)(x, y, s)
    for k in range(3):
        np.testing.assert_allclose(g[k], g_plain[k], rtol=1e-10, atol=1e-12)
        fd = central_differences(loss(np), (x, y, s), k)
        np.testing.assert_allclose(g[k], fd, rtol=1e-5, atol=1e-6)


def test_integer_and_rank0_chains_and_single_operations_are_left_alone():
    def f(i, x, t):
        j = i * 3 + 1                       # integer index arithmetic
        u = qnp.sin(t) * 2.0 + t            # a rank-0 chain
        return qnp.sum(qnp.exp(x)) * u, j  # a single elementwise operation on arrays

    program = qdiff.trace(f, np.arange(4), np.ones(4), 0.5)
    assert fuse_elementwise(program) is program
    dead = qdiff.trace(lambda x: (qnp.sin(qnp.cos(x)), x * 2.0)[1], np.ones(3))
    assert top_level(fuse_elementwise(dead)) == ["cos", "sin", "mul"]


def test_loop_bodies_are_fused_but_increments_stay_visible():
    def total(x):
        return qdiff.fori_loop(0, 30, lambda i, acc: acc + qnp.sin(x * i) * qnp.cos(x),
                               qnp.zeros(4))

    x = np.array([0.1, 0.2, 0.3, 0.4])
    fused = fuse_elementwise(qdiff.trace(total, x))
    (loop,) = fused.eqns
    body = loop.params["body"]
    assert count_primitives(body, "map") == 1
    assert body.eqns[-1].primitive.name == "add"
    assert increment_only_carries(body, loop.params["num_consts"]) == [True]
    with qdiff.loops.memory.measure_checkpoint_memory() as memory:
        jac = qdiff.jacobian(total)(x)
    assert memory.elements == 0
    i = np.arange(30)[:, None]
    want = np.sum(i * np.cos(x * i) * np.cos(x) - np.sin(x * i) * np.sin(x), axis=0)
    np.testing.assert_allclose(jac, np.diag(want), rtol=1e-12, atol=1e-12)


def test_fusion_switches_off_by_keyword_and_by_module_flag(monkeypatch):
    program = qdiff.trace(example(qnp), np.ones(3), np.ones(3))
    assert count_primitives(qdiff.grad(program), "map") == 1
    assert count_primitives(qdiff.grad(program, fuse=False), "map") == 0
    monkeypatch.setattr(transforms, "FUSE_ELEMENTWISE", False)
    assert count_primitives(qdiff.grad(program), "map") == 0
    assert count_primitives(qdiff.grad(program, fuse=True), "map") == 1
    assert count_primitives(qdiff.jacobian(program), "map") == 1  # the map over the rows


def test_jacobian_and_hessian_agree_with_and_without_fusion():
    def f(x):
        return qnp.tanh(qnp.sin(x) * x + 0.5) * x

    x = np.array([0.3, -0.8, 1.1])
    for mode in ("forward", "reverse"):
        np.testing.assert_allclose(qdiff.jacobian(f, mode=mode)(x),
                                   qdiff.jacobian(f, mode=mode, fuse=False)(x), rtol=1e-12)
    h = qdiff.hessian(lambda x: qnp.sum(f(x)))(x)
    h_plain = qdiff.hessian(lambda x: qnp.sum(f(x)), fuse=False)(x)
    np.testing.assert_allclose(h, h_plain, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(h, h.T, rtol=1e-10, atol=1e-12)


def test_fused_maps_run_vectorized_and_match_row_by_row_evaluation():
    x = np.random.default_rng(3).normal(size=7)
    scalar = qdiff.trace(lambda v: qdiff.map(
        lambda e: (qnp.where(e > 0, e, 0.5 * e), e, 2.0, qnp.astype(e > 0, float)), v), x)
    got = scalar(x)
    for g, want in zip(got, (np.where(x > 0, x, 0.5 * x), x, np.full(7, 2.0),
                             (x > 0).astype(float))):
        np.testing.assert_array_equal(g, want)
        assert g.shape == (7,) and g.dtype == np.float64
    empty = qdiff.trace(lambda v: qdiff.map(lambda e: qnp.sin(e) * 2.0, v), np.zeros(0))
    assert empty(np.zeros(0)).shape == (0,)


def test_complex_chains_fuse_with_the_right_gradient():
    def f(ns):
        return lambda z: ns.sum(ns.abs(ns.exp(ns.sin(z) * z)) ** 2)

    z = np.array([0.3 + 0.4j, -1.0 + 0.2j, 0.5 - 0.7j])
    gradient = qdiff.grad(qdiff.trace(f(qnp), z))
    assert count_primitives(gradient, "map") == 1
    g = gradient(z)
    # the gradient of a real function of z = x + iy is df/dx + i df/dy
    want = (central_differences(lambda x, y: f(np)(x + 1j * y), (z.real, z.imag), 0)
            + 1j * central_differences(lambda x, y: f(np)(x + 1j * y), (z.real, z.imag), 1))
    np.testing.assert_allclose(g, want, rtol=1e-6)
    np.testing.assert_allclose(g, qdiff.grad(f(qnp), fuse=False)(z), rtol=1e-12)
