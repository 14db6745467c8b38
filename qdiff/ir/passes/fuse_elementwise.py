"""Elementwise fusion: a chain of elementwise equations becomes one `map`.

Rewrite rule. Let ``e_1 … e_k`` (k ≥ 2, in program order) be elementwise equations (the
rows of `qdiff.classical.elementwise`, ``select`` and ``convert``) whose results all have
one shape S with at least one axis, connected through their results, such that no equation
outside the group reads a group result before ``e_k``. With ``n = prod(S)``::

    y_1 = e_1(…); …; y_k = e_k(…)
  ⇒
    x'_j = reshape[(n,)](x_j)      each operand of shape S that the group reads but does not make
    y'   = map[body, c](*consts, *x')
    y_i  = reshape[S](y'_i)        each exported result

``body(*consts, *x_scalars)`` runs ``e_1 … e_k`` on scalars. Rank-0 operands (the ones
elementwise primitives broadcast) become the map's consts when they are vars and stay
literals inside the body when they are literals. The exported results are those read
outside the group or returned: an intermediate result used elsewhere is written out by the
map as an extra output, never recomputed. 1-D groups need no reshapes; the reshapes of
rank-k groups only relabel the shape, so the whole chain is one pass over the elements,
and so is its derivative (the map's rules differentiate the lambda as a whole). The map
stands where ``e_k`` stood, which is after all the group's operands are defined and before
any outside reader of its results.

Left alone: rank-0 chains (already a single pass; a length-1 map would only add work),
groups with no float or complex result (index arithmetic, masks), and, inside sub-programs,
an ``add``/``sub`` that updates a carried input (``x' = x + f(…)``), so that loop reversal
still recognizes increment-only carries (`qdiff.loops.increments`). Sub-programs (loop
bodies, branches, map lambdas) are fused too.

>>> import qdiff, qdiff.numpy as qnp
>>> f = lambda x, y: qnp.sum(qnp.exp(qnp.sin(x) * y) + x)
>>> x, y = np.array([0.5, 1.0, -2.0]), np.array([1.0, 2.0, 3.0])
>>> p = qdiff.trace(f, x, y)
>>> fused = fuse_elementwise(p)
>>> [e.primitive.name for e in fused.eqns]
['map', 'reduce_sum']
>>> [e.primitive.name for e in fused.eqns[0].params["body"].eqns]
['sin', 'mul', 'exp', 'add']
>>> bool(np.isclose(fused(x, y), p(x, y)))
True
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..core import Atom, Eqn, Literal, Program, Var
from ..primitives import get_primitive
from ..types import Tensor

_INCREMENTS = ("add", "sub")


def fuse_elementwise(program: Program) -> Program:
    """``program`` with its chains of elementwise equations fused into `map` equations.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.tanh(2.0 * x) + 1.0, np.zeros((2, 3)))
    >>> print(fuse_elementwise(p))  # doctest: +NORMALIZE_WHITESPACE
    program <lambda>(a: f64[2,3]) -> f64[2,3] {
      b: f64[6] = reshape[shape=(6,)] a
      c: f64[6] = map[num_consts=0] b
        body(d: f64[]) -> f64[] {
          e: f64[] = mul 2.0 d
          f: f64[] = tanh e
          g: f64[] = add f 1.0
          return g
        }
      h: f64[2,3] = reshape[shape=(2, 3)] c
      return h
    }
    """
    return _fuse(program, nested=False)


def count_primitives(program: Program, name: str) -> int:
    """How many equations apply primitive ``name``, sub-programs included.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.sum(qnp.sin(x) * qnp.cos(x)), np.zeros(4))
    >>> count_primitives(p, "sin"), count_primitives(fuse_elementwise(p), "map")
    (1, 1)
    """
    total = 0
    for eqn in program.eqns:
        total += eqn.primitive.name == name
        total += sum(count_primitives(sub, name) for _, sub in eqn.subprograms())
    return total


def _fuse(program: Program, nested: bool) -> Program:
    eqns = [_fuse_subprograms(eqn) for eqn in program.eqns]
    groups = _groups(eqns, program, nested)
    if not groups:
        if all(a is b for a, b in zip(eqns, program.eqns)):
            return program
        return _rebuild(program, eqns)
    last_of = {members[-1]: members for members in groups}
    member = {i for members in groups for i in members}
    readers = _outside_reads(eqns, program, groups)
    fused: list[Eqn] = []
    for i, eqn in enumerate(eqns):
        if i in last_of:
            members = last_of[i]
            exported = [eqns[k].outputs[0] for k in members if eqns[k].outputs[0] in readers]
            if exported:
                fused.extend(_fused_eqns([eqns[k] for k in members], exported))
            else:  # dead code: left for `simplify` to drop
                fused.extend(eqns[k] for k in members)
        elif i not in member:
            fused.append(eqn)
    return _rebuild(program, fused)


def _rebuild(program: Program, eqns: Sequence[Eqn]) -> Program:
    return Program(program.inputs, tuple(eqns), program.outputs, name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)


def _fuse_subprograms(eqn: Eqn) -> Eqn:
    return eqn.map_subprograms(lambda body: _fuse(body, nested=True))


def _candidate(eqn: Eqn) -> bool:
    if not eqn.primitive.elementwise:
        return False
    out = eqn.outputs[0].type
    return isinstance(out, Tensor) and out.ndim >= 1 and out.np_dtype.kind in "fcb"


def _is_increment(eqn: Eqn, program: Program) -> bool:
    """``out = x + f`` / ``out = x - f`` with x an input and out an output of ``program``."""
    if eqn.primitive.name not in _INCREMENTS:
        return False
    inputs = set(program.inputs)
    return (any(o is eqn.outputs[0] for o in program.outputs)
            and any(isinstance(a, Var) and a in inputs for a in eqn.inputs))


def _groups(eqns: list[Eqn], program: Program, nested: bool) -> list[list[int]]:
    """The equation indices of each group to fuse (sorted), found greedily in program order.

    A group stays open while no equation outside it has read one of its results; an
    elementwise equation of the group's shape joins every open group it reads (merging
    them). Reading a result from outside closes the group, so its map, placed at its last
    equation, precedes every outside reader.
    """
    parent: dict[int, int] = {}
    is_open: dict[int, bool] = {}
    made_by: dict[Var, int] = {}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, eqn in enumerate(eqns):
        joins = (_candidate(eqn)
                 and not (nested and _is_increment(eqn, program)))
        shape = eqn.outputs[0].type.shape if joins else None
        read = {find(made_by[a]) for a in eqn.inputs if isinstance(a, Var) and a in made_by}
        joined = set()
        for root in read:
            if joins and is_open[root] and eqns[root].outputs[0].type.shape == shape:
                joined.add(root)
            else:
                is_open[root] = False
        if not joins:
            continue
        parent[i] = i
        is_open[i] = True
        made_by[eqn.outputs[0]] = i
        for root in joined:
            parent[root] = i
    members: dict[int, list[int]] = {}
    for i in parent:
        members.setdefault(find(i), []).append(i)
    return [sorted(group) for group in members.values()
            if len(group) >= 2 and any(eqns[k].outputs[0].type.np_dtype.kind in "fc"
                                       for k in group)]


def _outside_reads(eqns: list[Eqn], program: Program, groups: list[list[int]]) -> set[Var]:
    """Group results read by an equation of another group, an unfused one, or returned."""
    group_of = {i: g for g, members in enumerate(groups) for i in members}
    made_in = {eqns[i].outputs[0]: g for i, g in group_of.items()}
    read: set[Var] = {a for a in program.outputs if isinstance(a, Var) and a in made_in}
    for i, eqn in enumerate(eqns):
        for a in eqn.inputs:
            if isinstance(a, Var) and a in made_in and group_of.get(i) != made_in[a]:
                read.add(a)
    return read


def _fused_eqns(members: list[Eqn], exported: list[Var]) -> list[Eqn]:
    """The reshapes, the map and the reshapes back that replace one group."""
    shape = members[0].outputs[0].type.shape
    n = int(np.prod(shape, dtype=np.int64))
    flat = len(shape) != 1
    inner: dict[Atom, Var] = {}
    consts: list[Var] = []
    mapped: list[Atom] = []
    body_eqns: list[Eqn] = []
    for eqn in members:
        operands: list[Atom] = []
        for atom in eqn.inputs:
            if atom in inner:
                operands.append(inner[atom])
            elif isinstance(atom, Literal) and atom.type.shape == ():
                operands.append(atom)
            else:
                scalar = Var(Tensor((), atom.type.dtype))
                inner[atom] = scalar
                (consts if atom.type.shape == () else mapped).append(atom)
                operands.append(scalar)
        out = eqn.outputs[0]
        inner[out] = Var(Tensor((), out.type.dtype))
        body_eqns.append(Eqn(eqn.primitive, tuple(operands), (inner[out],), dict(eqn.params)))
    body = Program(tuple(inner[a] for a in (*consts, *mapped)), tuple(body_eqns),
                   tuple(inner[v] for v in exported), name="fused")
    reshape = get_primitive("reshape")
    before: list[Eqn] = []
    after: list[Eqn] = []
    flat_inputs: list[Atom] = []
    for atom in mapped:
        if not flat:
            flat_inputs.append(atom)
        elif isinstance(atom, Literal):
            flat_inputs.append(Literal(atom.value.reshape(n), Tensor((n,), atom.type.dtype)))
        else:
            v = Var(Tensor((n,), atom.type.dtype))
            before.append(Eqn(reshape, (atom,), (v,), {"shape": (n,)}))
            flat_inputs.append(v)
    outputs: list[Var] = []
    for v in exported:
        if not flat:
            outputs.append(v)
            continue
        flat_out = Var(Tensor((n,), v.type.dtype))
        after.append(Eqn(reshape, (flat_out,), (v,), {"shape": shape}))
        outputs.append(flat_out)
    fused = Eqn(get_primitive("map"), (*consts, *flat_inputs), tuple(outputs),
                {"body": body, "num_consts": len(consts)})
    return [*before, fused, *after]
