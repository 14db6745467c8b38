"""Sums over points of a weighted per-point linear map, in weighted-Gram form
(`qdiff/compiler/weighted_gram.py`): GMM's reverse pass makes one Gram product per point
instead of two d×d products. Rewritten programs are compared with the original (the
interpreter) to 1e-12 relative, compiled gradients with the interpreter, with the program
compiled without the rewrite and with central finite differences of a NumPy oracle."""

from __future__ import annotations

import re

import numpy as np
import pytest

import qdiff
import qdiff.compiler.lowering as lowering
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from qdiff.compiler.duplicates import merge_repeated_outputs
from qdiff.compiler.linear_sums import push_sums_into_contractions
from qdiff.compiler.tiles import TILE_ROWS
from qdiff.compiler.weighted_gram import weighted_grams
from qdiff.ir.passes import fuse_elementwise
from tests.backends import assert_agree

RNG = np.random.default_rng(47)
D, K = 10, 3


def _specs(program):
    return [e.params["spec"] for e in program.eqns if e.primitive.name == "einsum"]


def _mixture(alphas, means, log_diagonal, factors, x, np_like=qnp):
    """GMM's log-likelihood: Σ_n logsumexp_k(α_k − ½‖Q_k (x_n − μ_k)‖²),
    Q_k = diag(exp(q_k)) + A_k."""
    centred = x[:, None, :] - means[None, :, :]
    rows = np_like.exp(log_diagonal)[None] * centred \
        + np_like.einsum("kij,nkj->nki", factors, centred)
    inner = alphas[None, :] - 0.5 * np_like.sum(rows ** 2, axis=2)
    top = np_like.max(inner, axis=1)
    return np_like.sum(np_like.log(np_like.sum(np_like.exp(inner - top[:, None]), axis=1)) + top)


def _arguments(n):
    return [RNG.normal(size=K), RNG.normal(size=(K, D)), 0.1 * RNG.normal(size=(K, D)),
            0.1 * RNG.normal(size=(K, D, D)), RNG.normal(size=(n, D))]


def _point_products(source: str, n: int) -> int:
    """How many BLAS products the loops over tiles of the ``n`` points make."""
    count, tile_indent = 0, None
    for line in source.splitlines():
        indent = len(line) - len(line.lstrip())
        if tile_indent is not None and line.strip() and indent <= tile_indent:
            tile_indent = None
        if re.search(rf"for \w+ in range\(0, {n}, \d+\):", line):
            tile_indent = indent
        elif tile_indent is not None and "np.dot(" in line:
            count += 1
    return count


@pytest.mark.parametrize("n", [2 * TILE_ROWS + 37, 2])
def test_gmm_gradient_reads_one_weighted_gram_per_component(n, monkeypatch):
    args = _arguments(n)
    program = qdiff.grad(_mixture, argnums=(0, 1, 2, 3)).trace(*args)
    pushed = push_sums_into_contractions(merge_repeated_outputs(program))  # as lowering does
    rewritten = weighted_grams(pushed)
    assert "kij,kjl->kil" in _specs(rewritten)  # Q_k M_k, one product per component
    for k, (a, b) in enumerate(zip(rewritten(*args), pushed(*args))):
        assert_agree(a, b, f"rewritten output {k}, n={n}")

    compiled = CompiledProgram(program)
    got = compiled(*args)
    with monkeypatch.context() as patch:
        patch.setattr(lowering, "weighted_grams", lambda p: p)
        before = CompiledProgram(program)
        unrewritten = before(*args)
    for k, (a, b, c) in enumerate(zip(got, program(*args), unrewritten)):
        assert_agree(a, b, f"output {k}, n={n}")
        assert_agree(a, c, f"output {k} against the unrewritten, n={n}")
    for k, value in enumerate(args[:4]):
        step, direction = 1e-6, RNG.normal(size=value.shape)
        shifted = [[a + s * step * direction if i == k else a for i, a in enumerate(args)]
                   for s in (1, -1)]
        numeric = (_mixture(*shifted[0], np_like=np) - _mixture(*shifted[1], np_like=np)) \
            / (2 * step)
        assert abs(np.sum(got[k] * direction) - numeric) <= 1e-6 * max(1.0, abs(numeric))
    if n > TILE_ROWS:
        # before: the forward L_k c, the reverse nest's L_k c again and Σ_n t̄ cᵀ; after:
        # the forward L_k c and Σ_n w c cᵀ
        assert _point_products(before.source, n) == 3
        assert _point_products(compiled.source, n) == 2


