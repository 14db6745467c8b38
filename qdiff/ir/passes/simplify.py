"""Simplification: identity folding, common subexpressions and dead code.

Derivative programs are generated mechanically; this pass makes them readable and cheaper:
``x * 1`` and ``x + 0`` (with literal all-ones / all-zeros operands of x's type) become
``x``; equations repeating an earlier one (same primitive, operands and params) reuse its
outputs; equations whose outputs nobody reads are dropped unless they have effects. Sub-
programs are simplified too. Constant folding already happens while tracing (`bind`
evaluates primitives whose operands are all constants).

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: (qnp.sin(x) * 1.0 + qnp.sin(x), qnp.cos(x))[0], np.zeros(2))
>>> [e.primitive.name for e in simplify(p).eqns]
['sin', 'add']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import Atom, Eqn, Literal, Program, Var
from ..tracer import _is_effectful

_IDENTITY = {"mul": 1, "add": 0}


def simplify(program: Program) -> Program:
    """A smaller program computing the same outputs."""
    renamed: dict[Var, Atom] = {}
    seen: dict[Any, tuple[Var, ...]] = {}
    eqns: list[Eqn] = []

    def read(atom: Atom) -> Atom:
        return renamed.get(atom, atom) if isinstance(atom, Var) else atom

    for eqn in program.eqns:
        inputs = tuple(read(a) for a in eqn.inputs)
        params = {k: (_simplify_param(v) if k in eqn.primitive.subprogram_params else v)
                  for k, v in eqn.params.items()}
        same = _identity_operand(eqn, inputs)
        if same is not None:
            renamed[eqn.outputs[0]] = same
            continue
        key = _key(eqn, inputs, params)
        if key is not None and key in seen:
            renamed.update(zip(eqn.outputs, seen[key]))
            continue
        if key is not None:
            seen[key] = eqn.outputs
        eqns.append(Eqn(eqn.primitive, inputs, eqn.outputs, params))
    outputs = tuple(read(a) for a in program.outputs)
    return Program(program.inputs, tuple(_live(eqns, outputs)), outputs, name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)


def _simplify_param(value: Any) -> Any:
    if isinstance(value, Program):
        return simplify(value)
    return tuple(simplify(p) for p in value)


def _identity_operand(eqn: Eqn, inputs: tuple[Atom, ...]) -> Atom | None:
    unit = _IDENTITY.get(eqn.primitive.name)
    if unit is None:
        return None
    out_type = eqn.outputs[0].type
    for k, atom in enumerate(inputs):
        other = inputs[1 - k]
        if isinstance(atom, Literal) and np.all(atom.value == unit) and other.type == out_type:
            return other
    return None


def _atom_key(atom: Atom) -> Any:
    if isinstance(atom, Var):
        return ("var", id(atom))
    if atom.value.size > 64:
        return None
    return ("literal", atom.type, atom.value.tobytes())


def _key(eqn: Eqn, inputs: tuple[Atom, ...], params: dict) -> Any:
    if eqn.primitive.subprogram_params or _is_effectful(eqn.primitive, params):
        return None
    if any(isinstance(v, np.ndarray) for v in params.values()):
        return None
    atoms = tuple(_atom_key(a) for a in inputs)
    if any(a is None for a in atoms):
        return None
    key = (eqn.primitive.name, atoms, tuple(sorted(params.items())))
    try:
        hash(key)
    except TypeError:  # an unhashable param
        return None
    return key


def _live(eqns: list[Eqn], outputs: tuple[Atom, ...]) -> list[Eqn]:
    needed = {a for a in outputs if isinstance(a, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(eqns):
        if any(v in needed for v in eqn.outputs) or _is_effectful(eqn.primitive, eqn.params):
            kept.append(eqn)
            needed.update(a for a in eqn.inputs if isinstance(a, Var))
    return kept[::-1]
