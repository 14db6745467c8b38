"""A program using every loop and combinator: printed with loops intact, equal to NumPy,
and unchanged by a JSON round trip."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qdiff
import qdiff.numpy as qnp


def qdiff_version(x, bins):
    state = qdiff.fori_loop(0, 8, lambda i, s: qnp.tanh(1.5 * s + x[i % 5]), 0.0)
    size = qdiff.while_loop(lambda v: v > 1e-3, lambda v: 0.5 * v, qnp.abs(state) + 1.0)
    signed = qdiff.cond(state > 0, lambda v: v * 2.0, lambda v: -v, x)
    energy = qdiff.reduce("add", 0.0, qdiff.map(lambda v: qnp.sin(v) * size, signed))
    running = qdiff.scan(lambda a, b: a * b, 1.0, x)
    counts = qdiff.hist(qnp.zeros(3), "add", 0.0, bins, x)
    placed = qdiff.scatter(qnp.zeros(4), bins, x)
    return energy + running[-1], counts, placed


def numpy_version(x, bins):
    state = 0.0
    for i in range(8):
        state = np.tanh(1.5 * state + x[i % 5])
    size = abs(state) + 1.0
    while size > 1e-3:
        size *= 0.5
    signed = x * 2.0 if state > 0 else -x
    energy = np.sum(np.sin(signed) * size)
    counts = np.zeros(3)
    np.add.at(counts, bins[(bins >= 0) & (bins < 3)], x[(bins >= 0) & (bins < 3)])
    placed = np.zeros(4)
    for b, v in zip(bins, x):
        if 0 <= b < 4:
            placed[b] = v
    return energy + np.cumprod(x)[-1], counts, placed


EXAMPLE = (np.linspace(-1, 1, 5), np.array([0, 2, 1, 5, -1]))


@pytest.fixture(scope="module")
def program():
    return qdiff.trace(qdiff_version, *EXAMPLE)


def test_loops_print_as_loops_not_unrolled(program):
    text = str(program)
    for node in ("= loop", "= while", "= cond", "= map", "= reduce", "= scan", "= hist",
                 "= scatter"):
        assert node in text, node
    # the 8-iteration body appears once: it was not unrolled
    assert text.count("tanh") == 1
    assert "body(" in text and "cond(" in text and "branches[1](" in text


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_matches_numpy_on_random_inputs(program, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=5)
    bins = rng.integers(-1, 6, size=5)
    got = program(x, bins)
    want = numpy_version(x, bins)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def test_json_round_trip_is_equal(program):
    restored = qdiff.Program.from_json(program.to_json(indent=1))
    assert restored == program
    assert str(restored) == str(program)
    x, bins = EXAMPLE
    for a, b in zip(restored(x, bins), program(x, bins)):
        np.testing.assert_array_equal(a, b)


def test_structural_equality_sees_differences():
    a = qdiff.trace(lambda x: qnp.sin(x) * 2.0, 1.0)
    b = qdiff.trace(lambda x: qnp.sin(x) * 3.0, 1.0)
    c = qdiff.trace(lambda x: qnp.cos(x) * 2.0, 1.0)
    assert a == qdiff.trace(lambda y: qnp.sin(y) * 2.0, 1.0)
    assert a != b and a != c


def test_program_decorator_caches_per_signature():
    calls = []

    @qdiff.program
    def f(x):
        calls.append(1)
        return x + 1

    f(1.0), f(2.0), f(np.ones(2))
    assert len(calls) == 2
    assert f.trace(np.ones(2)) is f.trace(np.zeros(2))


def test_pytree_arguments_and_results():
    def f(params, xs):
        return {"out": params["w"] * xs[0] + params["b"], "pair": (xs[1], None)}

    args = ({"w": 2.0, "b": np.ones(2)}, [np.arange(2.0), 3.0])
    p = qdiff.trace(f, *args)
    got = p(*args)
    assert set(got) == {"out", "pair"}
    np.testing.assert_allclose(got["out"], [1.0, 3.0])
    assert got["pair"][1] is None and float(got["pair"][0]) == 3.0
    with pytest.raises(qdiff.QdiffError, match="structured"):
        p({"w": 2.0}, [np.arange(2.0), 3.0])


def test_calling_a_program_inside_a_trace_inlines_it():
    inner = qdiff.trace(lambda v: qnp.exp(v) + 1.0, np.zeros(3))
    outer = qdiff.trace(lambda v: qnp.sum(inner(v) * 2.0), np.zeros(3))
    assert "exp" in str(outer)
    np.testing.assert_allclose(outer(np.arange(3.0)), np.sum((np.exp(np.arange(3.0)) + 1) * 2))


def test_argument_shape_mismatch_is_reported():
    p = qdiff.trace(lambda v: v * 2.0, np.zeros(3))
    with pytest.raises(qdiff.QdiffError, match=r"shape \(4,\).*f64\[3\]"):
        p(np.zeros(4))
