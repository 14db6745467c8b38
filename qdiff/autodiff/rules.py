"""Helpers that register derivative rules on primitives (the ``defjvp`` style).

Most primitives have one output and a tangent that is a function of the primal operands,
their tangents and the primal output; `def_tangent` turns such a function into a full JVP
rule. `def_cotangent` does the same for VJP rules. `def_zero_derivative` marks piecewise
constant or integer-valued primitives (argmax, floor, comparisons).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.primitives import Primitive
from ..ir.tracer import bind

TangentFn = Callable[..., Any]


def def_tangent(primitive: Primitive, tangent: TangentFn) -> None:
    """Register ``tangent(values, tangents, out, **params) -> output tangent or None``."""

    def rule(values: list[Any], tangents: list[Any], **params: Any) -> tuple[list, list]:
        out = bind(primitive, *values, **params)
        return [out], [tangent(values, tangents, out, **params)]

    primitive.jvp = rule


def def_cotangent(primitive: Primitive, cotangent: TangentFn) -> None:
    """Register ``cotangent(ct, values, out, active, **params) -> operand cotangents``.

    Called only with a non-zero output cotangent ``ct``.
    """

    def rule(cts: list[Any], values: list[Any], outs: list[Any], active: list[bool],
             **params: Any) -> list[Any]:
        if cts[0] is None:
            return [None] * len(values)
        return list(cotangent(cts[0], values, outs[0], active, **params))

    primitive.vjp = rule


def def_zero_derivative(primitive: Primitive) -> None:
    """Register rules for a primitive whose outputs do not change with small input changes."""

    def jvp(values: list[Any], tangents: list[Any], **params: Any) -> tuple[list, list]:
        result = bind(primitive, *values, **params)
        outs = result if primitive.multiple_results else [result]
        return list(outs), [None] * len(outs)

    def vjp(cts: list[Any], values: list[Any], outs: list[Any], active: list[bool],
            **params: Any) -> list[Any]:
        return [None] * len(values)

    primitive.jvp, primitive.vjp = jvp, vjp


def def_linear(primitive: Primitive, transpose: Callable[..., Any]) -> None:
    """Rules for a primitive linear in its first operand (other operands are static data).

    The tangent is the primitive applied to the tangent; ``transpose(ct, values, **params)``
    returns the first operand's cotangent.
    """

    def tangent(values: list[Any], tangents: list[Any], out: Any, **params: Any) -> Any:
        if tangents[0] is None:
            return None
        return bind(primitive, tangents[0], *values[1:], **params)

    def cotangent(ct: Any, values: list[Any], out: Any, active: list[bool],
                  **params: Any) -> list[Any]:
        return [transpose(ct, values, **params)] + [None] * (len(values) - 1)

    def_tangent(primitive, tangent)
    def_cotangent(primitive, cotangent)
