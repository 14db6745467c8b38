"""Shared checks for derivative tests: the inner-product identity and finite differences."""

from __future__ import annotations

from typing import Any

import numpy as np

import qdiff
from qdiff.ir import pytree


def _float_leaves(tree: Any) -> list[np.ndarray]:
    return [np.asarray(v) for v in pytree.flatten(tree)[0]]


def _random_like(tree: Any, rng: np.random.Generator) -> Any:
    leaves, treedef = pytree.flatten(tree)
    made = [rng.normal(size=np.shape(v)).astype(np.asarray(v).dtype)
            if np.asarray(v).dtype.kind == "f" else np.zeros_like(v) for v in leaves]
    return pytree.unflatten(treedef, made)


def _inner(a: Any, b: Any) -> float:
    return float(sum(np.vdot(np.asarray(x, float), np.asarray(y, float))
                     for x, y in zip(_float_leaves(a), _float_leaves(b))
                     if np.asarray(x).dtype.kind == "f"))


def check_derivatives(f: Any, *args: Any, seed: int = 0, eps: float = 1e-6,
                      rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Forward vs reverse (``<vjp(c), t> == <c, jvp(t)>``) and forward vs central
    differences, for random tangent t and cotangent c."""
    rng = np.random.default_rng(seed)
    program = qdiff.trace(f, *args)
    tangents = _random_like(tuple(args), rng)
    out, out_tangent = qdiff.jvp(program, args, tangents)
    cotangent = _random_like(out, rng)
    _, back = qdiff.vjp(program, *args)
    in_cotangent = back(cotangent)
    forward = _inner(cotangent, out_tangent)
    reverse = _inner(tuple(c if c is not None else np.zeros_like(a)
                           for c, a in zip(in_cotangent, args)), tangents)
    np.testing.assert_allclose(reverse, forward, rtol=rtol, atol=atol)

    def shifted(scale: float) -> Any:
        leaves, treedef = pytree.flatten(tuple(args))
        moved = [np.asarray(a) + scale * np.asarray(t) if np.asarray(a).dtype.kind == "f"
                 else a for a, t in zip(leaves, pytree.flatten(tangents)[0])]
        return program(*pytree.unflatten(treedef, moved))

    plus, minus = _float_leaves(shifted(eps)), _float_leaves(shifted(-eps))
    for p, m, t in zip(plus, minus, _float_leaves(out_tangent)):
        if p.dtype.kind == "f":
            np.testing.assert_allclose((p - m) / (2 * eps), t, rtol=1e-4, atol=1e-5)
