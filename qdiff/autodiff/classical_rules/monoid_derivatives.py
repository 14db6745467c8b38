"""Derivative rules of `reduce` and `scan` (tapeless, Futhark style).

Layouts: ``reduce[op, num_consts](*consts, *neutral, *xs)`` and the same for ``scan``; the
neutral element is the leftmost operand of the fold, ``y = ne ⊙ x_0 ⊙ … ⊙ x_{n-1}``.

Forward: the tangent of a fold is a fold of pairs with the lifted operator
``(a, ȧ) ⊙' (b, ḃ) = (a ⊙ b, ∂₁⊙·ȧ + ∂₂⊙·ḃ)``, which is associative when ⊙ is; ``+`` folds
the tangents directly.

Reverse, ``reduce``:
- ``+``: ``x̄_i += ȳ`` (broadcast), ``n̄e += ȳ``.
- ``*``: zero counting: ``x̄_i += ȳ·Π_{j≠i} x_j`` (one zero: only it gets the product of the
  others; two or more: all zero), with ``ne`` counted as one more factor.
- ``max``/``min``: ``x̄_k += ȳ`` for the FIRST index k attaining the extremum; ``ne`` counts
  as index -1, so it wins ties with the elements.
- any other operator: exclusive prefix scan ``l_i = ne ⊙ x_0 ⊙ … ⊙ x_{i-1}`` and exclusive
  suffix scan ``r_i = x_{i+1} ⊙ … ⊙ x_{n-1}``; ``x̄_i += ∂(l_i ⊙ x_i ⊙ r_i)/∂x_i · ȳ`` (a map of
  the adjoint of ``λ(l, a, r) → l ⊙ a ⊙ r``). When the operator reads differentiated free
  variables, the reduce is differentiated as the last element of a scan instead.

Reverse, ``scan`` (``y_i = y_{i-1} ⊙ x_i``, ``y_{-1} = ne``):
- ``+``: ``x̄s = reverse(scan(+, 0, reverse(ȳs)))``, ``n̄e = Σ ȳs``.
- any other operator: the backward linear recurrence ``r̄_{n-1} = ȳ_{n-1}``,
  ``r̄_i = ȳ_i + J_{i+1}ᵀ r̄_{i+1}`` with ``J_i = ∂(y_{i-1} ⊙ x_i)/∂y_{i-1}``, solved as a scan
  over affine maps ``(b, M)`` with ``(b1, M1) ∘ (b2, M2) = (b2 + M2·b1, M2·M1)``; then
  ``x̄_i = ∂(y_{i-1} ⊙ x_i)/∂x_i ᵀ r̄_i`` and free variables sum their per-step adjoints.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import numpy as qnp
from ...classical.soacs import map as map_fn
from ...classical.soacs import op_kind, reduce_p, scan_p
from ...classical.soacs import scan as scan_fn
from ...ir.core import Program
from ...ir.interpreter import inline
from ...ir.primitives import get_primitive
from ...ir.tracer import bind, trace, value_type
from ...ir.types import Tensor
from ..forward import jvp_program
from ..reverse import vjp_program
from ..tangents import (
    instantiate,
    interleave_order,
    is_differentiable,
    reorder_inputs,
    zeros,
)

_CLOSED_FORM = {"add": "reduce_sum", "mul": "reduce_prod", "max": "reduce_max",
                "min": "reduce_min"}


def _parts(values: list, num_consts: int) -> tuple[list, list, list]:
    consts, rest = list(values[:num_consts]), list(values[num_consts:])
    k = len(rest) // 2
    return consts, rest[:k], rest[k:]


def _with_neutral(neutral: Any, xs: Any) -> Any:
    """``[ne, x_0, …, x_{n-1}]``: a monoid fold with ne is the closed-form reduction of this."""
    return qnp.concatenate([qnp.expand_dims(neutral, 0), xs], axis=0)


def _lifted_op(op: Program, num_consts: int, const_flags: list[bool]) -> Program:
    """The operator on (value, tangent) pairs: ``(*c, *ċ, *a, *ȧ, *b, *ḃ) -> (*a⊙b, *d(a⊙b))``."""
    k = (len(op.inputs) - num_consts) // 2
    elements = [is_differentiable(t) for t in op.in_types[num_consts:num_consts + k]]
    jop = jvp_program(op, const_flags + elements + elements)
    counts = [sum(const_flags), sum(elements), sum(elements)]
    return reorder_inputs(jop, interleave_order([num_consts, k, k], counts))


def _fold_jvp(primitive: Any) -> Any:
    def rule(values: list, tangents: list, *, op: Program, num_consts: int) -> tuple[list, list]:
        consts, neutral, xs = _parts(values, num_consts)
        t_consts, t_neutral, t_xs = _parts(tangents, num_consts)
        out = bind(primitive, *values, op=op, num_consts=num_consts)
        if op_kind(op, num_consts) == "add":
            # y = ne + Σ x  (reduce) or y_i = ne + Σ_{j≤i} x_j (scan): fold the tangents
            (t_ne,), (t_x,) = t_neutral, t_xs
            x_type = value_type(xs[0])
            summed = bind(primitive, instantiate(t_ne, value_type(neutral[0])),
                          instantiate(t_x, x_type), op=op, num_consts=0)
            return out, summed
        const_flags = [t is not None for t in t_consts]
        lifted = _lifted_op(op, num_consts, const_flags)
        diff = [is_differentiable(value_type(x)) for x in xs]
        tangent_ne = [instantiate(t, value_type(v)) for t, v, d in zip(t_neutral, neutral, diff)
                      if d]
        tangent_xs = [instantiate(t, value_type(x)) for t, x, d in zip(t_xs, xs, diff) if d]
        both = bind(primitive, *consts, *(t for t in t_consts if t is not None), *neutral,
                    *tangent_ne, *xs, *tangent_xs, op=lifted,
                    num_consts=num_consts + sum(const_flags))
        rest = iter(both[len(xs):])
        return out, [next(rest) if d else None for d in diff]

    return rule


def _reduce_vjp(cts: list, values: list, outs: list, active: list, *, op: Program,
                num_consts: int) -> list:
    consts, neutral, xs = _parts(values, num_consts)
    kind = op_kind(op, num_consts)
    if kind is not None:
        return _closed_form_vjp(kind, cts[0], neutral[0], xs[0], active)
    if any(active[:num_consts]):
        return _reduce_as_scan_vjp(cts, values, active, op=op, num_consts=num_consts)
    return _prefix_suffix_vjp(cts, consts, neutral, xs, active, op, num_consts)


def _closed_form_vjp(kind: str, ct: Any, neutral: Any, xs: Any, active: list) -> list:
    # reduce(op, ne, xs) = reduce_<op>([ne, *xs]): reuse the closed-form reduction's rule
    if ct is None:
        return [None] * len(active)
    full = _with_neutral(neutral, xs)
    primitive = get_primitive(_CLOSED_FORM[kind])
    (ct_full,) = primitive.vjp([ct], [full], [bind(primitive, full, axes=(0,))], [True],
                               axes=(0,))
    return [ct_full[0] if active[0] else None, ct_full[1:] if active[1] else None]


def _element_types(xs: list) -> list[Tensor]:
    return [Tensor(value_type(x).shape[1:], value_type(x).dtype) for x in xs]


def _prefix_suffix_vjp(cts: list, consts: list, neutral: list, xs: list, active: list,
                       op: Program, num_consts: int) -> list:
    k = len(xs)
    n = value_type(xs[0]).shape[0]
    if all(c is None for c in cts):
        return [None] * len(active)
    if n == 0:
        return [None] * num_consts + [c if flag else None
                                      for c, flag in zip(cts, active[num_consts:])] + [None] * k
    inclusive = bind(scan_p, *consts, *neutral, *xs, op=op, num_consts=num_consts)
    prefix = [_shift_in(ne, y) for ne, y in zip(neutral, inclusive)]
    flipped = reorder_inputs(op, [*range(num_consts), *range(num_consts + k, num_consts + 2 * k),
                                  *range(num_consts, num_consts + k)])
    reversed_xs = [_reverse(x) for x in xs]
    from_right = bind(scan_p, *consts, *neutral, *reversed_xs, op=flipped, num_consts=num_consts)
    suffix = [_reverse(_shift_in(ne, r)) for ne, r in zip(neutral, from_right)]
    elements = _element_types(xs)

    def around(*args: Any) -> Any:
        c, (l, a, r) = list(args[:num_consts]), _chunks(args[num_consts:], k)
        middle = inline(op, [*c, *l, *a])
        return tuple(inline(op, [*c, *middle, *r]))

    three = trace(around, *value_type_list(consts), *elements, *elements, *elements,
                  name="l⊙a⊙r")
    wanted = [False] * num_consts + [False] * k + list(active[num_consts + k:]) + [False] * k
    adjoint = vjp_program(three, wanted, with_primal=False)
    diff = [is_differentiable(e) for e in elements]
    ct_rows = [qnp.broadcast_to(instantiate(c, e), (n, *e.shape))
               for c, e, d in zip(cts, elements, diff) if d]
    ct_xs = bind(get_primitive("map"), *consts, *prefix, *xs, *suffix, *ct_rows,
                 body=adjoint, num_consts=num_consts) if any(active[num_consts + k:]) else []
    ct_xs_iter = iter(ct_xs)
    result: list[Any] = [None] * num_consts
    # ne is the leftmost factor: y = ne ⊙ T with T = x_0 ⊙ … ⊙ x_{n-1}
    if any(active[num_consts:num_consts + k]):
        total = [r[n - 1] for r in from_right]
        first = vjp_program(op, [False] * num_consts + list(active[num_consts:num_consts + k])
                            + [False] * k, with_primal=False)
        ct_ne = iter(inline(first, [*consts, *neutral, *total,
                                    *(instantiate(c, e) for c, e, d in zip(cts, elements, diff)
                                      if d)]))
        result += [next(ct_ne) if flag else None for flag in active[num_consts:num_consts + k]]
    else:
        result += [None] * k
    result += [next(ct_xs_iter) if flag else None for flag in active[num_consts + k:]]
    return result


def value_type_list(values: list) -> list:
    """The IR types of ``values``."""
    return [value_type(v) for v in values]


def _chunks(args: Any, k: int) -> list[list]:
    args = list(args)
    return [args[i:i + k] for i in range(0, len(args), k)]


def _reverse(xs: Any) -> Any:
    """``xs`` reversed along the leading axis."""
    return xs[::-1]


def _shift_in(first: Any, ys: Any) -> Any:
    """``[first, ys_0, …, ys_{n-2}]``: an inclusive scan made exclusive."""
    return qnp.concatenate([qnp.expand_dims(first, 0), ys[:-1]], axis=0)


def _reduce_as_scan_vjp(cts: list, values: list, active: list, *, op: Program,
                        num_consts: int) -> list:
    # reduce = last element of the scan: seed the scan's adjoint at its last position only
    consts, neutral, xs = _parts(values, num_consts)
    ys = bind(scan_p, *values, op=op, num_consts=num_consts)
    n = value_type(xs[0]).shape[0]
    seeded = []
    for c in cts:
        if c is None:
            seeded.append(None)
            continue
        seeded.append(qnp.concatenate([zeros(Tensor((n - 1, *value_type(c).shape),
                                                    value_type(c).dtype)),
                                       qnp.expand_dims(c, 0)], axis=0))
    return _scan_vjp(seeded, values, ys, active, op=op, num_consts=num_consts)


def _scan_vjp(cts: list, values: list, outs: list, active: list, *, op: Program,
              num_consts: int) -> list:
    consts, neutral, xs = _parts(values, num_consts)
    k = len(xs)
    if all(c is None for c in cts):
        return [None] * len(values)
    n = value_type(xs[0]).shape[0]
    if n == 0:
        return [None] * len(values)
    if op_kind(op, num_consts) == "add":
        (ct,) = cts
        # y_i = ne + Σ_{j≤i} x_j  ⇒  x̄_j = Σ_{i≥j} ȳ_i (a reversed scan), n̄e = Σ_i ȳ_i
        (from_end,) = bind(scan_p, zeros(_element_types([ct])[0]), _reverse(ct), op=op,
                           num_consts=0)
        reversed_sum = _reverse(from_end)
        return [reversed_sum[0] if active[0] else None, reversed_sum if active[1] else None]
    elements = _element_types(xs)
    diff = [is_differentiable(e) for e in elements]
    previous = [_shift_in(ne, y) for ne, y in zip(neutral, outs)]
    adjoints = _backward_recurrence(cts, consts, previous, xs, elements, diff, op, num_consts)
    wanted = list(active[:num_consts]) + diff + list(active[num_consts + k:])
    step = vjp_program(op, wanted, with_primal=False)
    per_step = bind(get_primitive("map"), *consts, *previous, *xs, *adjoints, body=step,
                    num_consts=num_consts)
    per_step = iter(per_step)
    result: list[Any] = []
    for flag in active[:num_consts]:
        result.append(qnp.sum(next(per_step), axis=0) if flag else None)
    for flag, d in zip(active[num_consts:num_consts + k], diff):
        ct_previous = next(per_step) if d else None
        result.append(ct_previous[0] if flag and d else None)
    for flag in active[num_consts + k:]:
        result.append(next(per_step) if flag else None)
    return result


def _backward_recurrence(cts: list, consts: list, previous: list, xs: list,
                         elements: list[Tensor], diff: list[bool], op: Program,
                         num_consts: int) -> list:
    """The adjoints r̄_i of the scan's outputs, one array per differentiable element."""
    n = value_type(xs[0]).shape[0]
    sizes = [e.size for e, d in zip(elements, diff) if d]
    width = sum(sizes)
    dtype = np.result_type(*(e.np_dtype for e, d in zip(elements, diff) if d))
    k = len(xs)
    flags = [False] * num_consts + diff + [False] * k
    tangent_op = jvp_program(op, flags)
    diff_types = [e for e, d in zip(elements, diff) if d]
    identity = np.eye(width, dtype=dtype)

    def jacobian_rows(*args: Any) -> Any:
        # row j of Jᵀ = J e_j: the tangent of the step for a unit tangent of the carry
        def column(unit: Any) -> Any:
            pieces = _unflatten(unit, diff_types)
            outs = inline(tangent_op, [*args, *pieces])[k:]
            return _flatten(outs)

        return bind_map(column, identity)

    transposed = _map_fn(jacobian_rows, [*consts], [*previous, *xs])   # (n, width, width): J_iᵀ
    seeds = _flatten_rows([instantiate(c, Tensor((n, *e.shape), e.dtype))
                           for c, e, d in zip(cts, elements, diff) if d], n)
    # M_j = J_{n-j}ᵀ for j ≥ 1 and M_0 = I, b_j = ȳ_{n-1-j}
    shifted = qnp.concatenate([transposed[1:], identity[None]], axis=0)
    matrices = _reverse(shifted)
    vectors = _reverse(seeds)
    solved, _ = _affine_scan(vectors, matrices, width, dtype)
    adjoints = _reverse(solved)
    pieces = _unflatten_rows(adjoints, diff_types, n)
    it = iter(pieces)
    return [next(it) for d in diff if d]


