"""Elementwise ops and broadcasting against NumPy, on random shapes (hypothesis)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import qdiff
import qdiff.numpy as qnp

UNARY = {
    "negative": (qnp.negative, np.negative, None),
    "exp": (qnp.exp, np.exp, None),
    "log": (qnp.log, np.log, "positive"),
    "log1p": (qnp.log1p, np.log1p, "positive"),
    "expm1": (qnp.expm1, np.expm1, None),
    "sin": (qnp.sin, np.sin, None),
    "cos": (qnp.cos, np.cos, None),
    "tan": (qnp.tan, np.tan, None),
    "tanh": (qnp.tanh, np.tanh, None),
    "sqrt": (qnp.sqrt, np.sqrt, "positive"),
    "abs": (qnp.abs, np.abs, None),
    "sign": (qnp.sign, np.sign, None),
    "arctan": (qnp.arctan, np.arctan, None),
    "floor": (qnp.floor, np.floor, None),
}
BINARY = {
    "add": (qnp.add, np.add), "subtract": (qnp.subtract, np.subtract),
    "multiply": (qnp.multiply, np.multiply), "divide": (qnp.divide, np.divide),
    "maximum": (qnp.maximum, np.maximum), "minimum": (qnp.minimum, np.minimum),
    "less": (qnp.less, np.less), "greater_equal": (qnp.greater_equal, np.greater_equal),
    "equal": (qnp.equal, np.equal), "not_equal": (qnp.not_equal, np.not_equal),
    "arctan2": (qnp.arctan2, np.arctan2),
}

floats = st.floats(-5, 5, allow_nan=False, width=64)


def _array(shape, positive=False):
    elements = st.floats(0.1, 5) if positive else floats
    return hnp.arrays(np.float64, shape, elements=elements)


@pytest.mark.parametrize("name", sorted(UNARY))
@settings(max_examples=15, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
def test_unary_matches_numpy(name, data, shape):
    ours, theirs, domain = UNARY[name]
    x = data.draw(_array(shape, positive=domain == "positive"))
    program = qdiff.trace(ours, x)
    np.testing.assert_allclose(program(x), theirs(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-12, atol=1e-12)  # eager


@pytest.mark.parametrize("name", sorted(BINARY))
@settings(max_examples=15, deadline=None)
@given(data=st.data(),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4))
def test_binary_broadcasting_matches_numpy(name, data, shapes):
    ours, theirs = BINARY[name]
    a = data.draw(_array(shapes.input_shapes[0]))
    b = data.draw(_array(shapes.input_shapes[1], positive=name == "divide"))
    program = qdiff.trace(ours, a, b)
    got = program(a, b)
    assert np.shape(got) == shapes.result_shape
    np.testing.assert_allclose(got, theirs(a, b), rtol=1e-12, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(data=st.data(),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3, max_side=3))
def test_where_broadcasts_three_ways(data, shapes):
    c = data.draw(hnp.arrays(np.bool_, shapes.input_shapes[0]))
    a, b = data.draw(_array(shapes.input_shapes[1])), data.draw(_array(shapes.input_shapes[2]))
    np.testing.assert_array_equal(qdiff.trace(qnp.where, c, a, b)(c, a, b), np.where(c, a, b))


def test_operators_on_tracers_and_weak_scalars():
    def f(x, n):
        return (2 - x) * 3 / (x + 1) ** 2 - (-x) % 1.5 + n // 2 + (x @ x), x.astype(np.float32) * 2

    x, n = np.array([0.5, 1.5]), np.array([3, 4])
    p = qdiff.trace(f, x, n)
    got, single = p(x, n)
    want = (2 - x) * 3 / (x + 1) ** 2 - (-x) % 1.5 + n // 2 + x @ x
    np.testing.assert_allclose(got, want)
    assert single.dtype == np.float32  # `* 2` keeps float32: Python scalars are weak


def test_numpy_array_on_the_left_defers_to_tracer():
    p = qdiff.trace(lambda x: np.ones(2) + x, np.zeros(2))
    np.testing.assert_array_equal(p(np.arange(2.0)), [1.0, 2.0])


def test_dtype_promotion_matches_numpy():
    p = qdiff.trace(lambda i, f: (i + f, i * 2, i / 2, qnp.sin(i)),
                    np.arange(3), np.ones(3, np.float32))
    s, twice, half, sine = p(np.arange(3), np.ones(3, np.float32))
    assert s.dtype == np.result_type(np.int64, np.float32)
    assert twice.dtype == np.int64 and half.dtype == np.float64 and sine.dtype == np.float64


def test_shape_mismatch_fails_at_trace_time_naming_op_and_shapes():
    message = r"add: cannot broadcast shapes \(3,\) and \(4,\)"
    with pytest.raises(qdiff.TypeCheckError, match=message):
        qdiff.trace(lambda a, b: a + b, np.zeros(3), np.zeros(4))
    with pytest.raises(qdiff.TypeCheckError, match=r"test_numpy_elementwise.py:\d+"):
        qdiff.trace(lambda a, b: qnp.multiply(a, b), np.zeros((2, 3)), np.zeros((3, 2)))
