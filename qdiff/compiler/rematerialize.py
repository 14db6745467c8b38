"""Rematerialization: every fused reader of a broadcast gets its own copy of it.

A broadcast (``broadcast_in_dim``, ``iota``, a slice, concatenation or zero padding that
coarsening takes into loop nests, and reshapes of them) costs one load per element inside
a loop nest, while storing it costs a full array written once and read back
by each later nest. Reverse mode reads the same broadcast in the primal's nest and again in
the adjoint's (``x[:, None, :] - c[None, :, :]`` in k-means or GMM: two (n, k, d) arrays),
so left shared, coarsening has to store it. Rewrite rule, for ``b`` such a chain and ``r``
a reader that joins loop nests (elementwise, elementwise ``map``, reduction)::

    b = broadcast(x); …; y = r(b, …)
  ⇒
    b = broadcast(x); …; b' = broadcast(x); y = r(b', …)

The copy sits just before its reader, so it joins the reader's nest and no array of the
broadcast's size is ever written; the original stays for readers that need the array
(BLAS products, gathers) and is dropped when none is left.
"""

from __future__ import annotations

from ..ir.core import Eqn, Program, Var
from .fusion import member_kind

# readers that evaluate an operand element by element at their own position
_ELEMENT_READERS = {"elementwise", "reduction"}


def _is_broadcast(eqn: Eqn, chains: dict[Var, Eqn]) -> bool:
    name = eqn.primitive.name
    if member_kind(eqn) in ("index", "window"):
        return True
    return name == "reshape" and isinstance(eqn.inputs[0], Var) and eqn.inputs[0] in chains \
        and bool(eqn.outputs[0].type.shape)


def rematerialize(program: Program) -> Program:
    """``program`` with a private copy of each broadcast chain before every fused reader.

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x, c: qnp.sum((x[:, None] - c[None, :]) ** 2)
    ...                 + qnp.sum(x[:, None] * c[None, :]), np.ones(3), np.ones(2))
    >>> [e.primitive.name for e in rematerialize(p).eqns].count("broadcast_in_dim")
    4
    """
    chains: dict[Var, Eqn] = {}  # broadcast value -> its equation
    for eqn in program.eqns:
        if _is_broadcast(eqn, chains):
            chains[eqn.outputs[0]] = eqn
    if not chains:
        return program
    result: list[Eqn] = []
    for eqn in program.eqns:
        if eqn.outputs and eqn.outputs[0] in chains \
                or member_kind(eqn) not in _ELEMENT_READERS \
                or not any(isinstance(a, Var) and a in chains for a in eqn.inputs):
            result.append(eqn)
            continue
        copies: dict[Var, Var] = {}
        inputs = tuple(_copy(a, chains, copies, result) if isinstance(a, Var) else a
                       for a in eqn.inputs)
        result.append(Eqn(eqn.primitive, inputs, eqn.outputs, eqn.params))
    return program.with_eqns(_without_dead_broadcasts(result, program, chains))


def _copy(var: Var, chains: dict[Var, Eqn], copies: dict[Var, Var], out: list[Eqn]) -> Var:
    """A fresh copy of ``var``'s broadcast chain appended to ``out`` (``var`` itself when it
    is no broadcast)."""
    if var not in chains:
        return var
    if var not in copies:
        eqn = chains[var]
        inputs = tuple(_copy(a, chains, copies, out) if isinstance(a, Var) else a
                       for a in eqn.inputs)
        copies[var] = Var(var.type)
        out.append(Eqn(eqn.primitive, inputs, (copies[var],), eqn.params))
    return copies[var]


def _without_dead_broadcasts(eqns: list[Eqn], program: Program,
                             chains: dict[Var, Eqn]) -> list[Eqn]:
    read = {a for a in program.outputs if isinstance(a, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(eqns):
        if eqn.outputs and eqn.outputs[0] in chains and eqn.outputs[0] not in read:
            continue
        kept.append(eqn)
        read.update(a for a in eqn.inputs if isinstance(a, Var))
    return kept[::-1]
