"""Derivative rules of `hist` (reduce-by-index) and `scatter`.

``h = hist(dest, ⊙, is, vs)``: ``h[b] = dest[b] ⊙ (⊙_{i: is_i = b} vs_i)``; indices out of
range are ignored (so are their derivatives). Rewrites, with ``b = is_i``:
- ``+``: ``ḣ = hist(+, ḋest, is, v̇s)``; ``d̄est = h̄``, ``v̄s_i = h̄[b]`` (a gather).
- ``*``: per bin, ``nz[b]`` = product of its nonzero values and ``Z[b]`` the product of its
  zero values (`product_of_zeros`: 1 without zeros, else 0 with the right derivatives); the
  bin's product is ``P[b] = nz[b]·Z[b]`` and ``h = dest·P``;
  ``∂P[b]/∂v_i = nz[b]/s_i · Z_i[b]`` (``s_i``: v_i, or 1 when v_i = 0; ``Z_i[b]``: the
  product of the bin's zeros other than v_i); ``d̄est = P·h̄``,
  ``v̄s_i = dest[b]·h̄[b]·∂P[b]/∂v_i``.
- ``max``/``min``: the derivative goes to the winner of each bin: ``dest[b]`` when it attains
  ``h[b]`` (dest wins ties), else the first index i attaining it.
- any other operator: the forward sweep replays the updates and saves each overwritten bin
  value ``old_i``; the reverse sweep walks the updates backwards:
  ``(ōld_i, v̄_i) = ∂⊙(old_i, v_i)ᵀ·h̄[b]``, ``h̄[b] = ōld_i``.

``y = scatter(dest, is, vs)`` (last write wins): ``ẏ = scatter(ḋest, is, v̇s)``;
``v̄s_i = h̄[is_i]`` for the writes that survive, ``d̄est = scatter(ȳ, is, 0)`` (overwritten
cells have zero sensitivity). The forward sweep need not save the overwritten values: in
SSA form ``dest`` is still in scope.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import numpy as qnp
from ...classical.soacs import hist, hist_p, op_kind, scatter, scatter_p
from ...ir.control_flow import fori_loop
from ...ir.core import Program
from ...ir.interpreter import inline
from ...ir.primitives import get_primitive
from ...ir.tracer import bind, record, value_type
from ...ir.types import Tensor
from ..forward import jvp_program
from ..reverse import vjp_program
from ..tangents import instantiate, zeros
from .derivative_helpers import product_of_zeros


def hist_rows(dest: Any, op: str, fill: Any, indices: Any, values: Any) -> Any:
    """``hist`` with the neutral element ``fill`` spread over a row of ``dest``."""
    element = value_type(dest)
    neutral = np.full(element.shape[1:], fill, element.np_dtype)
    return hist(dest, op, neutral, indices, values)


def _in_range(indices: Any, size: int) -> Any:
    return qnp.logical_and(indices >= 0, indices < size)


def _rows(mask: Any, like: Any) -> Any:
    """A per-index mask broadcast over the trailing axes of ``like``."""
    shape = value_type(like).shape
    return qnp.broadcast_to(qnp.reshape(mask, (shape[0],) + (1,) * (len(shape) - 1)), shape) \
        if len(shape) > 1 else mask


def gather_rows(table: Any, indices: Any) -> Any:
    """``table[indices[i]]`` per i, zero where the index is out of range."""
    size = value_type(table).shape[0]
    valid = _in_range(indices, size)
    picked = bind(get_primitive("gather"), table, qnp.where(valid, indices, 0), axis=0)
    return qnp.where(_rows(valid, picked), picked, 0.0)


def _iota(n: int, like: Any) -> Any:
    """Index i in row i, broadcast over the trailing axes of ``like``."""
    shape = value_type(like).shape
    return record(get_primitive("iota"), shape=shape, dimension=0, dtype="int64")


def _product_parts(dest: Any, indices: Any, values: Any) -> tuple[Any, Any]:
    """(P, ∂P[b]/∂v_i): the per-bin product of values and each value's partial of it."""
    d_type = value_type(dest)
    valid = _rows(_in_range(indices, d_type.shape[0]), values)
    is_zero = qnp.logical_and(valid, qnp.equal(values, 0))
    safe = qnp.where(qnp.logical_or(is_zero, qnp.logical_not(valid)), 1.0, values)
    zero_flags = qnp.astype(is_zero, np.int64)
    zeros_only = qnp.where(is_zero, values, 0.0)  # the zero values, traced (they are 0)
    squares = zeros_only * zeros_only
    counts, firsts, seconds = (
        hist_rows(zeros(d_type.with_dtype(value_type(v).dtype)), "add", 0, indices, v)
        for v in (zero_flags, zeros_only, squares))
    nonzero = hist_rows(qnp.full_like(zeros(d_type), 1.0), "mul", 1.0, indices, safe)
    product = nonzero * product_of_zeros(counts, firsts, seconds)
    # the partial of v_i: the bin's nonzero values but v_i, times the bin's other zeros
    bin_count, bin_first, bin_second, bin_nonzero = (gather_rows(t, indices) for t in (
        counts, firsts, seconds, nonzero))
    partial = bin_nonzero / safe * product_of_zeros(bin_count - zero_flags,
                                                    bin_first - zeros_only, bin_second - squares)
    return product, partial


