"""Derivative rules of `einsum` (`qdiff.classical.linalg`)."""

from __future__ import annotations

from typing import Any

from ... import numpy as qnp
from ...classical.linalg import einsum_p, parse_spec
from ...ir.tracer import bind, value_type
from ..rules import def_cotangent, def_tangent
from ..tangents import add_tangents


# out = einsum("a,b->o", A, B) is bilinear: ȯ = einsum(Ȧ, B) + einsum(A, Ḃ);
# Ā = einsum("o,b->a", Ō, conj B), B̄ = einsum("a,o->b", conj A, Ō).
def _einsum_tangent(values: list, tangents: list, out: Any, *, spec: str) -> Any:
    (x, y), (tx, ty) = values, tangents
    total = bind(einsum_p, tx, y, spec=spec) if tx is not None else None
    if ty is not None:
        total = add_tangents(total, bind(einsum_p, x, ty, spec=spec))
    return total


def _conj_if_complex(value: Any) -> Any:
    if value_type(value).np_dtype.kind != "c":
        return value
    return qnp.conj(value)


def _einsum_cotangent(ct: Any, values: list, out: Any, active: list, *, spec: str) -> list:
    a, b, o = parse_spec(spec)
    x, y = values
    ct_x = bind(einsum_p, ct, _conj_if_complex(y), spec=f"{o},{b}->{a}") if active[0] else None
    ct_y = bind(einsum_p, _conj_if_complex(x), ct, spec=f"{a},{o}->{b}") if active[1] else None
    return [ct_x, ct_y]


def_tangent(einsum_p, _einsum_tangent)
def_cotangent(einsum_p, _einsum_cotangent)
