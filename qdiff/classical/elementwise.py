"""Elementwise primitives: one table row each (name, NumPy function, dtype rule).

Operands share one shape, except rank-0 operands, which broadcast; they share one dtype
(the `select` predicate is bool). The tracer (`qdiff.numpy`) inserts the explicit
`broadcast_in_dim` and `convert` equations that NumPy's implicit rules would need.
"""

from __future__ import annotations

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

UNARY: dict[str, tuple[Callable, str]] = {
    "neg": (np.negative, NUMERIC),
    "exp": (np.exp, FLOAT),
    "log": (np.log, FLOAT),
    "log1p": (np.log1p, FLOAT),
    "expm1": (np.expm1, FLOAT),
    "sin": (np.sin, FLOAT),
    "cos": (np.cos, FLOAT),
    "tan": (np.tan, FLOAT),
    "asin": (np.arcsin, FLOAT),
    "acos": (np.arccos, FLOAT),
    "atan": (np.arctan, FLOAT),
    "sinh": (np.sinh, FLOAT),
    "cosh": (np.cosh, FLOAT),
    "tanh": (np.tanh, FLOAT),
    "sqrt": (np.sqrt, FLOAT),
    "abs": (np.abs, TO_REAL),
    "sign": (np.sign, NUMERIC),
    "floor": (np.floor, FLOAT),
    "ceil": (np.ceil, FLOAT),
    "round": (np.round, FLOAT),
    "conj": (np.conj, NUMERIC),
    "real": (np.real, TO_REAL),
    "imag": (np.imag, TO_REAL),
    "not": (np.logical_not, LOGICAL),
}

BINARY: dict[str, tuple[Callable, str]] = {
    "add": (np.add, NUMERIC),
    "sub": (np.subtract, NUMERIC),
    "mul": (np.multiply, NUMERIC),
    "div": (np.true_divide, FLOAT),
    "pow": (np.power, NUMERIC),
    "max": (np.maximum, INTEGER_OK_FLOAT),
    "min": (np.minimum, INTEGER_OK_FLOAT),
    "atan2": (np.arctan2, FLOAT),
    "floor_div": (np.floor_divide, INTEGER_OK_FLOAT),
    "rem": (np.remainder, INTEGER_OK_FLOAT),
    "eq": (np.equal, COMPARE),
    "ne": (np.not_equal, COMPARE),
    "lt": (np.less, COMPARE),
    "le": (np.less_equal, COMPARE),
    "gt": (np.greater, COMPARE),
    "ge": (np.greater_equal, COMPARE),
    "and": (np.logical_and, LOGICAL),
    "or": (np.logical_or, LOGICAL),
    "xor": (np.logical_xor, LOGICAL),
}


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


def _register(name: str, fn: Callable, kind: str) -> Primitive:
    primitive = register_primitive(name, _elementwise_rule(name, kind))
    primitive.def_impl("numpy")(_numpy_impl(fn, lambda d: _out_dtype(kind, d.name)))
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


select_p = register_primitive("select", _select_rule)


@select_p.def_impl("numpy")
def _select_impl(pred: np.ndarray, on_true: np.ndarray, on_false: np.ndarray) -> np.ndarray:
    return np.asarray(np.where(pred, on_true, on_false), dtype=np.result_type(on_true, on_false))


# convert[dtype](x): elementwise change of dtype (the tracer's dtype promotion).
def _convert_rule(x: Type, *, dtype: str) -> tuple[Type, ...]:
    source, target = tensor(x, "operand"), canonical_dtype(dtype)
    if source.np_dtype.kind == "c" and np.dtype(target).kind != "c":
        raise TypeCheckError(f"cannot convert {source.dtype} to {target}; use real or imag")
    return (source.with_dtype(target),)


convert_p = register_primitive("convert", _convert_rule)


@convert_p.def_impl("numpy")
def _convert_impl(x: np.ndarray, *, dtype: str) -> np.ndarray:
    return np.asarray(x).astype(dtype)
