"""Scheduling: loop-nest members moved up to just after their operands.

Coarsening (`fusion.plan`) walks the equations in order and must write a loop nest as soon
as an equation reads one of its reductions. In a derivative program the reverse sweep
interleaves small equations on reduction results (a (K, d) adjoint from a sum over n) with
the big elementwise ones, so in program order a nest over n·K·d elements is cut before a
reduction of one of its values that comes later, and that value is stored and read again.
Moving each elementwise equation, reshape and reduction up to just after the last of its
operands (SSA makes any order that respects definitions valid) puts the reduction next to
the nest that makes its operand.

Broadcasts and other index computations stay where they are: they cost nothing inside the
nest of their reader, which is where rematerialization put them. Effectful equations keep
their place and nothing moves above one.
"""

from __future__ import annotations

from ..ir.core import Eqn, Program, Var
from .fusion import member_kind

HOISTED = {"elementwise", "reduction", "alias"}


def hoist(program: Program) -> Program:
    """``program`` with each elementwise equation, reshape and reduction placed just after
    the last definition of its operands.

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x, y: (qnp.sum(y * 2.0), qnp.exp(x), qnp.sum(qnp.exp(x))),
    ...                 np.ones(3), np.ones(4))
    >>> [e.primitive.name for e in p.eqns]
    ['mul', 'reduce_sum', 'exp', 'exp', 'reduce_sum']
    >>> [e.primitive.name for e in hoist(p).eqns]   # each sum next to what it sums
    ['exp', 'reduce_sum', 'exp', 'mul', 'reduce_sum']
    """
    order: list[Eqn] = []
    floor = 0  # nothing moves above an effectful equation
    reduced: set[Var] = set()  # reduction results: reading one ends a nest, so stay late
    for eqn in program.eqns:
        kind = member_kind(eqn)
        if kind == "reduction":
            reduced.update(eqn.outputs)
        if eqn.primitive.effectful or eqn.primitive.subprogram_params or kind not in HOISTED \
                or any(isinstance(a, Var) and a in reduced for a in eqn.inputs):
            order.append(eqn)
            if eqn.primitive.effectful:
                floor = len(order)
            continue
        inputs = {a for a in eqn.inputs if isinstance(a, Var)}
        position = len(order)
        while position > floor and not inputs.intersection(order[position - 1].outputs):
            position -= 1
        order.insert(position, eqn)
    return program.with_eqns(order)
