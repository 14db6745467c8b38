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

from collections.abc import Sequence
from typing import Any

from ..core import Atom, Eqn, Program, Var
from ..interpreter import inline
from ..tracer import _is_effectful, trace
from ..types import Tensor
from .simplify import simplify


def fuse_maps(program: Program) -> Program:
    """``program`` with each map whose results only one later map reads, element by
    element, fused into that map (top level; applied until none is left)."""
    eqns = list(program.eqns)
    changed = False
    while True:
        pair = _fusable_pair(eqns, program.outputs)
        if pair is None:
            break
        producer, consumer = pair
        eqns[consumer] = _fused(eqns[producer], eqns[consumer])
        del eqns[producer]
        changed = True
    return program.with_eqns(eqns) if changed else program


def _fusable_pair(eqns: Sequence[Eqn], outputs: Sequence[Atom]) -> tuple[int, int] | None:
    """(producer, consumer) indices of the first map pair to fuse, or None."""
    readers: dict[Var, set[int]] = {}
    for k, eqn in enumerate(eqns):
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                readers.setdefault(atom, set()).add(k)
    returned = {a for a in outputs if isinstance(a, Var)}
    for k, eqn in enumerate(eqns):
        if not _scalar_map(eqn):
            continue
        read = [v for v in eqn.outputs if v in readers or v in returned]
        if not read or any(v in returned for v in read):
            continue
        consumers = set().union(*(readers[v] for v in read))
        if len(consumers) != 1:
            continue
        (consumer,) = consumers
        if _scalar_map(eqns[consumer]) and not set(read) & set(_consts(eqns[consumer])):
            return k, consumer
    return None


def straight_line_on_scalars(body: Program) -> bool:
    """Whether ``body`` is straight-line code on scalars: no sub-programs (loops, branches,
    maps), every value it makes of rank 0."""
    return all(not eqn.primitive.subprogram_params
               and all(isinstance(v.type, Tensor) and v.type.shape == () for v in eqn.outputs)
               for eqn in body.eqns)


def _scalar_map(eqn: Eqn) -> bool:
    return (eqn.primitive.name == "map" and not _is_effectful(eqn.primitive, eqn.params)
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
