"""Unpacking: the scalar elements a program reads from one array, in one equation.

Indexing a parameter array element by element (``w[l, 0, i]`` for every gate angle of an
ansatz) traces to a ``slice`` and a ``reshape`` per element. Interpreters that pay per
equation (the recording runner of the adjoint method pays twice: forward and reverse) do
better with one ``unpack[indices](w)`` giving every element: this pass rewrites the
top-level chains ``reshape[()](slice(w))`` of a source array ``w`` read at least twice into
one ``unpack``, placed where the first of them was.

>>> import qdiff
>>> p = qdiff.trace(lambda w: w[0, 1] * w[1, 0] + w[0, 0], np.ones((2, 2)))
>>> [e.primitive.name for e in unpack_scalars(p).eqns]
['unpack', 'mul', 'add']
>>> float(unpack_scalars(p)(np.array([[1.0, 2.0], [3.0, 4.0]])))
7.0
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..core import Eqn, Program, Var
from ..primitives import get_primitive
from .per_program_cache import cached_per_program


@cached_per_program(limit=256)
def unpack_scalars(program: Program) -> Program:
    """``program`` with per-element reads of an array merged into one ``unpack`` per array
    (cached per program)."""
    uses: Counter = Counter(a for e in program.eqns for a in e.inputs if isinstance(a, Var))
    uses.update(a for a in program.outputs if isinstance(a, Var))
    producer = {v: k for k, e in enumerate(program.eqns) for v in e.outputs}
    groups: dict[Var, list[tuple[int, int, int]]] = {}  # source -> (slice, reshape, index)
    for k, eqn in enumerate(program.eqns):
        if eqn.primitive.name != "reshape" or eqn.params.get("shape") != ():
            continue
        (sliced,) = eqn.inputs
        j = producer.get(sliced) if isinstance(sliced, Var) else None
        if j is None or uses[sliced] != 1:
            continue
        element = _element(program.eqns[j])
        if element is not None:
            source, index = element
            groups.setdefault(source, []).append((j, k, index))
    groups = {s: g for s, g in groups.items() if len(g) > 1}
    if not groups:
        return program
    unpack = get_primitive("unpack")
    dropped = {index for g in groups.values() for j, r, _ in g for index in (j, r)}
    placed = {min(j for j, _, _ in g): source for source, g in groups.items()}
    eqns = []
    for k, eqn in enumerate(program.eqns):
        if k in placed:
            group = groups[placed[k]]
            eqns.append(Eqn(unpack, (placed[k],),
                            tuple(program.eqns[r].outputs[0] for _, r, _ in group),
                            {"indices": tuple(i for _, _, i in group)}))
        if k not in dropped:
            eqns.append(eqn)
    return program.with_eqns(eqns)


def _element(eqn: Eqn) -> tuple[Var, int] | None:
    """(source, flat index) when ``eqn`` slices out one element of a var."""
    if eqn.primitive.name != "slice":
        return None
    (source,) = eqn.inputs
    if not isinstance(source, Var):
        return None
    start, limit = eqn.params["start"], eqn.params["limit"]
    if any(b - a != 1 for a, b in zip(start, limit)):
        return None
    return source, int(np.ravel_multi_index(tuple(start), source.type.shape))
