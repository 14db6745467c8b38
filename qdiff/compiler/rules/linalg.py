"""``einsum`` of two operands as a batched matrix product.

Rewrite rule. With the spec's indices split into batch (in both operands and the output),
contracted (in both, not the output) and free ones (in one operand and the output)::

    out[b, f_a, f_b] = Σ_c a[b, f_a, c] · b[b, c, f_b]
  ⇒
    A = a transposed to (b, f_a, c), reshaped (P, M, K)
    B = b transposed to (b, c, f_b), reshaped (P, K, N)
    out = (A[p] @ B[p] for p) reshaped (b, f_a, f_b), transposed to the output's order

Each product goes through BLAS; transposes that are identities are skipped.
"""

from __future__ import annotations

import math

from ...classical.linalg import einsum_p, parse_spec
from ...ir.core import Eqn
from ..lowering import Scope, rule, shape_text


def _arranged(scope: Scope, operand: str, term: str, order: str, shape3: tuple) -> str:
    perm = tuple(term.index(c) for c in order)
    text = operand
    if perm != tuple(range(len(perm))):
        text = f"np.ascontiguousarray(np.transpose({operand}, {shape_text(perm)}))"
    name = scope.fresh("m")
    scope.line(f"{name} = {text}.reshape({shape_text(shape3)})" if term else
               f"{name} = np.full({shape_text(shape3)}, {operand})")
    return name


@rule(einsum_p)
def _einsum(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    a_term, b_term, out_term = parse_spec(eqn.params["spec"])
    sizes = dict(zip(a_term, eqn.inputs[0].type.shape)) | dict(zip(b_term,
                                                                   eqn.inputs[1].type.shape))
    batch = "".join(c for c in out_term if c in a_term and c in b_term)
    free_a = "".join(c for c in a_term if c in out_term and c not in b_term)
    free_b = "".join(c for c in b_term if c in out_term and c not in a_term)
    summed = "".join(c for c in a_term if c not in out_term)

    def size(indices: str) -> int:
        return math.prod(sizes[c] for c in indices)

    p, m, k, n = size(batch), size(free_a), size(summed), size(free_b)
    left = _arranged(scope, args[0], a_term, batch + free_a + summed, (p, m, k))
    right = _arranged(scope, args[1], b_term, batch + summed + free_b, (p, k, n))
    blas = eqn.outputs[0].type.np_dtype.kind in "fc"
    product = scope.fresh("m")
    helper = "batched_matmul" if blas else "batched_matmul_loops"
    scope.line(f"{product} = rt.{helper}({left}, {right})")
    natural = batch + free_a + free_b
    out = scope.fresh()
    if not out_term:
        scope.line(f"{out} = {product}[0, 0, 0]")
        return [out]
    grid = f"{product}.reshape({shape_text(tuple(sizes[c] for c in natural))})"
    perm = tuple(natural.index(c) for c in out_term)
    if perm == tuple(range(len(perm))):
        scope.line(f"{out} = {grid}")
    else:
        scope.line(f"{out} = np.ascontiguousarray(np.transpose({grid}, {shape_text(perm)}))")
    return [out]