def _readers(a, g, x, mu, w):
    """Every kind of reader of t̄ = 2 w (A c + g ⊙ c)."""
    c = x[:, None, :] - mu[None, :, :]
    t = w[:, :, None] * (qnp.einsum("kij,nkj->nki", a, c) + g[None] * c) * 2.0
    return (qnp.einsum("nki,nkj->kij", t, c), qnp.sum(t, axis=0), qnp.sum(c * t, axis=0),
            qnp.sum(-g[None] * t / 4.0, axis=0), qnp.sum(3.0 * c * g[None] * t, axis=0))


def _reader_arguments(n=7):
    return (RNG.normal(size=(K, D, D)), RNG.normal(size=(K, D)), RNG.normal(size=(n, D)),
            RNG.normal(size=(K, D)), RNG.normal(size=(n, K)))


def test_every_reader_kind_moves_to_the_gram_form():
    args = _reader_arguments()
    program = fuse_elementwise(qdiff.trace(_readers, *args))
    rewritten = weighted_grams(program)
    assert _specs(program) == ["kij,nkj->nki", "nki,nkj->kij"]
    # A c was read by t̄ alone: its per-point product is gone
    assert sorted(_specs(rewritten)) == ["kij,kj->ki", "kij,kjl->kil", "nki,nkj->kij"]
    for k, (a, b) in enumerate(zip(rewritten(*args), program(*args))):
        assert_agree(a, b, f"output {k}")


def _weighted_map_read_by(extra):
    """t̄ = w ⊙ A c read by Σ_n t̄ cᵀ, Σ_n t̄ and ``extra(t̄, c)``."""
    args = _reader_arguments()

    def f(a, g, x, mu, w):
        c = x[:, None, :] - mu[None, :, :]
        t = w[:, :, None] * qnp.einsum("kij,nkj->nki", a, c)
        return (qnp.einsum("nki,nkj->kij", t, c), qnp.sum(t, axis=0)) + extra(t, c)

    return fuse_elementwise(qdiff.trace(f, *args)), args


def test_cotangent_read_only_by_sums_over_points_is_rewritten():
    program, args = _weighted_map_read_by(lambda t, c: (qnp.sum(c * t, axis=0),))
    rewritten = weighted_grams(program)
    assert "kij,kjl->kil" in _specs(rewritten)
    for k, (a, b) in enumerate(zip(rewritten(*args), program(*args))):
        assert_agree(a, b, f"output {k}")


@pytest.mark.parametrize("extra", [
    lambda t, c: (t,),                                  # returned: not a sum
    lambda t, c: (qnp.sum(t, axis=2),),                 # summed over the vector's axis
    lambda t, c: (qnp.sum(t * t, axis=0),),             # not linear in t̄
    lambda t, c: (qnp.einsum("nki,nkj->kij", t, t),),   # a Gram with t̄, not with c
    lambda t, c: (qnp.sum(qnp.exp(c) * t, axis=0),),    # a factor varying per point
])
def test_cotangent_with_a_reader_of_another_kind_keeps_the_program(extra):
    program, _ = _weighted_map_read_by(extra)
    assert weighted_grams(program) is program


def test_cotangent_not_linear_in_the_vectors_keeps_the_program():
    args = _reader_arguments()

    def f(a, g, x, mu, w):
        c = x[:, None, :] - mu[None, :, :]
        t = (qnp.einsum("kij,nkj->nki", a, c) + g[None] * c) * c
        return qnp.einsum("nki,nkj->kij", t, c), qnp.sum(t, axis=0)

    program = fuse_elementwise(qdiff.trace(f, *args))
    assert weighted_grams(program) is program
