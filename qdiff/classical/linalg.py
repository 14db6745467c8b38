"""`einsum` of two operands: one primitive behind dot, matmul, outer, tensordot and einsum.

The spec is explicit ("ij,jk->ik"): no ellipsis, no index repeated within one operand, and
every index of an operand appears in the other operand or in the output (the tracer sums
lone indices out first). These limits keep the transpose rule a single einsum: for
``out = einsum("a,b->o", A, B)``, ``Ā = einsum("o,b->a", Ō, B)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autodiff.rules import def_cotangent, def_tangent
from ..autodiff.tangents import add_tangents
from ..ir.errors import TypeCheckError
from ..ir.primitives import register_primitive
from ..ir.tracer import bind, value_type
from ..ir.type_rules import same_dtype, tensor
from ..ir.types import Tensor, Type


def parse_spec(spec: str) -> tuple[str, str, str]:
    """Split ``"ij,jk->ik"`` into its three index strings, checking the IR's limits."""
    try:
        lhs, out = spec.split("->")
        a, b = lhs.split(",")
    except ValueError:
        raise TypeCheckError(f"einsum spec {spec!r} must look like 'ij,jk->ik'") from None
    for term in (a, b, out):
        if not term.isalpha() and term != "":
            raise TypeCheckError(f"einsum spec {spec!r}: indices must be letters")
        if len(set(term)) != len(term):
            raise TypeCheckError(f"einsum spec {spec!r}: an index repeats within {term!r}")
    for name, term, other in (("first", a, b), ("second", b, a)):
        lone = set(term) - set(other) - set(out)
        if lone:
            raise TypeCheckError(
                f"einsum spec {spec!r}: index {''.join(sorted(lone))} of the {name} operand "
                "appears nowhere else; sum it out first")
    missing = set(out) - set(a) - set(b)
    if missing:
        raise TypeCheckError(f"einsum spec {spec!r}: output index {missing} has no source")
    return a, b, out


def _einsum_rule(x: Type, y: Type, *, spec: str) -> tuple[Type, ...]:
    a, b, out = parse_spec(spec)
    tx, ty = tensor(x, "first operand"), tensor(y, "second operand")
    dtype = same_dtype([tx, ty])
    if tx.ndim != len(a) or ty.ndim != len(b):
        raise TypeCheckError(
            f"spec {spec!r} does not fit operands {tx.short()} and {ty.short()}")
    sizes: dict[str, int] = {}
    for term, t in ((a, tx), (b, ty)):
        for index, size in zip(term, t.shape):
            if sizes.setdefault(index, size) != size:
                raise TypeCheckError(
                    f"spec {spec!r}: index {index!r} has size {sizes[index]} in one operand "
                    f"and {size} in the other ({tx.short()} and {ty.short()})")
    return (Tensor(tuple(sizes[i] for i in out), dtype),)


einsum_p = register_primitive("einsum", _einsum_rule)


@einsum_p.def_impl("numpy")
def _einsum_impl(x: np.ndarray, y: np.ndarray, *, spec: str) -> np.ndarray:
    return np.asarray(np.einsum(spec, x, y, optimize=True), dtype=np.result_type(x, y))


# ------------------------------------------------------------------------- derivative rules
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
    from .. import numpy as qnp

    return qnp.conj(value)


def _einsum_cotangent(ct: Any, values: list, out: Any, active: list, *, spec: str) -> list:
    a, b, o = parse_spec(spec)
    x, y = values
    ct_x = bind(einsum_p, ct, _conj_if_complex(y), spec=f"{o},{b}->{a}") if active[0] else None
    ct_y = bind(einsum_p, _conj_if_complex(x), ct, spec=f"{a},{o}->{b}") if active[1] else None
    return [ct_x, ct_y]


def_tangent(einsum_p, _einsum_tangent)
def_cotangent(einsum_p, _einsum_cotangent)
