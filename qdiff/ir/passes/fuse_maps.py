"""Map fusion: a `map` whose results only one later `map` reads, element by element, runs
inside that map's lambda.

Rewrite rule. Let ``F = map[f](*c_F, *x_F)`` and ``A = map[a](*c_A, *x_A)`` be equations
without effects whose lambdas are straight-line code on scalars (`straight_line_on_scalars`:
no loops or branches, nothing a batched runner would claim) such that every result of F that
anything reads is read only by A, as one of A's mapped operands (never as a const, never
returned)::

    ys = map[f](*c_F, *x_F); …; zs = map[a](*c_A, *x_A)      (some x_A are ys)
  ⇒
    zs = map[λ c x → a(c_A, x_A with ys_i = f(c_F, x_F_i))](*c, *x)

with ``c`` and ``x`` the consts and mapped operands of both, each once; the fused map
stands where A stood. Iteration i of A reads only ``ys[i]``, which is iteration i of F, so
the array ``ys`` is never stored; every element of F is still computed once.

Derivative programs need this: a map's reverse sweep reads values its forward sweep
returns (`classical_rules/map_derivatives._map_keeping`), which pays when the forward map
runs anyway (its outputs are the value, or feed later equations); when nothing else reads
them (``grad``, where the value is dead), the forward map is fused into its adjoint map,
which then re-executes the lambda in one pass, as the tapeless adjoint does.

>>> import qdiff, qdiff.numpy as qnp
>>> def two_maps(x):
...     y = qdiff.map(lambda v: qnp.exp(qnp.sin(v)), x)
...     return qdiff.map(lambda v, w: v * w, x, y)
>>> p = qdiff.trace(two_maps, np.zeros(3))
>>> fused = fuse_maps(p)
>>> [e.primitive.name for e in fused.eqns]
['map']
>>> [e.primitive.name for e in fused.eqns[0].params["body"].eqns]
['sin', 'exp', 'mul']
>>> x = np.array([0.5, 1.0, -2.0])
>>> bool(np.allclose(fused(x), p(x)))
True
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any

from ..core import Atom, Eqn, Program, Var
from ..interpreter import inline
from ..tracer import is_effectful, trace
from ..types import Tensor
from .simplify import simplify


def fuse_maps(program: Program) -> Program:
    """``program`` with each map whose results only one later map reads, element by
    element, fused into that map (top level; applied until none is left)."""
    eqns: list[Eqn | None] = list(program.eqns)
    readers: dict[Var, set[int]] = {}
    for k, eqn in enumerate(eqns):
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                readers.setdefault(atom, set()).add(k)
    made_at = {v: k for k, eqn in enumerate(eqns) for v in eqn.outputs}
    returned = {a for a in program.outputs if isinstance(a, Var)}
    # positions to look at, lowest first; a fusion puts back the maps whose results the
    # fused map reads (one of their other readers may just have been fused away)
    pending = list(range(len(eqns)))
    waiting = set(pending)
    changed = False
    while pending:
        producer = heapq.heappop(pending)
        waiting.discard(producer)
        consumer = _consumer(eqns, producer, readers, returned)
        if consumer is None:
            continue
        fused = _fused(eqns[producer], eqns[consumer])
        for atom in eqns[producer].inputs:
            if isinstance(atom, Var):
                readers[atom].discard(producer)
                readers[atom].add(consumer)
        for var in eqns[producer].outputs:
            readers.pop(var, None)
            made_at.pop(var)
        eqns[consumer], eqns[producer] = fused, None
        changed = True
        for k in {made_at.get(a) for a in fused.inputs} - {None} - waiting:
            heapq.heappush(pending, k)
            waiting.add(k)
    return program.with_eqns([e for e in eqns if e is not None]) if changed else program


def _consumer(eqns: Sequence[Eqn | None], k: int, readers: dict[Var, set[int]],
              returned: set[Var]) -> int | None:
    """The position of the map that map ``k`` fuses into, or None."""
    eqn = eqns[k]
    if eqn is None or not _scalar_map(eqn):
        return None
    read = [v for v in eqn.outputs if v in readers or v in returned]
    if not read or any(v in returned for v in read):
        return None
    consumers = set().union(*(readers[v] for v in read))
    if len(consumers) != 1:
        return None
    (consumer,) = consumers
    if _scalar_map(eqns[consumer]) and not set(read) & set(_consts(eqns[consumer])):
        return consumer
    return None


def straight_line_on_scalars(body: Program) -> bool:
    """Whether ``body`` is straight-line code on scalars: no sub-programs (loops, branches,
    maps), every value it makes of rank 0."""
    return all(not eqn.primitive.subprogram_params
               and all(isinstance(v.type, Tensor) and v.type.shape == () for v in eqn.outputs)
               for eqn in body.eqns)


def _scalar_map(eqn: Eqn) -> bool:
    return (eqn.primitive.name == "map" and not is_effectful(eqn.primitive, eqn.params)
            and straight_line_on_scalars(eqn.params["body"]))


def _consts(eqn: Eqn) -> tuple[Atom, ...]:
    return eqn.inputs[:eqn.params["num_consts"]]


def _mapped(eqn: Eqn) -> tuple[Atom, ...]:
    return eqn.inputs[eqn.params["num_consts"]:]


def _fused(producer: Eqn, consumer: Eqn) -> Eqn:
    """The map computing ``consumer``'s results with ``producer``'s lambda inside its own."""
    made = set(producer.outputs)
    consts = _distinct([*_consts(producer), *_consts(consumer)])
    mapped = _distinct([*_mapped(producer), *(a for a in _mapped(consumer) if a not in made)])
    operands = [*consts, *mapped]
    f, a = producer.params["body"], consumer.params["body"]
    element_types = [*(c.type for c in consts),
                     *f.in_types[producer.params["num_consts"]:],
                     *a.in_types[consumer.params["num_consts"]:]]
    # an operand's element type, found where a lambda takes it
    types = dict(zip(map(id, [*consts, *_mapped(producer), *_mapped(consumer)]),
                     element_types))

    def lambda_of_both(*args: Any) -> tuple:
        value = dict(zip(map(id, operands), args))
        ys = dict(zip(producer.outputs, inline(f, [value[id(x)] for x in producer.inputs])))
        return tuple(inline(a, [ys[x] if x in ys else value[id(x)] for x in consumer.inputs]))

    body = simplify(trace(lambda_of_both, *(types[id(x)] for x in operands), name=a.name))
    params = {**consumer.params, "body": body, "num_consts": len(consts)}
    return Eqn(consumer.primitive, tuple(operands), consumer.outputs, params)


def _distinct(atoms: Sequence[Atom]) -> list[Atom]:
    """``atoms`` without repeats (the same var read by both maps is one operand)."""
    first = {}
    for atom in atoms:
        first.setdefault(id(atom), atom)
    return list(first.values())
