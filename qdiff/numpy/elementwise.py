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


def _family(operands: str | None, arity: int, names: str) -> list[Callable[..., Any]]:
    """One function per word of ``names``: ``public`` or ``primitive=public`` (when the
    primitive's name differs from NumPy's), each taking ``arity`` operands."""
    operand_list = "x" if arity == 1 else "x, y"
    functions = []
    for word in names.split():
        primitive, _, public = word.rpartition("=")
        functions.append(_elementwise(primitive or public, f"{public}({operand_list})",
                                      operands))
    return functions


# Float-valued functions: ints and bools promote to float64 first.
(exp, log, log1p, expm1, sin, cos, tan, arcsin, arccos, arctan, sinh, cosh, tanh, sqrt,
 _float_floor, _float_ceil) = _family("float", 1, "exp log log1p expm1 sin cos tan asin=arcsin "
                                      "acos=arccos atan=arctan sinh cosh tanh sqrt floor ceil")
divide, arctan2 = _family("float", 2, "div=divide atan2=arctan2")
# NumPy's common dtype.
negative, abs, sign, conj, real, imag = _family(  # noqa: A001 - abs mirrors numpy.abs
    None, 1, "neg=negative abs sign conj real imag")
(add, subtract, multiply, power, maximum, minimum, floor_divide, remainder, equal, not_equal,
 less, less_equal, greater, greater_equal) = _family(
    None, 2, "add sub=subtract mul=multiply pow=power max=maximum min=minimum "
             "floor_div=floor_divide rem=remainder eq=equal ne=not_equal lt=less "
             "le=less_equal gt=greater ge=greater_equal")
# Logical functions: operands become bools first.
(logical_not,) = _family("bool", 1, "not=logical_not")
logical_and, logical_or, logical_xor = _family(
    "bool", 2, "and=logical_and or=logical_or xor=logical_xor")
absolute = abs
true_divide = divide
mod = remainder


def _integers_unchanged(rounding: Callable[[Any], Any], kinds: str) -> Callable[[Any], Any]:
    """A rounding function that, as NumPy's, returns integers (dtype kinds ``kinds``)
    unchanged."""
    def fn(x: Any) -> Any:
        x = as_operand(x)
        return x if x.dtype.kind in kinds else rounding(x)

    fn.__name__ = fn.__qualname__ = rounding.__name__.lstrip("_").replace("float_", "")
    fn.__doc__ = rounding.__doc__ + " Integers stay integers, as in NumPy."
    return fn


def _float_round(x: Any) -> Any:
    """Round half to even, elementwise (NumPy's ``round`` with 0 decimals)."""
    (operand,), _ = promote("round", x, dtype=float_dtype(x))
    return apply("round", operand)


floor = _integers_unchanged(_float_floor, "biu")
ceil = _integers_unchanged(_float_ceil, "biu")
round = _integers_unchanged(_float_round, "iu")  # noqa: A001 - NumPy rounds bools to floats


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


def isfinite(x: Any) -> Any:
    """Whether each element is neither infinite nor NaN (integers always are)."""
    x = as_operand(x)
    return equal(x, x) if x.dtype.kind in "biu" else less(abs(x), np.inf)


def isinf(x: Any) -> Any:
    """Whether each element is ``+inf`` or ``-inf`` (integers never are)."""
    x = as_operand(x)
    return not_equal(x, x) if x.dtype.kind in "biu" else equal(abs(x), np.inf)


def isnan(x: Any) -> Any:
    """Whether each element is NaN (the one value not equal to itself)."""
    return not_equal(x, x)


def sigmoid(x: Any) -> Any:
    """The logistic function ``1 / (1 + exp(-x))``."""
    return divide(1.0, add(1.0, exp(negative(x))))


def result_type(*values: Any) -> np.dtype:
    """The dtype NumPy would give an operation on ``values``."""
    return result_dtype(*values)
