"""Derivative rules of `loop`, `while` and `cond`.

Forward: each becomes the same construct over (value, tangent) pairs: the body (or
branch) is replaced by its JVP; a carry gets a tangent when its initial value has one or
when the body makes it depend on one (a fixed point over the body's activity).

Reverse:
- ``cond``: re-execute the taken branch in the reverse sweep: ``cond(index, ops, ȳ)`` with
  each branch replaced by its VJP (which re-runs the branch forward, then backward).
- ``loop``: keep only the loop-carried values per iteration, walk the iterations backwards,
  restoring the carry and re-running the body forward then backward
  (`qdiff.loops.reversal`; ``checkpoint=k`` strip-mines the storage). A loop with an
  ``inverse`` stores nothing: the sweep recomputes each carry from the next one
  (reverse computing). Forward mode ignores the inverse.
- ``while``: ``W = while c do B`` runs ``step = B ∘ (carry of C)`` n times, then C once more.
  The forward sweep counts n (a while loop carrying a counter); the reverse sweep is the
  reversal of the counted loop ``for i < n: carry = step(carry)`` followed by the final test's
  carry update, so data-dependent trip counts work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..autodiff.activity import active_outputs
from ..autodiff.forward import jvp_program
from ..autodiff.reverse import vjp_program
from ..autodiff.tangents import (
    add_tangents,
    instantiate,
    interleave_order,
    is_differentiable,
    reorder_inputs,
)
from ..ir.control_flow import cond_p, loop_p, while_p
from ..ir.core import Program
from ..ir.interpreter import inline
from ..ir.tracer import bind, trace, value_type
from ..ir.types import Tensor
from .reversal import reverse_computing_loop, reverse_loop


def _options(checkpoint: int | None) -> dict:
    return {} if checkpoint is None else {"checkpoint": checkpoint}


def _carry_fixed_point(bodies: list[Program], const_flags: list[list[bool]],
                       carry_flags: list[bool]) -> list[bool]:
    """Carries that get tangents: those whose value can depend on an active input.

    Each body takes (leading inputs such as a loop index, consts, carry) and returns the
    carry last (after outputs that are not carried, like a while test's predicate);
    ``const_flags`` is the activity of each body's consts.
    """
    flags = list(carry_flags)
    while True:
        grown = list(flags)
        for body, consts in zip(bodies, const_flags):
            lead_in = [False] * (len(body.inputs) - len(consts) - len(flags))
            outs = active_outputs(body, lead_in + consts + flags)
            carried = outs[len(body.outputs) - len(flags):]
            grown = [g or o for g, o in zip(grown, carried)]
        if grown == flags:
            return flags
        flags = grown


# ------------------------------------------------------------------------------------ loop
def _loop_jvp(values: list, tangents: list, *, body: Program, num_consts: int,
              checkpoint: int | None = None, inverse: Program | None = None
              ) -> tuple[list, list]:
    consts, carry = values[2:2 + num_consts], values[2 + num_consts:]
    t_consts, t_carry = tangents[2:2 + num_consts], tangents[2 + num_consts:]
    const_flags = [t is not None for t in t_consts]
    carry_flags = _carry_fixed_point([body], [const_flags], [t is not None for t in t_carry])
    jbody = jvp_program(body, [False, *const_flags, *carry_flags], tangent_outputs=carry_flags)
    counts = [1, num_consts, len(carry)]
    jbody = reorder_inputs(jbody, interleave_order(counts, [0, sum(const_flags),
                                                            sum(carry_flags)]))
    filled = [instantiate(t, value_type(c)) for t, c, f in zip(t_carry, carry, carry_flags) if f]
    outs = bind(loop_p, values[0], values[1], *consts, *(t for t in t_consts if t is not None),
                *carry, *filled, body=jbody, num_consts=num_consts + sum(const_flags),
                **_options(checkpoint))
    rest = iter(outs[len(carry):])
    return outs[:len(carry)], [next(rest) if f else None for f in carry_flags]


def _loop_vjp(cts: list, values: list, outs: list, active: list, *, body: Program,
              num_consts: int, checkpoint: int | None = None,
              inverse: Program | None = None) -> list:
    start, stop = values[0], values[1]
    consts, carry = values[2:2 + num_consts], values[2 + num_consts:]
    if all(c is None for c in cts):
        return [None] * len(values)
    ct_carry = [instantiate(c, value_type(o)) for c, o in zip(cts, outs)
                if is_differentiable(value_type(o))]
    const_active = active[2:2 + num_consts]
    if inverse is not None:
        ct_consts, ct_init = reverse_computing_loop(body, inverse, num_consts, start, stop,
                                                    consts, outs, ct_carry, const_active)
    else:
        ct_consts, ct_init = reverse_loop(body, num_consts, start, stop, consts, carry,
                                          ct_carry, const_active, checkpoint=checkpoint)
    return [None, None, *ct_consts,
            *(c if flag else None for c, flag in zip(ct_init, active[2 + num_consts:]))]


# ----------------------------------------------------------------------------------- while
def _while_jvp(values: list, tangents: list, *, cond: Program, body: Program,
               num_cond_consts: int, num_body_consts: int, max_iter: int | None,
               checkpoint: int | None = None, inverse: Program | None = None
               ) -> tuple[list, list]:
    ncc, nbc = num_cond_consts, num_body_consts
    cc, bc, carry = values[:ncc], values[ncc:ncc + nbc], values[ncc + nbc:]
    t_cc, t_bc, t_carry = tangents[:ncc], tangents[ncc:ncc + nbc], tangents[ncc + nbc:]
    cc_flags, bc_flags = [t is not None for t in t_cc], [t is not None for t in t_bc]
    flags = _carry_fixed_point([cond, body], [cc_flags, bc_flags],
                               [t is not None for t in t_carry])
    n_carry, n_flags = len(carry), sum(flags)
    jcond = jvp_program(cond, [*cc_flags, *flags], tangent_outputs=[False, *flags])
    jcond = reorder_inputs(jcond, interleave_order([ncc, n_carry], [sum(cc_flags), n_flags]))
    jbody = jvp_program(body, [*bc_flags, *flags], tangent_outputs=flags)
    jbody = reorder_inputs(jbody, interleave_order([nbc, n_carry], [sum(bc_flags), n_flags]))
    filled = [instantiate(t, value_type(c)) for t, c, f in zip(t_carry, carry, flags) if f]
    outs = bind(while_p, *cc, *(t for t in t_cc if t is not None), *bc,
                *(t for t in t_bc if t is not None), *carry, *filled, cond=jcond, body=jbody,
                num_cond_consts=ncc + sum(cc_flags), num_body_consts=nbc + sum(bc_flags),
                max_iter=max_iter, **_options(checkpoint))
    rest = iter(outs[n_carry:])
    return outs[:n_carry], [next(rest) if f else None for f in flags]


def _cond_updates_carry(cond: Program, num_cond_consts: int) -> bool:
    passed = cond.inputs[num_cond_consts:]
    return any(out is not var for out, var in zip(cond.outputs[1:], passed))


def _while_step(cond: Program, body: Program, ncc: int, nbc: int) -> Program:
    """``step(i, *cc, *bc, *carry) = body(*bc, *carry of cond(*cc, *carry))``."""
    index = Tensor((), "int64")

    def step(i: Any, *args: Any) -> tuple:
        cc, bc, carry = args[:ncc], args[ncc:ncc + nbc], args[ncc + nbc:]
        tested = inline(cond, [*cc, *carry])[1:]
        return tuple(inline(body, [*bc, *tested]))

    types = [*cond.in_types[:ncc], *body.in_types]
    return trace(step, index, *types, name="while step")


def _while_step_inverse(cond: Program, inverse: Program, ncc: int, nbc: int) -> Program:
    """The inverse of `_while_step` for a test that leaves the carry as it is."""
    def undo(i: Any, *args: Any) -> tuple:
        return tuple(inline(inverse, list(args[ncc:])))

    types = [*cond.in_types[:ncc], *inverse.in_types]
    return trace(undo, Tensor((), "int64"), *types, name="while step inverse")


def _trip_count(values: list, cond: Program, body: Program, ncc: int, nbc: int,
                max_iter: int | None) -> Any:
    """How many times the body runs: the while loop again, carrying a counter."""
    counter = Tensor((), "int64")
    carry_types = list(body.out_types)

    def counting_cond(*args: Any) -> tuple:
        return (*inline(cond, list(args[:-1])), args[-1])

    def counting_body(*args: Any) -> tuple:
        return (*inline(body, list(args[:-1])), args[-1] + 1)

    cond_program = trace(counting_cond, *cond.in_types, counter, name="cond")
    body_program = trace(counting_body, *body.in_types[:nbc], *carry_types, counter,
                         name="body")
    outs = bind(while_p, *values, np.asarray(0, np.int64), cond=cond_program,
                body=body_program, num_cond_consts=ncc, num_body_consts=nbc, max_iter=max_iter)
    return outs[-1]


def _while_vjp(cts: list, values: list, outs: list, active: list, *, cond: Program,
               body: Program, num_cond_consts: int, num_body_consts: int,
               max_iter: int | None, checkpoint: int | None = None,
               inverse: Program | None = None) -> list:
    ncc, nbc = num_cond_consts, num_body_consts
    consts, carry = values[:ncc + nbc], values[ncc + nbc:]
    if all(c is None for c in cts):
        return [None] * len(values)
    diff = [is_differentiable(value_type(o)) for o in outs]
    ct_final = [instantiate(c, value_type(o)) for c, o, d in zip(cts, outs, diff) if d]
    count = _trip_count(values, cond, body, ncc, nbc, max_iter)
    step = _while_step(cond, body, ncc, nbc)
    const_active = list(active[:ncc + nbc])
    ct_cond_consts: list[Any] = [None] * ncc
    zero = np.asarray(0, np.int64)
    if inverse is not None and not _cond_updates_carry(cond, ncc):
        undo = _while_step_inverse(cond, inverse, ncc, nbc)
        ct_consts, ct_init = reverse_computing_loop(step, undo, ncc + nbc, zero, count, consts,
                                                    outs, ct_final, const_active)
        return [*ct_consts, *(c if flag else None
                              for c, flag in zip(ct_init, active[ncc + nbc:]))]
    if _cond_updates_carry(cond, ncc):
        # the final test updates the carry too: y = carry of cond(c_n)
        last = bind(loop_p, zero, count, *consts, *carry, body=step, num_consts=ncc + nbc)
        test = trace(lambda *a: tuple(inline(cond, list(a))[1:]), *cond.in_types,
                     name="final test")
        back = vjp_program(test, [*active[:ncc], *diff], with_primal=False)
        got = inline(back, [*values[:ncc], *last, *ct_final])
        live = [k for k in range(ncc) if active[k]]
        by_const = dict(zip(live, got[:len(live)]))
        ct_cond_consts = [by_const.get(k) for k in range(ncc)]
        ct_final = list(got[len(live):])
    ct_consts, ct_init = reverse_loop(step, ncc + nbc, zero, count, consts, carry, ct_final,
                                      const_active, checkpoint=checkpoint, capacity=max_iter)
    ct_consts = [add_tangents(a, b) for a, b in zip(ct_consts, ct_cond_consts + [None] * nbc)]
    return [*ct_consts, *(c if flag else None for c, flag in zip(ct_init, active[ncc + nbc:]))]


# ------------------------------------------------------------------------------------ cond
def _cond_jvp(values: list, tangents: list, *, branches: tuple) -> tuple[list, list]:
    flags = [t is not None for t in tangents[1:]]
    jbranches = tuple(jvp_program(b, flags) for b in branches)
    outs = bind(cond_p, values[0], *values[1:], *(t for t in tangents[1:] if t is not None),
                branches=jbranches)
    n_out = len(branches[0].outputs)
    rest = iter(outs[n_out:])
    return outs[:n_out], [next(rest) if is_differentiable(t) else None
                          for t in branches[0].out_types]


def _cond_vjp(cts: list, values: list, outs: list, active: list, *, branches: tuple) -> list:
    # only the taken branch runs: each branch becomes its own VJP (re-execution inside)
    if all(c is None for c in cts):
        return [None] * len(values)
    flags = list(active[1:])
    adjoints = tuple(vjp_program(b, flags, with_primal=False) for b in branches)
    ct_outs = [instantiate(c, value_type(o)) for c, o in zip(cts, outs)
               if is_differentiable(value_type(o))]
    got = iter(bind(cond_p, values[0], *values[1:], *ct_outs, branches=adjoints))
    return [None, *(next(got) if flag else None for flag in flags)]


loop_p.jvp, loop_p.vjp = _loop_jvp, _loop_vjp
while_p.jvp, while_p.vjp = _while_jvp, _while_vjp
cond_p.jvp, cond_p.vjp = _cond_jvp, _cond_vjp
