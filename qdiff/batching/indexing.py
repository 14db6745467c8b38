"""Batching rules of the indexing primitives: `dynamic_slice`, `dynamic_update_slice`,
`gather` and `unpack`.

Start indices shared by the batch slice every member at once along one more axis; an
index array read by every member gathers once and moves the batch axis in front; indices
that differ per member (and per member arrays) go member by member (`per_member`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..classical import indexing as ops
from ..classical.shape import reshape_p, slice_p
from ..ir.tracer import bind, value_type
from .interpreter import def_batch, materialize, move_axis, per_member

Rule = tuple[list[Any], list[bool]]
_ZERO = np.asarray(0, np.int64)


def _dynamic_slice(values: list, batched: list, size: int, *, sizes: tuple[int, ...]) -> Rule:
    if any(batched[1:]):
        return per_member(ops.dynamic_slice_p, values, batched, size, sizes=sizes)
    return [bind(ops.dynamic_slice_p, values[0], _ZERO, *values[1:],
                 sizes=(size, *sizes))], [True]


def _dynamic_update_slice(values: list, batched: list, size: int) -> Rule:
    if any(batched[2:]):
        return per_member(ops.dynamic_update_slice_p, values, batched, size)
    x, update = (materialize(v, b, size) for v, b in zip(values[:2], batched[:2]))
    return [bind(ops.dynamic_update_slice_p, x, update, _ZERO, *values[2:])], [True]


def _gather(values: list, batched: list, size: int, *, axis: int) -> Rule:
    x, indices = values
    if batched[0] and batched[1]:
        return per_member(ops.gather_p, values, batched, size, axis=axis)
    if batched[0]:
        return [bind(ops.gather_p, x, indices, axis=axis + 1)], [True]
    # one array, indices per member: the batch axis lands where `axis` was
    return [move_axis(bind(ops.gather_p, x, indices, axis=axis), axis, 0)], [True]


def _unpack(values: list, batched: list, size: int, *, indices: tuple[int, ...]) -> Rule:
    flat = bind(reshape_p, values[0], shape=(size, value_type(values[0]).size // size))
    outs = [bind(reshape_p, bind(slice_p, flat, start=(0, i), limit=(size, i + 1),
                                 strides=(1, 1)), shape=(size,)) for i in indices]
    return outs, [True] * len(outs)


def_batch(ops.dynamic_slice_p, _dynamic_slice)
def_batch(ops.dynamic_update_slice_p, _dynamic_update_slice)
def_batch(ops.gather_p, _gather)
def_batch(ops.unpack_p, _unpack)
