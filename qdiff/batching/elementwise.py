"""Batching rules of the elementwise primitives: one generic rule, read off the
``elementwise`` flag, and the identity rule of `stop_gradient`.

Elementwise operands share one shape or are rank 0; with the batch axis in front, a batched
rank-0 operand becomes a vector that no longer broadcasts, so it is spread over the member
shape, and an unbatched operand of the member shape is repeated over the batch (an
unbatched rank-0 operand still broadcasts as it is).
"""

from __future__ import annotations

from typing import Any

from ..autodiff.stop_gradient import stop_gradient_p
from ..classical.shape import broadcast_in_dim_p
from ..ir.primitives import Primitive, elementwise_primitives
from ..ir.tracer import bind
from .interpreter import def_batch, leading_axes_rule, materialize, member_shape


def _elementwise_rule(primitive: Primitive):
    def rule(values: list[Any], batched: list[bool], size: int,
             **params: Any) -> tuple[list[Any], list[bool]]:
        shapes = [member_shape(x, b) for x, b in zip(values, batched)]
        shape = max(shapes, key=len)
        operands = []
        for x, b, s in zip(values, batched, shapes):
            if b and s != shape:  # a batched scalar: spread over the member shape
                x = bind(broadcast_in_dim_p, x, shape=(size, *shape), broadcast_dimensions=(0,))
            elif not b and s:
                x = materialize(x, False, size)
            operands.append(x)
        return [bind(primitive, *operands, **params)], [True]

    return rule


for _primitive in elementwise_primitives():
    def_batch(_primitive, _elementwise_rule(_primitive))
def_batch(stop_gradient_p, leading_axes_rule(stop_gradient_p))
