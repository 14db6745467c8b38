"""`qdiff.vmap` against a Python loop over the batch: every classical primitive (a
completeness test over the registry), in_axes and out_axes variants, nesting, per-example
gradients, gradients of batched losses, compiled batches, and control flow whose
predicates and trip counts differ from member to member."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.classical import elementwise, indexing, solvers
from qdiff.ir.primitives import all_primitives
from qdiff.ir.tracer import bind

B = 3
rng = np.random.default_rng(7)

# Classical primitives that need no batching rule, with the reason.
WITHOUT_RULE = {
    "iota": "takes no operands, so it is never batched",
    "derivative_call": "a program holding it is claimed by its whole-program rule, which "
                       "vmap runs member by member (test_vmap_quantum)",
}
# Packages whose primitives vmap rewrites; quantum primitives run on a simulator as a whole.
COVERED = ("qdiff.classical", "qdiff.ir", "qdiff.autodiff", "qdiff.loops")


def _loop(fn, batched_args, in_axes):
    """The oracle: ``fn`` on each member, results stacked on axis 0."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(batched_args)
    size = next(np.shape(a)[ax] for a, ax in zip(batched_args, axes) if ax is not None)
    rows = []
    for b in range(size):
        member = [a if ax is None else np.take(a, b, axis=ax)
                  for a, ax in zip(batched_args, axes)]
        rows.append(fn(*member))
    if isinstance(rows[0], tuple):
        return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))
    return np.stack([np.asarray(r) for r in rows])


def _close(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w)
        return
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, want)


def _check(fn, args, in_axes=0):
    """vmap(fn) equals the loop, and returns the per-member program's primitive names."""
    got = qdiff.vmap(fn, in_axes=in_axes)(*args)
    _close(got, _loop(qdiff.program(fn), args, in_axes))
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    member = [a if ax is None else np.take(a, 0, axis=ax) for a, ax in zip(args, axes)]
    return {e.primitive.name for e in qdiff.trace(fn, *member).all_eqns()}


def _u(*shape, low=-1.0, high=1.0):
    return rng.uniform(low, high, size=(B, *shape))


# ------------------------------------------------------------------------- elementwise
DOMAIN = {"log": (0.5, 2), "sqrt": (0.5, 2), "asin": (-0.8, 0.8), "acos": (-0.8, 0.8),
          "pow": (0.5, 2), "floor_div": (0.5, 3), "rem": (0.5, 3), "div": (0.5, 2)}


def _operand(name, kind, shape):
    if kind == elementwise.LOGICAL:
        return rng.uniform(size=(B, *shape)) > 0.5
    low, high = DOMAIN.get(name, (-1.0, 1.0))
    return _u(*shape, low=low, high=high)


@pytest.mark.parametrize("name", sorted(elementwise.UNARY))
def test_unary_elementwise(name):
    primitive = elementwise.PRIMITIVES[name]
    x = _operand(name, elementwise.UNARY[name][1], (4,))
    assert name in _check(lambda v: bind(primitive, v), (x,))
    assert name in _check(lambda v: bind(primitive, v), (x[:, 0],))


@pytest.mark.parametrize("name", sorted(elementwise.BINARY))
def test_binary_elementwise(name):
    primitive = elementwise.PRIMITIVES[name]
    kind = elementwise.BINARY[name][1]
    x, y = _operand(name, kind, (4,)), _operand(name, kind, (4,))
    fn = lambda a, b: bind(primitive, a, b)  # noqa: E731
    assert name in _check(fn, (x, y))
    _check(fn, (x, y[0]), in_axes=(0, None))            # one operand shared
    _check(fn, (x[:, 0], y), in_axes=(0, 0))            # a batched scalar against an array
    _check(fn, (x, y[0, 0]), in_axes=(0, None))          # a shared scalar
    _check(fn, (x[0, 0], y[:, 1]), in_axes=(None, 0))


def test_select_and_convert():
    x, y = _u(4), _u(4)
    assert "select" in _check(lambda a, b: qnp.where(a > 0, a, b), (x, y))
    assert "select" in _check(lambda a, b: qnp.where(a > 0, a, b), (x, y[0]), (0, None))
    assert "select" in _check(lambda p, b: qnp.where(p, 1.0, b), (x[:, 0] > 0, y), (0, 0))
    assert "convert" in _check(lambda a: qnp.astype(a, np.float32), (x,))
    assert "stop_gradient" in _check(lambda a: qdiff.stop_gradient(a) * 2.0, (x,))


