"""Batching rules of the reductions: the reduced axes shift past the batch axis."""

from __future__ import annotations

from typing import Any

from ..classical import reductions
from ..ir.primitives import Primitive
from ..ir.tracer import bind
from .interpreter import def_batch


def _over_axes(primitive: Primitive):
    def rule(values: list[Any], batched: list[bool], size: int, *,
             axes: tuple[int, ...]) -> tuple[list[Any], list[bool]]:
        return [bind(primitive, values[0], axes=tuple(a + 1 for a in axes))], [True]

    return rule


def _along_axis(primitive: Primitive):
    def rule(values: list[Any], batched: list[bool], size: int, *,
             axis: int) -> tuple[list[Any], list[bool]]:
        return [bind(primitive, values[0], axis=axis + 1)], [True]

    return rule


for _primitive in (reductions.reduce_sum_p, reductions.reduce_prod_p, reductions.reduce_max_p,
                   reductions.reduce_min_p):
    def_batch(_primitive, _over_axes(_primitive))
for _primitive in (reductions.argmax_p, reductions.argmin_p):
    def_batch(_primitive, _along_axis(_primitive))
