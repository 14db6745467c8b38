"""JVP and VJP rules of the elementwise primitives (`qdiff.classical.elementwise`), built
from one derivative table entry each.

For ``y = f(x)`` with ``d = f'(x)``: the tangent is ``d·ẋ`` and the cotangent ``x̄ += conj(d)·ȳ``
(the conjugate makes ``<vjp(c), t> = <c, jvp(t)>`` hold for complex values under
``<a, b> = Re Σ conj(a) b``). For ``z = f(x, y)``: ``ż = ∂f/∂x·ẋ + ∂f/∂y·ẏ``,
``x̄ += conj(∂f/∂x)·z̄``, ``ȳ += conj(∂f/∂y)·z̄``; a rank-0 operand of a non-scalar result
gets the sum (the adjoint of its implicit broadcast).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ... import numpy as qnp
from ...classical.elementwise import PRIMITIVES, convert_p, select_p
from ...ir.primitives import Primitive
from ...ir.tracer import bind, value_type
from ..rules import def_cotangent, def_linear, def_tangent, def_zero_derivative
from ..tangents import add_tangents, broadcast_to, cast_like, instantiate, sum_to_shape

# Markers of an entry: LINEAR (f is linear: its tangent is f(tangent)), ZERO (piecewise
# constant), NONE (bool-valued: no derivative at all).
LINEAR, ZERO, NONE = "linear", "zero", "none"


def _pick(wins: Any, ties: Any) -> Any:
    return qnp.where(wins, 1.0, qnp.where(ties, 0.5, 0.0))


def _safe_log(x: Any) -> Any:
    return qnp.log(qnp.where(x == 0, 1.0, x))


# d(x, y) = dy/dx of y = f(x) (autograd style, in qdiff.numpy), or a marker.
UNARY_DERIVATIVES: dict[str, Any] = {
    "neg": LINEAR,
    "exp": lambda x, y: y,
    "log": lambda x, y: 1.0 / x,
    "log1p": lambda x, y: 1.0 / (1.0 + x),
    "expm1": lambda x, y: y + 1.0,
    "sin": lambda x, y: qnp.cos(x),
    "cos": lambda x, y: -qnp.sin(x),
    "tan": lambda x, y: 1.0 + y * y,
    "asin": lambda x, y: 1.0 / qnp.sqrt(1.0 - x * x),
    "acos": lambda x, y: -1.0 / qnp.sqrt(1.0 - x * x),
    "atan": lambda x, y: 1.0 / (1.0 + x * x),
    "sinh": lambda x, y: qnp.cosh(x),
    "cosh": lambda x, y: qnp.sinh(x),
    "tanh": lambda x, y: 1.0 - y * y,
    "sqrt": lambda x, y: 0.5 / y,
    # |x|' = sign(x) for real x (0 at 0); complex x: special rule in `_register_unary`
    "abs": lambda x, y: qnp.sign(x),
    "sign": ZERO, "floor": ZERO, "ceil": ZERO, "round": ZERO,
    "conj": LINEAR, "real": LINEAR, "imag": LINEAR,
    "not": NONE,
}

# (dz/dx, dz/dy) of z = f(x, y) as functions of (x, y, z), or a marker.
BINARY_DERIVATIVES: dict[str, Any] = {
    "add": (lambda x, y, z: 1.0, lambda x, y, z: 1.0),
    "sub": (lambda x, y, z: 1.0, lambda x, y, z: -1.0),
    "mul": (lambda x, y, z: y, lambda x, y, z: x),
    "div": (lambda x, y, z: 1.0 / y, lambda x, y, z: -z / y),
    # d/dy x^y = log(x) x^y, taken as 0 at x = 0 (the limit from the right, as in JAX)
    "pow": (lambda x, y, z: y * qnp.power(x, y - 1.0),
            lambda x, y, z: qnp.where(x == 0, 0.0, _safe_log(x) * z)),
    # ties split the derivative evenly between the operands
    "max": (lambda x, y, z: _pick(x > y, x == y), lambda x, y, z: _pick(y > x, x == y)),
    "min": (lambda x, y, z: _pick(x < y, x == y), lambda x, y, z: _pick(y < x, x == y)),
    "atan2": (lambda x, y, z: y / (x * x + y * y), lambda x, y, z: -x / (x * x + y * y)),
    "floor_div": ZERO,
    # rem(x, y) = x - floor(x / y) y
    "rem": (lambda x, y, z: 1.0, lambda x, y, z: -qnp.floor(x / y)),
    **dict.fromkeys(("eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor"), NONE),
}


def _is_complex(value: Any) -> bool:
    return value_type(value).np_dtype.kind == "c"


def _scale(t: Any, d: Any) -> Any:
    """``t · d`` without multiplying by a constant ±1."""
    if isinstance(d, float) and d == 1.0:
        return t
    if isinstance(d, float) and d == -1.0:
        return qnp.negative(t)
    return qnp.multiply(t, d)


def _conj(d: Any) -> Any:
    return qnp.conj(d) if not isinstance(d, float) and _is_complex(d) else d


def _fit_output(t: Any, out: Any) -> Any:
    """A tangent as an array of the output's shape and dtype."""
    out_type = value_type(out)
    return cast_like(broadcast_to(t, out_type.shape), out_type)


