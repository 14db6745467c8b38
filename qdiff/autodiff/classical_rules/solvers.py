"""Derivative rules of the dense solvers (`qdiff.classical.solvers`).

Each rule is written with the solvers themselves, so it can be differentiated again:
- ``X = A⁻¹B``: ``Ẋ = A⁻¹(Ḃ - ȦX)``; ``B̄ = A⁻ᵀX̄``, ``Ā = -B̄Xᵀ``.
- ``l = log|det A|``: ``l̇ = tr(A⁻¹Ȧ)``; ``Ā = l̄ A⁻ᵀ``. The sign is piecewise constant.
- ``L = chol(A)``, with ``Ȧ`` symmetrized as JAX does: ``L̇ = L Φ(L⁻¹ sym(Ȧ) L⁻ᵀ)`` where Φ
  keeps the lower triangle and halves the diagonal; Φ is a mask, so it is its own adjoint and
  ``Ā = sym(L⁻ᵀ Φ(LᵀL̄) L⁻¹)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import numpy as qnp
from ...classical.solvers import cholesky_p, det_sign_p, logabsdet_p, solve_p
from ...ir.tracer import bind, value_type
from ...numpy.linalg import matrix_transpose
from ..rules import def_cotangent, def_tangent, def_zero_derivative
from ..tangents import add_tangents


def _solve(a: Any, b: Any) -> Any:
    return bind(solve_p, a, b)


def _solve_tangent(values: list, tangents: list, out: Any) -> Any:
    (a, _), (ta, tb) = values, tangents
    rhs = tb
    if ta is not None:
        rhs = add_tangents(rhs, qnp.negative(qnp.matmul(ta, out)))
    return None if rhs is None else _solve(a, rhs)


def _solve_cotangent(ct: Any, values: list, out: Any, active: list) -> list:
    a, _ = values
    ct_b = _solve(matrix_transpose(a), ct)
    ct_a = qnp.negative(qnp.matmul(ct_b, matrix_transpose(out))) if active[0] else None
    return [ct_a, ct_b if active[1] else None]


def _eye_like(a: Any) -> np.ndarray:
    t = value_type(a)
    return np.ascontiguousarray(np.broadcast_to(np.eye(t.shape[-1], dtype=t.np_dtype), t.shape))


def _logabsdet_tangent(values: list, tangents: list, out: Any) -> Any:
    (a,), (ta,) = values, tangents
    if ta is None:
        return None
    return qnp.sum(qnp.multiply(_solve(a, ta), _eye_like(a)), axis=(-2, -1))


def _logabsdet_cotangent(ct: Any, values: list, out: Any, active: list) -> list:
    (a,) = values
    inverse_t = _solve(matrix_transpose(a), _eye_like(a))
    return [qnp.multiply(qnp.expand_dims(ct, (-2, -1)), inverse_t)]


def _half_lower(x: Any) -> Any:
    """Φ(x): the lower triangle of each matrix, with the diagonal halved."""
    n = value_type(x).shape[-1]
    mask = np.tril(np.ones((n, n))) - 0.5 * np.eye(n)
    return qnp.multiply(x, mask.astype(value_type(x).np_dtype))


def _symmetric(x: Any) -> Any:
    return qnp.multiply(qnp.add(x, matrix_transpose(x)), 0.5)


def _cholesky_tangent(values: list, tangents: list, out: Any) -> Any:
    (ta,) = tangents
    if ta is None:
        return None
    inner = _solve(out, matrix_transpose(_solve(out, _symmetric(ta))))  # L⁻¹ S L⁻ᵀ
    return qnp.matmul(out, _half_lower(inner))


def _cholesky_cotangent(ct: Any, values: list, out: Any, active: list) -> list:
    lower_t = matrix_transpose(out)
    left = _solve(lower_t, _half_lower(qnp.matmul(lower_t, ct)))  # L⁻ᵀ Φ(LᵀL̄)
    return [_symmetric(matrix_transpose(_solve(lower_t, matrix_transpose(left))))]


def_tangent(solve_p, _solve_tangent)
def_cotangent(solve_p, _solve_cotangent)
def_tangent(logabsdet_p, _logabsdet_tangent)
def_cotangent(logabsdet_p, _logabsdet_cotangent)
def_tangent(cholesky_p, _cholesky_tangent)
def_cotangent(cholesky_p, _cholesky_cotangent)
def_zero_derivative(det_sign_p)
