"""Sums of linear functions of contractions: the sum moves onto the contraction's operand.

A sum over axes of a contraction's result, where each summed index is carried by one
operand only, equals the contraction of that operand summed first; and a sum of an
elementwise function affine in the contraction's result (a number times it, plus terms that
do not read it) splits into the sum of those terms and the number times that sum::

    e = einsum("kij,nki->nkj", L, t); y = f(u..) + c·e (elementwise); s = Σ_n y
  ⇒
    s = Σ_n f(u..) + c · einsum("kij,ki->kj", L, Σ_n t)

Reverse mode makes this shape wherever a parameter broadcast over points goes through a
linear map: GMM's μ̄_k = −Σ_n (Q_kᵀ t̄_nk), one d×d product per point and component, is
−Q_kᵀ Σ_n t̄_nk, one per component. The contraction over points is gone; the sum of its
operand joins the loop nest that makes it (a register or row per component). Sums are
taken in another order, so results agree to rounding.

The rewrite applies when the contraction's result is read by one elementwise ``map`` (or
one ``reduce_sum``), directly or through a reshape, and every output of that ``map`` that
depends on it is affine in it with a constant coefficient (additions, subtractions,
negations, and products or quotients by literals; a product by any value whose coefficient
is 0) and is read only by a ``reduce_sum`` of the contraction's shape over indices that
one operand alone carries, with at least one index of each operand left. The numbers are
kept, 0 included, so an infinite or NaN term still makes the sum NaN or infinite.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..classical.linalg import parse_spec
from ..ir.core import Atom, Eqn, Literal, Program, Var
from ..ir.primitives import get_primitive
from ..ir.types import Tensor
from .analysis import readers
from .fusion import elementwise_map


@dataclass(frozen=True)
class Affine:
    """A lambda value as ``coefficient · h + rest`` (``rest`` None: zero)."""

    coefficient: float
    rest: Atom | None


class _NotAffine(Exception):
    pass


def new_eqn(name: str, inputs: Sequence[Atom], out: Tensor, params: dict | None = None) -> Eqn:
    """An equation of primitive ``name`` making a new value of type ``out``."""
    return Eqn(get_primitive(name), tuple(inputs), (Var(out),), params or {})


def scalar(value: float, dtype: str) -> Literal:
    """``value`` as a scalar literal of ``dtype``."""
    return Literal(np.asarray(value, dtype=dtype))


def _combine(name: str, a: Atom | None, b: Atom | None, out: Tensor,
             eqns: list[Eqn]) -> Atom | None:
    """``a name b`` for name add or sub, where None is zero."""
    if b is None:
        return a
    if a is None:
        if name == "add":
            return b
        eqns.append(new_eqn("neg", (b,), out))
        return eqns[-1].outputs[0]
    eqns.append(new_eqn(name, (a, b), out))
    return eqns[-1].outputs[0]


def _scaled(name: str, rest: Atom | None, other: Atom, out: Tensor, order: tuple[int, int],
            eqns: list[Eqn]) -> Atom | None:
    if rest is None:
        return None
    operands = (rest, other)
    eqns.append(new_eqn(name, (operands[order[0]], operands[order[1]]), out))
    return eqns[-1].outputs[0]


def _affine_step(eqn: Eqn, forms: dict[Var, Affine], eqns: list[Eqn]) -> Affine:
    """The affine form of ``eqn``'s output given those of its operands (new equations for
    the rest appended to ``eqns``); `_NotAffine` when it is none."""
    name = eqn.primitive.name
    out = eqn.outputs[0].type

    def form(atom: Atom) -> tuple[Affine, bool]:
        if isinstance(atom, Var) and atom in forms:
            return forms[atom], True
        return Affine(0.0, atom), False

    if name in ("add", "sub"):
        (a, _), (b, _) = map(form, eqn.inputs)
        sign = 1.0 if name == "add" else -1.0
        return Affine(a.coefficient + sign * b.coefficient,
                      _combine(name, a.rest, b.rest, out, eqns))
    if name == "neg":
        (a, _), = map(form, eqn.inputs)
        return Affine(-a.coefficient, _combine("sub", None, a.rest, out, eqns))
    if name in ("mul", "div"):
        (a, a_dep), (b, b_dep) = map(form, eqn.inputs)
        if a_dep and b_dep or name == "div" and b_dep:
            raise _NotAffine
        dep, other, order = (a, eqn.inputs[1], (0, 1)) if a_dep else (b, eqn.inputs[0], (1, 0))
        if isinstance(other, Literal):
            factor = float(other.value)
            coefficient = dep.coefficient / factor if name == "div" else dep.coefficient * factor
        elif dep.coefficient == 0.0:
            coefficient = 0.0
        else:
            raise _NotAffine
        return Affine(coefficient, _scaled(name, dep.rest, other, out, order, eqns))
    raise _NotAffine


def affine_outputs(body: Program, params: set[Var]) -> tuple[list[Eqn], list[Affine | None]]:
    """The lambda ``body``'s outputs as affine forms in the value its ``params`` receive
    (None: an output that does not depend on it), and the equations computing their rests
    (the body's equations that do not read it, then the new ones, in order).

    >>> import numpy as np, qdiff
    >>> p = qdiff.trace(lambda h, u: u * u - 2.0 * h, 1.0, 1.0)
    >>> _, forms = affine_outputs(p, {p.inputs[0]})
    >>> forms[0].coefficient
    -2.0
    """
    forms: dict[Var, Affine] = {p: Affine(1.0, None) for p in params}
    eqns: list[Eqn] = []
    for eqn in body.eqns:
        if any(isinstance(a, Var) and a in forms for a in eqn.inputs):
            if len(eqn.outputs) != 1:
                raise _NotAffine
            forms[eqn.outputs[0]] = _affine_step(eqn, forms, eqns)
        else:
            eqns.append(eqn)
    return eqns, [forms.get(a) if isinstance(a, Var) else None for a in body.outputs]


@dataclass
class _Sum:
    """A ``reduce_sum`` of an affine output: its equation and the equations between."""

    output: int
    path: list[Eqn]  # an optional reshape, then the reduce_sum


def _pushable(einsum: Eqn, axes: tuple[int, ...]) -> bool:
    a, b, out = parse_spec(einsum.params["spec"])
    summed = {out[i] for i in axes}
    return (all((s in a) != (s in b) for s in summed)
            and bool(set(a) - summed) and bool(set(b) - summed))


def _pushed(einsum: Eqn, axes: tuple[int, ...], out: Tensor, eqns: list[Eqn]) -> Var:
    """``Σ_axes einsum(x, y)`` as the einsum of its operands summed over their own indices
    among ``axes`` (equations appended to ``eqns``)."""
    a, b, spec_out = parse_spec(einsum.params["spec"])
    summed = {spec_out[i] for i in axes}
    operands = []
    for term, operand in zip((a, b), einsum.inputs):
        positions = tuple(i for i, s in enumerate(term) if s in summed)
        if positions:
            kept = tuple(d for i, d in enumerate(operand.type.shape) if i not in positions)
            eqns.append(new_eqn("reduce_sum", (operand,), Tensor(kept, operand.type.dtype),
                             {"axes": positions}))
            operand = eqns[-1].outputs[0]
        operands.append(operand)
    spec = ",".join("".join(s for s in t if s not in summed) for t in (a, b))
    spec += "->" + "".join(s for s in spec_out if s not in summed)
    eqns.append(new_eqn("einsum", operands, out, {"spec": spec}))
    return eqns[-1].outputs[0]


class Readers:
    """The equations reading each value of a program, and the equations' positions."""

    def __init__(self, program: Program):
        self.of = readers(program)   # None among them: the program returns the value
        self.position = {eqn: i for i, eqn in enumerate(program.eqns)}

    def only(self, var: Var) -> Eqn | None:
        """The one equation that reads ``var``, where nothing else (the program's outputs
        included) does."""
        found = self.of.get(var, [])
        return found[0] if len(found) == 1 else None


def sum_of(var: Var, shape: tuple[int, ...], readers: Readers) -> list[Eqn] | None:
    """The equations from ``var`` to its one reader ``reduce_sum`` over an array of
    ``shape`` (through one reshape to it), or None."""
    path = []
    reader = readers.only(var)
    if reader is not None and reader.primitive.name == "reshape" and var.type.shape != shape:
        path.append(reader)
        reader = readers.only(reader.outputs[0])
    if reader is None or reader.primitive.name != "reduce_sum" \
            or reader.inputs[0].type.shape != shape:
        return None
    return path + [reader]


@dataclass
class _Rewrite:
    einsum: Eqn
    dropped: set[Eqn]                # the einsum, its reshape, the map
    replacement: dict[Eqn, list[Eqn]]  # an equation -> what takes its place


def _plan(einsum: Eqn, readers: Readers) -> _Rewrite | None:
    """How to rewrite the sums of one einsum's affine readers, or None."""
    e = einsum.outputs[0]
    if not (isinstance(e.type, Tensor) and e.type.np_dtype.kind == "f"):
        return None
    shape = e.type.shape
    reader = readers.only(e)
    h, dropped = e, {einsum}
    if reader is not None and reader.primitive.name == "reshape":
        h, dropped = reader.outputs[0], {einsum, reader}
        reader = readers.only(h)
    if reader is None:
        return None
    if reader.primitive.name == "reduce_sum" and reader.inputs[0] is e:
        axes = reader.params["axes"]
        if not _pushable(einsum, axes):
            return None
        eqns: list[Eqn] = []
        _pushed(einsum, axes, reader.outputs[0].type, eqns)
        eqns[-1] = Eqn(eqns[-1].primitive, eqns[-1].inputs, reader.outputs, eqns[-1].params)
        return _Rewrite(einsum, dropped, {reader: eqns})
    if not elementwise_map(reader):
        return None
    body: Program = reader.params["body"]
    consts = reader.params["num_consts"]
    positions = [i for i, a in enumerate(reader.inputs) if a is h]
    if any(i < consts for i in positions):
        return None
    try:
        body_eqns, forms = affine_outputs(body, {body.inputs[i] for i in positions})
    except _NotAffine:
        return None
    sums: list[_Sum] = []
    for k, form in enumerate(forms):
        if form is None:
            continue
        path = sum_of(reader.outputs[k], shape, readers)
        if path is None or not _pushable(einsum, path[-1].params["axes"]):
            return None
        sums.append(_Sum(k, path))
    if not sums:
        return None
    sums.sort(key=lambda s: readers.position[s.path[-1]])  # the first one makes the einsum
    return _split(einsum, reader, h, body, body_eqns, forms, sums, dropped)


def _split(einsum: Eqn, mapped: Eqn, h: Var, body: Program, body_eqns: list[Eqn],
           forms: list[Affine | None], sums: list[_Sum], dropped: set[Eqn]) -> _Rewrite:
    """The map computing the rests, and each sum as the rest's sum plus the number times
    the pushed einsum."""
    affine = {s.output for s in sums}
    kept_outputs = [k for k in range(len(forms))
                    if k not in affine or forms[k].rest is not None]
    body_outputs = [forms[k].rest if k in affine else body.outputs[k] for k in kept_outputs]
    kept_inputs = [i for i, a in enumerate(mapped.inputs) if a is not h]
    new_body = Program(tuple(body.inputs[i] for i in kept_inputs), tuple(body_eqns),
                       tuple(body_outputs), name=body.name)
    new_map = Eqn(mapped.primitive, tuple(mapped.inputs[i] for i in kept_inputs),
                  tuple(mapped.outputs[k] for k in kept_outputs),
                  {**mapped.params, "body": new_body})
    replacement: dict[Eqn, list[Eqn]] = {mapped: [new_map]}
    pushed: dict[tuple[int, ...], Var] = {}
    for s in sums:
        total = s.path[-1]
        axes, out = total.params["axes"], total.outputs[0].type
        eqns: list[Eqn] = []
        if axes not in pushed:
            pushed[axes] = _pushed(einsum, axes, out, eqns)
        coefficient = scalar(forms[s.output].coefficient, out.dtype)
        if forms[s.output].rest is None:
            eqns.append(Eqn(get_primitive("mul"), (coefficient, pushed[axes]), total.outputs, {}))
            replacement.update({e: [] for e in s.path[:-1]})
        else:
            rest_sum, term = Var(out), Var(out)
            eqns.insert(0, Eqn(total.primitive, total.inputs, (rest_sum,), total.params))
            eqns.append(Eqn(get_primitive("mul"), (coefficient, pushed[axes]), (term,), {}))
            eqns.append(Eqn(get_primitive("add"), (rest_sum, term), total.outputs, {}))
        replacement[total] = eqns
    return _Rewrite(einsum, dropped, replacement)


def push_sums_into_contractions(program: Program) -> Program:
    """``program`` with each sum of an affine function of a contraction's result over
    indices one operand carries taken over that operand first (see the module's text).

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> from qdiff.ir.passes import fuse_elementwise
    >>> def f(w, t, u):
    ...     return qnp.sum(u * u - 2.0 * qnp.einsum("ij,nj->ni", w, t), axis=0)
    >>> rng = np.random.default_rng(0)
    >>> args = (rng.normal(size=(3, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 3)))
    >>> p = fuse_elementwise(qdiff.trace(f, *args))
    >>> q = push_sums_into_contractions(p)
    >>> [e.params["spec"] for e in q.eqns if e.primitive.name == "einsum"]
    ['ij,j->i']
    >>> bool(np.allclose(q(*args), p(*args)))
    True
    """
    readers = Readers(program)
    dropped: set[Eqn] = set()
    replacement: dict[Eqn, list[Eqn]] = {}
    for eqn in program.eqns:
        if eqn.primitive.name != "einsum" or eqn in dropped:
            continue
        rewrite = _plan(eqn, readers)
        if rewrite is None or set(rewrite.replacement) & (dropped | set(replacement)):
            continue
        dropped |= rewrite.dropped
        replacement.update(rewrite.replacement)
    if not dropped:
        return program
    result: list[Eqn] = []
    for eqn in program.eqns:
        if eqn not in dropped:
            result.extend(replacement.get(eqn, [eqn]))
    return program.with_eqns(result)
