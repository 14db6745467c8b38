"""``einsum`` of two operands as a batched matrix product.

Rewrite rule. With the spec's indices split into batch (in both operands and the output),
contracted (in both, not the output) and free ones (in one operand and the output)::

    out[b, f_a, f_b] = Σ_c a[b, f_a, c] · b[b, c, f_b]
  ⇒
    A = a transposed to (b, f_a, c), reshaped (P, M, K)
    B = b transposed to (b, c, f_b), reshaped (P, K, N)
    out = (A[p] @ B[p] for p) reshaped (b, f_a, f_b), transposed to the output's order

Each product goes through BLAS; transposes that are identities are skipped. Where BLAS would
need an operand transposed and the result per batch member is small (`direct_loops`), the
einsum runs as loops over the operands in memory order instead.
"""

from __future__ import annotations

import math
from contextlib import ExitStack

from ...classical.linalg import einsum_p, parse_spec
from ...ir.core import Eqn
from ..lowering import Scope, rule, shape_text
from ..source import cast, dtype_name


def _arranged(scope: Scope, operand: str, term: str, order: str, shape3: tuple,
              view: bool = False) -> str:
    """``operand`` (index letters ``term``) laid out in ``order`` as a (P, rows, columns)
    array: a copy, or with ``view`` the transposed view itself."""
    perm = tuple(term.index(c) for c in order)
    text = operand
    if view:
        text = f"np.transpose({operand}, {shape_text(perm)})"
    elif perm != tuple(range(len(perm))):
        text = f"np.ascontiguousarray(np.transpose({operand}, {shape_text(perm)}))"
    name = scope.fresh("m")
    scope.line(f"{name} = {text}" if view else
               f"{name} = {text}.reshape({shape_text(shape3)})" if term else
               f"{name} = np.full({shape_text(shape3)}, {operand})")
    return name


def batch_view(term: str, order: str, batch: str) -> bool:
    """Whether an operand (index letters ``term``) is read by BLAS as a strided view in
    ``order`` rather than copied: it has one batch index and one index each of rows and
    columns, and only the batch index moves, so each batch member is a matrix whose rows
    are contiguous (`runtime.batched_matmul_views` copies one member at a time, in cache,
    where a full transposed copy of GMM's (n, K, d) operands to (K, n, d) wrote 1 GB each
    at d=64).

    >>> batch_view("nki", "kni", "k"), batch_view("nki", "kin", "k"), batch_view("kni", "kni", "k")
    (True, False, False)
    """
    rest = [c for c in order if c != batch]
    return (len(set(term)) == len(term) == 3 and len(batch) == 1 and term != order
            and [c for c in term if c != batch] == rest)


# An einsum whose operands BLAS would need transposed, with at most this many result
# elements per batch member, runs as direct loops (GMM's Σ_n t̄[n,k,i] c[n,k,j] at d=10: the
# two transposed copies of (n, K, d) arrays cost several times the products themselves).
DIRECT_LOOPS_MAX_OUTPUT = 256


def direct_loops(a_term: str, b_term: str, a_order: str, b_order: str, outputs: int) -> bool:
    """Whether an einsum runs as direct loops: both operands are arrays, one of them is
    not in the order BLAS reads it (``a_order``, ``b_order``), and each batch member has
    at most `DIRECT_LOOPS_MAX_OUTPUT` result elements (``outputs``).

    >>> direct_loops("nki", "nkj", "kin", "knj", 100), direct_loops("ij", "jk", "ij", "jk", 4)
    (True, False)
    """
    return (bool(a_term) and bool(b_term) and outputs <= DIRECT_LOOPS_MAX_OUTPUT
            and len(set(a_term)) == len(a_term) and len(set(b_term)) == len(b_term)
            and (a_term != a_order or b_term != b_order))


def _direct(scope: Scope, eqn: Eqn, args: list[str], a_term: str, b_term: str,
            out_term: str, sizes: dict[str, int]) -> str:
    """``out[..] += a[..] * b[..]`` over the indices of ``a`` in its order, then those
    only ``b`` has: both operands and the result are read in memory order where they can
    be, with nothing copied."""
    out = eqn.outputs[0].type
    result = scope.fresh("d")
    scope.line(f"{result} = np.zeros({shape_text(out.shape)}, {dtype_name(out.np_dtype)})")
    index = {c: scope.fresh("q") for c in a_term + b_term}
    order = a_term + "".join(c for c in b_term if c not in a_term)
    with ExitStack() as loops:
        for c in order:
            loops.enter_context(scope.src.block(f"for {index[c]} in range({sizes[c]})"))

        def at(array: str, term: str) -> str:
            return f"{array}[{', '.join(index[c] for c in term)}]"

        cell = at(result, out_term) if out_term else f"{result}[()]"
        product = f"{cell} + {at(args[0], a_term)} * {at(args[1], b_term)}"
        scope.line(f"{cell} = {cast(product, out.dtype)}")
    if not out_term:
        scalar = scope.fresh()
        scope.line(f"{scalar} = {result}[()]")
        return scalar
    return result


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
    if direct_loops(a_term, b_term, batch + free_a + summed, batch + summed + free_b, m * n):
        return [_direct(scope, eqn, args, a_term, b_term, out_term, sizes)]
    blas = eqn.outputs[0].type.np_dtype.kind in "fc"
    # BLAS reads an operand transposed in place: lay out each one with its own last
    # index last, so that its copy moves whole rows (GMM's Σ_n t̄[n,k,i] c[n,k,j]
    # copies t̄ to (k, n, i), not to (k, i, n), an element at a time)
    transpose_a = blas and bool(a_term) and a_term[-1] in free_a and bool(summed)
    transpose_b = blas and bool(b_term) and b_term[-1] in summed and bool(free_b)
    a_order = batch + summed + free_a if transpose_a else batch + free_a + summed
    b_order = batch + free_b + summed if transpose_b else batch + summed + free_b
    views = blas and (batch_view(a_term, a_order, batch) or batch_view(b_term, b_order, batch))
    left = _arranged(scope, args[0], a_term, a_order, (p, k, m) if transpose_a else (p, m, k),
                     views and batch_view(a_term, a_order, batch))
    right = _arranged(scope, args[1], b_term, b_order, (p, n, k) if transpose_b else (p, k, n),
                      views and batch_view(b_term, b_order, batch))
    product = scope.fresh("m")
    if views:
        scope.line(f"{product} = rt.batched_matmul_views({left}, {right}, "
                   f"{transpose_a}, {transpose_b})")
    elif transpose_a or transpose_b:
        scope.line(f"{product} = rt.batched_matmul_transposed({left}, {right}, "
                   f"{transpose_a}, {transpose_b})")
    else:
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