def _winners(dest: Any, indices: Any, values: Any, out: Any) -> tuple[Any, Any]:
    """(dest wins, value i wins): who attains each bin's max/min, dest first then lowest i."""
    n = value_type(values).shape[0]
    dest_wins = qnp.equal(dest, out)
    valid = _rows(_in_range(indices, value_type(dest).shape[0]), values)
    candidate = qnp.logical_and(valid, qnp.logical_and(
        qnp.equal(values, gather_rows(out, indices)),
        qnp.logical_not(gather_rows(qnp.astype(dest_wins, np.int64), indices) > 0)))
    order = _iota(n, values)
    first = hist_rows(qnp.full_like(zeros(value_type(dest).with_dtype("int64")), n), "min", n,
                      indices, qnp.where(candidate, order, n))
    return dest_wins, qnp.logical_and(candidate, qnp.equal(gather_rows(first, indices), order))


def _replay(consts: list, dest: Any, indices: Any, values: Any, op: Program,
            tangents: tuple | None = None) -> tuple[Any, Any, Any]:
    """Run the updates one by one; returns (result, saved old bin values, result tangent)."""
    size, n = value_type(dest).shape[0], value_type(values).shape[0]
    olds = zeros(value_type(values))
    tangent_op = None
    if tangents is not None:
        t_consts, t_dest, t_values = tangents
        flags = [t is not None for t in t_consts] + [True, True]
        tangent_op = jvp_program(op, flags)
        live_t_consts = [t for t in t_consts if t is not None]

    def step(i: Any, carry: Any) -> Any:
        acc, saved, t_acc = carry
        b = qnp.getitem(indices, i)
        valid = qnp.logical_and(b >= 0, b < size)
        slot = qnp.where(valid, b, 0)
        old, value = acc[slot], qnp.getitem(values, i)
        if tangent_op is None:
            (new,) = inline(op, [*consts, old, value])
            t_new = t_acc
        else:
            new, t_step = inline(tangent_op, [*consts, old, value, *live_t_consts,
                                              t_acc[slot], qnp.getitem(t_values, i)])
            t_new = t_acc.at[slot].set(qnp.where(valid, t_step, t_acc[slot]))
        return (acc.at[slot].set(qnp.where(valid, new, old)), saved.at[i].set(old), t_new)

    start_t = None if tangents is None else tangents[1]
    result, saved, t_result = fori_loop(0, n, step, (dest, olds, start_t if start_t is not None
                                                      else zeros(value_type(dest))))
    return result, saved, t_result


def _hist_jvp(values: list, tangents: list, *, op: Program, num_consts: int) -> tuple[list, list]:
    consts, (dest, neutral, indices, vals) = values[:num_consts], values[num_consts:]
    t_consts, (t_dest, _, _, t_vals) = tangents[:num_consts], tangents[num_consts:]
    out = bind(hist_p, *values, op=op, num_consts=num_consts)
    kind = op_kind(op, num_consts)
    d_type, v_type = value_type(dest), value_type(vals)
    if kind == "add":
        tangent = bind(hist_p, instantiate(t_dest, d_type), neutral, indices,
                       instantiate(t_vals, v_type), op=op, num_consts=0)
    elif kind == "mul":
        product, partial = _product_parts(dest, indices, vals)
        tangent = instantiate(t_dest, d_type) * product
        if t_vals is not None:
            tangent = tangent + dest * hist_rows(zeros(d_type), "add", 0.0, indices,
                                                 t_vals * partial)
    elif kind in ("max", "min"):
        dest_wins, value_wins = _winners(dest, indices, vals, out)
        tangent = qnp.where(dest_wins, instantiate(t_dest, d_type), 0.0)
        if t_vals is not None:
            tangent = tangent + hist_rows(zeros(d_type), "add", 0.0, indices,
                                          qnp.where(value_wins, t_vals, 0.0))
    else:
        _, _, tangent = _replay(consts, dest, indices, vals, op,
                                (t_consts, instantiate(t_dest, d_type),
                                 instantiate(t_vals, v_type)))
    return [out], [tangent]


