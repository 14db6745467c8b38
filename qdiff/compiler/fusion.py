"""Coarsening: which array equations run together in one loop nest.

Rewrite rule (one loop nest per group). Let ``e_1 … e_k`` be array equations over the same
number n of elements, each of them an elementwise operation (a primitive flagged
``elementwise``, or a ``map`` whose lambda is elementwise on scalars), a ``broadcast_in_dim``
or ``iota`` (an index computation), a ``slice``, ``concatenate`` or zero padding (a
``scatter`` of rows into zeros: each element reads its operands at shifted positions), a
``reshape`` of a group value (a relabelling of the same elements in C order) or a
``reduce_{sum,prod,max,min}`` of n elements. Then::

    y_1 = e_1(…); …; y_k = e_k(…)
  ⇒
    for i in L:                       # L: a loop shape every member's shape is a merge of
        y_1[i] = e_1(…[i]); …         # element expressions, no intermediate arrays
        acc_r ⊙= y_j[i]               # reductions accumulate in registers (trailing axes)

and only the values read outside the group are written to memory. A group is closed (its
loop nest written) before the first equation outside it that reads one of its values, and
before any equation that may update an array in place or runs a sub-program (so reordering
never lets an in-place update overtake a read). Reduction results are not element streams:
an equation that needs one starts a new group.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..classical.linalg import parse_spec
from ..ir.core import Eqn, Literal, Program, Var
from ..ir.types import Tensor
from .analysis import leading_block

# reduction primitive -> the scalar monoid it folds with
REDUCTIONS = {"reduce_sum": "add", "reduce_prod": "mul", "reduce_max": "max",
              "reduce_min": "min"}
# equations that may update an operand's array in place when it is dead afterwards
IN_PLACE = {"dynamic_update_slice", "scatter", "hist"}


def elementwise_map(eqn: Eqn) -> bool:
    """Whether ``eqn`` is a ``map`` whose lambda takes scalars and is elementwise (what
    elementwise fusion before differentiation produces), with scalar consts."""
    if eqn.primitive.name != "map":
        return False
    body: Program = eqn.params["body"]
    consts = eqn.inputs[:eqn.params["num_consts"]]
    return (all(isinstance(t, Tensor) and t.shape == () for t in body.in_types)
            and all(isinstance(t, Tensor) and t.shape == () for t in body.out_types)
            and all(c.type.shape == () for c in consts)
            and all(e.primitive.elementwise for e in body.eqns))


def member_kind(eqn: Eqn, point_products: bool = False) -> str | None:
    """How ``eqn`` takes part in a loop nest, or None when it is lowered alone
    (``point_products``: whether the target's nests compute `point_product` einsums)."""
    name = eqn.primitive.name
    out = eqn.outputs[0].type if eqn.outputs else None
    if not isinstance(out, Tensor):
        return None
    if eqn.primitive.elementwise or elementwise_map(eqn):
        return "elementwise" if out.shape else None
    if name in ("broadcast_in_dim", "iota") and out.shape:
        return "index"
    if name in REDUCTIONS:
        operand = eqn.inputs[0].type
        if operand.dtype == "bool" or (name in ("reduce_max", "reduce_min")
                                        and operand.np_dtype.kind == "c"):
            return None
        return "reduction"
    if name == "reshape" and out.shape:
        return "alias"
    if name == "einsum" and out.shape and summed_size(eqn) <= DIRECT_CONTRACTION:
        return "contraction"
    if name == "einsum" and point_products and point_product(eqn) is not None:
        return "point_product"
    if out.shape and (name == "concatenate" or (name == "slice" and not leading_block(eqn))
                      or zero_padding(eqn) is not None):
        return "window"
    return None


# Rows narrower than this make tile products too small to pay for a BLAS call (GMM at
# d = 2): such point products, and row contractions, keep their other forms
ROW_TILE_MIN = 8


def point_product(eqn: Eqn) -> tuple[int, int] | None:
    """For an ``einsum`` summing outer products of rows over points,
    ``out[k.., i, j] = Σ_n a[n.., k.., i] b[n.., k.., j]`` with ``a`` and ``b`` of one
    shape (rows at least `ROW_TILE_MIN` wide) and floating dtype (GMM's
    Σ_n t̄[n,k,i] (x − μ)[n,k,j]): which operand gives the result's rows and which its
    columns, (0, 1) or (1, 0). None for any other einsum.

    A loop nest over the operands' elements computes it tile of points by tile as BLAS
    products (`tiles.PointProductTile`), so neither operand is stored.

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> a = np.ones((5, 2, 8))
    >>> p = qdiff.trace(lambda a, b: (qnp.einsum("nki,nkj->kij", a, b),
    ...                               qnp.einsum("nki,nkj->kji", a, b)), a, a)
    >>> [point_product(e) for e in p.eqns]
    [(0, 1), (1, 0)]
    """
    a, b, out = parse_spec(eqn.params["spec"])
    left, right = eqn.inputs
    if left.type != right.type or left.type.np_dtype.kind not in "fc" \
            or eqn.outputs[0].type.np_dtype != left.type.np_dtype \
            or len(a) != len(b) or len(a) < 2 or a[:-1] != b[:-1] or a[-1] == b[-1] \
            or len(set(a + b)) != len(a) + 1 or left.type.shape[-1] < ROW_TILE_MIN:
        return None
    kept = "".join(c for c in a[:-1] if c in out)
    if kept == a[:-1]:  # nothing summed
        return None
    if out == kept + a[-1] + b[-1]:
        return (0, 1)
    if out == kept + b[-1] + a[-1]:
        return (1, 0)
    return None


def zero_padding(eqn: Eqn) -> int | None:
    """For a ``scatter`` of rows into zeros at the literal indices ``a, a+1, …`` (in
    bounds): ``a``, the first row it writes. Such a scatter is a zero padding (the
    derivative of a slice), an element expression instead of a copied array. None
    otherwise."""
    if eqn.primitive.name != "scatter":
        return None
    dest, indices = eqn.inputs[0], eqn.inputs[1]
    if not (isinstance(dest, Literal) and isinstance(indices, Literal)) \
            or indices.value.ndim != 1 or indices.value.size == 0:
        return None
    zero = dest.value == 0
    if not (np.all(zero) and not np.any(np.signbit(dest.value))):
        return None
    first = int(indices.value[0])
    expected = np.arange(first, first + indices.value.size)
    if first < 0 or expected[-1] >= dest.type.shape[0] \
            or not np.array_equal(indices.value, expected):
        return None
    return first


# Contractions summing at most this many products per element run as a loop inside the
# nest (cache-friendly, fusable); bigger ones go to BLAS, which wins for matrix products.
DIRECT_CONTRACTION = 64


# A contraction's operand made in its own nest is computed again at each summed position
# (instead of being stored and read back) when its chain of elementwise operations and
# broadcasts is at most this deep: GMM's x_i - μ_k, one subtraction of two broadcasts.
RECOMPUTE_MAX_MEMBERS = 4


def summed_size(eqn: Eqn) -> int:
    """How many products an ``einsum`` sums per output element."""
    a, b = eqn.params["spec"].split("->")[0].split(",")
    out = eqn.params["spec"].split("->")[1]
    sizes = dict(zip(a, eqn.inputs[0].type.shape)) | dict(zip(b, eqn.inputs[1].type.shape))
    return math.prod(sizes[c] for c in set(a) | set(b) if c not in out)


def merge_runs(loop: Sequence[int], shape: Sequence[int]) -> list[tuple[int, int]] | None:
    """For each axis of ``shape``, the run ``[a, b)`` of ``loop``'s axes it merges (C
    order), or None when ``shape`` is not such a merge of ``loop``. Size-1 axes take an
    empty run (their index is 0).

    >>> merge_runs((7, 5, 2), (35, 2)), merge_runs((7, 5, 2), (7, 1, 10)), merge_runs((6,), (2, 3))
    ([(0, 2), (2, 3)], [(0, 1), (1, 1), (1, 3)], None)
    >>> merge_runs((0, 4), (0, 4))
    [(0, 1), (1, 2)]
    """
    runs, j = [], 0
    for size in shape:
        start, product = j, 1
        if size == 1:
            runs.append((j, j))
            continue
        if size == 0:  # an empty axis is an empty loop axis (products cannot say which)
            if j == len(loop) or loop[j] != 0:
                return None
            runs.append((j, j + 1))
            j += 1
            continue
        while product < size and j < len(loop):
            product *= loop[j]
            j += 1
        if product != size:
            return None
        runs.append((start, j))
    if any(loop[k] != 1 for k in range(j, len(loop))):
        return None
    return runs


def _stream_size(eqn: Eqn, kind: str) -> int:
    """How many elements ``eqn`` runs over as a member of ``kind``."""
    source = eqn.inputs[0] if kind in ("reduction", "alias", "point_product") \
        else eqn.outputs[0]
    return math.prod(source.type.shape)


def _fit(requirements: list[tuple[int, ...]], current: tuple[int, ...] | None,
         required: tuple[int, ...]) -> tuple[int, ...] | None:
    """A loop shape that every requirement and ``required`` merge from, or None."""
    needed = [*requirements, required]
    for candidate in (current, required, *requirements):
        if candidate is not None and all(merge_runs(candidate, s) is not None for s in needed):
            return candidate
    return None


@dataclass(eq=False)
class Group:
    """Equations lowered together into one loop nest over ``size`` elements."""

    size: int
    members: list[Eqn] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    requirements: list[tuple[int, ...]] = field(default_factory=list)
    loop_shape: tuple[int, ...] | None = None
    streams: set[Var] = field(default_factory=set)    # values with one element per index
    produced: set[Var] = field(default_factory=set)   # every value the group defines

    @classmethod
    def start(cls, eqn: Eqn, kind: str) -> Group:
        """A group holding ``eqn`` alone."""
        group = cls(size=_stream_size(eqn, kind))
        group.add(eqn, kind)
        return group


    def requirement(self, eqn: Eqn, kind: str) -> tuple[int, ...] | None:
        """The shape whose multi-index the member needs (None: the flat index does)."""
        if kind in ("index", "contraction", "window"):
            return eqn.outputs[0].type.shape
        if kind == "point_product":
            return eqn.inputs[0].type.shape
        if kind == "reduction":
            shape, axes = eqn.inputs[0].type.shape, eqn.params["axes"]
            if len(axes) == len(shape):
                return None  # a full reduction folds the elements in any order
            return shape
        return None

    def accepts(self, eqn: Eqn, kind: str) -> bool:
        if _stream_size(eqn, kind) != self.size:
            return False
        inputs = [a for a in eqn.inputs if isinstance(a, Var)]
        if any(a in self.produced and a not in self.streams for a in inputs):
            return False  # needs a finished reduction
        if kind == "alias" and inputs[0] not in self.streams:
            return False
        if kind == "window" and any(a in self.produced for a in inputs):
            return False  # operands are read at other positions than the element's
        if kind == "contraction" and any(a in self.produced for a in inputs):
            return self._contracts_members(eqn)
        if kind == "index" and inputs and inputs[0] in self.streams \
                and inputs[0].type.size != self.size:
            return False
        required = self.requirement(eqn, kind)
        if required is None:
            return True
        shape = self._loop_shape_with(required)
        return shape is not None and self._keeps_point_products(
            shape, [eqn] if kind == "point_product" else [])

    def _keeps_point_products(self, shape: tuple[int, ...], more: Sequence[Eqn] = ()) -> bool:
        """Whether a nest over ``shape`` gives each point product (members, and ``more``)
        one loop level per operand axis, the rows' axis the innermost: a point is then a
        choice of the outer levels and its row the innermost loop (`groups`)."""
        for eqn in [*(e for e, k in zip(self.members, self.kinds) if k == "point_product"),
                    *more]:
            runs = merge_runs(shape, eqn.inputs[0].type.shape)
            if runs is None or runs[-1] != (len(shape) - 1, len(shape)) \
                    or any(b - a > 1 for a, b in runs):
                return False
        return True

    def _contracts_members(self, eqn: Eqn) -> bool:
        """Whether the contraction ``eqn`` may read its operands that this group makes by
        computing them again at the positions it sums over (`recomputable`), each axis of
        such an operand being one loop level (so a position is a choice of level indices)."""
        shape = self._loop_shape_with(eqn.outputs[0].type.shape)
        if shape is None:
            return False
        for operand in eqn.inputs:
            if operand not in self.produced:
                continue
            runs = merge_runs(shape, operand.type.shape)
            if runs is None or any(b - a > 1 for a, b in runs) \
                    or not self.recomputable(operand, RECOMPUTE_MAX_MEMBERS):
                return False
        return True

    def recomputable(self, var: Var, budget: int) -> bool:
        """Whether ``var`` is an element stream made, back to the group's operands, by
        elementwise operations, broadcasts and windows at most ``budget`` deep (reshapes
        free): cheap to
        compute at any position from arrays that are stored."""
        producer = next((k for k, e in enumerate(self.members) if var in e.outputs), None)
        if producer is None or budget <= 0 \
                or self.kinds[producer] not in ("elementwise", "index", "window", "alias"):
            return False
        inputs = [a for a in self.members[producer].inputs
                  if isinstance(a, Var) and a in self.produced]
        cost = 0 if self.kinds[producer] == "alias" else 1  # a reshape relabels only
        return all(self.recomputable(a, budget - cost) for a in inputs)

    def _loop_shape_with(self, required: tuple[int, ...]) -> tuple[int, ...] | None:
        return _fit(self.requirements, self.loop_shape, required)

    def add(self, eqn: Eqn, kind: str) -> None:
        required = self.requirement(eqn, kind)
        if required is not None:
            self.loop_shape = self._loop_shape_with(required)
            self.requirements.append(required)
        self.members.append(eqn)
        self.kinds.append(kind)
        self.produced.update(eqn.outputs)
        if kind not in ("reduction", "point_product"):
            self.streams.update(eqn.outputs)

    def absorb(self, other: Group) -> bool:
        """Take ``other``'s members in front of this group's (they are independent);
        False, changing nothing, when no loop shape serves both."""
        if other.size != self.size:
            return False
        shape = self.loop_shape
        for required in other.requirements:
            shape = _fit([*self.requirements, *other.requirements], shape, required)
            if shape is None:
                return False
        if not self._keeps_point_products(shape or self.loop_shape or (self.size,), [
                e for e, k in zip(other.members, other.kinds) if k == "point_product"]):
            return False
        self.loop_shape = shape if other.requirements else self.loop_shape
        self.members[:0], self.kinds[:0] = other.members, other.kinds
        self.requirements.extend(other.requirements)
        self.streams |= other.streams
        self.produced |= other.produced
        return True

    def reads(self) -> set[Var]:
        return {a for e in self.members for a in e.inputs if isinstance(a, Var)}


def _merge(groups: list[Group], open_groups: list[Group], close) -> Group | None:
    """One group holding ``groups`` (open, independent, of one size), or None when their
    loop shapes do not fit one nest (then all but the last are written first)."""
    target = groups[-1]
    for other in groups[:-1]:
        if not target.absorb(other):
            close(groups[:-1])
            return target
        open_groups.remove(other)
    return target


def plan(eqns: Sequence[Eqn], point_products: bool = False) -> list[Eqn | Group]:
    """``eqns`` in an order to lower them, array equations gathered into `Group`s
    (``point_products``: whether point products join nests, `member_kind`)."""
    items: list[Eqn | Group] = []
    open_groups: list[Group] = []

    def close(groups: list[Group]) -> None:
        for group in groups:
            open_groups.remove(group)
            items.append(group)

    for eqn in eqns:
        kind = member_kind(eqn, point_products)
        inputs = [a for a in eqn.inputs if isinstance(a, Var)]
        needed = [g for g in open_groups if any(a in g.produced for a in inputs)]
        if kind == "point_product" and not any(g.accepts(eqn, kind) for g in needed):
            kind = None  # a product of stored operands only: its batched BLAS product
        if kind is not None:
            # groups the equation reads but cannot join are written first; those it can
            # join (independent of each other) merge into one nest with it
            joinable = [g for g in needed if g.accepts(eqn, kind)]
            close([g for g in needed if g not in joinable])
            # an index computation joins only a nest that reads it (rematerialization put
            # it before its reader); in another it would be stored for nothing
            unrelated = None if kind in ("index", "window") else next(
                (g for g in reversed(open_groups) if g.accepts(eqn, kind)), None)
            target = _merge(joinable, open_groups, close) if joinable else unrelated
            if target is not None and target.accepts(eqn, kind):
                target.add(eqn, kind)
                continue
            needed = [g for g in open_groups if any(a in g.produced for a in inputs)]
        if kind is None and (eqn.primitive.name in IN_PLACE or eqn.primitive.subprogram_params):
            close(list(open_groups))
        else:
            close(needed)
        if kind is not None and kind != "alias":
            open_groups.append(Group.start(eqn, kind))
        else:
            items.append(eqn)
    close(list(open_groups))
    return items
