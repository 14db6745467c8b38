"""The differentiation API: exact cases, argnums and pytrees, programs in and out,
composition (grad of grad, jvp of vjp, hessian), mixed mode and errors."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.autodiff.classical_rules.map_derivatives import use_mixed_mode


def test_jacobian_of_inclusive_product_scan_is_exact():
    expected = [[1, 0, 0, 0, 0], [2, 1, 0, 0, 0], [6, 3, 2, 0, 0], [24, 12, 8, 6, 0],
                [120, 60, 40, 30, 24]]
    x = np.arange(1.0, 6.0)
    scan = lambda v: qdiff.scan("mul", 1.0, v)  # noqa: E731
    for mode in ("reverse", "forward"):
        np.testing.assert_array_equal(qdiff.jacobian(scan, mode=mode)(x), expected)


def test_gradient_of_product_reduce_counts_zeros():
    product = lambda v: qdiff.reduce("mul", 1.0, v)  # noqa: E731
    np.testing.assert_array_equal(qdiff.grad(product)(np.array([0.0, 2.0, 0.0, 4.0])), 0.0)
    np.testing.assert_array_equal(qdiff.grad(product)(np.array([0.0, 2.0, 3.0])), [6, 0, 0])


def test_max_reduce_sends_the_gradient_to_the_first_maximum():
    g = qdiff.grad(lambda v: qdiff.reduce("max", -np.inf, v))(np.array([1.0, 3.0, 3.0]))
    np.testing.assert_array_equal(g, [0, 1, 0])


def test_argnums_and_pytrees():
    def f(params, x):
        return qnp.sum(params["w"] * x) + params["b"][0] ** 2

    params = {"w": np.array([1.0, 2.0]), "b": [np.float64(3.0)]}
    x = np.array([5.0, 7.0])
    g = qdiff.grad(f)(params, x)
    np.testing.assert_array_equal(g["w"], x)
    assert float(g["b"][0]) == 6.0
    gp, gx = qdiff.grad(f, argnums=(0, 1))(params, x)
    np.testing.assert_array_equal(gx, params["w"])
    value, g2 = qdiff.value_and_grad(f, argnums=1)(params, x)
    assert float(value) == 19.0 + 9.0
    np.testing.assert_array_equal(g2, params["w"])


def test_transforming_a_program_returns_a_program_that_prints_saves_and_runs():
    program = qdiff.trace(lambda x: qnp.sum(qnp.sin(x) * x), np.zeros(3))
    gradient = qdiff.grad(program)
    assert isinstance(gradient, qdiff.Program)
    gradient.verify()
    assert "cos" in str(gradient)
    restored = qdiff.Program.from_json(gradient.to_json())
    x = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(restored(x), np.cos(x) * x + np.sin(x))
    for transformed in (qdiff.jvp_program(program), qdiff.vjp_program(program),
                        qdiff.jacobian(program), qdiff.hessian(program)):
        assert qdiff.Program.from_json(transformed.verify().to_json()) == transformed


def test_program_function_input_and_trace_of_the_gradient():
    @qdiff.program
    def energy(x):
        return qnp.sum(x ** 3)

    g = qdiff.grad(energy)
    np.testing.assert_allclose(g(np.array([1.0, 2.0])), [3.0, 12.0])
    assert isinstance(g.trace(np.zeros(2)), qdiff.Program)


def test_grad_of_grad_matches_closed_form():
    f = lambda x: qnp.sin(x) * x ** 2  # noqa: E731
    x = 0.7
    second = qdiff.grad(qdiff.grad(f))(x)
    expected = 2 * np.sin(x) + 4 * x * np.cos(x) - x ** 2 * np.sin(x)
    np.testing.assert_allclose(second, expected)
    third = qdiff.grad(qdiff.grad(qdiff.grad(f)))(x)
    expected3 = 6 * np.cos(x) - 6 * x * np.sin(x) - x ** 2 * np.cos(x)
    np.testing.assert_allclose(third, expected3)


def test_hessian_through_a_loop_matches_finite_differences():
    def f(x):
        return qdiff.fori_loop(0, 4, lambda i, s: s + qnp.sin(s * x[i % 2]) * x[1], 0.5)

    x = np.array([0.3, 0.8])
    hess = qdiff.hessian(f)(x)
    grad = qdiff.grad(f)
    eps = 1e-5
    numeric = np.stack([(grad(x + eps * e) - grad(x - eps * e)) / (2 * eps) for e in np.eye(2)])
    np.testing.assert_allclose(hess, numeric, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(hess, hess.T, atol=1e-10)


def test_jvp_of_vjp_is_a_hessian_vector_product():
    f = lambda x: qnp.sum(qnp.exp(x) * x)  # noqa: E731
    x, v = np.array([0.1, -0.4]), np.array([1.0, 2.0])

    def gradient(y):
        return qdiff.vjp(f, y)[1](1.0)[0]

    _, hvp = qdiff.jvp(gradient, (x,), (v,))
    np.testing.assert_allclose(hvp, (2 * np.exp(x) + x * np.exp(x)) * v)


def test_mixed_mode_is_chosen_for_few_scalar_inputs_and_can_be_forced():
    program = qdiff.trace(lambda x: qdiff.map(lambda v: v * v, x), np.zeros(3))
    body = program.eqns[0].params["body"]
    assert use_mixed_mode(body, [True])
    assert not use_mixed_mode(body, [True], ad_mode="reverse")
    rows = qdiff.trace(lambda m: qdiff.map(lambda r: qnp.sum(r), m), np.zeros((2, 3)))
    assert not use_mixed_mode(rows.eqns[0].params["body"], [True])


def test_mixed_mode_handles_a_data_dependent_loop_inside_the_lambda():
    def f(x):
        def body(v):
            return qdiff.while_loop(lambda s: s < 10.0, lambda s: s * 1.5 + v, v + 1.0)

        return qnp.sum(qdiff.map(body, x, ad_mode="mixed"))

    x = np.array([0.5, 2.0])
    g = qdiff.grad(f)(x)
    reverse = qdiff.grad(lambda y: qnp.sum(qdiff.map(
        lambda v: qdiff.while_loop(lambda s: s < 10.0, lambda s: s * 1.5 + v, v + 1.0), y,
        ad_mode="reverse")))(x)
    np.testing.assert_allclose(g, reverse)
    eps = 1e-6
    numeric = [(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(g, numeric, rtol=1e-6)


def test_errors_name_the_problem():
    with pytest.raises(qdiff.QdiffError, match="one float scalar"):
        qdiff.grad(lambda x: x * 2.0)(np.ones(2))
    with pytest.raises(qdiff.QdiffError, match="argument 1 holds a i64"):
        qdiff.grad(lambda x, n: x * n, argnums=1)(1.0, 2)
    with pytest.raises(qdiff.QdiffError, match="out of range"):
        qdiff.grad(lambda x: x, argnums=3)(1.0)


def _costly_count(program) -> int:
    return sum(e.primitive.name in ("exp", "tanh", "div") for e in program.all_eqns())


def test_map_adjoint_reads_the_values_its_forward_sweep_kept(monkeypatch):
    # an LSTM-like cell in a loop whose output the rest of the step reads (so the reverse
    # sweep runs the cell's map forward anyway): that map keeps its sigmoid and tanh for the
    # adjoint lambda, which otherwise computes them again (six scalar inputs to
    # differentiate: reverse mode inside the lambda, not mixed mode)
    from qdiff.autodiff.classical_rules import map_derivatives

    def cell_loop(w, x):
        def step(i, c):
            gate = 1.0 / (1.0 + qnp.exp(-(c * w[0] + x * w[1] + w[2])))
            h = gate * qnp.tanh(c * w[3] + w[4])
            return h * qnp.sum(h) * 0.1 + c
        return qnp.sum(qdiff.fori_loop(0, 4, step, x) ** 2)

    def plain(w, x):
        c = x
        for _ in range(4):
            h = 1.0 / (1.0 + np.exp(-(c * w[0] + x * w[1] + w[2]))) * np.tanh(c * w[3] + w[4])
            c = h * np.sum(h) * 0.1 + c
        return np.sum(c ** 2)

    w, x = np.array([0.7, -0.4, 0.2, 0.5, -0.1]), np.linspace(-1.0, 1.0, 6)
    steps = np.eye(5) * 1e-6
    central = [(plain(w + e, x) - plain(w - e, x)) / 2e-6 for e in steps]
    kept = qdiff.grad(cell_loop)
    np.testing.assert_allclose(kept(w, x), central, rtol=1e-7)
    monkeypatch.setattr(map_derivatives, "MAX_KEPT_BYTES", 0)  # re-execute the lambda
    recomputed = qdiff.grad(cell_loop)
    np.testing.assert_allclose(recomputed(w, x), kept(w, x), rtol=1e-13)
    # the reverse sweep's forward map and the adjoint's: three costly operations fewer
    assert _costly_count(kept.trace(w, x)) == _costly_count(recomputed.trace(w, x)) - 3
    compiled = qdiff.jit(kept)(w, x)
    np.testing.assert_allclose(compiled, kept(w, x), rtol=1e-12)


def test_softmax_adjoint_reads_the_exponentials_its_forward_map_returns():
    # logsumexp's map exp(v - max) has two scalar inputs (mixed mode); its exponentials are
    # its outputs, which the forward sweep sums: the adjoint reads them, one exp in all
    def logsumexp(x):
        top = qnp.max(x, axis=1)
        return qnp.sum(qnp.log(qnp.sum(qnp.exp(x - top[:, None]), axis=1)) + top)

    x = np.random.default_rng(3).normal(size=(4, 5))
    gradient = qdiff.grad(logsumexp)
    assert sum(e.primitive.name == "exp" for e in gradient.trace(x).all_eqns()) == 1
    softmax = np.exp(x - x.max(axis=1, keepdims=True))
    softmax /= softmax.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(gradient(x), softmax, rtol=1e-13)
    np.testing.assert_allclose(qdiff.jit(gradient)(x), gradient(x), rtol=1e-12)


def _exp_sin_product(ns):
    return lambda x, y: ns.sum(ns.exp(ns.sin(x) * y))


def _central_gradient(f, args, eps=1e-6):
    """d f / d args[k] for each k by central differences, element by element (f: NumPy)."""
    result = []
    for k, arg in enumerate(args):
        grad = np.zeros_like(arg)
        for i in range(arg.size):
            step = np.zeros_like(arg)
            step.flat[i] = eps
            up, down = list(args), list(args)
            up[k], down[k] = arg + step, arg - step
            grad.flat[i] = (f(*up) - f(*down)) / (2 * eps)
        result.append(grad)
    return result


@pytest.mark.parametrize("ad_mode", ["auto", "reverse"])
def test_gradient_of_an_elementwise_chain_is_one_map_when_its_value_is_not_needed(ad_mode):
    # the forward map keeps exp(sin(x)·y) for its adjoint, but nothing else reads it when
    # the value is not returned: the two run as one map and no array of them is stored
    def f(x, y):
        return qnp.sum(qdiff.map(lambda v, w: qnp.exp(qnp.sin(v) * w), x, y, ad_mode=ad_mode))

    x, y = np.linspace(-1.0, 2.0, 6), np.linspace(0.5, -0.7, 6)
    gradient = qdiff.grad(f, argnums=(0, 1))
    program = gradient.trace(x, y)
    assert [e.primitive.name for e in program.eqns] == ["map"]
    assert _costly_count(program) == 1  # exp(sin(x)·y) once, then its adjoint
    central = _central_gradient(_exp_sin_product(np), (x, y))
    for got, expected in zip(gradient(x, y), central):
        np.testing.assert_allclose(got, expected, rtol=1e-8)
    for got, expected in zip(qdiff.jit(gradient)(x, y), gradient(x, y)):
        np.testing.assert_allclose(got, expected, rtol=1e-13)


def test_value_and_grad_adjoint_reads_the_exponentials_its_forward_map_returns():
    # the value needs the forward map's exponentials anyway: the adjoint map reads them
    both = qdiff.value_and_grad(_exp_sin_product(qnp), argnums=(0, 1))
    x, y = np.linspace(-1.0, 2.0, 6), np.linspace(0.5, -0.7, 6)
    program = both.trace(x, y)
    forward, adjoint = [e for e in program.eqns if e.primitive.name == "map"]
    assert set(forward.outputs) & set(adjoint.inputs)
    assert _costly_count(program) == 1  # the forward map's exp; the adjoint computes none
    value, grads = both(x, y)
    np.testing.assert_allclose(value, _exp_sin_product(np)(x, y), rtol=1e-14)
    central = _central_gradient(_exp_sin_product(np), (x, y))
    for got, expected in zip(grads, central):
        np.testing.assert_allclose(got, expected, rtol=1e-8)


def test_map_adjoint_is_not_passed_an_output_it_does_not_read():
    # a square's adjoint 2·v does not read v², so the squares (summed where they are made)
    # are not an operand of the adjoint map, which would make a loop nest store them
    gradient = qdiff.value_and_grad(lambda x: qnp.sum(qdiff.map(lambda v: v ** 2.0, x)))
    x = np.linspace(-1.0, 1.0, 5)
    program = gradient.trace(x)
    maps = [e for e in program.eqns if e.primitive.name == "map"]
    squares = [v for e in maps for v in e.outputs
               if any(b.primitive.name == "pow" for b in e.params["body"].eqns)]
    assert squares and not any(v in e.inputs for e in maps for v in squares)
    value, slope = gradient(x)
    np.testing.assert_allclose(value, np.sum(x ** 2), rtol=1e-15)
    np.testing.assert_allclose(slope, 2 * x, rtol=1e-15)


def test_map_keeps_nothing_for_a_lambda_with_a_loop_or_past_the_memory_bound():
    from qdiff.autodiff.classical_rules.map_derivatives import MAX_KEPT_BYTES, kept_values

    straight = qdiff.trace(lambda v: qnp.exp(qnp.sin(v)) * 2.0, 0.0)
    assert len(kept_values(straight, 10)) == 2
    assert kept_values(straight, MAX_KEPT_BYTES // 16 + 1) == []
    looped = qdiff.trace(lambda v: qdiff.fori_loop(0, 3, lambda i, c: qnp.exp(c), v), 0.0)
    assert kept_values(looped, 10) == []
