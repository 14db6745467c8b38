"""Products and dense linear algebra of `qdiff.numpy` (also reachable as `qnp.linalg`):
einsum, dot, matmul, inner, outer, vdot; solve, inv, det, slogdet, cholesky.

The products lower to the two-operand `einsum` primitive with an explicit spec; indices that
appear in only one operand and not in the output are summed out first, and batch dimensions
of `matmul` are broadcast explicitly. The solvers bind the primitives of
`qdiff.classical.solvers` on real float matrices (integers become float64, as in NumPy).
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.tracer import as_operand
from ._core import apply, broadcast_to_shape, float_dtype, result_dtype, shape_of
from .elementwise import conj, exp, multiply
from .reductions import sum as _sum
from .shape import reshape, swapaxes, transpose


def _parse(spec: str, ndims: list[int]) -> tuple[list[str], str]:
    spec = spec.replace(" ", "")
    lhs, arrow, out = spec.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise TypeCheckError(f"einsum: spec {spec!r} names {len(terms)} operands, got {len(ndims)}")
    used = set(spec) - set(",->.")
    free = [c for c in string.ascii_letters if c not in used]
    ell_ndim = max((nd - len(t.replace("...", "")) for t, nd in zip(terms, ndims) if "..." in t),
                   default=0)
    ell = "".join(free[:ell_ndim])
    expanded = []
    for term, nd in zip(terms, ndims):
        if "..." in term:
            k = nd - len(term.replace("...", ""))
            term = term.replace("...", ell[ell_ndim - k:] if k else "")
        if len(term) != nd:
            raise TypeCheckError(f"einsum: term {term!r} does not fit an operand of {nd} dims")
        expanded.append(term)
    if arrow:
        out = out.replace("...", ell)
    else:
        counts = {c: "".join(expanded).count(c) for c in set("".join(expanded))}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    return expanded, out


def einsum(spec: str, *operands: Any) -> Any:
    """Einstein summation over one or two operands (NumPy's einsum, ellipsis included).

    >>> import qdiff.numpy as qnp
    >>> qnp.einsum("ij,j->i", np.eye(2), np.array([1.0, 2.0])).tolist()
    [1.0, 2.0]
    """
    if len(operands) not in (1, 2):
        raise TypeCheckError("einsum: qdiff supports one or two operands; chain calls for more")
    dtype = result_dtype(*operands)
    ops = [as_operand(o, dtype) for o in operands]
    terms, out = _parse(spec, [len(shape_of(o)) for o in ops])
    for term in terms:
        if len(set(term)) != len(term):
            raise TypeCheckError(
                f"einsum: repeated index in {term!r} (diagonals) is not supported")
    if len(ops) == 1:
        return _single(ops[0], terms[0], out)
    (a, b), (ta, tb) = ops, terms
    # broadcast size-1 ellipsis dims between the operands, as NumPy does
    sizes: dict[str, int] = {}
    for term, op in ((ta, a), (tb, b)):
        for c, d in zip(term, shape_of(op)):
            sizes[c] = d if sizes.get(c, 1) == 1 else sizes[c]
    a = broadcast_to_shape(a, tuple(sizes[c] for c in ta))
    b = broadcast_to_shape(b, tuple(sizes[c] for c in tb))
    a, ta = _sum_lone(a, ta, tb + out)
    b, tb = _sum_lone(b, tb, ta + out)
    return apply("einsum", a, b, spec=f"{ta},{tb}->{out}")


def _sum_lone(x: Any, term: str, elsewhere: str) -> tuple[Any, str]:
    lone = tuple(i for i, c in enumerate(term) if c not in elsewhere)
    if not lone:
        return x, term
    return _sum(x, lone), "".join(c for i, c in enumerate(term) if i not in lone)


def _single(x: Any, term: str, out: str) -> Any:
    missing = set(out) - set(term)
    if missing:
        raise TypeCheckError(f"einsum: output index {sorted(missing)} has no source")
    x, term = _sum_lone(x, term, out)
    return transpose(x, [term.index(c) for c in out])


def dot(a: Any, b: Any) -> Any:
    """NumPy's dot: inner product, matrix product, or sum over a's last and b's
    second-to-last axis.
    """
    na, nb = len(shape_of(a)), len(shape_of(b))
    if na == 0 or nb == 0:
        return multiply(a, b)
    letters = string.ascii_letters
    ta = letters[:na]
    contracted = ta[-1]
    others = letters[na:na + nb - 1]  # b's axes other than the contracted one
    tb = contracted if nb == 1 else others[:-1] + contracted + others[-1]
    out = ta[:-1] + others
    return einsum(f"{ta},{tb}->{out}", a, b)


def matmul(a: Any, b: Any) -> Any:
    """The ``@`` operator: matrix product with broadcast batch dimensions.

    >>> import qdiff.numpy as qnp
    >>> qnp.matmul(np.ones((4, 2, 3)), np.ones((3, 5))).shape
    (4, 2, 5)
    """
    na, nb = len(shape_of(a)), len(shape_of(b))
    if na == 0 or nb == 0:
        raise TypeCheckError("matmul: operands must not be scalars (use *)")
    if na == 1 and nb == 1:
        return einsum("i,i->", a, b)
    if nb == 1:
        return einsum("...ij,j->...i", a, b)
    if na == 1:
        return einsum("j,...jk->...k", a, b)
    batch_a, batch_b = shape_of(a)[:-2], shape_of(b)[:-2]
    try:
        batch = tuple(np.broadcast_shapes(batch_a, batch_b))
    except ValueError:
        raise TypeCheckError(
            f"matmul: batch shapes {batch_a} and {batch_b} do not broadcast") from None
    a = broadcast_to_shape(as_operand(a), batch + shape_of(a)[-2:])
    b = broadcast_to_shape(as_operand(b), batch + shape_of(b)[-2:])
    if shape_of(a)[-1] != shape_of(b)[-2]:
        raise TypeCheckError(
            f"matmul: inner dimensions differ: {shape_of(a)} @ {shape_of(b)}")
    return einsum("...ij,...jk->...ik", a, b)


def inner(a: Any, b: Any) -> Any:
    """Sum over the last axes of ``a`` and ``b``."""
    na, nb = len(shape_of(a)), len(shape_of(b))
    letters = string.ascii_letters
    ta, tb = letters[:na - 1] + "Z", letters[na - 1:na + nb - 2] + "Z"
    return einsum(f"{ta},{tb}->{ta[:-1]}{tb[:-1]}", a, b)


def outer(a: Any, b: Any) -> Any:
    """The outer product of two flattened arrays."""
    return einsum("i,j->ij", reshape(a, (-1,)), reshape(b, (-1,)))


def vdot(a: Any, b: Any) -> Any:
    """Dot product of flattened arrays, conjugating the first."""
    a = as_operand(a)
    a = conj(a) if np.dtype(a.dtype).kind == "c" else a
    return einsum("i,i->", reshape(a, (-1,)), reshape(b, (-1,)))


# ------------------------------------------------------------------------- dense solvers
def _matrices(name: str, *operands: Any) -> list[Any]:
    dtype = float_dtype(*operands)
    if dtype.kind == "c":
        raise TypeCheckError(f"linalg.{name}: complex matrices are not supported")
    ops = [as_operand(o, dtype) for o in operands]
    shape = shape_of(ops[0])
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise TypeCheckError(f"linalg.{name}: expected square matrices (..., n, n), got {shape}")
    return ops


def matrix_transpose(x: Any) -> Any:
    """``x`` with its last two axes exchanged (a batch of transposed matrices)."""
    return swapaxes(x, -1, -2)


def solve(a: Any, b: Any) -> Any:
    """The solution ``x`` of ``a @ x = b`` (NumPy's rules: ``b`` is a vector only when 1-d).

    >>> import qdiff.numpy as qnp
    >>> qnp.linalg.solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([1.0, 1.0])).tolist()
    [0.5, 0.25]
    """
    a, b = _matrices("solve", a, b)
    a_shape, b_shape = shape_of(a), shape_of(b)
    vector = len(b_shape) == 1
    if vector:
        b = reshape(b, (b_shape[0], 1))
        b_shape = shape_of(b)
    if len(b_shape) < 2 or b_shape[-2] != a_shape[-1]:
        raise TypeCheckError(f"linalg.solve: right-hand side {b_shape} does not fit the "
                             f"matrix {a_shape}")
    try:
        batch = tuple(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    except ValueError:
        raise TypeCheckError(f"linalg.solve: batch shapes {a_shape[:-2]} and {b_shape[:-2]} "
                             "do not broadcast") from None
    a = broadcast_to_shape(a, batch + a_shape[-2:])
    b = broadcast_to_shape(b, batch + b_shape[-2:])
    x = apply("solve", a, b)
    return reshape(x, shape_of(x)[:-1]) if vector else x


def inv(a: Any) -> Any:
    """The inverse of each matrix in ``a`` (an error for a singular one, as in NumPy).

    >>> import qdiff.numpy as qnp
    >>> qnp.linalg.inv(np.array([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    (a,) = _matrices("inv", a)
    shape = shape_of(a)
    identity = np.broadcast_to(np.eye(shape[-1], dtype=a.dtype), shape)
    return apply("solve", a, np.ascontiguousarray(identity))


def slogdet(a: Any) -> tuple[Any, Any]:
    """``(sign, log|det a|)`` of each matrix; a singular one gives ``(0, -inf)``.

    >>> import qdiff.numpy as qnp
    >>> [float(v) for v in qnp.linalg.slogdet(np.array([[0.0, 2.0], [3.0, 0.0]]))]
    [-1.0, 1.791759469228055]
    """
    (a,) = _matrices("slogdet", a)
    return apply("det_sign", a), apply("logabsdet", a)


def det(a: Any) -> Any:
    """The determinant of each matrix in ``a``: ``sign * exp(log|det|)``.

    >>> import qdiff.numpy as qnp
    >>> float(qnp.linalg.det(np.array([[1.0, 2.0], [3.0, 4.0]])))
    -2.0000000000000004
    """
    sign, logdet = slogdet(a)
    return multiply(sign, exp(logdet))


def cholesky(a: Any) -> Any:
    """The lower-triangular ``L`` with ``L @ L.T == a``, reading ``a``'s lower triangle.

    Derivatives treat ``a`` as symmetric (the tangent ``da`` enters as
    ``(da + da.T) / 2``), as JAX does.

    >>> import qdiff.numpy as qnp
    >>> qnp.linalg.cholesky(np.array([[4.0, 2.0], [2.0, 2.0]])).tolist()
    [[2.0, 0.0], [1.0, 1.0]]
    """
    (a,) = _matrices("cholesky", a)
    return apply("cholesky", a)
