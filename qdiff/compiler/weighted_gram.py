"""Sums over points of a weighted per-point linear map, in weighted-Gram form.

Where a cotangent is a point weight times a per-component linear map of a per-point vector,
``t̄[n,k] = w[n,k] · Q_k c[n,k]`` with ``Q_k = Σ_r β_r g_r[k] ⊙ (A_k or I)`` (``A_k c`` an
einsum ``"kij,nkj->nki"``, ``g_r`` arrays broadcast over points or absent, ``β_r`` numbers),
and every reader of ``t̄`` sums it over points — ``Σ_n t̄ cᵀ`` (an einsum
``"nki,nkj->kij"``), ``Σ_n t̄``, or ``Σ_n f ⊙ t̄`` with ``f`` a number times ``c``, an array
broadcast over points, or both — those sums are ``Q_k M_k``, ``Q_k m_k`` and
``f``'s part of ``Q_k M_k``'s diagonal or of ``Q_k m_k``, with one weighted Gram matrix
and one weighted sum per component::

    M_k = Σ_n w[n,k] c[n,k] c[n,k]ᵀ,    m_k = Σ_n w[n,k] c[n,k]

GMM's reverse pass has this shape (``t̄ = 2 w Q_k (x − μ_k)``, ``Q_k = D_k + L_k``): its two
d×d products per point, ``L_k c`` and ``Σ_n t̄ cᵀ``, become one Gram product per point and
one d×d×d product per component. The rewrite moves every reader of ``t̄`` at once, or none:
a reader of another kind (the program's output among them) keeps the program as it is.
Sums are taken in another order, so results agree to rounding (where ``w`` or ``c`` hold
infinities or NaNs, the entries that come out NaN may differ).

Values are matched as expressions over the arrays the elementwise maps read (reshapes
followed, one map's body expanded into its reader's), so a reader that computes ``c`` again
from the same arrays is recognised as reading ``c``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..classical.linalg import parse_spec
from ..ir.core import Atom, Eqn, Literal, Program, Var, producers
from ..ir.passes.simplify import live_eqns
from ..ir.types import Tensor
from .fusion import elementwise_map
from .linear_sums import Readers, new_eqn, scalar, sum_of

Tree = tuple

# terms an expression may expand into before it counts as no match (a product of sums
# multiplies their counts)
MAX_TERMS = 64


class _NoMatch(Exception):
    pass


class _Expressions:
    """Values as expression trees over the arrays behind reshapes."""

    def __init__(self, producer: dict[Var, Eqn], kept: Iterable[Var]):
        self.producer = producer
        self.kept = set(kept)  # leaves even when a map makes them

    def root(self, var: Var) -> Var:
        """``var`` with the reshapes that make it followed back."""
        eqn = self.producer.get(var)
        while eqn is not None and eqn.primitive.name == "reshape":
            var = eqn.inputs[0]
            eqn = self.producer.get(var)
        return var

    def outer(self, atom: Atom, expand: bool) -> Tree:
        """The tree of a value outside any map body (``expand``: an elementwise
        equation's output as its expression)."""
        if isinstance(atom, Literal):
            if atom.value.shape:
                raise _NoMatch
            return ("literal", float(atom.value))
        var = self.root(atom)
        eqn = self.producer.get(var)
        if expand and var not in self.kept and eqn is not None and elementwise(eqn):
            return self.of(eqn, eqn.outputs.index(var), expand=False)
        return ("leaf", var)

    def of(self, eqn: Eqn, output: int, expand: bool) -> Tree:
        """The tree of the elementwise ``eqn``'s output ``output`` over the arrays it
        reads (``expand``: their elementwise producers' expressions too)."""
        if not elementwise_map(eqn):
            return _node(eqn, [self.outer(a, expand) for a in eqn.inputs])
        body: Program = eqn.params["body"]
        trees: dict[Var, Tree] = {v: self.outer(a, expand)
                                  for v, a in zip(body.inputs, eqn.inputs)}
        for inner in body.eqns:
            if len(inner.outputs) != 1:
                raise _NoMatch
            trees[inner.outputs[0]] = _node(inner, [
                trees[a] if isinstance(a, Var) else self.outer(a, False) for a in inner.inputs])
        result = body.outputs[output]
        return trees[result] if isinstance(result, Var) else self.outer(result, False)


def elementwise(eqn: Eqn) -> bool:
    """Whether ``eqn`` computes each element of its outputs from the same element of its
    operands (an elementwise primitive, or a ``map`` of them without constants)."""
    if elementwise_map(eqn):
        return eqn.params["num_consts"] == 0
    return eqn.primitive.elementwise and len(eqn.outputs) == 1 \
        and isinstance(eqn.outputs[0].type, Tensor)


def _node(eqn: Eqn, children: list[Tree]) -> Tree:
    # a primitive with parameters is a factor of its own, told apart by them
    name = (eqn.primitive.name, repr(sorted(eqn.params.items()))) if eqn.params \
        else eqn.primitive.name
    return (name, *children)


def _monomials(tree: Tree, atoms: dict[Tree, Tree]) -> list[tuple[float, tuple[Tree, ...]]]:
    """``tree`` as a sum of numbers times products of factors (``atoms``: subtrees taken
    as one factor, and what they stand for); factors are trees that are not sums,
    differences, negations or products."""
    if tree in atoms:
        return [(1.0, (atoms[tree],))]
    kind = tree[0]
    if kind == "literal":
        return [(tree[1], ())]
    if kind in ("add", "sub"):
        sign = 1.0 if kind == "add" else -1.0
        terms = _monomials(tree[1], atoms) + [(sign * c, f) for c, f in _monomials(tree[2], atoms)]
        if len(terms) > MAX_TERMS:
            raise _NoMatch
        return terms
    if kind == "neg":
        return [(-c, f) for c, f in _monomials(tree[1], atoms)]
    if kind == "mul":
        left, right = _monomials(tree[1], atoms), _monomials(tree[2], atoms)
        if len(left) * len(right) > MAX_TERMS:
            raise _NoMatch
        return [(ca * cb, fa + fb) for ca, fa in left for cb, fb in right]
    if kind == "div" and tree[2][0] == "literal":
        return [(c / tree[2][1], f) for c, f in _monomials(tree[1], atoms)]
    return [(1.0, (tree,))]


@dataclass
class _Term:
    """``coefficient · g ⊙ (A c or c)`` (``g`` None: absent)."""

    coefficient: float
    per_component: Var | None  # a [K, d] broadcast source
    through_map: bool           # A c, not c


@dataclass
class _Plan:
    linear: Eqn                 # the einsum A c
    weight: Var                 # w broadcast to [N, K, d]
    terms: list[_Term]
    # the readers in program order: ("gram", einsum Σ_n t̄ cᵀ, None), ("sum", reduce_sum
    # Σ_n t̄, None), ("weighted", a map reading t̄, its outputs' paths to their sums and terms
    # (coefficient, per-component array or None, whether c is a factor))
    readers: list[tuple[str, Eqn, list | None]]
    dropped: set[Eqn] = field(default_factory=set)


def _per_point_map(eqn: Eqn) -> bool:
    """Whether ``eqn`` is ``einsum("kij,nkj->nki", A, c)`` (letters renamed) of floats."""
    if eqn.primitive.name != "einsum":
        return False
    a, b, out = parse_spec(eqn.params["spec"])
    matrix, vectors = eqn.inputs
    return (len(a) == 3 and len(b) == 3 and len(set(a + b)) == 4 and b[1] == a[0]
            and b[2] == a[2] and out == b[0] + a[0] + a[1]
            and vectors.type.np_dtype.kind == "f" and matrix.type.dtype == vectors.type.dtype
            and matrix.type.shape == (vectors.type.shape[1],) + vectors.type.shape[2:] * 2)


def _broadcast_source(var: Var, producer: dict[Var, Eqn], shape: tuple[int, ...],
                      varying: tuple[int, ...]) -> Var | None:
    """The array broadcast into ``var`` (of ``shape``) along every axis but ``varying``,
    where it carries exactly those axes, or None."""
    eqn = producer.get(var)
    if eqn is None or eqn.primitive.name != "broadcast_in_dim" or var.type.shape != shape:
        return None
    source = eqn.inputs[0]
    if not isinstance(source, Var):
        return None
    dims = eqn.params["broadcast_dimensions"]
    if any(axis not in dims for axis in varying):
        return None
    for size, out_axis in zip(source.type.shape, dims):
        if size != (shape[out_axis] if out_axis in varying else 1):
            return None
    return source


def _factor_kinds(factors: tuple[Tree, ...], shape: tuple[int, ...],
                  producer: dict[Var, Eqn]) -> dict[str, list]:
    """Each factor of a monomial by kind: "c", "h" and "t" markers, "w" (a weight
    broadcast along the vector axis), "g" (an array broadcast over points)."""
    kinds: dict[str, list] = {"c": [], "h": [], "t": [], "w": [], "g": []}
    for factor in factors:
        if factor in (("c",), ("h",), ("t",)):
            kinds[factor[0]].append(factor)
        elif factor[0] == "leaf" and _broadcast_source(factor[1], producer, shape, (0, 1)):
            kinds["w"].append(factor[1])
        elif factor[0] == "leaf" and _broadcast_source(factor[1], producer, shape, (1, 2)):
            kinds["g"].append(_broadcast_source(factor[1], producer, shape, (1, 2)))
        else:
            raise _NoMatch
    return kinds


def _closure(var: Var, readers: Readers) -> set[Var]:
    """``var`` and the reshapes of it."""
    found, stack = {var}, [var]
    while stack:
        for eqn in readers.of.get(stack.pop(), []):
            if eqn is not None and eqn.primitive.name == "reshape":
                found.add(eqn.outputs[0])
                stack.append(eqn.outputs[0])
    return found


def _plan(cotangent_map: Eqn, producer: dict[Var, Eqn], readers: Readers) -> _Plan | None:
    """How to rewrite the readers of ``cotangent_map``'s output, or None."""
    if not elementwise(cotangent_map) or len(cotangent_map.outputs) != 1:
        return None
    cotangent = cotangent_map.outputs[0]
    expressions = _Expressions(producer, [cotangent])
    linear = {producer.get(expressions.root(a)) for a in cotangent_map.inputs
              if isinstance(a, Var)}
    linear = [e for e in linear if e is not None and _per_point_map(e)]
    if len(linear) != 1:
        return None
    linear = linear[0]
    vectors = linear.inputs[1]
    shape = vectors.type.shape
    try:
        c_tree = expressions.outer(vectors, True)
        atoms = {c_tree: ("c",), ("leaf", linear.outputs[0]): ("h",),
                 ("leaf", cotangent): ("t",)}
        terms, weight = [], None
        for coefficient, factors in _monomials(expressions.of(cotangent_map, 0, True), atoms):
            kinds = _factor_kinds(factors, shape, producer)
            if len(kinds["w"]) != 1 or weight not in (None, kinds["w"][0]) \
                    or len(kinds["c"]) + len(kinds["h"]) != 1 or len(kinds["g"]) > 1 \
                    or kinds["t"]:
                return None
            weight = kinds["w"][0]
            terms.append(_Term(coefficient, (kinds["g"] or [None])[0], bool(kinds["h"])))
        if not terms:
            return None
        plan = _Plan(linear, weight, terms, [], {cotangent_map})
        found = []
        for var in _closure(cotangent, readers):
            for reader in readers.of.get(var, []):
                if reader is None:  # the program returns it
                    return None
                if reader.primitive.name == "reshape":
                    plan.dropped.add(reader)
                else:
                    found.append((reader, var))
        found.sort(key=lambda pair: readers.position[pair[0]])
        for reader, var in found:
            if not _reader(reader, var, plan, expressions, atoms, c_tree, shape, producer,
                           readers):
                return None
    except _NoMatch:
        return None
    return plan if plan.readers else None


def _reader(reader: Eqn, var: Var, plan: _Plan, expressions: _Expressions,
            atoms: dict[Tree, Tree], c_tree: Tree, shape: tuple[int, ...],
            producer: dict[Var, Eqn], readers: Readers) -> bool:
    """Add ``reader`` of ``t̄`` (as ``var``) to ``plan``; False where it is of no kind the
    rewrite knows."""
    name = reader.primitive.name
    if reader in plan.dropped:
        return True
    if name == "einsum" and var.type.shape == shape and reader.inputs[0] is var:
        a, b, out = parse_spec(reader.params["spec"])
        if not (len(a) == 3 and a[:2] == b[:2] and len(set(a + b)) == 4
                and out == a[1:] + b[2] and reader.inputs[1].type.shape == shape
                and expressions.outer(reader.inputs[1], True) == c_tree):
            return False
        plan.readers.append(("gram", reader, None))
        plan.dropped.add(reader)
        return True
    if name == "reduce_sum" and var.type.shape == shape and reader.params["axes"] == (0,):
        plan.readers.append(("sum", reader, None))
        plan.dropped.add(reader)
        return True
    if not elementwise(reader):
        return False
    outputs = []
    for k, out in enumerate(reader.outputs):
        monomials = _monomials(expressions.of(reader, k, True), atoms)
        path = sum_of(out, shape, readers)
        if path is None or path[-1].params["axes"] != (0,):
            return False
        terms = []
        for coefficient, factors in monomials:
            kinds = _factor_kinds(factors, shape, producer)
            if len(kinds["t"]) != 1 or kinds["h"] or kinds["w"] or len(kinds["c"]) > 1 \
                    or len(kinds["g"]) > 1:
                return False
            terms.append((coefficient, (kinds["g"] or [None])[0], bool(kinds["c"])))
        outputs.append((path, terms))
    plan.readers.append(("weighted", reader, outputs))
    plan.dropped.add(reader)
    plan.dropped.update(e for path, _ in outputs for e in path)
    return True


class _Writer:
    """The equations of a rewrite, the shared values made once."""

    def __init__(self, plan: _Plan):
        self.plan = plan
        self.eqns: list[Eqn] = []
        self.values: dict[str, Var] = {}
        vectors = plan.linear.inputs[1]
        self.shape, self.dtype = vectors.type.shape, vectors.type.dtype

    def add(self, name: str, inputs: tuple, shape: tuple[int, ...], params: dict | None = None,
            out: Var | None = None) -> Var:
        eqn = new_eqn(name, inputs, Tensor(shape, self.dtype), params)
        if out is not None:
            eqn = Eqn(eqn.primitive, eqn.inputs, (out,), eqn.params)
        self.eqns.append(eqn)
        return eqn.outputs[0]

    def shared(self, key: str) -> Var:
        """The weighted vectors, their Gram matrices and sums, and ``Q`` times those."""
        if key in self.values:
            return self.values[key]
        n, k, d = self.shape
        vectors, matrix = self.plan.linear.inputs[1], self.plan.linear.inputs[0]
        if key == "wc":
            value = self.add("mul", (self.plan.weight, vectors), self.shape)
        elif key == "M":
            value = self.add("einsum", (self.shared("wc"), vectors), (k, d, d),
                             {"spec": "nki,nkj->kij"})
        elif key == "m":
            value = self.add("reduce_sum", (self.shared("wc"),), (k, d), {"axes": (0,)})
        else:  # "QM" or "Qm"
            x = self.shared(key[1])
            spec = "kij,kjl->kil" if key == "QM" else "kij,kj->ki"
            value = None
            for term in self.plan.terms:
                part = self.add("einsum", (matrix, x), x.type.shape, {"spec": spec}) \
                    if term.through_map else x
                part = self.scaled(term.coefficient, term.per_component, part)
                value = part if value is None else self.add("add", (value, part), x.type.shape)
        self.values[key] = value
        return value

    def scaled(self, coefficient: float, per_component: Var | None, x: Var) -> Var:
        """``coefficient · g ⊙ x`` for ``x`` of shape [K, d] or [K, d, d]."""
        k, d = self.shape[1:]
        if per_component is not None:
            g = per_component
            if g.type.shape != (k, d):
                g = self.add("reshape", (g,), (k, d), {"shape": (k, d)})
            if x.type.shape != (k, d):
                g = self.add("broadcast_in_dim", (g,), x.type.shape,
                             {"shape": x.type.shape, "broadcast_dimensions": (0, 1)})
            x = self.add("mul", (g, x), x.type.shape)
        if coefficient != 1.0:
            x = self.add("mul", (scalar(coefficient, self.dtype), x), x.type.shape)
        return x

    def diagonal(self) -> Var:
        """``Q_k M_k``'s diagonal."""
        if "diag" not in self.values:
            k, d = self.shape[1:]
            eye = self.add("broadcast_in_dim", (Literal(np.eye(d, dtype=self.dtype)),),
                           (k, d, d), {"shape": (k, d, d), "broadcast_dimensions": (1, 2)})
            masked = self.add("mul", (self.shared("QM"), eye), (k, d, d))
            self.values["diag"] = self.add("reduce_sum", (masked,), (k, d), {"axes": (2,)})
        return self.values["diag"]

    def bind(self, value: Var, out: Var) -> None:
        """``out`` holding ``value``."""
        self.add("reshape", (value,), out.type.shape, {"shape": out.type.shape}, out)


def _replacement(plan: _Plan) -> dict[Eqn, list[Eqn]]:
    """The equations in place of each rewritten reader (the shared ones before the
    first)."""
    writer = _Writer(plan)
    replacement: dict[Eqn, list[Eqn]] = {}
    # the Gram matrices and the sums next to each other, so that one loop nest over the
    # points makes both
    uses_vectors = {kind == "gram" or any(c for _, terms in outputs or [] for *_, c in terms)
                    for kind, _, outputs in plan.readers}
    uses_sums = {kind == "sum" or any(not c for _, terms in outputs or [] for *_, c in terms)
                 for kind, _, outputs in plan.readers}
    if True in uses_sums:
        writer.shared("m")
    if True in uses_vectors:
        writer.shared("M")
    for kind, reader, outputs in plan.readers:
        if kind == "gram":
            writer.bind(writer.shared("QM"), reader.outputs[0])
        elif kind == "sum":
            writer.bind(writer.shared("Qm"), reader.outputs[0])
        else:
            for path, terms in outputs:
                value = None
                for coefficient, per_component, with_vectors in terms:
                    base = writer.diagonal() if with_vectors else writer.shared("Qm")
                    part = writer.scaled(coefficient, per_component, base)
                    value = part if value is None else writer.add("add", (value, part),
                                                                   part.type.shape)
                writer.bind(value, path[-1].outputs[0])
        replacement[reader], writer.eqns = writer.eqns, []
    return replacement


def weighted_grams(program: Program) -> Program:
    """``program`` with each weighted per-point linear map's cotangent, read only by sums
    over points, replaced by products with per-component weighted Gram matrices (see the
    module's text).

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> from qdiff.ir.passes import fuse_elementwise
    >>> def f(a, x, mu, w):
    ...     c = x[:, None, :] - mu[None, :, :]
    ...     t = w[:, :, None] * qnp.einsum("kij,nkj->nki", a, c)
    ...     return qnp.einsum("nki,nkj->kij", t, c), qnp.sum(t, axis=0)
    >>> rng = np.random.default_rng(0)
    >>> args = [rng.normal(size=s) for s in ((2, 3, 3), (5, 3), (2, 3), (5, 2))]
    >>> p = fuse_elementwise(qdiff.trace(f, *args))
    >>> q = weighted_grams(p)
    >>> sorted(e.params["spec"] for e in q.eqns if e.primitive.name == "einsum")
    ['kij,kj->ki', 'kij,kjl->kil', 'nki,nkj->kij']
    >>> all(np.allclose(a, b) for a, b in zip(q(*args), p(*args)))
    True
    """
    readers, producer = Readers(program), producers(program.eqns)
    dropped: set[Eqn] = set()
    replacement: dict[Eqn, list[Eqn]] = {}
    for eqn in program.eqns:
        if eqn in dropped or not elementwise(eqn):
            continue
        plan = _plan(eqn, producer, readers)
        if plan is None or plan.dropped & (dropped | set(replacement)):
            continue
        dropped |= plan.dropped
        replacement.update(_replacement(plan))
    if not dropped:
        return program
    result: list[Eqn] = []
    for eqn in program.eqns:
        if eqn in replacement:
            result.extend(replacement[eqn])
        elif eqn not in dropped:
            result.append(eqn)
    # the linear map's products, where only the cotangent read them, go too
    return program.with_eqns(live_eqns(result, program.outputs))
