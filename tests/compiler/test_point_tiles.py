"""Point tiles (`qdiff/compiler/tiles.py`): a row contraction whose matrix does not depend
on the points, and a sum over points of outer products of rows, computed a tile of points
at a time as BLAS products inside the loop nest. Each case is compared with the interpreter
and with NumPy's einsum, at point counts that are not multiples of the tile, one point and
none."""

from __future__ import annotations

import re

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from qdiff.compiler.tiles import TILE_ROWS
from tests.backends import assert_agree

RNG = np.random.default_rng(23)
POINTS = (2 * TILE_ROWS + 37, TILE_ROWS, 1, 0)


def _norms(factors, x, means):
    """Σ_n Σ_k ‖diag(e) (x_n − μ_k) + L_k (x_n − μ_k)‖² weighted per component (GMM's
    inner term), L_k stored, x_n − μ_k made in the nest."""
    centred = x[:, None, :] - means[None, :, :]
    rows = 0.5 * centred + qnp.einsum("kij,nkj->nki", factors, centred)
    return qnp.sum(qnp.sum(rows ** 2, axis=2) * qnp.arange(1.0, 4.0)[None, :])


def _norms_oracle(factors, x, means):
    centred = x[:, None, :] - means[None, :, :]
    rows = 0.5 * centred + np.einsum("kij,nkj->nki", factors, centred)
    return np.sum(np.sum(rows ** 2, axis=2) * np.arange(1.0, 4.0)[None, :])


@pytest.mark.parametrize("n", POINTS)
def test_row_contraction_tiles_agree_at_any_point_count(n):
    factors, means = RNG.normal(size=(3, 20, 20)), RNG.normal(size=(3, 20))
    x = RNG.normal(size=(n, 20))
    program = qdiff.trace(_norms, factors, x, means)
    compiled = CompiledProgram(program)
    got = compiled(factors, x, means)
    assert_agree(got, program(factors, x, means), f"n={n}")
    assert_agree(got, _norms_oracle(factors, x, means), f"n={n} against NumPy")
    if n > 1:
        assert "np.dot(" in compiled.source  # a BLAS product per tile of points
        assert re.search(rf"in range\(0, {n}, {min(n, TILE_ROWS)}\)", compiled.source)


def _gram(x, means, weights):
    """Σ_n w[n,k] (x_n − μ_k) (x_n − μ_k)ᵀ: a point product whose operands the nest makes."""
    centred = x[:, None, :] - means[None, :, :]
    return qnp.einsum("nki,nkj->kij", centred * weights[:, :, None], centred)


@pytest.mark.parametrize("n", POINTS)
def test_point_product_is_added_tile_by_tile_without_storing_its_operands(n):
    means, x, weights = RNG.normal(size=(4, 9)), RNG.normal(size=(n, 9)), RNG.normal(size=(n, 4))
    program = qdiff.trace(_gram, x, means, weights)
    compiled = CompiledProgram(program)
    got = compiled(x, means, weights)
    centred = x[:, None, :] - means[None, :, :]
    assert_agree(got, program(x, means, weights), f"n={n}")
    assert_agree(got, np.einsum("nki,nkj->kij", centred * weights[:, :, None], centred),
                 f"n={n} against NumPy")
    if n > 1:  # (one point or none: no loop of points to speak of)
        assert f"np.empty(({n}, 4, 9," not in compiled.source  # no (n, K, d) operand stored
        assert "batched_matmul" not in compiled.source


def test_point_product_over_two_point_axes_sums_point_by_point():
    """Summed over two loop levels there is no one loop of points to tile: the product is
    added one point at a time (an outer product of rows)."""
    means, x = RNG.normal(size=(4, 9)), RNG.normal(size=(30, 7, 9))

    def gram(x, means):
        centred = x[:, :, None, :] - means[None, None, :, :]
        return qnp.einsum("nmki,nmkj->kij", centred * centred, centred)

    program = qdiff.trace(gram, x, means)
    compiled = CompiledProgram(program)
    centred = x[:, :, None, :] - means[None, None, :, :]
    got = compiled(x, means)
    assert_agree(got, program(x, means), "interpreter")
    assert_agree(got, np.einsum("nmki,nmkj->kij", centred ** 2, centred), "NumPy")
    assert "np.dot(" not in compiled.source and "batched_matmul" not in compiled.source


def test_point_tiles_in_gradients_and_under_prange():
    """GMM-shaped gradient (both tiled nests and the point product) against the interpreter
    and central finite differences, and the program with ``parallel=True``."""
    factors, means = 0.3 * RNG.normal(size=(3, 12, 12)), RNG.normal(size=(3, 12))
    x = RNG.normal(size=(TILE_ROWS + 5, 12))
    gradient = qdiff.grad(_norms, argnums=(0, 2))
    compiled = qdiff.jit(gradient)
    got = compiled(factors, x, means)
    for k, (a, b) in enumerate(zip(got, gradient(factors, x, means))):
        assert_agree(a, b, f"output {k}")
    source = compiled.compiled(factors, x, means).source
    # the forward row product and the point product (L_kᵀ t̄ is summed over points first,
    # `linear_sums.py`, so it makes no product per tile)
    assert source.count("np.dot(") == 2 and "batched_matmul" not in source
    step, direction = 1e-6, RNG.normal(size=means.shape)
    numeric = (_norms_oracle(factors, x, means + step * direction)
               - _norms_oracle(factors, x, means - step * direction)) / (2 * step)
    assert abs(np.sum(got[1] * direction) - numeric) <= 1e-6 * abs(numeric)
    program = qdiff.trace(_norms, factors, x, means)
    parallel = CompiledProgram(program, parallel=True)
    assert_agree(parallel(factors, x, means), program(factors, x, means), "parallel")
