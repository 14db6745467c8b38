"""Derivative rules of the indexing primitives (`qdiff.classical.indexing`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import numpy as qnp
from ...classical.indexing import dynamic_slice_p, dynamic_update_slice_p, gather_p, unpack_p
from ...ir.tracer import Tracer, bind, value_type
from ...ir.types import Tensor
from ..rules import def_cotangent, def_linear, def_tangent
from ..tangents import instantiate, zeros
from .indexed_derivatives import hist_rows


def _dynamic_slice_transpose(ct: Any, values: list, *, sizes: tuple[int, ...]) -> Any:
    # y = x[s:s+n]  ⇒  x̄ = zeros with x̄[s:s+n] = ȳ
    x, *starts = values
    return bind(dynamic_update_slice_p, zeros(value_type(x)), ct, *starts)


def _update_tangent(values: list, tangents: list, out: Any) -> Any:
    (x, update, *starts), (tx, tu, *_) = values, tangents
    if tx is None and tu is None:
        return None
    return bind(dynamic_update_slice_p, instantiate(tx, value_type(x)),
                instantiate(tu, value_type(update)), *starts)


def _update_cotangent(ct: Any, values: list, out: Any, active: list) -> list:
    # y = x with block ← u  ⇒  x̄ = ȳ with the block zeroed (overwritten), ū = ȳ[block]
    x, update, *starts = values
    u_type = value_type(update)
    ct_x = bind(dynamic_update_slice_p, ct, zeros(u_type), *starts) if active[0] else None
    ct_u = bind(dynamic_slice_p, ct, *starts, sizes=u_type.shape) if active[1] else None
    return [ct_x, ct_u] + [None] * len(starts)


def _gather_transpose(ct: Any, values: list, *, axis: int) -> Any:
    # y = take(x, idx, axis)  ⇒  x̄[idx[k]] += ȳ[k] along axis (a histogram with +)
    x, indices = values
    x_type, i_type = value_type(x), value_type(indices)
    size, rank = x_type.shape[axis], len(i_type.shape)
    flat = qnp.reshape(indices, (-1,))
    flat = qnp.where(flat < 0, flat + size, flat)
    ct_type = value_type(ct)
    order = list(range(axis, axis + rank)) + [a for a in range(ct_type.ndim)
                                               if not axis <= a < axis + rank]
    rest = tuple(d for a, d in enumerate(x_type.shape) if a != axis)
    rows = qnp.reshape(qnp.transpose(ct, order), (int(np.prod(i_type.shape)), *rest))
    summed = hist_rows(zeros(Tensor((size, *rest), x_type.dtype)), "add", 0.0, flat, rows)
    return qnp.moveaxis(summed, 0, axis)


def_linear(dynamic_slice_p, _dynamic_slice_transpose)
def_tangent(dynamic_update_slice_p, _update_tangent)
def_cotangent(dynamic_update_slice_p, _update_cotangent)
def_linear(gather_p, _gather_transpose)


def _unpack_tangent(values: list, tangents: list, **params: Any) -> tuple[list, list]:
    outs = list(bind(unpack_p, *values, **params))
    if tangents[0] is None:
        return outs, [None] * len(outs)
    return outs, list(bind(unpack_p, tangents[0], **params))


def _unpack_cotangent(cts: list, values: list, outs: list, active: list, *,
                      indices: tuple[int, ...]) -> list:
    # y_k = x.flat[i_k]  ⇒  x̄.flat[i_k] += ȳ_k
    (x,) = values
    x_type = value_type(x)
    if not any(isinstance(c, Tracer) for c in cts):  # eager (the adjoint sweep): NumPy
        flat = np.zeros(x_type.size, x_type.np_dtype)
        for i, c in zip(indices, cts):
            if c is not None:
                flat[i] += c
        return [flat.reshape(x_type.shape)]
    column = qnp.stack([zeros(Tensor((), x_type.dtype)) if c is None else c for c in cts])
    flat = _gather_transpose(column, [qnp.reshape(x, (-1,)), np.asarray(indices)], axis=0)
    return [qnp.reshape(flat, x_type.shape)]


unpack_p.jvp = _unpack_tangent
unpack_p.vjp = _unpack_cotangent
