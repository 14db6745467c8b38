"""JVP and VJP rules built from the derivative column of the elementwise table.

For ``y = f(x)`` with ``d = f'(x)``: the tangent is ``d·ẋ`` and the cotangent ``x̄ += conj(d)·ȳ``
(the conjugate makes ``<vjp(c), t> = <c, jvp(t)>`` hold for complex values under
``<a, b> = Re Σ conj(a) b``). For ``z = f(x, y)``: ``ż = ∂f/∂x·ẋ + ∂f/∂y·ẏ``,
``x̄ += conj(∂f/∂x)·z̄``, ``ȳ += conj(∂f/∂y)·z̄``; a rank-0 operand of a non-scalar result
gets the sum (the adjoint of its implicit broadcast).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..ir.primitives import Primitive
from ..ir.tracer import bind, value_type
from .rules import def_cotangent, def_linear, def_tangent, def_zero_derivative
from .tangents import add_tangents, broadcast_to, cast_like, instantiate, sum_to_shape

LINEAR, ZERO, NONE = "linear", "zero", "none"


def _qnp() -> Any:
    from .. import numpy as qnp

    return qnp


def _is_complex(value: Any) -> bool:
    return value_type(value).np_dtype.kind == "c"


def _scale(t: Any, d: Any) -> Any:
    """``t · d`` without multiplying by a constant ±1."""
    if isinstance(d, float) and d == 1.0:
        return t
    if isinstance(d, float) and d == -1.0:
        return _qnp().negative(t)
    return _qnp().multiply(t, d)


def _conj(d: Any) -> Any:
    return _qnp().conj(d) if not isinstance(d, float) and _is_complex(d) else d


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
            return _qnp().real(_qnp().conj(x) * t) / out
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
    return _qnp().multiply(cast_like(ct, value_type(values[0])), 1j)


_LINEAR_TRANSPOSES: Mapping[str, Callable[..., Any]] = {
    "neg": lambda ct, values: _qnp().negative(ct),
    "conj": lambda ct, values: _qnp().conj(ct),
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
        zero = _qnp().zeros((), value_type(ct).np_dtype)
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


def register_elementwise_rules(primitives: Mapping[str, Primitive], unary: Mapping[str, tuple],
                               binary: Mapping[str, tuple], select_p: Primitive,
                               convert_p: Primitive) -> None:
    """Register the rules of every elementwise primitive from its table row."""
    for name, (_, _, derivative) in unary.items():
        _register_unary(primitives[name], derivative)
    for name, (_, _, partials) in binary.items():
        _register_binary(primitives[name], partials)
    _register_select(select_p)
    _register_convert(convert_p)
