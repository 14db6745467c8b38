"""Repeated map outputs: a ``map`` whose lambda returns one value at several positions
(reverse mode makes them: the adjoint of a value read twice, ``return g, g``) stores one
array, and the readers of the repeats read it.

    a, b = map(λ x. (g(x), g(x)), xs)   ⇒   a = map(λ x. g(x), xs); b's readers read a

A repeat that is an output of the program keeps its own array (the caller may write to
each result).
"""

from __future__ import annotations

from ..ir.core import Eqn, Program, Var


def _repeats(eqn: Eqn) -> dict[int, int]:
    """Output position -> the earlier position returning the same lambda value."""
    if eqn.primitive.name != "map":
        return {}
    first: dict[int, int] = {}
    result = {}
    for position, atom in enumerate(eqn.params["body"].outputs):
        if isinstance(atom, Var):
            if id(atom) in first:
                result[position] = first[id(atom)]
            else:
                first[id(atom)] = position
    return result


def merge_repeated_outputs(program: Program) -> Program:
    """``program`` with each map computing a repeated lambda output once.

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> def twice(v):
    ...     e = qnp.exp(v)
    ...     return e, e
    >>> p = qdiff.trace(lambda x: qnp.multiply(*qdiff.map(twice, x)), np.ones(3))
    >>> [len(e.outputs) for e in p.eqns], [len(e.outputs) for e in merge_repeated_outputs(p).eqns]
    ([2, 1], [1, 1])
    """
    outputs = {id(a) for a in program.outputs if isinstance(a, Var)}
    replace: dict[Var, Var] = {}
    result = []
    for eqn in program.eqns:
        inputs = tuple(replace.get(a, a) if isinstance(a, Var) else a for a in eqn.inputs)
        repeats = {k: j for k, j in _repeats(eqn).items() if id(eqn.outputs[k]) not in outputs}
        if not repeats:
            result.append(eqn if inputs == eqn.inputs else
                          Eqn(eqn.primitive, inputs, eqn.outputs, eqn.params))
            continue
        body: Program = eqn.params["body"]
        kept = [k for k in range(len(eqn.outputs)) if k not in repeats]
        for k, j in repeats.items():
            replace[eqn.outputs[k]] = eqn.outputs[j]
        new_body = Program(body.inputs, body.eqns, tuple(body.outputs[k] for k in kept),
                           name=body.name)
        result.append(Eqn(eqn.primitive, inputs, tuple(eqn.outputs[k] for k in kept),
                          {**eqn.params, "body": new_body}))
    return program.with_eqns(result)