def _register_unary(primitive: Primitive, derivative: Any) -> None:
    name = primitive.name
    if derivative in (ZERO, NONE):
        def_zero_derivative(primitive)
        return
    if derivative == LINEAR:
        def_linear(primitive, _LINEAR_TRANSPOSES[name])
        return

    def tangent(values: list, tangents: list, out: Any) -> Any:
        (x,), (t,) = values, tangents
        if name == "abs" and _is_complex(x):  # d|x| = Re(conj(x) ẋ) / |x|
            return qnp.real(qnp.conj(x) * t) / out
        return _fit_output(_scale(t, derivative(x, out)), out)

    def cotangent(ct: Any, values: list, out: Any, active: list) -> list:
        (x,) = values
        if name == "abs" and _is_complex(x):
            return [ct * x / out]
        return [_scale(ct, _conj(derivative(x, out)))]

    def_tangent(primitive, tangent)
    def_cotangent(primitive, cotangent)


def _real_transpose(ct: Any, values: list) -> Any:
    return cast_like(ct, value_type(values[0]))


def _imag_transpose(ct: Any, values: list) -> Any:
    # Im(ẋ) = Re(conj(i·c)·ẋ) for real c, so x̄ = i·ȳ; a real x has Im x = 0
    if not _is_complex(values[0]):
        return None
    return qnp.multiply(cast_like(ct, value_type(values[0])), 1j)


_LINEAR_TRANSPOSES: Mapping[str, Callable[..., Any]] = {
    "neg": lambda ct, values: qnp.negative(ct),
    "conj": lambda ct, values: qnp.conj(ct),
    "real": _real_transpose,
    "imag": _imag_transpose,
}


def _register_binary(primitive: Primitive, partials: Any) -> None:
    if partials in (ZERO, NONE):
        def_zero_derivative(primitive)
        return

    def tangent(values: list, tangents: list, out: Any) -> Any:
        x, y = values
        total = None
        for t, partial in zip(tangents, partials):
            if t is not None:
                total = add_tangents(total, _scale(t, partial(x, y, out)))
        return _fit_output(total, out)

    def cotangent(ct: Any, values: list, out: Any, active: list) -> list:
        x, y = values
        return [sum_to_shape(_scale(ct, _conj(partial(x, y, out))), value_type(v).shape)
                if flag else None
                for v, partial, flag in zip(values, partials, active)]

    def_tangent(primitive, tangent)
    def_cotangent(primitive, cotangent)


def _register_select(select_p: Primitive) -> None:
    # z = p ? a : b  ⇒  ż = p ? ȧ : ḃ ;  ā += p ? z̄ : 0 ;  b̄ += p ? 0 : z̄
    def tangent(values: list, tangents: list, out: Any) -> Any:
        pred, a, b = values
        _, ta, tb = tangents
        if ta is None and tb is None:
            return None
        chosen = select_p_bind(select_p, pred, instantiate(ta, value_type(a)),
                               instantiate(tb, value_type(b)))
        return _fit_output(chosen, out)

    def cotangent(ct: Any, values: list, out: Any, active: list) -> list:
        pred, a, b = values
        zero = qnp.zeros((), value_type(ct).np_dtype)
        return [None,
                sum_to_shape(select_p_bind(select_p, pred, ct, zero), value_type(a).shape)
                if active[1] else None,
                sum_to_shape(select_p_bind(select_p, pred, zero, ct), value_type(b).shape)
                if active[2] else None]

    def_tangent(select_p, tangent)
    def_cotangent(select_p, cotangent)


def select_p_bind(select_p: Primitive, pred: Any, a: Any, b: Any) -> Any:
    """``select(pred, a, b)`` on operands of one dtype."""
    return bind(select_p, pred, a, cast_like(b, value_type(a)))


def _register_convert(convert_p: Primitive) -> None:
    # a change of dtype: the tangent changes dtype too; to an integer type it vanishes
    def tangent(values: list, tangents: list, out: Any, *, dtype: str) -> Any:
        if tangents[0] is None or value_type(out).np_dtype.kind not in "fc":
            return None
        return bind(convert_p, tangents[0], dtype=dtype)

    def cotangent(ct: Any, values: list, out: Any, active: list, *, dtype: str) -> list:
        return [cast_like(ct, value_type(values[0]))]

    def_tangent(convert_p, tangent)
    def_cotangent(convert_p, cotangent)


def register_elementwise_rules() -> None:
    """Register the rules of every elementwise primitive from its derivative table entry."""
    for name, derivative in UNARY_DERIVATIVES.items():
        _register_unary(PRIMITIVES[name], derivative)
    for name, partials in BINARY_DERIVATIVES.items():
        _register_binary(PRIMITIVES[name], partials)
    _register_select(select_p)
    _register_convert(convert_p)


register_elementwise_rules()
