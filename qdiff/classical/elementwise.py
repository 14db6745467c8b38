"""Elementwise primitives: one table row each (name, NumPy function, dtype rule).

Operands share one shape, except rank-0 operands, which broadcast; they share one dtype
(the `select` predicate is bool). The tracer (`qdiff.numpy`) inserts the explicit
`broadcast_in_dim` and `convert` equations that NumPy's implicit rules would need.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..autodiff.elementwise_rules import LINEAR, NONE, ZERO, register_elementwise_rules
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

# Markers of the derivative column: LINEAR (f is linear: its tangent is f(tangent)), ZERO
# (piecewise constant), NONE (bool-valued: no derivative at all).

_KIND_OK = {
    FLOAT: "fc",
    NUMERIC: "iufc",
    COMPARE: "iufcb",
    LOGICAL: "b",
    TO_REAL: "iufc",
    INTEGER_OK_FLOAT: "iuf",
}

# The derivative column: d(x, y) = dy/dx of y = f(x) (autograd style, in qdiff.numpy), or
# LINEAR (the tangent is f(t)), ZERO (piecewise constant) or NONE (bool values).
UNARY: dict[str, tuple[Callable, str, Any]] = {
    "neg": (np.negative, NUMERIC, LINEAR),
    "exp": (np.exp, FLOAT, lambda x, y: y),
    "log": (np.log, FLOAT, lambda x, y: 1.0 / x),
    "log1p": (np.log1p, FLOAT, lambda x, y: 1.0 / (1.0 + x)),
    "expm1": (np.expm1, FLOAT, lambda x, y: y + 1.0),
    "sin": (np.sin, FLOAT, lambda x, y: _qnp().cos(x)),
    "cos": (np.cos, FLOAT, lambda x, y: -_qnp().sin(x)),
    "tan": (np.tan, FLOAT, lambda x, y: 1.0 + y * y),
    "asin": (np.arcsin, FLOAT, lambda x, y: 1.0 / _qnp().sqrt(1.0 - x * x)),
    "acos": (np.arccos, FLOAT, lambda x, y: -1.0 / _qnp().sqrt(1.0 - x * x)),
    "atan": (np.arctan, FLOAT, lambda x, y: 1.0 / (1.0 + x * x)),
    "sinh": (np.sinh, FLOAT, lambda x, y: _qnp().cosh(x)),
    "cosh": (np.cosh, FLOAT, lambda x, y: _qnp().sinh(x)),
    "tanh": (np.tanh, FLOAT, lambda x, y: 1.0 - y * y),
    "sqrt": (np.sqrt, FLOAT, lambda x, y: 0.5 / y),
    # |x|' = sign(x) for real x (0 at 0); complex x: special rule below
    "abs": (np.abs, TO_REAL, lambda x, y: _qnp().sign(x)),
    "sign": (np.sign, NUMERIC, ZERO),
    "floor": (np.floor, FLOAT, ZERO),
    "ceil": (np.ceil, FLOAT, ZERO),
    "round": (np.round, FLOAT, ZERO),
    "conj": (np.conj, NUMERIC, LINEAR),
    "real": (np.real, TO_REAL, LINEAR),
    "imag": (np.imag, TO_REAL, LINEAR),
    "not": (np.logical_not, LOGICAL, NONE),
}

# The derivative column: (dz/dx, dz/dy) of z = f(x, y) as functions of (x, y, z).
BINARY: dict[str, tuple[Callable, str, Any]] = {
    "add": (np.add, NUMERIC, (lambda x, y, z: 1.0, lambda x, y, z: 1.0)),
    "sub": (np.subtract, NUMERIC, (lambda x, y, z: 1.0, lambda x, y, z: -1.0)),
    "mul": (np.multiply, NUMERIC, (lambda x, y, z: y, lambda x, y, z: x)),
    "div": (np.true_divide, FLOAT, (lambda x, y, z: 1.0 / y, lambda x, y, z: -z / y)),
    # d/dy x^y = log(x) x^y, taken as 0 at x = 0 (the limit from the right, as in JAX)
    "pow": (np.power, NUMERIC, (lambda x, y, z: y * _qnp().power(x, y - 1.0),
                                lambda x, y, z: _qnp().where(x == 0, 0.0, _safe_log(x) * z))),
    # ties split the derivative evenly between the operands
    "max": (np.maximum, INTEGER_OK_FLOAT, (lambda x, y, z: _pick(x > y, x == y),
                                           lambda x, y, z: _pick(y > x, x == y))),
    "min": (np.minimum, INTEGER_OK_FLOAT, (lambda x, y, z: _pick(x < y, x == y),
                                           lambda x, y, z: _pick(y < x, x == y))),
    "atan2": (np.arctan2, FLOAT, (lambda x, y, z: y / (x * x + y * y),
                                  lambda x, y, z: -x / (x * x + y * y))),
    "floor_div": (np.floor_divide, INTEGER_OK_FLOAT, ZERO),
    # rem(x, y) = x - floor(x / y) y
    "rem": (np.remainder, INTEGER_OK_FLOAT, (lambda x, y, z: 1.0,
                                             lambda x, y, z: -_qnp().floor(x / y))),
    "eq": (np.equal, COMPARE, NONE),
    "ne": (np.not_equal, COMPARE, NONE),
    "lt": (np.less, COMPARE, NONE),
    "le": (np.less_equal, COMPARE, NONE),
    "gt": (np.greater, COMPARE, NONE),
    "ge": (np.greater_equal, COMPARE, NONE),
    "and": (np.logical_and, LOGICAL, NONE),
    "or": (np.logical_or, LOGICAL, NONE),
    "xor": (np.logical_xor, LOGICAL, NONE),
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
    name: _register(name, fn, kind) for name, (fn, kind, _) in {**UNARY, **BINARY}.items()
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


def _qnp() -> Any:
    from .. import numpy as qnp

    return qnp


def _pick(wins: Any, ties: Any) -> Any:
    qnp = _qnp()
    return qnp.where(wins, 1.0, qnp.where(ties, 0.5, 0.0))


def _safe_log(x: Any) -> Any:
    qnp = _qnp()
    return qnp.log(qnp.where(x == 0, 1.0, x))


register_elementwise_rules(PRIMITIVES, UNARY, BINARY, select_p, convert_p)

# Everything that acts on each element alone: what fusion and the vectorized map evaluate as one
# array pass.
ELEMENTWISE_PRIMITIVES: frozenset[Primitive] = frozenset((*PRIMITIVES.values(), convert_p,
                                                          select_p))
