"""Batching rules of the shape primitives: the batch axis is one more leading axis that
each of them leaves in place."""

from __future__ import annotations

from typing import Any

from ..classical import shape as ops
from ..ir.tracer import bind
from .interpreter import def_batch, materialize

Rule = tuple[list[Any], list[bool]]


def _reshape(values: list, batched: list, size: int, *, shape: tuple[int, ...]) -> Rule:
    return [bind(ops.reshape_p, values[0], shape=(size, *shape))], [True]


def _transpose(values: list, batched: list, size: int, *, perm: tuple[int, ...]) -> Rule:
    return [bind(ops.transpose_p, values[0], perm=(0, *(p + 1 for p in perm)))], [True]


def _broadcast(values: list, batched: list, size: int, *, shape: tuple[int, ...],
               broadcast_dimensions: tuple[int, ...]) -> Rule:
    dims = (0, *(d + 1 for d in broadcast_dimensions))
    return [bind(ops.broadcast_in_dim_p, values[0], shape=(size, *shape),
                 broadcast_dimensions=dims)], [True]


def _concatenate(values: list, batched: list, size: int, *, axis: int) -> Rule:
    parts = [materialize(x, b, size) for x, b in zip(values, batched)]
    return [bind(ops.concatenate_p, *parts, axis=axis + 1)], [True]


def _slice(values: list, batched: list, size: int, *, start: tuple[int, ...],
           limit: tuple[int, ...], strides: tuple[int, ...]) -> Rule:
    return [bind(ops.slice_p, values[0], start=(0, *start), limit=(size, *limit),
                 strides=(1, *strides))], [True]


def _rev(values: list, batched: list, size: int, *, axes: tuple[int, ...]) -> Rule:
    return [bind(ops.rev_p, values[0], axes=tuple(a + 1 for a in axes))], [True]


def_batch(ops.reshape_p, _reshape)
def_batch(ops.transpose_p, _transpose)
def_batch(ops.broadcast_in_dim_p, _broadcast)
def_batch(ops.concatenate_p, _concatenate)
def_batch(ops.slice_p, _slice)
def_batch(ops.rev_p, _rev)
# iota has no operands, so it is never batched
