"""Batching rules of `loop`, `while` and `cond`.

- ``loop``: the body is batched; a carry is batched when it enters batched or the body
  makes it so (a fixed point). Bounds that differ per member run the loop from the
  smallest start to the largest stop, and each member keeps its carry outside its own
  range (``select`` on a mask).
- ``while``: with a test shared by the batch, the body is batched. A test that differs per
  member runs the loop while any member's test holds; members whose test has failed keep
  their carry (as JAX does), and the test's own update of the carry applies to a member
  only while it runs.
- A loop's inverse step (reverse computing) is batched with its body, masked like it;
  where a member's steps cannot be told apart in reverse (a while loop whose test differs
  per member), the batched loop drops it and its reversal stores carries instead.
- ``cond``: with a shared predicate, each branch is batched; with a predicate per member,
  every branch runs on the whole batch and each member selects its own branch's results
  (a branch not taken by any member still runs, so it must not fail on those values).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..classical.elementwise import PRIMITIVES, convert_p
from ..classical.reductions import reduce_max_p, reduce_min_p, reduce_sum_p
from ..ir.control_flow import cond_p, loop_p, while_p
from ..ir.interpreter import inline
from ..ir.tracer import bind, trace, value_type
from ..ir.types import Tensor
from .interpreter import (
    batch_eval,
    batch_subprogram,
    batched_fixed_point,
    batched_type,
    def_batch,
    materialize,
    where_members,
)

Rule = tuple[list[Any], list[bool]]


def _options(checkpoint: int | None, inverse: Any = None) -> dict:
    return {**({} if checkpoint is None else {"checkpoint": checkpoint}),
            **({} if inverse is None else {"inverse": inverse})}


def _batched_inverse(inverse: Any, in_flags: list[bool], size: int,
                     carry_flags: list[bool]) -> Any:
    """A loop's inverse step batched like its body (its carry batched as ``carry_flags``),
    or None (no inverse, or one that would batch a carry the body leaves shared)."""
    if inverse is None:
        return None
    program, natural = batch_subprogram(inverse, in_flags, size, carry_flags)
    return program if all(f or not n for n, f in zip(natural, carry_flags)) else None


def _loop(values: list, batched: list, size: int, *, body: Any, num_consts: int,
          checkpoint: int | None = None, inverse: Any = None) -> Rule:
    nc = num_consts
    consts, carry = values[2:2 + nc], values[2 + nc:]
    const_flags, carry_flags = batched[2:2 + nc], batched[2 + nc:]
    if not (batched[0] or batched[1]):
        flags = batched_fixed_point([(body, [False, *const_flags], 0)], carry_flags, size)
        batched_body, _ = batch_subprogram(body, [False, *const_flags, *flags], size, flags)
        undo = _batched_inverse(inverse, [False, *const_flags, *flags], size, flags)
        init = [materialize(x, b, size) if f else x
                for x, b, f in zip(carry, carry_flags, flags)]
        outs = bind(loop_p, values[0], values[1], *consts, *init, body=batched_body,
                    num_consts=nc, **_options(checkpoint, undo))
        return list(outs), flags
    # bounds per member: run over the union of the ranges, masked per member
    starts, stops = (materialize(x, b, size) for x, b in zip(values[:2], batched[:2]))
    everything = [True] * len(carry)
    batched_body, _ = batch_subprogram(body, [False, *const_flags, *everything], size,
                                       everything)
    undo = _batched_inverse(inverse, [False, *const_flags, *everything], size, everything)
    index = Tensor((), value_type(values[0]).dtype)
    types = [value_type(x) for x in (starts, stops, *consts)]
    carry_types = [batched_type(t, size) for t in body.out_types]

    def masked_step(step: Any) -> Any:
        """``step`` (the body, or its inverse) on the members whose range holds i; the
        others keep their carry."""
        def masked(i: Any, first: Any, last: Any, *rest: Any) -> tuple:
            old = rest[nc:]
            new = inline(step, [i, *rest])
            running = bind(PRIMITIVES["and"], bind(PRIMITIVES["le"], first, i),
                           bind(PRIMITIVES["lt"], i, last))
            return tuple(where_members(running, n, o) for n, o in zip(new, old))
        return trace(masked, index, *types, *carry_types, name=step.name)

    init = [materialize(x, b, size) for x, b in zip(carry, carry_flags)]
    outs = bind(loop_p, bind(reduce_min_p, starts, axes=(0,)),
                bind(reduce_max_p, stops, axes=(0,)), starts, stops, *consts, *init,
                body=masked_step(batched_body), num_consts=nc + 2,
                **_options(checkpoint, None if undo is None else masked_step(undo)))
    return list(outs), everything


def _while(values: list, batched: list, size: int, *, cond: Any, body: Any,
           num_cond_consts: int, num_body_consts: int, max_iter: int | None,
           checkpoint: int | None = None, inverse: Any = None) -> Rule:
    ncc, nbc = num_cond_consts, num_body_consts
    cc_flags, bc_flags = batched[:ncc], batched[ncc:ncc + nbc]
    carry, carry_flags = values[ncc + nbc:], batched[ncc + nbc:]
    flags = batched_fixed_point([(cond, cc_flags, 1), (body, bc_flags, 0)], carry_flags, size)
    _, natural = batch_subprogram(cond, [*cc_flags, *flags], size)
    params = dict(num_cond_consts=ncc, num_body_consts=nbc, max_iter=max_iter,
                  **_options(checkpoint))
    if not natural[0]:  # one test for the whole batch
        batched_cond, _ = batch_subprogram(cond, [*cc_flags, *flags], size, [False, *flags])
        batched_body, _ = batch_subprogram(body, [*bc_flags, *flags], size, flags)
        undo = _batched_inverse(inverse, [*bc_flags, *flags], size, flags)
        init = [materialize(x, b, size) if f else x
                for x, b, f in zip(carry, carry_flags, flags)]
        outs = bind(while_p, *values[:ncc + nbc], *init, cond=batched_cond, body=batched_body,
                    **params, **({} if undo is None else {"inverse": undo}))
        return list(outs), flags
    everything = [True] * len(carry)
    batched_cond, _ = batch_subprogram(cond, [*cc_flags, *everything], size,
                                       [True, *everything])
    batched_body, _ = batch_subprogram(body, [*bc_flags, *everything], size, everything)

    def test(*args: Any) -> tuple:
        *rest, running = args
        old = rest[ncc:]
        pred, *tested = inline(batched_cond, rest)
        # a member's test updates its carry only while it is still running
        carry_out = [where_members(running, n, o) for n, o in zip(tested, old)]
        still = bind(PRIMITIVES["and"], running, pred)
        count = bind(reduce_sum_p, bind(convert_p, still, dtype="int64"), axes=(0,))
        return (bind(PRIMITIVES["gt"], count, np.asarray(0, np.int64)), *carry_out, still)

    def step(*args: Any) -> tuple:
        *rest, running = args
        new = inline(batched_body, rest)
        return (*(where_members(running, n, o) for n, o in zip(new, rest[nbc:])), running)

    carry_types = [batched_type(t, size) for t in body.out_types]
    alive = Tensor((size,), "bool")
    test_program = trace(test, *batched_cond.in_types, alive, name=cond.name)
    step_program = trace(step, *batched_body.in_types[:nbc], *carry_types, alive,
                         name=body.name)
    init = [materialize(x, b, size) for x, b in zip(carry, carry_flags)]
    running = materialize(np.asarray(True), False, size)
    outs = bind(while_p, *values[:ncc + nbc], *init, running, cond=test_program,
                body=step_program, **params)
    return list(outs[:-1]), everything


def _cond(values: list, batched: list, size: int, *, branches: tuple) -> Rule:
    operands, flags = values[1:], batched[1:]
    if not batched[0]:  # one branch for the whole batch
        naturals = [batch_subprogram(b, flags, size)[1] for b in branches]
        out_flags = [any(column) for column in zip(*naturals)]
        programs = tuple(batch_subprogram(b, flags, size, out_flags)[0] for b in branches)
        return list(bind(cond_p, values[0], *operands, branches=programs)), out_flags
    # a branch per member: run them all, each member keeps its own branch's results
    results = []
    for branch in branches:
        outs, out_flags = batch_eval(branch, operands, flags, size)
        results.append([materialize(x, b, size) for x, b in zip(outs, out_flags)])
    index = values[0]
    chosen = results[0]
    if value_type(index).dtype == "bool":
        chosen = [where_members(index, t, f) for t, f in zip(results[1], results[0])]
    else:  # an int index is clamped into range: branch k from index k on
        for k, outs in enumerate(results[1:], start=1):
            from_k = bind(PRIMITIVES["ge"], index, np.asarray(k, value_type(index).np_dtype))
            chosen = [where_members(from_k, t, f) for t, f in zip(outs, chosen)]
    return chosen, [True] * len(chosen)


def_batch(loop_p, _loop)
def_batch(while_p, _while)
def_batch(cond_p, _cond)
