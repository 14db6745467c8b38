"""One loop nest per fused group (`fusion.Group`): element expressions in registers, stores
only for values read outside the group, reductions accumulated in place.

The nest runs over the group's loop shape L in C order. A member that needs a multi-index
(a broadcast, an iota, a partial reduction) reads it through the runs of L its own shape
merges (`fusion.merge_runs`); everything else reads the flat index. A reduction over a
suffix of L keeps its accumulator in a register opened at the first reduced level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..classical.linalg import parse_spec
from ..ir.core import Eqn, Var
from ..ir.primitives import get_primitive
from ..ir.types import Tensor
from .fusion import (
    REDUCTIONS,
    ROW_TILE_MIN,
    Group,
    member_kind,
    merge_runs,
    point_product,
    zero_padding,
)
from .lowering import LOOP_NEST, Scope, empty, rule, shape_text
from .rules.elementwise import scalar_expression
from .source import cast, scalar_literal
from .tiles import (
    PointProductTile,
    RowTile,
    allocate_tiles,
    tile_rows,
    tiles_level,
    write_tiled_loop,
)


def neutral(monoid: str, dtype: np.dtype) -> object:
    """The identity of ``monoid`` on ``dtype`` (max/min of integers start at their range)."""
    if monoid == "add":
        return 0
    if monoid == "mul":
        return 1
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if monoid == "max" else info.max
    return -np.inf if monoid == "max" else np.inf


# A contraction inside a nest is computed a row at a time when the innermost level has at
# least this many elements: measured on GMM's products Q_k (x_i - μ_k), rows of 16 take
# half the time of one register per element and rows of 64 a third, rows of 10 the same.
ROW_CONTRACTION_MIN = 16
# ... and from `fusion.ROW_TILE_MIN` (8) where a tile of rows may be one BLAS product
# (`tiles`): GMM's rows of 10 then run as 128 × 10 by 10 × 10 products


def _at(array: str, term: str, position: dict[str, str]) -> str:
    """``array`` (an einsum operand with index letters ``term``) at ``position``."""
    return f"{array}[{', '.join(position[c] for c in term)}]" if term else array


def fold(monoid: str, acc: str, value: str) -> str:
    return {"add": f"{acc} + {value}", "mul": f"{acc} * {value}",
            "max": f"np.maximum({acc}, {value})", "min": f"np.minimum({acc}, {value})"}[monoid]


@dataclass
class _Accumulator:
    eqn: Eqn
    monoid: str
    level: int            # loop level whose body opens the register (-1: an array in memory)
    register: str
    target: str | None    # the array the register is stored to (None: the result is the register)
    kept: list[str]       # index expressions of the result element


class _Nest:
    # whether contractions may be computed a row at a time (`row_contraction`): rows are
    # scratch arrays shared by the iterations of the innermost level
    row_contractions = True

    def __init__(self, scope: Scope, group: Group):
        self.scope, self.group = scope, group
        self.shape = group.loop_shape or (group.size,)
        self.index = [scope.fresh("i") for _ in self.shape]
        self.flat = scope.fresh("k") if len(self.shape) > 1 else self.index[0]
        self.elements: dict[Var, str] = {}
        self.flat_views: dict[int, str] = {}  # id(operand) -> its flat view
        self.element_reads: set[Var] = set()  # arrays read at the current element only
        self.other_reads: set[Var] = set()    # arrays read at other positions
        self.reused: set[Var] = set()         # operands whose arrays hold a result
        # arrays of partial reductions: (name, value, shape, dtype, initial value or None)
        self.results: list[tuple[str, Var, tuple, Any, str | None]] = []
        self.before: list[str] = []      # statements before the nest
        self.after: list[str] = []       # statements after it
        self.body: list[str] = []        # statements at the innermost level
        self.level_open: dict[int, list[str]] = {}
        self.level_close: dict[int, list[str]] = {}
        self.producers: dict[Var, tuple[Eqn, str]] = {}
        # the order the levels but the innermost are looped in, outermost first
        self.order = list(range(len(self.shape)))
        self.in_order = False  # whether a reduction over outer levels fixes their order
        self.summed_levels: list[list[int]] = []  # levels each reduction in memory sums over
        # row contractions (`row_contraction`): the row form's statements, the scratch rows,
        # their shape and dtype as one row, and the tile form (None: none)
        self.rows: list[tuple[list[str], str, tuple[int, int], Any, RowTile | None]] = []
        self.tile_index: str | None = None  # the row of the scratch tiles being read
        self.products: list[PointProductTile] = []  # point products (`point_product`)
        self.tiled: list[RowTile | PointProductTile] = []  # the tile forms written (`write`)

    # --------------------------------------------------------------- indices
    def index_of(self, run: tuple[int, int]) -> str:
        a, b = run
        if a == b:
            return "0"
        text = self.index[a]
        for j in range(a + 1, b):
            text = f"({text}) * {self.shape[j]} + {self.index[j]}"
        return text

    def multi_index(self, shape: tuple[int, ...]) -> list[str]:
        runs = merge_runs(self.shape, shape)
        return [self.index_of(run) for run in runs]

    def position(self, shape: tuple[int, ...]) -> str | None:
        """The index of the current element in an array of ``shape`` (one of the group's
        size), addressed directly: no flattened view to make, which costs a call and a
        reference count in compiled code. None when ``shape`` is no merge of the loop's."""
        if len(shape) == 1:
            return self.flat
        if merge_runs(self.shape, shape) is None:
            return None
        return ", ".join(self.multi_index(shape))

    # --------------------------------------------------------------- operands
    def element(self, atom: object) -> str:
        """The current element of an operand of a member."""
        if atom.type.shape == ():
            return self.scope.read(atom)
        if isinstance(atom, Var) and atom in self.elements:
            return self.elements[atom]
        if isinstance(atom, Var):
            self.element_reads.add(atom)
        position = self.position(atom.type.shape)
        if position is not None:
            return f"{self.scope.read(atom)}[{position}]"
        view = self.flat_views.get(id(atom))
        if view is None:
            view = self.scope.fresh("f")
            self.before.append(f"{view} = {self.scope.read(atom)}.reshape(-1)")
            self.flat_views[id(atom)] = view
        return f"{view}[{self.flat}]"

    def read_elsewhere(self, atom: object) -> None:
        if isinstance(atom, Var):
            self.other_reads.add(atom)

    def assign(self, var: Var, expression: str) -> None:
        name = self.scope.fresh("e")
        self.body.append(f"{name} = {expression}")
        self.elements[var] = name

    # --------------------------------------------------------------- members
    def member(self, eqn: Eqn, kind: str) -> None:
        for var in eqn.outputs:
            self.producers[var] = (eqn, kind)
        if kind == "elementwise":
            self.elementwise(eqn)
        elif kind == "alias":
            self.elements[eqn.outputs[0]] = self.element(eqn.inputs[0])
        elif kind == "index":
            self.index_member(eqn)
        elif kind == "contraction":
            self.contraction(eqn)
        elif kind == "window":
            self.window(eqn)
        elif kind == "point_product":
            self.point_product(eqn)
        else:
            self.reduction(eqn)

    def elementwise(self, eqn: Eqn) -> None:
        args = [self.element(a) for a in eqn.inputs]
        if eqn.primitive.name != "map":
            self.assign(eqn.outputs[0], scalar_expression(eqn, args, self.scope.scalar_forms))
            return
        # an elementwise lambda: lower its scalar equations at the innermost level
        lines_before = len(self.scope.src.lines)
        outputs = self.scope.inline(eqn.params["body"], args)
        self.body.extend(line.strip() for line in self.scope.src.lines[lines_before:])
        del self.scope.src.lines[lines_before:]
        for var, expression in zip(eqn.outputs, outputs):
            self.assign(var, expression)

    def index_member(self, eqn: Eqn) -> None:
        out: Tensor = eqn.outputs[0].type
        multi = self.multi_index(out.shape)
        if eqn.primitive.name == "iota":
            self.assign(eqn.outputs[0], cast(multi[eqn.params["dimension"]], out.dtype)
                        if out.dtype != "int64" else multi[eqn.params["dimension"]])
            return
        operand = eqn.inputs[0]
        if isinstance(operand, Var) and operand in self.elements:  # no axis grows
            self.elements[eqn.outputs[0]] = self.elements[operand]
            return
        if operand.type.shape == ():
            self.elements[eqn.outputs[0]] = self.scope.read(operand)
            return
        self.read_elsewhere(operand)
        dims = eqn.params["broadcast_dimensions"]
        picks = ["0" if size == 1 else multi[d] for size, d in zip(operand.type.shape, dims)]
        self.assign(eqn.outputs[0], f"{self.scope.read(operand)}[{', '.join(picks)}]")

    def window(self, eqn: Eqn) -> None:
        """A slice, concatenation or zero padding: the element reads an operand (stored,
        never a member of this nest) at a shifted position."""
        out: Tensor = eqn.outputs[0].type
        multi = [f"({m})" for m in self.multi_index(out.shape)]
        name = eqn.primitive.name

        def at(atom: object, picks: list[str]) -> str:
            self.read_elsewhere(atom)
            return f"{self.scope.read(atom)}[{', '.join(picks)}]"

        if name == "slice":
            picks = [f"{a} + {m} * {s}" if s != 1 else f"{a} + {m}" if a else m for a, m, s
                     in zip(eqn.params["start"], multi, eqn.params["strides"])]
            self.assign(eqn.outputs[0], at(eqn.inputs[0], picks))
            return
        if name == "concatenate":
            axis = eqn.params["axis"]
            offsets, end = [], 0
            for operand in eqn.inputs:
                offsets.append(end)
                end += operand.type.shape[axis]

            def piece(k: int) -> str:
                picks = list(multi)
                picks[axis] = f"{multi[axis]} - {offsets[k]}" if offsets[k] else multi[axis]
                return at(eqn.inputs[k], picks)

            expression = piece(len(eqn.inputs) - 1)
            for k in range(len(eqn.inputs) - 2, -1, -1):
                bound = offsets[k] + eqn.inputs[k].type.shape[axis]
                expression = f"({piece(k)} if {multi[axis]} < {bound} else {expression})"
            self.assign(eqn.outputs[0], expression)
            return
        first = zero_padding(eqn)
        count = eqn.inputs[1].type.shape[0]
        values = at(eqn.inputs[2], [f"{multi[0]} - {first}", *multi[1:]])
        zero = scalar_literal(0, out.np_dtype)
        self.assign(eqn.outputs[0],
                    f"({values} if {first} <= {multi[0]} < {first + count} else {zero})")

    def contraction(self, eqn: Eqn) -> None:
        a_term, b_term, out_term = parse_spec(eqn.params["spec"])
        out = eqn.outputs[0].type
        position = dict(zip(out_term, self.multi_index(out.shape)))
        sizes = dict(zip(a_term, eqn.inputs[0].type.shape)) | dict(
            zip(b_term, eqn.inputs[1].type.shape))
        summed = [c for c in a_term if c not in out_term]
        for operand in eqn.inputs:
            if operand not in self.elements:
                self.read_elsewhere(operand)
        operands = [None if x in self.elements else self.scope.read(x) for x in eqn.inputs]
        made_here = [term for x, term in zip(eqn.inputs, (a_term, b_term)) if x in self.elements]
        if self.contracts_rows(out.shape, self.may_tile(eqn, len(summed))) \
                and not any(out_term[-1] in t for t in made_here):
            self.row_contraction(eqn, operands, position, sizes, summed)
            return
        acc = self.scope.fresh("acc")
        self.body.append(f"{acc} = {scalar_literal(0, out.np_dtype)}")
        indent = ""
        for c in summed:
            position[c] = self.scope.fresh("j")
            self.body.append(f"{indent}for {position[c]} in range({sizes[c]}):")
            indent += "    "
        left, right = (self.operand_at(x, array, term, position, self.body, indent)
                       for x, array, term in zip(eqn.inputs, operands, (a_term, b_term)))
        self.body.append(f"{indent}{acc} = {cast(f'{acc} + {left} * {right}', out.dtype)}")
        self.elements[eqn.outputs[0]] = acc

    def operand_at(self, atom: Var, array: str | None, term: str, position: dict[str, str],
                   lines: list[str], indent: str) -> str:
        """A contraction operand's element at ``position`` (index letters of ``term``): read
        from ``array``, or for a value this nest makes (``array`` None), its members again
        with the loop indices of ``position``, their statements appended to ``lines``."""
        if array is not None:
            return _at(array, term, position)
        runs = merge_runs(self.shape, atom.type.shape)
        index = list(self.index)
        for (a, b), c in zip(runs, term):
            if b == a + 1:
                index[a] = position[c]
        saved = (self.index, self.flat, self.elements, self.body, self.element_reads)
        self.index, self.elements, self.body = index, {}, []
        self.flat = self.index_of((0, len(self.shape))) if len(self.shape) > 1 else index[0]
        self.element_reads = self.other_reads  # reads at positions other than the element's
        self.recompute(atom)
        expression, body = self.elements[atom], self.body
        self.index, self.flat, self.elements, self.body, self.element_reads = saved
        lines.extend(f"{indent}{line}" for line in body)
        return expression

    def recompute(self, var: Var) -> None:
        """Write ``var``'s member again (and the members it reads, first) at the current
        indices."""
        eqn, kind = self.producers[var]
        for operand in eqn.inputs:
            if isinstance(operand, Var) and operand in self.producers \
                    and operand not in self.elements:
                self.recompute(operand)
        self.member(eqn, kind)

    def may_tile(self, eqn: Eqn, summed: int) -> bool:
        """Whether a row contraction of ``eqn`` (``summed`` indices) could take the tile
        form (`row_tile`, which also needs the loop order)."""
        out = eqn.outputs[0].type
        row_char = parse_spec(eqn.params["spec"])[2][-1]
        holding = [x for x, term in zip(eqn.inputs, parse_spec(eqn.params["spec"])[:2])
                   if row_char in term]
        return summed == 1 and out.np_dtype.kind in "fc" and len(holding) == 1 \
            and holding[0] not in self.elements \
            and all(x.type.np_dtype == out.np_dtype for x in eqn.inputs)

    def contracts_rows(self, out_shape: tuple[int, ...], may_tile: bool = False) -> bool:
        """Whether a contraction is computed a row at a time (`row_contraction`): on the CPU,
        when the result's last axis is the nest's innermost level alone and that level has
        at least `ROW_CONTRACTION_MIN` elements (`ROW_TILE_MIN` where a tile of rows may be
        one BLAS product, ``may_tile``)."""
        last = len(self.shape) - 1
        return (self.row_contractions and bool(out_shape)
                and self.shape[last] >= (ROW_TILE_MIN if may_tile else ROW_CONTRACTION_MIN)
                and merge_runs(self.shape, out_shape)[-1] == (last, last + 1))

    def row_contraction(self, eqn: Eqn, operands: list[str], position: dict[str, str],
                        sizes: dict[str, int], summed: list[str]) -> None:
        """The contraction's whole row over the innermost level, into a row of a scratch
        array before that level's loop: ``row[z] += a[.., z, ..] * b[..]`` with the summed
        indices outside and ``z`` inside. Each element still sums its products in the same
        order from zero (the same numbers as one register per element), but the inner loop
        is over independent elements, contiguous in memory, so it vectorizes; an operand
        whose axis of ``z`` is not its last is first copied with that axis last (once per
        nest; the nest reads it once per outer point). When the operand holding the row is
        stored and there is one summed index, the nest may instead compute the rows of a
        tile of points as one matrix product (`tiles`), decided when the nest is written
        (`write`: it needs the loop order)."""
        a_term, b_term, out_term = parse_spec(eqn.params["spec"])
        out = eqn.outputs[0].type
        last = len(self.shape) - 1
        z, rows = self.scope.fresh("z"), self.scope.fresh("row")
        row_char = out_term[-1]
        position[row_char] = z
        # the operand holding the row, laid out with the summed index and then the row last
        # (one summed index: for a tile, its matrix for fixed outer indices is contiguous)
        tail = [c for c in summed if len(summed) == 1] + [row_char]
        terms = []
        for k, term in enumerate((a_term, b_term)):
            if operands[k] is not None and row_char in term:
                ends = [c for c in tail if c in term]
                order = [*(i for i, c in enumerate(term) if c not in ends),
                         *(term.index(c) for c in ends)]
                if order != list(range(len(term))):
                    moved = self.scope.fresh("t")
                    self.before.append(f"{moved} = np.ascontiguousarray(np.transpose("
                                       f"{operands[k]}, {shape_text(tuple(order))}))")
                    operands[k], term = moved, "".join(term[i] for i in order)
            terms.append(term)
        self.weights_outside(out.shape, out_term, (a_term, b_term), operands)
        if self.tile_index is None:
            self.tile_index = self.scope.fresh("t")
        t = self.tile_index
        # under prange each outer iteration needs its own row (and tiles are not used)
        shared = last == 0 or self.outer_range() == "range"
        lines = [f"for {z} in range({self.shape[last]}):",
                 f"    {rows}[{t}, {z}] = {scalar_literal(0, out.np_dtype)}"]
        indent = ""
        for c in summed:
            position[c] = self.scope.fresh("j")
            lines.append(f"{indent}for {position[c]} in range({sizes[c]}):")
            indent += "    "
        left, right = (self.operand_at(x, array, term, position, lines, indent)
                       for x, array, term in zip(eqn.inputs, operands, terms))
        lines.append(f"{indent}for {z} in range({self.shape[last]}):")
        lines.append(f"{indent}    {rows}[{t}, {z}] = "
                     f"{cast(f'{rows}[{t}, {z}] + {left} * {right}', out.dtype)}")
        self.elements[eqn.outputs[0]] = f"{rows}[{t}, {self.index[last]}]"
        shape = (1, self.shape[last])
        tile = self.row_tile(eqn, operands, terms, position, sizes, summed, rows) \
            if shared else None
        if not shared:  # allocated there when written (`write_rows`)
            self.level_open.setdefault(1, [])
        self.rows.append((lines, rows, shape, out.np_dtype, tile))

    def row_tile(self, eqn: Eqn, operands: list[str | None], terms: list[str],
                 position: dict[str, str], sizes: dict[str, int], summed: list[str],
                 rows: str) -> RowTile | None:
        """The tile form of a row contraction (`tiles`), or None where it has none: one
        summed index, the operand holding the row stored (its matrix for the current outer
        indices ``W[.., j, z]`` contiguous), the other not holding it, and one floating
        dtype BLAS takes."""
        out = eqn.outputs[0].type
        row_char = parse_spec(eqn.params["spec"])[2][-1]
        if not self.may_tile(eqn, len(summed)):
            return None
        w = next(k for k, term in enumerate(terms) if row_char in term)
        dtype = out.np_dtype
        weights_term, (j,) = terms[w], summed
        outer = weights_term[:-2] if weights_term.endswith(j + row_char) else None
        if outer is None:
            return None
        out_term = parse_spec(eqn.params["spec"])[2]
        runs = dict(zip(out_term, merge_runs(self.shape, out.shape)))
        levels = {level for c in outer for level in range(*runs[c])}
        points = 1 - w
        fill: list[str] = []
        position = dict(position)
        position[j] = self.scope.fresh("j")
        fill.append(f"for {position[j]} in range({sizes[j]}):")
        value = self.operand_at(eqn.inputs[points], operands[points], terms[points], position,
                                fill, "    ")
        tile_points = self.scope.fresh("tp")
        fill.append(f"    {tile_points}[{self.tile_index}, {position[j]}] = {value}")
        return RowTile(fill=fill, weights=_at(operands[w], outer, position), levels=levels,
                       points=tile_points, rows=rows, summed=sizes[j],
                       row=self.shape[-1], dtype=dtype)

    def point_product(self, eqn: Eqn) -> None:
        """A point product (`fusion.point_product`): each point writes its rows of both
        operands (their elements at the innermost level) into scratch tiles, which are
        multiplied and added into the result per tile (`tiles`), or per point."""
        order = point_product(eqn)
        assert order is not None
        left, right = (eqn.inputs[k] for k in order)
        a_term, _, out_term = parse_spec(eqn.params["spec"])
        out = eqn.outputs[0]
        shape = left.type.shape
        runs = merge_runs(self.shape, shape)
        multi = self.multi_index(shape)
        kept = [multi[a_term.index(c)] for c in out_term[:-2]]
        summed = {level for c, run in zip(a_term, runs) if c not in out_term
                  for level in range(*run)}
        # the levels of the result's leading axes first, so that the summed ones are the
        # loop just outside the rows: the one tiled (where `loop_order` allows)
        outer = sorted(level for c, run in zip(a_term, runs) if c in out_term[:-2]
                       for level in range(*run))
        self.order = outer + [level for level in self.order if level not in outer]
        if self.tile_index is None:
            self.tile_index = self.scope.fresh("t")
        dtype = out.type.np_dtype
        target = self.scope.fresh("r")
        self.results.append((target, out, out.type.shape, dtype, scalar_literal(0, dtype)))
        tile = PointProductTile(
            left=self.scope.fresh("tl"), right=self.scope.fresh("tr"),
            product=self.scope.fresh("s"), target=target, kept=kept, levels=summed,
            rows=shape[-1], columns=shape[-1], dtype=dtype)
        for name, operand in ((tile.left, left), (tile.right, right)):
            self.body.append(f"{name}[{self.tile_index}, {self.index[-1]}] = "
                             f"{self.element(operand)}")
        self.products.append(tile)
        self.scope.bind(out, target)

    def weights_outside(self, out_shape: tuple[int, ...], out_term: str,
                        terms: tuple[str, str], operands: list[str | None]) -> None:
        """Loop first over the levels that index a row contraction's stored operand
        holding the row (GMM's Q_k, d×d): its block for one choice of them is then reused
        by every iteration of the levels inside, from cache, instead of being read again
        for each of them (a 32 KB matrix per point and component at d=64)."""
        runs = merge_runs(self.shape, out_shape)
        levels = {c: a for c, (a, b) in zip(out_term, runs) if b == a + 1}
        for term, array in zip(terms, operands):
            if array is None or out_term[-1] not in term:
                continue
            first = [levels[c] for c in term if c in levels and levels[c] < len(self.shape) - 1]
            rest = [level for level in self.order if level not in first]
            self.order = sorted(first) + rest
            return

    def reduction(self, eqn: Eqn) -> None:
        operand, out = eqn.inputs[0], eqn.outputs[0]
        monoid = REDUCTIONS[eqn.primitive.name]
        dtype = out.type.np_dtype
        start = scalar_literal(neutral(monoid, dtype), dtype)
        value = self.element(operand)
        register = self.scope.fresh("acc")
        shape, axes = operand.type.shape, eqn.params["axes"]
        if len(axes) == len(shape):
            self.in_order = True
            self.before.append(f"{register} = {start}")
            self.body.append(f"{register} = {cast(fold(monoid, register, value), dtype)}")
            self.scope.bind(out, register)
            return
        kept, first, in_register = self.partial_layout(shape, axes)
        if in_register:
            self.in_order |= first != len(self.shape) - 1
        else:
            self.summed_levels.append(self.reduced_levels(shape, axes))
        target = self.scope.fresh("r")
        if in_register:
            self.results.append((target, out, out.type.shape, dtype, None))
            self.level_open.setdefault(first, []).append(f"{register} = {start}")
            self.body.append(f"{register} = {cast(fold(monoid, register, value), dtype)}")
            self.level_close.setdefault(first, []).append(
                f"{target}[{', '.join(kept)}] = {register}")
        else:
            cell = f"{target}[{', '.join(kept)}]"
            self.results.append((target, out, out.type.shape, dtype, start))
            self.body.append(f"{cell} = {cast(fold(monoid, cell, value), dtype)}")
        self.scope.bind(out, target)

    def reduced_levels(self, shape: tuple[int, ...], axes: tuple[int, ...]) -> list[int]:
        runs = merge_runs(self.shape, shape)
        return sorted(j for axis in axes for j in range(*runs[axis]))

    def partial_layout(self, shape: tuple[int, ...], axes: tuple[int, ...]
                       ) -> tuple[list[str], int, bool]:
        """For a reduction of ``shape`` over ``axes`` (not all): the result element's index
        expressions, the first loop level it reduces over, and whether the levels from there
        on reduce only (so the sum can stay in a register opened at that level)."""
        runs = merge_runs(self.shape, shape)
        reduced = {j for axis in axes for j in range(*runs[axis])}
        kept = [self.index_of(runs[axis]) for axis in range(len(shape)) if axis not in axes]
        first = min(reduced) if reduced else len(self.shape)
        in_register = all(j in reduced or self.shape[j] == 1
                          for j in range(first, len(self.shape))) \
            and all(runs[axis][1] <= first or runs[axis][0] == runs[axis][1]
                    for axis in range(len(shape)) if axis not in axes)
        return kept, first, in_register

    # --------------------------------------------------------------- writing
    def outer_range(self) -> str:
        reduces_outer = any(
            kind in ("reduction", "point_product") for kind in self.group.kinds)
        return "range" if reduces_outer else self.scope.options.outer_range

    def write(self, stores: list[tuple[Var, str]]) -> None:
        scope = self.scope
        for target, var, shape, dtype, fill in self.results:
            scope.allocate(target, var, shape, dtype, fill)
        self.write_rows()
        for line in self.before:
            scope.line(line)
        reshaped = []
        for var, array in stores:
            reused = self.reusable(var)
            position = self.position(var.type.shape)
            if reused is not None:
                self.body.append(f"{reused}[{position}] = {self.elements[var]}")
                scope.bind(var, reused)
            elif position is not None:
                free = scope.free_array(var, self.operands())
                if free is None:
                    scope.allocate(array, var, var.type.shape, var.type.np_dtype)
                self.body.append(f"{free or array}[{position}] = {self.elements[var]}")
                scope.bind(var, free or array)
            else:
                scope.allocate(array, var, (self.group.size,), var.type.np_dtype)
                self.body.append(f"{array}[{self.flat}] = {self.elements[var]}")
                reshaped.append((var, array))
        self._level(0)
        self.bind_stores(reshaped)

    def write_rows(self) -> None:
        """Choose each row contraction's form: tiles when every one of the nest's has a tile
        form and the level looped just outside the row is one their matrices do not depend
        on, else one row at a time; allocate the scratch arrays."""
        if not self.rows and not self.products:
            return
        last = len(self.shape) - 1
        tiles = [tile for *_, tile in self.rows] + self.products
        level = self.loop_order()[last - 1] if last >= 1 else None
        if level is not None and all(t is not None for t in tiles) \
                and tiles_level(tiles, level):
            self.tiled = tiles
            allocate_tiles(self.scope, tiles, tile_rows(self.shape[level]))
            return
        # one point at a time: row 0 of each scratch array
        self.level_open.setdefault(last, [])[0:0] = [
            f"{self.tile_index} = 0", *(line for lines, *_ in self.rows for line in lines)]
        allocate_tiles(self.scope, self.products, 1)
        for product in self.products:
            self.level_close.setdefault(last, []).extend(product.accumulate("1"))
        if last == 0 or self.outer_range() == "range":
            for _, rows, shape, dtype, _ in self.rows:
                self.scope.allocate(rows, None, shape, dtype)
        else:  # under prange each outer iteration needs its own rows
            self.level_open[1][0:0] = [f"{rows} = {empty(shape, dtype)}"
                                       for _, rows, shape, dtype, _ in self.rows]

    def bind_stores(self, stores: list[tuple[Var, str]]) -> None:
        """Bind each value stored flat (one element per point of the nest) to its array,
        shaped as the value."""
        scope = self.scope
        for var, array in stores:
            shape = var.type.shape
            if len(shape) == 1:
                scope.bind(var, array)
            else:
                name = scope.fresh("a")
                scope.line(f"{name} = {array}.reshape({shape_text(shape)})")
                scope.bind(var, name)

    def operands(self) -> set[Var]:
        """Every value the nest's members read."""
        return {a for eqn in self.group.members for a in eqn.inputs if isinstance(a, Var)} \
            | self.element_reads | self.other_reads

    def reusable(self, var: Var) -> str | None:
        """An operand array the nest may store ``var`` into, element for element: of its
        shape and dtype, read only at the current element (so each element is read
        before it is overwritten), sharing its memory with no other operand, owned and
        dead after the nest (an adjoint accumulated in place, a loop carry updated in
        place). None when there is none; each is taken once."""
        scope, live = self.scope, self.scope.live
        reads = self.element_reads | self.other_reads
        for operand in sorted(self.element_reads - self.other_reads, key=lambda v: v.uid):
            if operand.type != var.type or operand in self.reused \
                    or self.position(var.type.shape) is None \
                    or not scope.can_overwrite(operand):
                continue
            root = live.root_of(operand)
            if any(live.root_of(other) is root for other in reads if other is not operand):
                continue
            self.reused.add(operand)
            return scope.read(operand)
        return None

    def loop_order(self) -> list[int]:
        """The level each depth of the nest loops over: `order` when that changes no
        result (no register summing over outer levels, no statements between them, and each
        sum in memory still meets its terms in the same order), else C order."""
        last = len(self.shape) - 1
        position = {level: depth for depth, level in enumerate(self.order)}
        if self.in_order or any(depth not in (last, len(self.shape))
                                for depth in (*self.level_open, *self.level_close)) \
                or any(sorted(levels, key=position.get) != levels
                       for levels in self.summed_levels):
            return list(range(len(self.shape)))
        return self.order

    def _level(self, level: int) -> None:
        scope = self.scope
        for line in self.level_open.get(level, []):
            scope.line(line)
        if level == len(self.shape):
            if len(self.shape) > 1:
                scope.line(f"{self.flat} = {self.index_of((0, len(self.shape)))}")
            for line in self.body:
                scope.line(line)
        else:
            loop = self.outer_range() if level == 0 else "range"
            looped = self.loop_order()[level]
            if self.tiled and level == len(self.shape) - 2:
                write_tiled_loop(scope, self.tiled, self.index[looped], self.shape[looped],
                                 self.tile_index, lambda: self._level(level + 1))
            else:
                with scope.src.block(
                        f"for {self.index[looped]} in {loop}({self.shape[looped]})"):
                    self._level(level + 1)
        for line in self.level_close.get(level, []):
            scope.line(line)


