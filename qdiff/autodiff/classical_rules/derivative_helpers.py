"""Array pieces shared by the derivative rules of reductions and SOACs.

``product_of_others`` gives ``∂(Π x)/∂x_i = Π_{j≠i} x_j`` by counting zeros instead of
dividing by x_i, so it is exact when elements are zero; ``first_extremum_mask`` marks the
first index (row-major over the reduced axes) attaining a maximum or minimum.

>>> product_of_others(np.array([0.0, 2.0, 3.0]), (0,)).tolist()
[6.0, 0.0, 0.0]
>>> first_extremum_mask(np.array([1.0, 5.0, 5.0]), (0,), "max").tolist()
[0.0, 1.0, 0.0]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import numpy as qnp
from ...ir.primitives import get_primitive
from ...ir.tracer import record, value_type


def expand_back(value: Any, shape: tuple[int, ...], axes: tuple[int, ...]) -> Any:
    """A reduction's result ``value`` broadcast back over the reduced ``axes`` of ``shape``."""
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    if tuple(shape) == value_type(value).shape:
        return value
    return record(get_primitive("broadcast_in_dim"), value, shape=tuple(shape),
                  broadcast_dimensions=kept)


def product_of_zeros(count: Any, first: Any, second: Any) -> Any:
    """The product of ``count`` elements that are all 0, given ``first = Σ z`` and
    ``second = Σ z²`` over them, written so that its derivatives up to second order are right.

    The value is 1 for no element and 0 otherwise, but the m-th derivative along m zero
    elements is 1: this is the elementary symmetric polynomial ``e_count`` of the elements
    (``e_1 = Σ z``, ``e_2 = ((Σ z)² - Σ z²) / 2``), whose value is 0 and whose derivatives
    up to second order are those of the product. Products computed by counting zeros use it
    so that their derivative rules can be differentiated again (Hessians stay right).
    """
    return qnp.where(qnp.equal(count, 0), 1.0,
                     qnp.where(qnp.equal(count, 1), first,
                               qnp.where(qnp.equal(count, 2), (first * first - second) * 0.5,
                                         0.0)))


def product_of_others(x: Any, axes: tuple[int, ...]) -> Any:
    """For each element, the product of the other elements along ``axes``.

    Computed without dividing by zero: ``Π_{j≠i} x_j = (P / s_i) · Z_i`` where ``s`` is x
    with its zeros replaced by ones, ``P = Π s`` and ``Z_i`` is the `product_of_zeros` of
    the zero elements other than i, so that its derivatives are right too.
    """
    shape = value_type(x).shape
    is_zero = qnp.equal(x, 0)
    safe = qnp.where(is_zero, 1.0, x)
    nonzero_product = expand_back(qnp.prod(safe, axes), shape, axes)
    zeros_only = qnp.where(is_zero, x, 0.0)  # the zero elements, traced (their values are 0)

    def others(values: Any) -> Any:
        # Σ_{j≠i} along axes, for each i
        return expand_back(qnp.sum(values, axes), shape, axes) - values

    zero_factor = product_of_zeros(others(qnp.astype(is_zero, np.int64)), others(zeros_only),
                                   others(zeros_only * zeros_only))
    return nonzero_product / safe * zero_factor


def first_extremum_mask(x: Any, axes: tuple[int, ...], kind: str) -> Any:
    """1 at the first index of each group along ``axes`` attaining its max (or min), else 0.

    Ties go to the smallest index in row-major order over ``axes``, as NumPy's argmax.
    """
    t = value_type(x)
    kept = [i for i in range(t.ndim) if i not in axes]
    perm = kept + list(axes)
    kept_shape = tuple(t.shape[i] for i in kept)
    size = int(np.prod([t.shape[a] for a in axes], dtype=np.int64))
    flat = qnp.reshape(qnp.transpose(x, perm), (*kept_shape, size))
    winner = (qnp.argmax if kind == "max" else qnp.argmin)(flat, axis=len(kept_shape))
    positions = record(get_primitive("iota"), shape=(*kept_shape, size),
                       dimension=len(kept_shape), dtype="int64")
    onehot = qnp.astype(qnp.equal(positions, qnp.expand_dims(winner, -1)), t.np_dtype)
    moved = qnp.reshape(onehot, tuple(t.shape[i] for i in perm))
    return qnp.transpose(moved, list(np.argsort(perm)))
