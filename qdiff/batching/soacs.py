"""Batching rules of the array combinators: `map`, `reduce`, `scan`, `hist`, `scatter`.

- ``map``: a lambda of scalars built from elementwise primitives (what fusion makes) maps
  over the batch and the mapped axis flattened into one, so it stays one vectorized pass;
  any other lambda is batched itself and maps over the mapped axis, each step handling the
  whole batch.
- ``reduce`` and ``scan``: the operator is batched (an ``add`` of scalars becomes an ``add``
  of vectors, still a known monoid) and folds along the mapped axis, moved first.
- ``hist`` and ``scatter``: members' destinations are stacked into one, each member's
  indices offset into its own block (indices outside a member's destination stay ignored).
  An operator or neutral element that differs per member goes member by member.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autodiff.tangents import reorder_inputs
from ..classical import soacs
from ..classical.elementwise import PRIMITIVES, select_p
from ..classical.shape import broadcast_in_dim_p, iota_p, reshape_p
from ..ir.tracer import bind, value_type
from .interpreter import batch_subprogram, def_batch, materialize, move_axis, per_member

Rule = tuple[list[Any], list[bool]]


def _merge_leading(x: Any) -> Any:
    """``(size, n, ...)`` as ``(size * n, ...)``."""
    shape = value_type(x).shape
    return bind(reshape_p, x, shape=(shape[0] * shape[1], *shape[2:]))


def _split_leading(x: Any, size: int) -> Any:
    shape = value_type(x).shape
    return bind(reshape_p, x, shape=(size, shape[0] // size, *shape[1:]))


def _map(values: list, batched: list, size: int, *, body: Any, num_consts: int,
         **mode: Any) -> Rule:
    consts, xs = values[:num_consts], values[num_consts:]
    const_flags, x_flags = batched[:num_consts], batched[num_consts:]
    if soacs.scalar_elementwise(body):
        # members and rows in one mapped axis; batched consts become mapped operands
        n = value_type(xs[0]).shape[int(x_flags[0])]
        shared = [k for k, b in enumerate(const_flags) if not b]
        spread = [k for k, b in enumerate(const_flags) if b]
        rows = [bind(broadcast_in_dim_p, consts[k], shape=(size, n), broadcast_dimensions=(0,))
                for k in spread]
        rows += [materialize(x, b, size) for x, b in zip(xs, x_flags)]
        order = shared + spread + list(range(num_consts, len(values)))
        outs = bind(
            soacs.map_p, *(consts[k] for k in shared), *map(_merge_leading, rows),
            body=reorder_inputs(body, order), num_consts=len(shared), **mode)
        return [_split_leading(y, size) for y in outs], [True] * len(outs)
    batched_body, _ = batch_subprogram(body, batched, size, force=[True] * len(body.outputs))
    rows = [move_axis(x, 0, 1) if b else x for x, b in zip(xs, x_flags)]
    outs = bind(soacs.map_p, *consts, *rows, body=batched_body, num_consts=num_consts, **mode)
    return [move_axis(y, 1, 0) for y in outs], [True] * len(outs)


def _monoid(primitive: Any, stacked: bool):
    def rule(values: list, batched: list, size: int, *, op: Any, num_consts: int) -> Rule:
        consts, rest = values[:num_consts], values[num_consts:]
        k = len(rest) // 2
        elements = [materialize(x, b, size) for x, b in zip(rest, batched[num_consts:])]
        neutral, xs = elements[:k], [move_axis(x, 0, 1) for x in elements[k:]]
        batched_op, _ = batch_subprogram(op, [*batched[:num_consts], *[True] * (2 * k)], size,
                                         force=[True] * k)
        outs = bind(primitive, *consts, *neutral, *xs, op=batched_op, num_consts=num_consts)
        return [move_axis(y, 1, 0) if stacked else y for y in outs], [True] * k

    return rule


def _flat_indices(indices: Any, batched: bool, size: int, length: int) -> Any:
    """Each member's indices into its block of the stacked destination (``size * length``
    rows); indices outside ``[0, length)`` point past the end, so they stay ignored."""
    indices = materialize(indices, batched, size)
    t = value_type(indices)
    dtype = t.np_dtype
    offsets = bind(PRIMITIVES["mul"], bind(iota_p, shape=t.shape, dimension=0, dtype=t.dtype),
                   np.asarray(length, dtype))
    inside = bind(PRIMITIVES["and"], bind(PRIMITIVES["ge"], indices, np.asarray(0, dtype)),
                  bind(PRIMITIVES["lt"], indices, np.asarray(length, dtype)))
    flat = bind(select_p, inside, bind(PRIMITIVES["add"], indices, offsets),
                np.asarray(size * length, dtype))
    return bind(reshape_p, flat, shape=(t.size,))


def _hist(values: list, batched: list, size: int, *, op: Any, num_consts: int) -> Rule:
    if any(batched[:num_consts]) or batched[num_consts + 1]:
        # an operator or neutral element per member
        return per_member(soacs.hist_p, values, batched, size, op=op, num_consts=num_consts)
    dest, neutral, indices, updates = values[num_consts:]
    dest, flat, updates = _stacked(dest, indices, updates, batched[num_consts:], size)
    out = bind(soacs.hist_p, *values[:num_consts], dest, neutral, flat, updates, op=op,
               num_consts=num_consts)
    return [_split_leading(out, size)], [True]


def _scatter(values: list, batched: list, size: int) -> Rule:
    dest, indices, updates = values
    dest, flat, updates = _stacked(dest, indices, updates, batched, size)
    return [_split_leading(bind(soacs.scatter_p, dest, flat, updates), size)], [True]


def _stacked(dest: Any, indices: Any, updates: Any, batched: list,
             size: int) -> tuple[Any, Any, Any]:
    """Every member's destination stacked into one, with the indices and values that
    update each member's block. ``batched`` flags (dest, [neutral,] indices, values)."""
    dest = materialize(dest, batched[0], size)
    flat = _flat_indices(indices, batched[-2], size, value_type(dest).shape[1])
    return _merge_leading(dest), flat, _merge_leading(materialize(updates, batched[-1], size))


def_batch(soacs.map_p, _map)
def_batch(soacs.reduce_p, _monoid(soacs.reduce_p, stacked=False))
def_batch(soacs.scan_p, _monoid(soacs.scan_p, stacked=True))
def_batch(soacs.hist_p, _hist)
def_batch(soacs.scatter_p, _scatter)
