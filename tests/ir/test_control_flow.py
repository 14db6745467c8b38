"""Control flow: counted and while loops, branches, switch, nesting, captured values, cells."""

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp


def test_fori_loop_with_traced_bounds_and_tuple_carry():
    def f(n, x):
        return qdiff.fori_loop(0, n, lambda i, c: (c[0] + i, c[1] * x), (0, 1.0))

    p = qdiff.trace(f, 3, 2.0)
    total, power = p(5, 2.0)
    assert int(total) == 10 and float(power) == 32.0
    assert int(p(0, 2.0)[0]) == 0


def test_while_loop_data_dependent_trip_count():
    def newton_sqrt(a):
        return qdiff.while_loop(lambda x: qnp.abs(x * x - a) > 1e-12,
                                lambda x: 0.5 * (x + a / x), a)

    p = qdiff.trace(newton_sqrt, 2.0)
    for a in (2.0, 10.0, 1e4):
        np.testing.assert_allclose(p(a), np.sqrt(a), rtol=1e-12)


def test_bounded_while_loop_aborts_when_exhausted():
    p = qdiff.trace(lambda x: qdiff.while_loop(lambda v: v < 100.0, lambda v: v + 1.0, x,
                                               max_iter=10), 0.0)
    assert float(p(95.0)) == 100.0
    with pytest.raises(qdiff.LoopLimitError, match="max_iter=10"):
        p(0.0)


def test_nested_loops_capture_outer_values():
    def f(x, w):
        def outer(i, acc):
            inner = qdiff.fori_loop(0, 3, lambda j, a: a + w[j] * x[i], 0.0)
            return acc + inner

        return qdiff.fori_loop(0, 4, outer, 0.0)

    x, w = np.arange(4.0), np.array([1.0, 2.0, 3.0])
    p = qdiff.trace(f, x, w)
    assert float(p(x, w)) == pytest.approx(np.sum(x) * np.sum(w))
    assert str(p).count("= loop") == 2  # nested, not flattened


def test_switch_clamps_index_and_branches_must_agree():
    p = qdiff.trace(lambda k, x: qdiff.switch(k, [lambda v: v + 1.0, lambda v: v * 10.0], x),
                    0, 1.0)
    assert [float(p(k, 2.0)) for k in (-5, 0, 1, 7)] == [3.0, 3.0, 20.0, 20.0]
    with pytest.raises(qdiff.TypeCheckError, match="branch 1 returns"):
        qdiff.trace(lambda x: qdiff.cond(x > 0, lambda: x, lambda: (x, x)), 1.0)


def test_cond_with_concrete_predicate_runs_at_trace_time():
    p = qdiff.trace(lambda x: qdiff.cond(True, lambda v: v + 1.0, lambda v: v - 1.0, x), 0.0)
    assert "cond" not in str(p) and float(p(1.0)) == 2.0


def test_carry_must_keep_its_type():
    with pytest.raises(qdiff.TypeCheckError, match="carry element 0"):
        qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: c * x, 1), 2.0)
    with pytest.raises(qdiff.TypeCheckError, match="carry"):
        qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: (c, c), x), 2.0)


def test_cells_become_carry_automatically():
    def f(x):
        total = qdiff.Cell(0.0)
        seen = qdiff.Cell(x)

        def body(i):
            total.set(total.value + seen.value * i)

        qdiff.fori_loop(0, 4, body)
        qdiff.cond(total.value > 10.0, lambda: total.set(total.value * 0.0), lambda: None)
        return total.value

    p = qdiff.trace(f, 1.0)
    assert float(p(1.0)) == 6.0
    assert float(p(2.0)) == 0.0
    # `seen` is only read: it is a const of the loop, not part of its carry
    loop = next(e for e in p.eqns if e.primitive.name == "loop")
    assert loop.params["num_consts"] == 1 and len(loop.outputs) == 1


def test_while_loop_closure_style_with_cells():
    def f(x):
        value, steps = qdiff.Cell(x), qdiff.Cell(0)

        def test():
            return value.value > 1.0

        def body():
            value.set(value.value / 2.0)
            steps.set(steps.value + 1)

        qdiff.while_loop(test, body)
        return value.value, steps.value

    p = qdiff.trace(f, 1.0)
    v, n = p(20.0)
    assert float(v) == 0.625 and int(n) == 5


def test_map_body_cannot_write_outer_cells():
    def f(x):
        acc = qdiff.Cell(0.0)
        return qdiff.map(lambda v: acc.set(v), x)

    with pytest.raises(qdiff.QdiffError, match="map body cannot update"):
        qdiff.trace(f, np.ones(3))


def test_escaped_tracer_is_reported():
    leaked = []

    def f(x):
        qdiff.fori_loop(0, 2, lambda i, c: leaked.append(c) or c, x)
        return leaked[0] + 1.0

    with pytest.raises(qdiff.QdiffError, match="escaped"):
        qdiff.trace(f, 1.0)


def test_general_operators_for_reduce_scan_hist():
    def f(x, idx):
        best = qdiff.reduce(lambda a, b: (qnp.maximum(a[0], b[0]), a[1] + b[1]),
                            (-np.inf, 0.0), (x, x * x))
        prefix = qdiff.scan(lambda a, b: a + b * 2.0, 0.0, x)  # not a plain monoid
        h = qdiff.hist(qnp.ones(2), lambda a, b: a * b, 1.0, idx, x)
        return best, prefix, h

    x, idx = np.array([1.0, -2.0, 3.0]), np.array([0, 1, 0])
    p = qdiff.trace(f, x, idx)
    (m, s2), prefix, h = p(x, idx)
    assert float(m) == 3.0 and float(s2) == 14.0
    np.testing.assert_allclose(prefix, [2.0, -2.0, 4.0])
    np.testing.assert_allclose(h, [3.0, -2.0])


def test_python_if_on_traced_value_names_the_combinator():
    def f(x):
        if x > 0:
            return x
        return -x

    with pytest.raises(qdiff.TracerConversionError, match="qdiff.cond"):
        qdiff.trace(f, 1.0)

    def g(x):
        while x > 0:
            x = x - 1.0
        return x

    with pytest.raises(qdiff.TracerConversionError, match="while_loop"):
        qdiff.trace(g, 1.0)
    with pytest.raises(qdiff.TracerConversionError, match="float"):
        qdiff.trace(lambda x: float(x), 1.0)


def test_eager_combinators_on_concrete_values():
    assert float(qdiff.fori_loop(0, 4, lambda i, c: c + i, 0)) == 6
    np.testing.assert_allclose(qdiff.map(lambda v: v * 2, np.arange(3.0)), [0.0, 2.0, 4.0])
    np.testing.assert_allclose(qdiff.scan("max", -np.inf, np.array([1.0, 3.0, 2.0])),
                               [1.0, 3.0, 3.0])
