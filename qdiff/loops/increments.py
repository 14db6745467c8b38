"""Increment-only carries: ``x' = x + f(...)`` with nothing else reading x.

Reversing such a carry needs no stored values: the adjoint of ``+`` does not read x, so
the reverse sweep may feed any value for x when it re-runs the body, and ``x̄`` passes
through unchanged (Futhark: addition-based accumulations need no recomputation).

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: (qnp.sin(c[0]),
...                 c[1] + c[0] ** 2), (x, x)), 1.0)
>>> increment_only_carries(p.eqns[0].params["body"], p.eqns[0].params["num_consts"])
[False, True]
"""

from __future__ import annotations

from collections import Counter

from ..ir.core import Program, Var, producers


def increment_only_carries(body: Program, num_consts: int, leading: int = 1) -> list[bool]:
    """For each carry of a loop body ``(i, *consts, *carry) -> carry``, whether it is
    increment-only (``leading`` counts the inputs before the consts: the loop index)."""
    carry_in = body.inputs[leading + num_consts:]
    uses: Counter = Counter()
    for eqn in body.eqns:
        uses.update(a for a in eqn.inputs if isinstance(a, Var))
    uses.update(a for a in body.outputs if isinstance(a, Var))
    producer = producers(body.eqns)
    result = []
    for x, out in zip(carry_in, body.outputs):
        eqn = producer.get(out) if isinstance(out, Var) else None
        ok = (eqn is not None and uses[x] == 1 and uses[out] == 1
              and eqn.outputs[0].type == x.type
              and ((eqn.primitive.name == "add" and x in eqn.inputs)
                   or (eqn.primitive.name == "sub" and eqn.inputs[0] is x)))
        result.append(bool(ok))
    return result
