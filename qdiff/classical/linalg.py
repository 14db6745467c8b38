"""`einsum` of two operands: one primitive behind dot, matmul, outer, tensordot and einsum.

The spec is explicit ("ij,jk->ik"): no ellipsis, no index repeated within one operand, and
every index of an operand appears in the other operand or in the output (the tracer sums
lone indices out first). These limits keep the transpose rule a single einsum: for
``out = einsum("a,b->o", A, B)``, ``Ā = einsum("o,b->a", Ō, B)``.
"""

from __future__ import annotations

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.primitives import register_primitive
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
