"""Elementwise functions of `qdiff.numpy`, NumPy's broadcasting and promotion included."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..ir.tracer import as_operand
from ._core import apply, broadcast_shapes, fit, float_dtype, promote, result_dtype


def _elementwise(name: str, doc: str, operands: str | None = None) -> Callable[..., Any]:
    """A NumPy-style function binding primitive ``name``.

    ``operands`` says what the operands are converted to first: ``"float"`` (ints and bools
    promote to float64, as in NumPy's float-valued functions), ``"bool"`` (logical ops), or
    None (NumPy's common dtype).
    """
    public = doc.split("(")[0]

    def fn(*xs: Any) -> Any:
        dtype = {"float": lambda: float_dtype(*xs), "bool": lambda: np.bool_}.get(
            operands, lambda: None)()
        promoted, _ = promote(public, *xs, dtype=dtype)
        return apply(name, *promoted)

    fn.__name__ = fn.__qualname__ = public
    fn.__doc__ = f"Elementwise {doc}, as in NumPy (traced as `{name}`)."
    return fn


def _unary(name: str, float_valued: bool, doc: str) -> Callable[[Any], Any]:
    return _elementwise(name, doc, "float" if float_valued else None)


_binary = _unary


negative = _unary("neg", False, "negative(x)")
exp = _unary("exp", True, "exp(x)")
log = _unary("log", True, "log(x)")
log1p = _unary("log1p", True, "log1p(x)")
expm1 = _unary("expm1", True, "expm1(x)")
sin = _unary("sin", True, "sin(x)")
cos = _unary("cos", True, "cos(x)")
tan = _unary("tan", True, "tan(x)")
arcsin = _unary("asin", True, "arcsin(x)")
arccos = _unary("acos", True, "arccos(x)")
arctan = _unary("atan", True, "arctan(x)")
sinh = _unary("sinh", True, "sinh(x)")
cosh = _unary("cosh", True, "cosh(x)")
tanh = _unary("tanh", True, "tanh(x)")
sqrt = _unary("sqrt", True, "sqrt(x)")
abs = _unary("abs", False, "abs(x)")  # noqa: A001 - mirrors numpy.abs
absolute = abs
sign = _unary("sign", False, "sign(x)")
floor = _unary("floor", True, "floor(x)")
ceil = _unary("ceil", True, "ceil(x)")
conj = _unary("conj", False, "conj(x)")
real = _unary("real", False, "real(x)")
imag = _unary("imag", False, "imag(x)")

add = _binary("add", False, "add(x, y)")
subtract = _binary("sub", False, "subtract(x, y)")
multiply = _binary("mul", False, "multiply(x, y)")
divide = _binary("div", True, "divide(x, y)")
true_divide = divide
power = _binary("pow", False, "power(x, y)")
maximum = _binary("max", False, "maximum(x, y)")
minimum = _binary("min", False, "minimum(x, y)")
arctan2 = _binary("atan2", True, "arctan2(x, y)")
floor_divide = _binary("floor_div", False, "floor_divide(x, y)")
remainder = _binary("rem", False, "remainder(x, y)")
mod = remainder
equal = _binary("eq", False, "equal(x, y)")
not_equal = _binary("ne", False, "not_equal(x, y)")
less = _binary("lt", False, "less(x, y)")
less_equal = _binary("le", False, "less_equal(x, y)")
greater = _binary("gt", False, "greater(x, y)")
greater_equal = _binary("ge", False, "greater_equal(x, y)")


def _logical(name: str, doc: str) -> Callable[..., Any]:
    return _elementwise(name, doc, "bool")


logical_and = _logical("and", "logical_and(x, y)")
logical_or = _logical("or", "logical_or(x, y)")
logical_xor = _logical("xor", "logical_xor(x, y)")
logical_not = _logical("not", "logical_not(x)")


def round(x: Any) -> Any:  # noqa: A001 - mirrors numpy.round
    """Round half to even, elementwise (NumPy's ``round`` with 0 decimals)."""
    (operand,), _ = promote("round", x, dtype=float_dtype(x))
    return apply("round", operand)


def where(condition: Any, x: Any, y: Any) -> Any:
    """``x`` where ``condition`` holds, else ``y``; broadcasting as in NumPy.

    >>> import qdiff.numpy as qnp
    >>> qnp.where(np.array([True, False]), 1.0, np.array([5.0, 6.0])).tolist()
    [1.0, 6.0]
    """
    (a, b), _ = promote("where", x, y)
    shape = broadcast_shapes("where", condition, x, y)
    pred = as_operand(condition, np.bool_)
    return apply("select", *(fit(v, shape) for v in (pred, a, b)))


def square(x: Any) -> Any:
    """``x * x``."""
    return multiply(x, x)


def reciprocal(x: Any) -> Any:
    """``1 / x``."""
    return divide(1.0, x)


def clip(x: Any, lower: Any, upper: Any) -> Any:
    """``x`` limited to ``[lower, upper]``."""
    return minimum(maximum(x, lower), upper)


def logaddexp(x: Any, y: Any) -> Any:
    """``log(exp(x) + exp(y))`` computed stably."""
    big = maximum(x, y)
    return add(big, log1p(exp(negative(abs(subtract(x, y))))))


def sigmoid(x: Any) -> Any:
    """The logistic function ``1 / (1 + exp(-x))``."""
    return divide(1.0, add(1.0, exp(negative(x))))


def result_type(*values: Any) -> np.dtype:
    """The dtype NumPy would give an operation on ``values``."""
    return result_dtype(*values)
