"""Derivative rules of the reductions (`qdiff.classical.reductions`)."""

from __future__ import annotations

from typing import Any

from ... import numpy as qnp
from ...classical.reductions import (
    argmax_p,
    argmin_p,
    reduce_max_p,
    reduce_min_p,
    reduce_prod_p,
    reduce_sum_p,
)
from ...ir.primitives import Primitive
from ...ir.tracer import value_type
from ..rules import def_cotangent, def_linear, def_tangent, def_zero_derivative
from .derivative_helpers import expand_back, first_extremum_mask, product_of_others


def _sum_transpose(ct: Any, values: list, *, axes: tuple[int, ...]) -> Any:
    # y = Σ_axes x  ⇒  x̄ = broadcast of ȳ over the summed axes
    return expand_back(ct, value_type(values[0]).shape, axes)


def _prod_tangent(values: list, tangents: list, out: Any, *, axes: tuple[int, ...]) -> Any:
    # ẏ = Σ_i ẋ_i Π_{j≠i} x_j (zero-counting form, exact with zero elements)
    (x,), (t,) = values, tangents
    return qnp.sum(t * product_of_others(x, axes), axes)


def _prod_cotangent(ct: Any, values: list, out: Any, active: list, *,
                    axes: tuple[int, ...]) -> list:
    # x̄_i += ȳ Π_{j≠i} x_j
    (x,) = values
    return [expand_back(ct, value_type(x).shape, axes) * product_of_others(x, axes)]


def _extremum_rules(primitive: Primitive, kind: str) -> None:
    # y = max x  ⇒  ẏ = ẋ_k, x̄_k += ȳ, with k the first index attaining the maximum
    def tangent(values: list, tangents: list, out: Any, *, axes: tuple[int, ...]) -> Any:
        (x,), (t,) = values, tangents
        return qnp.sum(t * first_extremum_mask(x, axes, kind), axes)

    def cotangent(ct: Any, values: list, out: Any, active: list, *,
                  axes: tuple[int, ...]) -> list:
        (x,) = values
        return [expand_back(ct, value_type(x).shape, axes) * first_extremum_mask(x, axes, kind)]

    def_tangent(primitive, tangent)
    def_cotangent(primitive, cotangent)


def_linear(reduce_sum_p, _sum_transpose)
def_tangent(reduce_prod_p, _prod_tangent)
def_cotangent(reduce_prod_p, _prod_cotangent)
_extremum_rules(reduce_max_p, "max")
_extremum_rules(reduce_min_p, "min")
def_zero_derivative(argmax_p)
def_zero_derivative(argmin_p)