def _affine_scan(vectors: Any, matrices: Any, width: int, dtype: Any) -> tuple[Any, Any]:

    def compose(first: Any, second: Any) -> Any:
        (b1, m1), (b2, m2) = first, second
        return b2 + qnp.matmul(m2, b1), qnp.matmul(m2, m1)

    neutral = (np.zeros(width, dtype), np.eye(width, dtype=dtype))
    return scan_fn(compose, neutral, (vectors, matrices))


def _flatten(values: list) -> Any:
    return qnp.concatenate([qnp.reshape(v, (-1,)) for v in values])


def _unflatten(vector: Any, types: list[Tensor]) -> list:
    pieces, start = [], 0
    for t in types:
        pieces.append(qnp.reshape(vector[start:start + t.size], t.shape))
        start += t.size
    return pieces


def _flatten_rows(arrays: list, n: int) -> Any:
    return qnp.concatenate([qnp.reshape(a, (n, -1)) for a in arrays], axis=1)


def _unflatten_rows(matrix: Any, types: list[Tensor], n: int) -> list:
    pieces, start = [], 0
    for t in types:
        pieces.append(qnp.reshape(matrix[:, start:start + t.size], (n, *t.shape)))
        start += t.size
    return pieces


def bind_map(fn: Any, *xs: Any) -> Any:
    """``qdiff.map(fn, *xs)`` (a traced map over the leading axis)."""

    return map_fn(fn, *xs)


def _map_fn(fn: Any, free: list, mapped: list) -> Any:
    """Map ``fn(*free, *row)`` over the rows of ``mapped`` with ``free`` read inside."""
    return bind_map(lambda *row: fn(*free, *row), *mapped)


reduce_p.jvp = _fold_jvp(reduce_p)
scan_p.jvp = _fold_jvp(scan_p)
reduce_p.vjp = _reduce_vjp
scan_p.vjp = _scan_vjp
