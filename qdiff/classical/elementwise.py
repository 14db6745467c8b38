"""Elementwise primitives: one table entry each (name, NumPy function, dtype rule).

Operands share one shape, except rank-0 operands, which broadcast; they share one dtype
(the `select` predicate is bool). The tracer (`qdiff.numpy`) inserts the explicit
`broadcast_in_dim` and `convert` equations that NumPy's implicit rules would need.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.primitives import Primitive, register_primitive
from ..ir.type_rules import elementwise_shape, same_dtype, tensor
from ..ir.types import Tensor, Type, canonical_dtype

# Which operand dtypes an operation accepts and which dtype it returns.
FLOAT = "float"      # inexact in, same out (exp, sin, ...)
NUMERIC = "numeric"  # any number in, same out (add, neg, ...)
COMPARE = "compare"  # any number in, bool out
LOGICAL = "logical"  # bool in, bool out
TO_REAL = "to_real"  # complex in, real out (real, imag); real in, same out
INTEGER_OK_FLOAT = "int_or_float"  # real numbers only (floor_divide, remainder, maximum)

_KIND_OK = {
    FLOAT: "fc",
    NUMERIC: "iufc",
    COMPARE: "iufcb",
    LOGICAL: "b",
    TO_REAL: "iufc",
    INTEGER_OK_FLOAT: "iuf",
}

# name -> NumPy function, grouped by the operand dtypes each accepts (`_KIND_OK`). Their
# derivative rules are in `qdiff.autodiff.classical_rules.elementwise`.
_UNARY_BY_KIND: dict[str, dict[str, Callable]] = {
    NUMERIC: {"neg": np.negative, "sign": np.sign, "conj": np.conj},
    FLOAT: {"exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1,
            "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
            "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
            "tanh": np.tanh, "sqrt": np.sqrt, "floor": np.floor, "ceil": np.ceil,
            "round": np.round},
    TO_REAL: {"abs": np.abs, "real": np.real, "imag": np.imag},
    LOGICAL: {"not": np.logical_not},
}
_BINARY_BY_KIND: dict[str, dict[str, Callable]] = {
    NUMERIC: {"add": np.add, "sub": np.subtract, "mul": np.multiply, "pow": np.power},
    FLOAT: {"div": np.true_divide, "atan2": np.arctan2},
    INTEGER_OK_FLOAT: {"max": np.maximum, "min": np.minimum, "floor_div": np.floor_divide,
                       "rem": np.remainder},
    COMPARE: {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
              "gt": np.greater, "ge": np.greater_equal},
    LOGICAL: {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor},
}


def _by_name(by_kind: dict[str, dict[str, Callable]]) -> dict[str, tuple[Callable, str]]:
    return {name: (fn, kind) for kind, fns in by_kind.items() for name, fn in fns.items()}


# name -> (NumPy function, kind)
UNARY: dict[str, tuple[Callable, str]] = _by_name(_UNARY_BY_KIND)
BINARY: dict[str, tuple[Callable, str]] = _by_name(_BINARY_BY_KIND)


def _out_dtype(kind: str, dtype: str) -> str:
    if kind in (COMPARE, LOGICAL):
        return "bool"
    if kind == TO_REAL and np.dtype(dtype).kind == "c":
        return np.finfo(np.dtype(dtype)).dtype.name
    return dtype


def _elementwise_rule(name: str, kind: str) -> Callable[..., tuple[Type, ...]]:
    def rule(*types: Type) -> tuple[Type, ...]:
        tensors = [tensor(t, f"operand {i}") for i, t in enumerate(types)]
        shape = elementwise_shape(tensors)
        dtype = same_dtype(tensors)
        if np.dtype(dtype).kind not in _KIND_OK[kind]:
            raise TypeCheckError(f"{name} does not accept {dtype} operands")
        return (Tensor(shape, _out_dtype(kind, dtype)),)

    return rule


def _numpy_impl(fn: Callable, out_dtype: Callable[[np.dtype], str]) -> Callable:
    def impl(*values: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):  # inf/nan follow IEEE, as in NumPy
            result = fn(*values)
        return np.asarray(result, dtype=out_dtype(np.result_type(*values)))

    return impl


@functools.lru_cache(maxsize=1024)
def _out_dtype_of(kind: str, dtype: np.dtype) -> str:
    # per call of an implementation: dtype.name is slow next to a small array's arithmetic
    return _out_dtype(kind, dtype.name)


def _register(name: str, fn: Callable, kind: str) -> Primitive:
    primitive = register_primitive(name, _elementwise_rule(name, kind), elementwise=True)
    primitive.def_impl("numpy")(_numpy_impl(fn, lambda d: _out_dtype_of(kind, d)))
    return primitive


PRIMITIVES: dict[str, Primitive] = {
    name: _register(name, fn, kind) for name, (fn, kind) in {**UNARY, **BINARY}.items()
}
ARITY = {**{name: 1 for name in UNARY}, **{name: 2 for name in BINARY}}


# select(pred, on_true, on_false) = pred ? on_true : on_false, elementwise.
def _select_rule(pred: Type, on_true: Type, on_false: Type) -> tuple[Type, ...]:
    p = tensor(pred, "predicate")
    if p.dtype != "bool":
        raise TypeCheckError(f"predicate must be bool, got {p.short()}")
    a, b = tensor(on_true, "on_true"), tensor(on_false, "on_false")
    shape = elementwise_shape([p, a, b])
    return (Tensor(shape, same_dtype([a, b])),)


select_p = register_primitive("select", _select_rule, elementwise=True)


@select_p.def_impl("numpy")
def _select_impl(pred: np.ndarray, on_true: np.ndarray, on_false: np.ndarray) -> np.ndarray:
    return np.asarray(np.where(pred, on_true, on_false), dtype=np.result_type(on_true, on_false))


# convert[dtype](x): elementwise change of dtype (the tracer's dtype promotion).
def _convert_rule(x: Type, *, dtype: str) -> tuple[Type, ...]:
    source, target = tensor(x, "operand"), canonical_dtype(dtype)
    if source.np_dtype.kind == "c" and np.dtype(target).kind != "c":
        raise TypeCheckError(f"cannot convert {source.dtype} to {target}; use real or imag")
    return (source.with_dtype(target),)


convert_p = register_primitive("convert", _convert_rule, elementwise=True)


@convert_p.def_impl("numpy")
def _convert_impl(x: np.ndarray, *, dtype: str) -> np.ndarray:
    return np.asarray(x).astype(dtype)


# Everything that acts on each element alone (the primitives flagged ``elementwise``): what
# fusion and the vectorized map evaluate as one array pass.
ELEMENTWISE_PRIMITIVES: frozenset[Primitive] = frozenset((*PRIMITIVES.values(), convert_p,
                                                          select_p))