# ------------------------------------------------------------------ reductions and shapes
STRUCTURAL = {
    "reduce_sum": (lambda x: qnp.sum(x, axis=0), (2, 3)),
    "reduce_prod": (lambda x: qnp.prod(x, axis=1), (2, 3)),
    "reduce_max": (lambda x: qnp.max(x), (2, 3)),
    "reduce_min": (lambda x: qnp.min(x, axis=(0, 1)), (2, 3)),
    "argmax": (lambda x: qnp.argmax(x, axis=1), (2, 3)),
    "argmin": (lambda x: qnp.argmin(x), (4,)),
    "reshape": (lambda x: qnp.reshape(x, (3, 2)), (2, 3)),
    "transpose": (lambda x: x.T, (2, 3)),
    "broadcast_in_dim": (lambda x: qnp.broadcast_to(x, (2, 3)), (3,)),
    "slice": (lambda x: x[1::2, :2], (4, 3)),
    "rev": (lambda x: x[::-1], (4,)),
    "gather": (lambda x: x[np.array([0, 2, -1, 2])], (4,)),
    "cholesky": (lambda x: qnp.linalg.cholesky(x @ x.T + 3.0 * qnp.eye(3)), (3, 3)),
    "logabsdet": (lambda x: qnp.linalg.slogdet(x)[1], (3, 3)),
    "det_sign": (lambda x: qnp.linalg.slogdet(x)[0], (3, 3)),
    "einsum": (lambda x: qnp.einsum("ij,jk->ik", x, x.T), (2, 3)),
    "unpack": (lambda x: tuple(bind(indexing.unpack_p, x, indices=(0, 3, 5))), (2, 3)),
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural(name):
    fn, shape = STRUCTURAL[name]
    assert name in _check(fn, (_u(*shape),))
    assert name in _check(fn, (np.moveaxis(_u(*shape), 0, -1),), in_axes=-1)


def test_two_operand_primitives():
    x, y = _u(3), _u(2)
    assert "concatenate" in _check(lambda a, b: qnp.concatenate([a, b]), (x, y))
    _check(lambda a, b: qnp.concatenate([a, b]), (x, y[0]), (0, None))
    a, b = _u(2, 3), _u(3, 4)
    _check(lambda p, q: p @ q, (a, b))
    _check(lambda p, q: p @ q, (a, b[0]), (0, None))
    _check(lambda p, q: p @ q, (a[0], b), (None, 0))
    m = _u(3, 3) + 3.0 * np.eye(3)
    assert "solve" in _check(lambda p, q: qnp.linalg.solve(p, q), (m, _u(3)))
    _check(lambda p, q: qnp.linalg.solve(p, q), (m[0], _u(3, 2)), (None, 0))
    assert "solve" in {e.primitive.name for e in qdiff.trace(
        lambda p, q: bind(solvers.solve_p, p, q), m[0], np.ones((3, 1))).eqns}


def test_indexing_with_shared_and_member_indices():
    x, i = _u(5), np.array([0, 3, -1])
    assert "dynamic_slice" in _check(lambda a, k: a[k], (x, np.int64(2)), (0, None))
    _check(lambda a, k: a[k], (x, i), (0, 0))                 # an index per member
    _check(lambda a, k: a[k], (x[0], i), (None, 0))
    _check(lambda a, k: a[k:k + 2] if False else qnp.sum(a[k]), (x, i), (0, 0))
    v = _u()
    assert "dynamic_update_slice" in _check(lambda a, k, w: a.at[k].set(w), (x, np.int64(1), v),
                                            (0, None, 0))
    _check(lambda a, k, w: a.at[k].add(w), (x, i, v), (0, 0, 0))
    _check(lambda a, k, w: a.at[k].set(w), (x[0], i, v), (None, 0, 0))
    idx = np.array([[0, 3], [1, 1], [3, -2]])
    _check(lambda a, k: a[k], (x, idx), (0, 0))               # gather, both batched
    _check(lambda a, k: a[k], (x[0], idx), (None, 0))
    m = _u(3, 4)
    _check(lambda a, k: a[:, k], (m, idx), (0, 0))


def test_gather_error_names_the_index():
    with pytest.raises(qdiff.QdiffError, match="out of bounds"):
        qdiff.vmap(lambda a, k: a[k])(_u(3), np.array([[0], [5], [1]]))


# -------------------------------------------------------------------------------- SOACs
def test_map_reduce_scan_hist_scatter():
    x, c = _u(4, 2), _u()
    assert "map" in _check(lambda a, s: qdiff.map(lambda r: qnp.sum(r * r) * s, a), (x, c))
    _check(lambda a, s: qdiff.map(lambda r: qnp.sum(r * r) * s, a), (x, c[0]), (0, None))
    _check(lambda a, s: qdiff.map(lambda r: qnp.sin(r) * s, a), (x[:, :, 0], c))  # elementwise
    _check(lambda a, s: qdiff.map(lambda r: qnp.sin(r) * s, a), (x[0, :, 0], c), (None, 0))
    assert "reduce" in _check(lambda a: qdiff.reduce("add", 0.0, a), (x[:, :, 0],))
    _check(lambda a: qdiff.reduce(lambda p, q: p * q + p, 1.0, a), (x[:, :, 0],))
    _check(lambda a: qdiff.reduce("max", qnp.full(2, -9.0), a), (x,))
    assert "scan" in _check(lambda a: qdiff.scan("mul", 1.0, a), (x[:, :, 0],))
    _check(lambda a, s: qdiff.scan(lambda p, q: p * s + q, 0.0, a), (x[:, :, 0], c))
    idx = np.array([[0, 2, 2, 5], [1, 1, -1, 0], [3, 0, 0, 0]])
    v = _u(4)
    assert "hist" in _check(lambda k, w: qdiff.hist(qnp.zeros(3), "add", 0.0, k, w), (idx, v))
    _check(lambda k, w: qdiff.hist(qnp.zeros(3), "max", -9.0, k, w), (idx[0], v), (None, 0))
    _check(lambda d, k, w: qdiff.hist(d, lambda p, q: p + q * q, 0.0, k, w), (_u(3), idx, v))
    _check(lambda k, w, s: qdiff.hist(qnp.zeros(3), lambda p, q: p + q * s, 0.0, k, w),
           (idx, v, c))                                         # an operator per member
    assert "scatter" in _check(lambda d, k, w: qdiff.scatter(d, k, w), (_u(3), idx, v))
    _check(lambda d, k, w: qdiff.scatter(d, k, w), (_u(3)[0], idx, v[0]), (None, 0, None))


# ------------------------------------------------------------------------- control flow
def test_loop_with_shared_and_member_trip_counts():
    x = _u()
    body = lambda i, c: qnp.sin(c) * 1.1 + i  # noqa: E731
    assert "loop" in _check(lambda a: qdiff.fori_loop(0, 4, body, a), (x,))
    # the body makes a carry that enters unbatched batched (a fixed point)
    _check(lambda a: qdiff.fori_loop(0, 3, lambda i, c: (c[0] + a, c[1] * 2.0), (0.0, 1.0)),
           (x,))
    n = np.array([0, 3, 5])
    _check(lambda a, k: qdiff.fori_loop(0, k, body, a), (x, n))
    _check(lambda a, k: qdiff.fori_loop(k, 6, body, a), (x, n), (0, 0))
    _check(lambda k: qdiff.fori_loop(1, k, lambda i, c: c * i, 1), (n,))


def test_while_with_member_predicates():
    x = np.array([10.0, 0.5, 3.0])
    halve = lambda a: qdiff.while_loop(lambda v: v > 1.0, lambda v: v / 2, a)  # noqa: E731
    assert "while" in _check(halve, (x,))
    count = lambda a: qdiff.while_loop(  # noqa: E731
        lambda s: s[0] > 1.0, lambda s: (s[0] / 2, s[1] + 1), (a, 0))
    _check(count, (x,))
    limit = np.array([1.0, 2.0, 0.1])
    _check(lambda a, t: qdiff.while_loop(lambda v: v > t, lambda v: v * 0.7, a), (x[0], limit),
           (None, 0))
    # a test shared by the batch, a body reading a batched value
    _check(lambda a: qdiff.fori_loop(0, 1, lambda i, c: qdiff.while_loop(
        lambda s: s[1] < 3, lambda s: (s[0] * a, s[1] + 1), (c, 0))[0], 1.0), (x,))


def test_cond_with_shared_and_member_predicates():
    x = np.array([-1.0, 0.5, 2.0])
    assert "cond" in _check(lambda a: qdiff.cond(a > 0, lambda v: v * 2, lambda v: -v, a), (x,))
    _check(lambda a, p: qdiff.cond(p > 0, lambda v: qnp.sin(v), lambda v: v, a),
           (x, 1.0), (0, None))
    _check(lambda k, a: qdiff.switch(k, [qnp.sin, qnp.cos, qnp.exp], a),
           (np.array([-1, 1, 7]), x))
    _check(lambda k, a: qdiff.switch(k, [qnp.sin, qnp.cos, qnp.exp], a), (np.int64(1), x),
           (None, 0))


# --------------------------------------------------------------------------- completeness
def test_every_classical_primitive_has_a_batching_rule():
    covered = {name: p for name, p in all_primitives().items()
               if (p.type_rule.__module__ or "").startswith(COVERED)}
    assert len(covered) > 60
    missing = sorted(name for name, p in covered.items()
                     if p.batch is None and name not in WITHOUT_RULE)
    assert missing == []
    stale = sorted(name for name in WITHOUT_RULE if covered[name].batch is not None)
    assert stale == []


# ------------------------------------------------------------------------ axes and trees
def test_in_axes_variants_and_trees():
    x, y = _u(2, 3), _u(3)
    f = lambda p, q: qnp.sum(p["a"] * q) + p["b"]  # noqa: E731
    tree = {"a": x, "b": y[:, 0]}
    got = qdiff.vmap(f, in_axes=({"a": 0, "b": 0}, 0))(tree, y)
    want = np.stack([f({"a": x[b], "b": y[b, 0]}, y[b]) for b in range(B)])
    _close(got, want)
    got = qdiff.vmap(f, in_axes=(0, None))(tree, y[0])
    _close(got, np.stack([f({"a": x[b], "b": y[b, 0]}, y[0]) for b in range(B)]))
    xt = np.moveaxis(x, 0, 1)                                      # batch axis 1
    _close(qdiff.vmap(lambda p: p * 2.0, in_axes=1)(xt), x * 2.0)
    _close(qdiff.vmap(lambda p: p * 2.0, in_axes=1, out_axes=1)(xt), xt * 2.0)
    got = qdiff.vmap(lambda p, q: (p * q, q), in_axes=(0, None), out_axes=(0, None))(x, y[0])
    _close(got, (x * y[0], y[0]))
    assert qdiff.vmap(lambda p: p * 2.0, in_axes=[0])(x).shape == x.shape


def test_axis_errors_name_the_problem():
    with pytest.raises(qdiff.QdiffError, match="different sizes"):
        qdiff.vmap(lambda p, q: p + q)(np.zeros(2), np.zeros(3))
    with pytest.raises(qdiff.QdiffError, match="at least one argument"):
        qdiff.vmap(lambda p: p, in_axes=None)(np.zeros(2))
    with pytest.raises(qdiff.QdiffError, match="does not have"):
        qdiff.vmap(lambda p: p, in_axes=1)(np.zeros(2))
    with pytest.raises(qdiff.QdiffError, match="prefix"):
        qdiff.vmap(lambda p, q: p, in_axes=(0,))(np.zeros(2), np.zeros(2))
    with pytest.raises(qdiff.QdiffError, match="differs from member to member"):
        qdiff.vmap(lambda p: p, out_axes=None)(np.zeros(2))


def test_nested_vmap():
    x, w = _u(3), rng.uniform(size=(4, 3))
    f = lambda a, b: qnp.sum(qnp.tanh(a * b))  # noqa: E731
    inner = qdiff.vmap(f, in_axes=(0, None))
    got = qdiff.vmap(inner, in_axes=(None, 0))(x, w)                # (4 w-rows, B x-rows)
    want = np.array([[f(x[b], w[k]) for b in range(B)] for k in range(4)])
    _close(got, want)


def test_program_and_decorated_function():
    p = qdiff.trace(lambda a: qnp.sum(a ** 2), np.zeros(3))
    x = _u(3)
    _close(qdiff.vmap(p)(x), np.sum(x ** 2, axis=1))
    batched = qdiff.vmap(p).trace(x)
    assert isinstance(batched, qdiff.Program) and batched.in_types[0].shape == (B, 3)
    assert qdiff.Program.from_json(batched.to_json()) == batched
    decorated = qdiff.program(lambda a: qnp.sum(a ** 2))
    _close(qdiff.vmap(decorated)(x), np.sum(x ** 2, axis=1))


# ---------------------------------------------------------------------------- derivatives
def _loss(w, x):
    h = qdiff.fori_loop(0, 5, lambda i, s: qnp.tanh(w * s + x[i % 3]), 0.0)
    return (h - 0.3) ** 2 + qnp.sum(qnp.sin(w * x))


def test_per_example_gradients_equal_a_loop_of_gradients():
    xs = _u(3)
    ws = rng.uniform(0.5, 1.5, size=B)
    g = qdiff.grad(_loss, argnums=(0, 1))
    got = qdiff.vmap(g)(ws, xs)
    want = _loop(lambda w, x: g(w, x), (ws, xs), 0)
    _close(got, want)
    got = qdiff.vmap(qdiff.grad(_loss), in_axes=(None, 0))(0.9, xs)
    _close(got, np.stack([qdiff.grad(_loss)(0.9, x) for x in xs]))


def test_gradient_of_a_batched_loss_equals_the_loop():
    xs = _u(3)

    def total(w):
        return qnp.sum(qdiff.vmap(_loss, in_axes=(None, 0))(w, xs))

    got = qdiff.grad(total)(0.9)
    want = sum(qdiff.grad(_loss)(0.9, x) for x in xs)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    # the same through a member-dependent trip count and branch
    ns = np.array([1, 4, 6])

    def member(w, n):
        s = qdiff.fori_loop(0, n, lambda i, c: qnp.sin(c * w) + 0.5, 0.2)
        return qdiff.cond(s > 0.6, lambda v: v * v, lambda v: -v, s)

    got = qdiff.grad(lambda w: qnp.sum(qdiff.vmap(member, in_axes=(None, 0))(w, ns)))(0.8)
    want = sum(qdiff.grad(member)(0.8, n) for n in ns)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    jac = qdiff.jacobian(qdiff.vmap(_loss, in_axes=(None, 0)))(0.9, xs)
    np.testing.assert_allclose(jac, [qdiff.grad(_loss)(0.9, x) for x in xs], rtol=1e-12)


def test_jit_of_vmap_equals_the_interpreter():
    xs, ws = _u(3), rng.uniform(0.5, 1.5, size=B)
    batched = qdiff.vmap(qdiff.grad(_loss))
    _close(qdiff.jit(batched)(ws, xs), batched(ws, xs))


def test_a_member_past_max_iter_fails_as_it_does_alone():
    halve = lambda a: qdiff.while_loop(lambda v: v > 1.0, lambda v: v / 2, a,  # noqa: E731
                                       max_iter=3)
    _close(qdiff.vmap(halve)(np.array([2.0, 5.0])), np.array([1.0, 0.625]))
    with pytest.raises(qdiff.LoopLimitError):
        qdiff.program(halve)(1000.0)
    with pytest.raises(qdiff.LoopLimitError):
        qdiff.vmap(halve)(np.array([2.0, 1000.0]))


def test_a_batch_of_one_and_a_shared_output():
    x = _u(2)[:1]
    _close(qdiff.vmap(lambda a: qnp.sum(a) * 2.0)(x), np.sum(x, axis=1) * 2.0)
    got = qdiff.vmap(lambda a, b: (a + b, b * 2.0), in_axes=(0, None),
                     out_axes=(0, None))(x, 3.0)
    _close(got, (x + 3.0, np.float64(6.0)))


# ------------------------------------------------------------------ reverse computing
def _leapfrog(a, steps, invertible=True):
    step = lambda i, c: (c[0] + 0.1 * c[1], c[1] - 0.1 * qnp.sin(c[0] + 0.1 * c[1]) * a)  # noqa: E731
    return qdiff.fori_loop(0, steps, step, (1.0, 0.0), invertible=invertible)[0]


def test_vmapped_invertible_loops_keep_their_inverse_and_agree_with_stored_carries():
    # the batched loop takes the batched inverse step, with shared and per-member bounds
    a, steps = _u(low=0.5, high=2.0), np.array([3, 50, 17])
    cases = [(lambda a: _leapfrog(a, 50), lambda a: _leapfrog(a, 50, False), (a,), 0),
             (_leapfrog, lambda a, n: _leapfrog(a, n, False), (a, steps), (0, 0))]
    for invertible, stored, args, axes in cases:
        _check(invertible, args, axes)
        np.testing.assert_allclose(qdiff.vmap(qdiff.grad(invertible), in_axes=axes)(*args),
                                   qdiff.vmap(qdiff.grad(stored), in_axes=axes)(*args),
                                   rtol=1e-11, atol=1e-13)
        batched = qdiff.vmap(invertible, in_axes=axes).trace(*args)
        assert any(e.params.get("inverse") is not None
                   for e in batched.all_eqns() if e.primitive.name == "loop")
