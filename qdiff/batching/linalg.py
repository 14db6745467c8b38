"""Batching rules of `einsum` and the dense solvers.

`einsum` gives the batch axis an index letter of its own, kept in the output; the solvers
already treat leading axes as a stack of independent matrices.
"""

from __future__ import annotations

import string
from typing import Any

from ..classical import solvers
from ..classical.linalg import einsum_p, parse_spec
from ..ir.tracer import bind
from .interpreter import def_batch, leading_axes_rule, materialize

Rule = tuple[list[Any], list[bool]]


def _einsum(values: list, batched: list, size: int, *, spec: str) -> Rule:
    a, b, out = parse_spec(spec)
    letter = next(c for c in string.ascii_letters if c not in a + b + out)
    terms = [letter + t if flag else t for t, flag in zip((a, b), batched)]
    return [bind(einsum_p, *values, spec=f"{terms[0]},{terms[1]}->{letter}{out}")], [True]


def _solve(values: list, batched: list, size: int) -> Rule:
    a, b = (materialize(v, flag, size) for v, flag in zip(values, batched))
    return [bind(solvers.solve_p, a, b)], [True]


def_batch(einsum_p, _einsum)
def_batch(solvers.solve_p, _solve)
for _primitive in (solvers.cholesky_p, solvers.logabsdet_p, solvers.det_sign_p):
    def_batch(_primitive, leading_axes_rule(_primitive))
