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

The same holds for a cheap elementwise equation (`CHEAP`: additions, subtractions,
multiplications, negations, or an elementwise ``map`` of only those) whose array operands
are all such chains, at most `CHAIN_MAX_DEPTH` of them deep: GMM's x_i − μ_k and
exp(q_k) ⊙ (x_i − μ_k), which a derivative's forward sweep computes once in a ``map`` and
its reverse nests read, are computed again by each nest (a contraction's nest computes them
again at each summed position, `fusion.Group.recomputable`) instead of being stored as two
(n, K, d) arrays and read back. Contractions inside nests are fused readers too.

A contraction inside nests (`fusion.member_kind` "contraction") summing at least
`RECOMPUTED_CONTRACTION_MIN` (8) products is copied the same way, so each nest that reads it
computes it (a tile of points at a time, one BLAS product, `tiles.py`) instead of one nest
storing it for the others: GMM's row products L_k (x_i − μ_k), which the gradient's forward
nest stored, an (n, K, d) array (1 GB at d=64, n=10000), for its reverse nest to read, are
computed again by the reverse nest (the gradient took half the time at full size). It
counts as a chain `CHAIN_MAX_DEPTH` deep, so the elementwise equations over it stay single
(computed once, by their own nest).
"""

from __future__ import annotations

from ..ir.core import Eqn, Program, Var
from .fusion import ROW_TILE_MIN, member_kind, summed_size

# readers that evaluate an operand element by element (a contraction: at the positions it
# sums over) inside their own loop nest
_ELEMENT_READERS = {"elementwise", "reduction", "contraction", "point_product"}

# elementwise primitives cheaper to compute again at each read than to store and load
CHEAP = {"add", "sub", "mul", "neg"}

# how many cheap elementwise equations deep a recomputed chain may be (reshapes and
# broadcasts not counted)
CHAIN_MAX_DEPTH = 2

# products summed per element from which a contraction inside nests is computed again by
# each nest that reads it rather than stored: the width from which nests compute it as tile
# products (`fusion.ROW_TILE_MIN`). Measured on GMM's gradient (README): at d = 64 and at
# d = 10 the reverse nest's tile product costs less than writing the (n, K, d) result and
# reading it back
RECOMPUTED_CONTRACTION_MIN = ROW_TILE_MIN


def _cheap(eqn: Eqn) -> bool:
    """Whether ``eqn`` is a cheap elementwise array equation (`CHEAP`, or an elementwise
    ``map`` of them)."""
    if member_kind(eqn) != "elementwise":
        return False
    if eqn.primitive.name == "map":
        return all(e.primitive.name in CHEAP for e in eqn.params["body"].eqns)
    return eqn.primitive.name in CHEAP


def _chain_depth(eqn: Eqn, chains: dict[Var, Eqn], depth: dict[Eqn, int]) -> int | None:
    """How many cheap elementwise equations deep ``eqn`` makes a chain (0: a broadcast or
    a reshape of a chain), or None when it makes none."""
    kind = member_kind(eqn)
    if kind in ("index", "window"):
        return 0
    if kind == "alias":  # a reshape
        return depth[chains[eqn.inputs[0]]] if eqn.inputs[0] in chains else None
    if kind == "contraction" and summed_size(eqn) >= RECOMPUTED_CONTRACTION_MIN:
        return CHAIN_MAX_DEPTH
    if not _cheap(eqn):
        return None
    arrays = [a for a in eqn.inputs if isinstance(a, Var) and a.type.shape]
    if not arrays or any(a not in chains for a in arrays):
        return None
    deepest = 1 + max(depth[chains[a]] for a in arrays)
    return deepest if deepest <= CHAIN_MAX_DEPTH else None


def rematerialize(program: Program, point_products: bool = False) -> Program:
    """``program`` with a private copy of each broadcast chain before every fused reader
    (``point_products``: whether point products are fused readers, `fusion.member_kind`).

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x, c: qnp.sum((x[:, None] - c[None, :]) ** 2)
    ...                 + qnp.sum(x[:, None] * c[None, :]), np.ones(3), np.ones(2))
    >>> [e.primitive.name for e in rematerialize(p).eqns].count("broadcast_in_dim")
    4
    """
    chains: dict[Var, Eqn] = {}  # value of a broadcast or cheap chain -> its equation
    depth: dict[Eqn, int] = {}
    for eqn in program.eqns:
        made = _chain_depth(eqn, chains, depth)
        if made is not None:
            depth[eqn] = made
            chains.update(dict.fromkeys(eqn.outputs, eqn))
    if not chains:
        return program
    result: list[Eqn] = []
    for eqn in program.eqns:
        if eqn.outputs and eqn.outputs[0] in chains \
                or member_kind(eqn, point_products) not in _ELEMENT_READERS \
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
        outputs = tuple(Var(v.type) for v in eqn.outputs)
        copies.update(zip(eqn.outputs, outputs))
        out.append(Eqn(eqn.primitive, inputs, outputs, eqn.params))
    return copies[var]


def _without_dead_broadcasts(eqns: list[Eqn], program: Program,
                             chains: dict[Var, Eqn]) -> list[Eqn]:
    read = {a for a in program.outputs if isinstance(a, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(eqns):
        if eqn.outputs and eqn.outputs[0] in chains and not read.intersection(eqn.outputs):
            continue
        kept.append(eqn)
        read.update(a for a in eqn.inputs if isinstance(a, Var))
    return kept[::-1]