def lower_group(scope: Scope, group: Group, nest_type: type[_Nest] = _Nest) -> None:
    """Write ``group``'s loop nest (a target writes it with its own ``nest_type``); bind
    every value it defines."""
    nest = nest_type(scope, group)
    for eqn, kind in zip(group.members, group.kinds):
        nest.member(eqn, kind)
    last = scope.index
    stores: list[tuple[Var, str]] = []
    views: list[tuple[Var, Var]] = []  # reshapes of one stored value: views of its array
    origin: dict[Var, Var] = {}        # a reshape (in C order) -> the value it relabels
    stored: dict[Var, Var] = {}        # origin -> the var whose array holds it
    for eqn, kind in zip(group.members, group.kinds):
        for var in eqn.outputs:
            origin[var] = origin.get(eqn.inputs[0], eqn.inputs[0]) if kind == "alias" else var
            if var not in group.streams or scope.live.last_use.get(var, -1) <= last:
                continue
            if origin[var] in stored:
                views.append((var, stored[origin[var]]))
            else:
                stores.append((var, scope.fresh("o")))
                stored[origin[var]] = var
    nest.write(stores)
    for var, source in views:
        name = scope.fresh("a")
        scope.line(f"{name} = {scope.read(source)}.reshape({shape_text(var.type.shape)})")
        scope.bind(var, name)


LOOP_NEST.append(lower_group)


@rule(*(get_primitive(name) for name in (*REDUCTIONS, "iota", "broadcast_in_dim")))
def _alone(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    """A loop-nest member met outside any group (a rank-0 broadcast, or a reduction the
    planner left alone): a nest of its own."""
    kind = member_kind(eqn)
    if kind is None:  # broadcast of a scalar to rank 0: the value itself
        return [args[0]]
    scope.lower_group(Group.start(eqn, kind))
    return [scope.read(v) for v in eqn.outputs]
