"""Sums of affine functions of contractions (`qdiff/compiler/linear_sums.py`): the sum over
points moves onto the contraction's operand, so a gradient through a per-point linear map
makes one product per component, not one per point. Rewritten programs are compared with
the original (the interpreter) to 1e-12 relative, compiled ones with the interpreter and
with central finite differences, at point counts that are not multiples of the tile, one
point and none."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from qdiff.compiler.linear_sums import push_sums_into_contractions
from qdiff.compiler.tiles import TILE_ROWS
from qdiff.ir.passes import fuse_elementwise
from tests.backends import assert_agree
from tests.compiler.test_point_tiles import _norms
from tests.compiler.test_point_tiles import _norms_oracle as _norms_numpy

# _norms: GMM's inner term with a weight per component, whose gradient in the means sums
# L_kᵀ t̄_nk over points
RNG = np.random.default_rng(31)
POINTS = (2 * TILE_ROWS + 37, TILE_ROWS, 1, 0)


def _specs(program):
    return [e.params["spec"] for e in program.eqns if e.primitive.name == "einsum"]


def _rewritten(f, *args):
    program = fuse_elementwise(qdiff.trace(f, *args))
    rewritten = push_sums_into_contractions(program)
    assert_agree(np.asarray(rewritten(*args)), np.asarray(program(*args)), "rewritten")
    return program, rewritten


@pytest.mark.parametrize("body", [
    lambda h, u: u * u - 2.0 * h,
    lambda h, u: -h / 4.0 + u,
    lambda h, u: (h + u) * 3.0 - h,
    lambda h, u: 0.0 * h + u * u,     # a zero coefficient still reads the sum
    lambda h, u: h,
])
def test_sum_of_affine_function_of_contraction_sums_operand_first(body):
    w, t, u = RNG.normal(size=(3, 4)), RNG.normal(size=(9, 4)), RNG.normal(size=(9, 3))

    def f(w, t, u):
        return qnp.sum(body(qnp.einsum("ij,nj->ni", w, t), u), axis=0)

    program, rewritten = _rewritten(f, w, t, u)
    assert _specs(program) == ["ij,nj->ni"] and _specs(rewritten) == ["ij,j->i"]


@pytest.mark.parametrize("body", [
    lambda h, u: h * h,                # not affine
    lambda h, u: u * h,                # a coefficient that varies per point
    lambda h, u: qnp.exp(h),
])
def test_sum_of_non_affine_function_keeps_its_contraction(body):
    w, t, u = RNG.normal(size=(3, 4)), RNG.normal(size=(9, 4)), RNG.normal(size=(9, 3))

    def f(w, t, u):
        return qnp.sum(body(qnp.einsum("ij,nj->ni", w, t), u), axis=0)

    program, rewritten = _rewritten(f, w, t, u)
    assert _specs(rewritten) == _specs(program)


def test_sum_over_an_index_both_operands_carry_keeps_its_contraction():
    """A batch index (in both operands) summed is a contraction, not a sum to move."""
    a, b = RNG.normal(size=(5, 3, 4)), RNG.normal(size=(5, 4))

    def f(a, b):
        return qnp.sum(qnp.einsum("nij,nj->ni", a, b), axis=0)

    program, rewritten = _rewritten(f, a, b)
    assert _specs(rewritten) == _specs(program)


def test_contraction_read_elsewhere_too_is_kept():
    w, t = RNG.normal(size=(3, 4)), RNG.normal(size=(9, 4))

    def f(w, t):
        e = qnp.einsum("ij,nj->ni", w, t)
        return qnp.sum(e, axis=0), e

    program = qdiff.trace(f, w, t)
    assert _specs(push_sums_into_contractions(program)) == _specs(program)


@pytest.mark.parametrize("n", POINTS)
def test_gradient_of_means_through_linear_map_makes_no_product_per_point(n):
    factors, means = 0.3 * RNG.normal(size=(3, 12, 12)), RNG.normal(size=(3, 12))
    x = RNG.normal(size=(n, 12))
    gradient = qdiff.grad(_norms, argnums=(0, 2))
    program = gradient.trace(factors, x, means)
    assert "kij,nki->nkj" in _specs(program)  # L_kᵀ t̄_nk, one product per point
    compiled = CompiledProgram(program)
    got = compiled(factors, x, means)
    for k, (a, b) in enumerate(zip(got, program(factors, x, means))):
        assert_agree(a, b, f"output {k}, n={n}")
    step, direction = 1e-6, RNG.normal(size=means.shape)
    numeric = (_norms_numpy(factors, x, means + step * direction)
               - _norms_numpy(factors, x, means - step * direction)) / (2 * step)
    assert abs(np.sum(got[1] * direction) - numeric) <= 1e-6 * max(1.0, abs(numeric))
    if n > 1:  # the forward row product and the point product; Σ_n t̄ costs no product
        assert compiled.source.count("np.dot(") == 2
