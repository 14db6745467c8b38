"""Every public `qdiff.numpy` name against its NumPy namesake, generated from one table.

Each function runs on concrete arrays and traced through `qdiff.trace`, on random and edge
inputs (zeros, ties, ±inf, NaN, empty and zero-size arrays; float, integer and boolean
dtypes) with every keyword it documents; values, shapes and dtypes must match NumPy's.
Names that are not functions, or have no NumPy namesake, are listed with the reason.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import special

import qdiff
import qdiff.numpy as qnp

rng = np.random.default_rng(21)
EDGE = np.array([0.0, -0.0, 1.0, -1.0, 2.5, 2.5, np.inf, -np.inf, np.nan, 0.5])
UNIT = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 0.25, 0.25, np.nan, 2.0])


def _inputs(edge: np.ndarray) -> list[np.ndarray]:
    return [
        rng.normal(size=(2, 3)),
        edge,
        edge.astype(np.float32),
        np.array([3, -2, 0, 7, 7], np.int64),
        np.array([True, False, True]),
        np.zeros((0,)),
        np.zeros((2, 0)),
        np.float64(1.5),
    ]


UNARY = ("abs absolute ceil conj cos cosh exp expm1 floor imag isfinite isinf isnan "
         "logical_not negative real reciprocal round sign sin sinh sqrt square tan tanh "
         "log log1p").split()
UNIT_UNARY = "arccos arcsin arctan".split()  # inputs in their domain mostly
BINARY = ("add arctan2 divide equal floor_divide greater greater_equal less less_equal "
          "logaddexp logical_and logical_or logical_xor maximum minimum mod multiply "
          "not_equal power remainder subtract true_divide").split()
REDUCTIONS = "sum prod mean max min amax amin logsumexp".split()


def _logsumexp(x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
    if x.size == 0:  # SciPy fails on zero-size arrays reduced over all axes: log(0)
        return np.log(np.sum(np.exp(x), axis, keepdims=keepdims))
    return special.logsumexp(x, axis=axis, keepdims=keepdims)


def _reference(name: str) -> Callable[..., Any]:
    return {"logsumexp": _logsumexp, "sigmoid": special.expit}.get(
        name, getattr(np, name, None))


# Where qdiff differs from NumPy by design; each is checked, not skipped.
# qdiff has no float16: float-valued functions of booleans give float64 (NumPy: float16),
# so the reference is NumPy on the booleans as float64.
# qdiff's type rules refuse arithmetic on booleans (NumPy treats them as 0/1 integers) for:
BOOL_ARITHMETIC_REFUSED = {"abs", "absolute", "conj", "real", "imag", "square", "negative",
                           "sign", "add", "subtract", "multiply", "power", "maximum",
                           "minimum", "floor_divide", "mod", "remainder", "clip", "dot",
                           "matmul"}
# reciprocal of integers is 1 / x in float64 (NumPy's integer reciprocal truncates to 0),
# so the reference is NumPy on float64.
FLOAT_REFERENCE = {"reciprocal"}


def _is_array(value: Any) -> bool:
    return isinstance(value, (np.ndarray, np.generic))


def _run(fn: Callable[..., Any], arrays: list[Any], kwargs: dict) -> tuple[Any, Any]:
    concrete = fn(*arrays, **kwargs)
    # arrays become traced arguments; Python scalars stay (weakly typed) constants
    traced_args = [a for a in arrays if _is_array(a)]

    def body(*xs: Any) -> Any:
        it = iter(xs)
        return fn(*(next(it) if _is_array(a) else a for a in arrays), **kwargs)

    traced = qdiff.trace(body, *traced_args)(*traced_args)
    return concrete, traced


def _as_float(arrays: list[Any]) -> list[Any]:
    return [a.astype(np.float64) if _is_array(a) and a.dtype.kind in "biu" else a
            for a in arrays]


def _same(actual: Any, expected: Any, where: str) -> None:
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
    if actual.dtype.kind in "fc":
        single = actual.dtype in (np.float32, np.complex64)
        np.testing.assert_allclose(actual, expected, rtol=1e-6 if single else 1e-12,
                                   atol=1e-15, equal_nan=True, err_msg=where)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=where)


def _check(name: str, arrays: list[Any], kwargs: dict | None = None,
           fn: Callable[..., Any] | None = None, reference: Callable[..., Any] | None = None
           ) -> None:
    kwargs = kwargs or {}
    fn = fn or getattr(qnp, name)
    reference = reference or _reference(name)
    shown = ", ".join(f"{a.dtype}{list(a.shape)}" for a in map(np.asarray, arrays))
    where = f"{name}({shown}, {kwargs})"
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        has_bool = any(_is_array(a) and a.dtype == np.bool_ for a in arrays)
        try:
            expected = reference(*arrays, **kwargs)
        except (TypeError, ValueError):
            with pytest.raises(Exception):  # noqa: B017 - NumPy refuses: qdiff must too
                _run(fn, arrays, kwargs)
            return
        if has_bool and name in BOOL_ARITHMETIC_REFUSED:
            with pytest.raises(qdiff.TypeCheckError, match="bool"):
                _run(fn, arrays, kwargs)
            return
        if np.asarray(expected).dtype == np.float16 or name in FLOAT_REFERENCE:
            expected = reference(*_as_float(arrays), **kwargs)
        concrete, traced = _run(fn, arrays, kwargs)
    _same(concrete, expected, where + " concrete")
    _same(traced, expected, where + " traced")


# ----------------------------------------------------------------------------- elementwise
@pytest.mark.parametrize("name", UNARY + UNIT_UNARY)
def test_unary_elementwise_matches_numpy(name):
    for x in _inputs(UNIT if name in UNIT_UNARY else EDGE):
        _check(name, [x])


@pytest.mark.parametrize("name", BINARY)
def test_binary_elementwise_matches_numpy(name):
    pairs = [(EDGE, EDGE[::-1]), (EDGE, 2.0), (3, EDGE), (np.array([3, -2, 0, 7]),
             np.array([2, 5, 3, -7])), (np.array([True, False]), np.array([True, True])),
             (rng.normal(size=(2, 3)), rng.normal(size=(3,))),
             (EDGE.astype(np.float32), 2.0), (np.zeros((2, 0)), np.zeros((1, 0)))]
    for x, y in pairs:
        if name in ("floor_divide", "mod", "remainder") and np.asarray(y).dtype.kind in "iu" \
                and np.any(np.asarray(y) == 0):
            continue  # integer division by zero is undefined behaviour
        _check(name, [x, y])


def test_where_clip_sigmoid_match_numpy():
    x = EDGE
    _check("where", [x > 0.7, x, -x])
    _check("where", [np.array([True, False]), 1.0, np.array([[5.0], [6.0]])])
    _check("clip", [x, -1.0, 1.0])
    _check("clip", [np.array([3, -2, 0, 7]), 0, 5])
    _check("sigmoid", [rng.normal(size=4)])
    assert qnp.result_type(np.float32(1), 2.0) == np.result_type(np.float32(1), 2.0)
    assert qnp.result_type(np.int32(1), np.int64(1)) == np.result_type(np.int32, np.int64)


# ------------------------------------------------------------------------------ reductions
AXES = [None, 0, -1, (0, 1), (-1, 0)]


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reductions_match_numpy(name):
    arrays = [rng.normal(size=(2, 3)), np.array([[0.0, 1.0, 1.0], [np.inf, -1.0, 0.0]]),
              np.array([[1.0, np.nan, 2.0], [-np.inf, -np.inf, -np.inf]]),
              np.array([[3, -2, 0], [7, 7, 1]], np.int32), np.array([[True, False, True]] * 2),
              rng.normal(size=(2, 3)).astype(np.float32), np.zeros((2, 0))]
    for x, axis, keepdims in itertools.product(arrays, AXES, (False, True)):
        empty_extremum = name in ("max", "min", "amax", "amin") and x.size == 0 and (
            axis is None or x.shape[axis if isinstance(axis, int) else 0] == 0
            or isinstance(axis, tuple))
        if empty_extremum:
            with pytest.raises(Exception):  # noqa: B017 - NumPy: zero-size array to reduction
                _run(getattr(qnp, name), [x], {"axis": axis})
            continue
        _check(name, [x], {"axis": axis, "keepdims": keepdims})
    for name_dtype in (np.float32, np.int64, np.float64):
        if name in ("sum", "prod", "mean"):
            _check(name, [np.array([[3, -2, 0], [7, 7, 1]], np.int32)], {"dtype": name_dtype})


@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_match_numpy(name):
    for x in (np.array([[1.0, 5.0, 5.0], [2.0, 2.0, -1.0]]), np.array([3, 7, 7, -1]),
              np.array([[0.0, np.nan], [1.0, 1.0]])):
        for axis in [None] + list(range(-x.ndim, x.ndim)):
            _check(name, [x], {"axis": axis})


# --------------------------------------------------------------------------- shape, linalg
def _joined(join: Callable[..., Any]) -> Callable[..., Any]:
    """``join`` (concatenate, stack, ...) taking its arrays as separate arguments."""
    return lambda *arrays, **kwargs: join(list(arrays), **kwargs)


def test_shape_functions_match_numpy():
    x = np.arange(24.0).reshape(2, 3, 4)
    for shape in ((4, 6), (-1,), (2, -1, 2), 24):
        _check("reshape", [x], {"shape": shape})
    for axes in (None, (1, 0, 2), (-1, 0, 1)):
        _check("transpose", [x], {"axes": axes})
    _check("swapaxes", [x], {"axis1": 0, "axis2": -1})
    _check("moveaxis", [x], {"source": [0, 2], "destination": [-1, 0]})
    _check("broadcast_to", [np.arange(3)], {"shape": (2, 3)})
    for axis in (0, -1, (0, 2)):
        _check("expand_dims", [x[0]], {"axis": axis})
    _check("squeeze", [np.zeros((1, 3, 1))])
    _check("squeeze", [np.zeros((1, 3, 1))], {"axis": -1})
    _check("ravel", [x])
    _check("ravel", [np.zeros((2, 0))])
    lists = {"concatenate": [{"axis": 0}, {"axis": -1}], "stack": [{"axis": 0}, {"axis": -1}],
             "hstack": [{}], "vstack": [{}]}
    for name, options in lists.items():
        for kwargs, (a, b) in itertools.product(options, [(x[0], x[1] + 1), (
                np.ones(3, np.int64), np.ones(3)), (np.zeros((2, 0)), np.zeros((2, 0)))]):
            _check(name, [a, b], kwargs, fn=_joined(getattr(qnp, name)),
                   reference=_joined(getattr(np, name)))


def test_products_match_numpy():
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    v, w = rng.normal(size=3), rng.normal(size=3)
    for name, args in (("dot", [a, b]), ("dot", [v, w]), ("dot", [a, v]), ("dot", [2.0, v]),
                       ("matmul", [a, b]), ("matmul", [np.ones((4, 2, 3)), b]),
                       ("matmul", [v, b]), ("inner", [a, v]), ("outer", [v, a]),
                       ("vdot", [v + 1j * w, v]), ("dot", [np.arange(3), np.arange(3)])):
        _check(name, args)
    _check("einsum", [a, b], fn=lambda x, y: qnp.einsum("ij,jk->ik", x, y),
           reference=lambda x, y: np.einsum("ij,jk->ik", x, y))
    _check("einsum", [a], fn=lambda x: qnp.einsum("ij->", x),
           reference=lambda x: np.einsum("ij->", x))


# ------------------------------------------------------------------------------- indexing
def test_indexing_matches_numpy():
    x = np.arange(12.0).reshape(4, 3)
    for index in ((1, 2), (slice(None, None, -1), [0, 2]), (Ellipsis, 1), [3, 0, -1],
                  (None, slice(1, 3)), np.array([[True, False, True]] * 4)):
        _check("getitem", [x], fn=lambda v, i=index: qnp.getitem(v, i),
               reference=lambda v, i=index: v[i])
    for axis in (None, 0, 1, -1):
        _check("take", [x], fn=lambda v, a=axis: qnp.take(v, [1, 0, -1], axis=a),
               reference=lambda v, a=axis: np.take(v, [1, 0, -1], axis=a))


# ------------------------------------------------ rearranging, cumulative, diagonals, solvers
def test_rearranging_functions_match_numpy():
    x = np.arange(12.0).reshape(3, 4)
    for arr in (x, EDGE, np.array([3, -2, 0, 7, 7], np.int64), np.array([[True, False]]),
                np.zeros((2, 0)), EDGE.astype(np.float32)):
        last = arr.ndim - 1
        for kwargs in ({"shift": 2}, {"shift": -7, "axis": last}, {"shift": (1, 3),
                                                                   "axis": (0, last)}):
            _check("roll", [arr], kwargs)
        for kwargs in ({"repeats": 2}, {"repeats": 0, "axis": last},
                       {"repeats": np.arange(arr.shape[0]) % 3, "axis": 0}):
            _check("repeat", [arr], kwargs)
        for reps in (2, (2, 1), (1, 2, 3), 0):
            _check("tile", [arr], {"reps": reps})
        order = np.argsort(arr, axis=-1) if arr.size else np.zeros(arr.shape, np.int64)
        _check("take_along_axis", [arr], {"indices": order, "axis": -1})
        _check("take_along_axis", [arr], {"indices": order[..., :1], "axis": last})
        _check("take_along_axis", [arr], {"indices": np.zeros(3, np.int64) if arr.size
                                          else np.zeros(0, np.int64), "axis": None})
    vectors = [rng.normal(size=(2, 3)), np.array([[0.0, np.inf, 1.0], [np.nan, 2.0, -0.0]]),
               np.array([1, 2, 3])]
    for a, b in itertools.product(vectors, vectors):
        _check("cross", [a, b])
    _check("cross", [rng.normal(size=(3, 2)), rng.normal(size=(3, 1))], {"axis": 0})
    # NumPy 2 deprecates 2-vectors (the z component alone); qdiff takes 3-vectors only
    with pytest.raises(qdiff.TypeCheckError, match="3 components"):
        qnp.cross(np.ones(2), np.ones(2))


def test_cumulative_functions_match_numpy():
    arrays = [rng.normal(size=(2, 3)), np.array([[0.0, 2.0, np.inf], [np.nan, -1.0, 0.0]]),
              np.array([[3, -2, 0], [7, 7, 1]], np.int32), np.array([[True, False, True]] * 2),
              EDGE, EDGE.astype(np.float32), np.zeros((2, 0)), np.zeros((0,)), np.float64(1.5)]
    for name in ("cumsum", "cumprod"):
        for x in arrays:
            for axis in [None] + list(range(-x.ndim, x.ndim)):
                _check(name, [x], {"axis": axis})
        _check(name, [arrays[2]], {"axis": 1, "dtype": np.float32})
    for x in arrays[:-1]:
        for n, axis in ((1, -1), (2, -1), (0, 0), (1, 0), (5, -1)):
            _check("diff", [x], {"n": n, "axis": axis})


def test_diagonal_functions_match_numpy():
    matrices = [np.arange(12.0).reshape(3, 4), np.array([[np.nan, np.inf], [-np.inf, 0.0]]),
                np.arange(24, dtype=np.int32).reshape(2, 3, 4),
                np.array([[True, False], [True, True]]), np.zeros((0, 3)),
                np.ones((3, 3), np.float32)]
    for x, k in itertools.product(matrices, (0, 1, -2, 5)):
        _check("tril", [x], {"k": k})
        _check("triu", [x], {"k": k})
        _check("trace", [x], {"offset": k})
        _check("diagonal", [x], {"offset": k, "axis1": -1, "axis2": 0})
        if x.ndim == 2:
            _check("diag", [x], {"k": k})
    for v, k in itertools.product([EDGE, np.array([1, 2], np.int64), np.zeros(0)], (0, 2, -1)):
        _check("diag", [v], {"k": k})
    _check("trace", [matrices[2]], {"axis1": 1, "axis2": 2, "dtype": np.float64})
    for n, k, m in ((3, 0, None), (4, 1, 2), (3, -1, 5), (0, 0, None)):
        for name in ("triu_indices", "tril_indices"):
            for ours, theirs in zip(getattr(qnp, name)(n, k, m), getattr(np, name)(n, k, m)):
                _same(ours, theirs, f"{name}({n}, {k}, {m})")


SOLVERS = ("solve", "inv", "det", "slogdet", "cholesky")


@pytest.mark.parametrize("name", SOLVERS)
def test_solvers_match_numpy_linalg(name):
    a = rng.normal(size=(3, 3)) + 3 * np.eye(3)
    spd = a @ a.T
    matrices = [spd, rng.normal(size=(2, 3, 3)) + 3 * np.eye(3), spd.astype(np.float32),
                np.array([[2, 1], [1, 3]], np.int64), np.zeros((0, 0)),
                np.array([[1.0, 2.0], [2.0, 4.0]]),  # singular
                np.array([[np.nan, 0.0], [0.0, 1.0]]), np.ones((2, 3))]
    fn, reference = getattr(qnp.linalg, name), getattr(np.linalg, name)
    for m in matrices:
        if name == "slogdet":  # a pair: compare both halves
            for part in (0, 1):
                _check(name, [m], fn=lambda v, p=part: fn(v)[p],
                       reference=lambda v, p=part: reference(v)[p])
        elif name == "solve":
            for b in (np.ones(m.shape[-1]), np.arange(2.0 * m.shape[-1]).reshape(-1, 2)):
                _check(name, [m, b], fn=fn, reference=reference)
        elif name == "cholesky" and m.size and np.isnan(m).any():
            continue  # LAPACK's cholesky on NaN input is undefined (NumPy may not raise)
        else:
            _check(name, [m], fn=fn, reference=reference)


def test_solvers_refuse_complex_matrices():
    with pytest.raises(qdiff.TypeCheckError, match="complex"):
        qnp.linalg.inv(np.eye(2) * 1j)


# ------------------------------------------------------------------------------- creation
def test_creation_matches_numpy():
    for name, args, kwargs in (
            ("zeros", [(2, 3)], {}), ("zeros", [(0,)], {"dtype": np.int32}),
            ("ones", [3], {"dtype": bool}), ("full", [(2,), 7], {}),
            ("full", [(2,), 1.5], {"dtype": np.float32}), ("arange", [5], {}),
            ("arange", [1, 7, 2], {"dtype": np.float64}), ("linspace", [0.0, 1.0, 5], {}),
            ("linspace", [0.0, 1.0, 4], {"endpoint": False}), ("eye", [3], {}),
            ("eye", [3, 4], {"k": -1, "dtype": np.int64}),
            ("array", [[1, 2.5]], {}), ("asarray", [[1, 2]], {"dtype": np.float32})):
        expected = getattr(np, name)(*args, **kwargs)
        _same(getattr(qnp, name)(*args, **kwargs), expected, name)
    x = np.array([[1, 2, 3]], np.int32)
    for name in ("zeros_like", "ones_like"):
        _check(name, [x])
        _check(name, [x], {"dtype": np.float64})
    _check("full_like", [x, 4])
    _check("full_like", [x.astype(float), 2.5], {"dtype": np.float32})
    _check("astype", [np.array([1.7, -1.2])], {"dtype": np.int64},
           reference=lambda v, dtype: v.astype(dtype))
    _check("array", [np.arange(3.0)])
    _check("asarray", [np.arange(3)], {"dtype": np.float64})


# ------------------------------------------------------------------- the table is complete
CONSTANTS = "pi e inf nan newaxis float32 float64 int32 int64 complex64 complex128 bool_".split()
NOT_TESTED_HERE = {
    # submodules of the package, not NumPy functions
    "creation": "submodule", "elementwise": "submodule", "indexing": "submodule",
    "linalg": "submodule", "reductions": "submodule", "shape": "submodule",
    "tracer_methods": "submodule", "arrange": "submodule", "cumulative": "submodule",
    "diagonals": "submodule",
    # no NumPy namesake: the ``x.at[...]`` helper of functional updates (JAX's idiom);
    # tests/numpy/test_numpy_indexing.py compares it with NumPy's in-place updates
    "IndexUpdateHelper": "x.at[...] helper class, no NumPy namesake",
}
COVERED = set(UNARY + UNIT_UNARY + BINARY + REDUCTIONS) | {
    "where", "clip", "sigmoid", "result_type", "argmax", "argmin", "reshape", "transpose",
    "swapaxes", "moveaxis", "broadcast_to", "expand_dims", "squeeze", "ravel", "concatenate",
    "stack", "hstack", "vstack", "dot", "matmul", "inner", "outer", "vdot", "einsum",
    "getitem", "take", "zeros", "ones", "full", "arange", "linspace", "eye", "array",
    "asarray", "zeros_like", "ones_like", "full_like", "astype", "roll", "repeat", "tile",
    "take_along_axis", "cross", "cumsum", "cumprod", "diff", "tril", "triu", "tril_indices",
    "triu_indices", "trace", "diagonal", "diag"}


def test_constants_are_numpys():
    for name in CONSTANTS:
        ours, theirs = getattr(qnp, name), getattr(np, name)
        assert ours is theirs or (ours != ours and theirs != theirs) or ours == theirs, name


def test_every_public_name_is_in_the_table_or_listed():
    public = {name for name in dir(qnp) if not name.startswith("_")}
    listed = COVERED | set(CONSTANTS) | set(NOT_TESTED_HERE)
    assert public == listed, (sorted(public - listed), sorted(listed - public))