def _hist_vjp(cts: list, values: list, outs: list, active: list, *, op: Program,
              num_consts: int) -> list:
    (ct,) = cts
    consts, (dest, _, indices, vals) = values[:num_consts], values[num_consts:]
    if ct is None:
        return [None] * len(values)
    kind = op_kind(op, num_consts)
    want_dest, want_vals = active[num_consts], active[num_consts + 3]
    ct_consts: list[Any] = [None] * num_consts
    if kind == "add":
        ct_dest, ct_vals = ct, gather_rows(ct, indices)
    elif kind == "mul":
        product, partial = _product_parts(dest, indices, vals)
        ct_dest, ct_vals = ct * product, gather_rows(ct * dest, indices) * partial
    elif kind in ("max", "min"):
        dest_wins, value_wins = _winners(dest, indices, vals, outs[0])
        ct_dest = qnp.where(dest_wins, ct, 0.0)
        ct_vals = qnp.where(value_wins, gather_rows(ct, indices), 0.0)
    else:
        ct_consts, ct_dest, ct_vals = _replay_backwards(consts, dest, indices, vals, op, ct,
                                                        active[:num_consts])
    return [*ct_consts, ct_dest if want_dest else None, None, None,
            ct_vals if want_vals else None]


def _replay_backwards(consts: list, dest: Any, indices: Any, values: Any, op: Program,
                      ct: Any, const_flags: list) -> tuple[list, Any, Any]:
    _, saved, _ = _replay(consts, dest, indices, values, op)
    size, n = value_type(dest).shape[0], value_type(values).shape[0]
    adjoint = vjp_program(op, [*const_flags, True, True], with_primal=False)
    live = [k for k, flag in enumerate(const_flags) if flag]
    start = (ct, zeros(value_type(values)), [zeros(value_type(consts[k])) for k in live])

    def step(j: Any, carry: Any) -> Any:
        ct_acc, ct_vals, ct_consts = carry
        i = n - 1 - j
        b = qnp.getitem(indices, i)
        valid = qnp.logical_and(b >= 0, b < size)
        slot = qnp.where(valid, b, 0)
        seed = qnp.where(valid, ct_acc[slot], 0.0)
        value = qnp.getitem(values, i)
        *c_bar, old_bar, value_bar = inline(adjoint, [*consts, saved[i], value, seed])
        ct_acc = ct_acc.at[slot].set(qnp.where(valid, old_bar, ct_acc[slot]))
        return ct_acc, ct_vals.at[i].set(value_bar), [a + c for a, c in zip(ct_consts, c_bar)]

    ct_dest, ct_vals, summed = fori_loop(0, n, step, start)
    by_const = dict(zip(live, summed))
    return [by_const.get(k) for k in range(len(consts))], ct_dest, ct_vals


def _scatter_jvp(values: list, tangents: list) -> tuple[list, list]:
    dest, indices, vals = values
    t_dest, _, t_vals = tangents
    out = bind(scatter_p, dest, indices, vals)
    return [out], [scatter(instantiate(t_dest, value_type(dest)), indices,
                           instantiate(t_vals, value_type(vals)))]


def _scatter_vjp(cts: list, values: list, outs: list, active: list) -> list:
    (ct,) = cts
    dest, indices, vals = values
    if ct is None:
        return [None, None, None]
    n, size = value_type(vals).shape[0], value_type(dest).shape[0]
    order = record(get_primitive("iota"), shape=(n,), dimension=0, dtype="int64")
    valid = _in_range(indices, size)
    last = hist_rows(qnp.full_like(zeros(Tensor((size,), "int64")), -1), "max", -1, indices,
                     order)
    survives = qnp.logical_and(valid, qnp.equal(gather_rows(last, indices), order))
    ct_vals = qnp.where(_rows(survives, vals), gather_rows(ct, indices), 0.0)
    ct_dest = scatter(ct, indices, zeros(value_type(vals)))
    return [ct_dest if active[0] else None, None, ct_vals if active[2] else None]


hist_p.jvp = _hist_jvp
hist_p.vjp = _hist_vjp
scatter_p.jvp = _scatter_jvp
scatter_p.vjp = _scatter_vjp
