"""Dense linear algebra through Numba's LAPACK bindings, one matrix of the batch at a time
(operands reshaped to (P, n, n)); a singular or indefinite matrix is the interpreter's
error."""

from __future__ import annotations

import math

from ...classical.solvers import cholesky_p, det_sign_p, logabsdet_p, solve_p
from ...ir.core import Eqn
from ...ir.errors import QdiffError
from ..lowering import Scope, rule, shape_text


def _batched(shape: tuple) -> str:
    return shape_text((math.prod(shape[:-2]), *shape[-2:]))


def _bind(scope: Scope, expression: str) -> list[str]:
    out = scope.fresh()
    scope.line(f"{out} = {expression}")
    return [out]


@rule(solve_p)
def _solve(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    a, b = (x.type.shape for x in eqn.inputs)
    code = len(scope.src.messages)
    scope.src.error(QdiffError, f"solve: the matrix is singular (shape {a})")
    found = (f"rt.factor_or_solve({args[0]}.reshape({_batched(a)}), "
             f"{args[1]}.reshape({_batched(b)}), True, {code})")
    return _bind(scope, f"{found}.reshape({shape_text(b)})")


@rule(cholesky_p)
def _cholesky(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    a = eqn.inputs[0].type.shape
    code = len(scope.src.messages)
    scope.src.error(QdiffError, f"cholesky: the matrix is not positive definite (shape {a})")
    matrices = f"{args[0]}.reshape({_batched(a)})"
    found = f"rt.factor_or_solve({matrices}, {matrices}, False, {code})"
    return _bind(scope, f"{found}.reshape({shape_text(a)})")


@rule(logabsdet_p, det_sign_p)
def _slogdet(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    a = eqn.inputs[0].type.shape
    found = f"rt.slogdet({args[0]}.reshape({_batched(a)}), {eqn.primitive is det_sign_p})"
    out = eqn.outputs[0].type.shape
    return _bind(scope, f"{found}.reshape({shape_text(out)})" if out else f"{found}[0]")
