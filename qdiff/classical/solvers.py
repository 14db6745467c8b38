"""Dense linear algebra primitives: `solve`, `cholesky`, `logabsdet` and `det_sign`.

They act on the last two axes of real float arrays; leading axes are a batch that both
operands of `solve` share (the tracer broadcasts them first). `qdiff.numpy.linalg` builds
``inv``, ``det`` and ``slogdet`` from them. A singular matrix (or one that is not positive
definite, for `cholesky`) is an error naming the problem, as in NumPy, never a number.
Their derivative rules (`autodiff/classical_rules/solvers.py`) are written with these same
primitives, so derivatives of any order exist.
"""

from __future__ import annotations

import numpy as np

from ..ir.errors import QdiffError, TypeCheckError
from ..ir.primitives import register_primitive
from ..ir.type_rules import same_dtype, tensor
from ..ir.types import Tensor, Type


def square_matrices(t: Type, what: str) -> Tensor:
    """``t`` as a real float array of square matrices (its last two axes)."""
    m = tensor(t, what)
    if m.ndim < 2 or m.shape[-1] != m.shape[-2]:
        raise TypeCheckError(f"{what} must be square matrices (..., n, n), got {m.short()}")
    if m.np_dtype.kind != "f":
        raise TypeCheckError(
            f"{what} must be a real float array (float32 or float64), got {m.short()}")
    return m


def _solve_rule(a: Type, b: Type) -> tuple[Type, ...]:
    ta, tb = square_matrices(a, "solve: the matrix"), tensor(b, "solve: the right-hand side")
    same_dtype([ta, tb])
    if tb.ndim != ta.ndim or tb.shape[:-1] != ta.shape[:-1]:
        raise TypeCheckError(
            f"solve: right-hand side {tb.short()} must have shape {ta.shape[:-1]} + (k,) "
            f"for the matrix {ta.short()}")
    return (tb,)


def _square_rule(name: str) -> object:
    def rule(a: Type) -> tuple[Type, ...]:
        return (square_matrices(a, f"{name}: the operand"),)
    return rule


def _scalar_per_matrix(name: str) -> object:
    def rule(a: Type) -> tuple[Type, ...]:
        m = square_matrices(a, f"{name}: the operand")
        return (Tensor(m.shape[:-2], m.dtype),)
    return rule


solve_p = register_primitive("solve", _solve_rule)
cholesky_p = register_primitive("cholesky", _square_rule("cholesky"))
logabsdet_p = register_primitive("logabsdet", _scalar_per_matrix("logabsdet"))
det_sign_p = register_primitive("det_sign", _scalar_per_matrix("det_sign"))


@solve_p.def_impl("numpy")
def _solve_impl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, b.dtype)
    try:
        return np.linalg.solve(a, b).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise QdiffError(f"solve: the matrix is singular (shape {a.shape})") from None


@cholesky_p.def_impl("numpy")
def _cholesky_impl(a: np.ndarray) -> np.ndarray:
    if a.size == 0:
        return np.zeros(a.shape, a.dtype)
    try:
        return np.linalg.cholesky(a).astype(a.dtype, copy=False)
    except np.linalg.LinAlgError:
        raise QdiffError(
            f"cholesky: the matrix is not positive definite (shape {a.shape})") from None


@logabsdet_p.def_impl("numpy")
def _logabsdet_impl(a: np.ndarray) -> np.ndarray:
    return np.asarray(np.linalg.slogdet(a)[1], a.dtype)


@det_sign_p.def_impl("numpy")
def _det_sign_impl(a: np.ndarray) -> np.ndarray:
    return np.asarray(np.linalg.slogdet(a)[0], a.dtype)
