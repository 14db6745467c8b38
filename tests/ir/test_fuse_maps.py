"""Map fusion: a map whose results only one later map reads runs inside that map's lambda.

Oracles: the unfused program run by the interpreter, and NumPy versions of the same
functions.
"""

from __future__ import annotations

import numpy as np

import qdiff
import qdiff.numpy as qnp
from qdiff.ir.passes import count_primitives, fuse_maps


def top_level(program: qdiff.Program) -> list[str]:
    return [e.primitive.name for e in program.eqns]


X = np.linspace(-1.5, 2.0, 7)
Y = np.cos(np.arange(7.0))


def test_map_read_only_by_the_next_map_runs_inside_it_with_both_maps_consts():
    def chain(x, y, scale, shift):
        e, s = qdiff.map(lambda v: (qnp.exp(qnp.sin(v) * scale), qnp.sin(v)), x)
        # x is an operand of both maps, e and s of the second only
        return qdiff.map(lambda v, w, a, b: w * a + b * v + shift, x, y, e, s)

    p = qdiff.trace(chain, X, Y, 0.5, 2.0)
    fused = fuse_maps(p)
    assert top_level(p) == ["map", "map"] and top_level(fused) == ["map"]
    (eqn,) = fused.eqns
    assert eqn.params["num_consts"] == 2 and len(eqn.inputs) == 4  # scale, shift; x, y
    expected = np.exp(np.sin(X) * 0.5) * Y + np.sin(X) * X + 2.0
    np.testing.assert_allclose(fused(X, Y, 0.5, 2.0), expected, rtol=1e-15)
    np.testing.assert_allclose(fused(X, Y, 0.5, 2.0), p(X, Y, 0.5, 2.0), rtol=1e-15)


def test_a_chain_of_three_maps_becomes_one():
    def chain(x):
        a = qdiff.map(qnp.sin, x)
        b = qdiff.map(lambda v: qnp.exp(v) * 2.0, a)
        return qdiff.map(lambda v, w: v * w, b, x)

    p = qdiff.trace(chain, X)
    fused = fuse_maps(p)
    assert top_level(fused) == ["map"] and count_primitives(fused, "exp") == 1
    np.testing.assert_allclose(fused(X), np.exp(np.sin(X)) * 2.0 * X, rtol=1e-15)


def test_map_whose_results_are_read_elsewhere_is_left_alone():
    def returned(x):
        e = qdiff.map(qnp.exp, x)
        return e, qdiff.map(lambda v: v * 2.0, e)

    def summed(x):
        e = qdiff.map(qnp.exp, x)
        return qdiff.map(lambda v: v * 2.0, e), qnp.sum(e)

    def read_whole(x):  # the second map reads all of e in every iteration (a const)
        e = qdiff.map(qnp.exp, x)
        return qdiff.map(lambda v: v * qnp.sum(e), x)

    def two_readers(x):
        e = qdiff.map(qnp.exp, x)
        return qdiff.map(lambda v: v * 2.0, e), qdiff.map(lambda v: v + 1.0, e)

    def looped(x):  # only straight-line lambdas on scalars are fused
        e = qdiff.map(lambda v: qdiff.fori_loop(0, 2, lambda i, c: qnp.sin(c), v), x)
        return qdiff.map(lambda v: v * 2.0, e)

    for f in (returned, summed, read_whole, two_readers, looped):
        p = qdiff.trace(f, X)
        assert fuse_maps(p) is p, f.__name__
