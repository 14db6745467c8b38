"""Indexing and `.at` updates against NumPy (hypothesis on random shapes and indices)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import qdiff


@st.composite
def basic_index(draw, shape):
    entries = []
    for dim in shape:
        kind = draw(st.sampled_from(["int", "slice", "full"]))
        if kind == "int":
            entries.append(draw(st.integers(-dim, dim - 1)))
        elif kind == "slice":
            start = draw(st.one_of(st.none(), st.integers(-dim - 1, dim + 1)))
            stop = draw(st.one_of(st.none(), st.integers(-dim - 1, dim + 1)))
            step = draw(st.sampled_from([None, 1, 2, -1, -2, 3]))
            entries.append(slice(start, stop, step))
        else:
            entries.append(slice(None))
    if draw(st.booleans()):
        entries.insert(draw(st.integers(0, len(entries))), None)
    return tuple(entries)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
def test_basic_indexing_matches_numpy(data, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    index = data.draw(basic_index(shape))
    np.testing.assert_array_equal(qdiff.trace(lambda v: v[index], x)(x), x[index])


@settings(max_examples=60, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
def test_advanced_indexing_matches_numpy(data, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    index = []
    for dim in shape:
        kind = data.draw(st.sampled_from(["array", "slice", "int"]))
        if kind == "array":
            index.append(data.draw(hnp.arrays(np.int64, data.draw(st.sampled_from([(2,), (2, 3)])),
                                              elements=st.integers(-dim, dim - 1))))
        elif kind == "int":
            index.append(data.draw(st.integers(-dim, dim - 1)))
        else:
            index.append(slice(None, None, data.draw(st.sampled_from([1, -1, 2]))))
    index = tuple(index)
    try:
        want = x[index]
    except IndexError:
        return
    arrays = [i for i in index if isinstance(i, np.ndarray)]

    def f(v, *traced_indices):
        it = iter(traced_indices)
        return v[tuple(next(it) if isinstance(i, np.ndarray) else i for i in index)]

    # static index arrays and traced index arrays give NumPy's answer
    np.testing.assert_array_equal(qdiff.trace(lambda v: v[index], x)(x), want)
    np.testing.assert_array_equal(qdiff.trace(f, x, *arrays)(x, *arrays), want)


def test_traced_scalar_index_and_mask():
    x = np.arange(12.0).reshape(3, 4)
    p = qdiff.trace(lambda v, i, j: (v[i], v[i, j], v[:, j], v[-1, i]), x, 0, 0)
    for i, j in [(0, 0), (2, 3), (-1, -2)]:
        got = p(x, i, j)
        for g, w in zip(got, (x[i], x[i, j], x[:, j], x[-1, i])):
            np.testing.assert_array_equal(g, w)
    mask = np.array([True, False, True])
    np.testing.assert_array_equal(qdiff.trace(lambda v: v[mask], x)(x), x[mask])
    with pytest.raises(qdiff.QdiffError, match="out of bounds"):
        p(x, 5, 0)
    with pytest.raises(qdiff.QdiffError, match="boolean mask"):
        qdiff.trace(lambda v: v[v > 2], x)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
def test_at_updates_match_numpy(data, shape):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    index = data.draw(basic_index(shape))
    region = x[index]
    values = data.draw(hnp.arrays(np.float64, region.shape, elements=st.floats(-3, 3)))
    expected_set, expected_add = x.copy(), x.copy()
    expected_set[index] = values
    expected_add[index] += values
    setter = qdiff.trace(lambda v, u: v.at[index].set(u), x, values)
    adder = qdiff.trace(lambda v, u: v.at[index].add(u), x, values)
    np.testing.assert_array_equal(setter(x, values), expected_set)
    np.testing.assert_array_equal(adder(x, values), expected_add)


def test_at_with_repeated_array_indices_accumulates():
    x, idx = np.zeros(4), np.array([1, 1, 3, -1])
    p = qdiff.trace(lambda v, i, u: (v.at[i].add(u), v.at[i].set(u), v.at[i].max(u)),
                    x, idx, np.ones(4))
    added, placed, biggest = p(x, idx, np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(added, [0.0, 3.0, 0.0, 7.0])
    np.testing.assert_array_equal(placed, [0.0, 2.0, 0.0, 4.0])  # last write wins
    np.testing.assert_array_equal(biggest, [0.0, 2.0, 0.0, 4.0])


def test_at_with_traced_scalar_index_in_a_loop():
    def running(x):
        return qdiff.fori_loop(1, x.shape[0], lambda i, acc: acc.at[i].add(acc[i - 1]), x)

    x = np.arange(1.0, 6.0)
    np.testing.assert_array_equal(qdiff.trace(running, x)(x), np.cumsum(x))


def test_setitem_is_refused_with_the_alternative():
    def f(v):
        v[0] = 1.0
        return v

    with pytest.raises(TypeError, match="at\\[index\\].set"):
        qdiff.trace(f, np.zeros(2))
