"""Parameter shift as a program transformation: the shifted programs of a gate occurrence.

A *site* is a ``gate`` equation, anywhere in the program (inside loop bodies, while tests
and bodies, cond branches), whose angle depends on the differentiated inputs. Executions of
a site are numbered along each run: occurrence ``k`` is the site's ``k``-th execution on
that path (iteration ``k`` of a loop around it, say). Following Zhu et al. (PLDI 2020) the
derivative is a sum over occurrences, each differentiated alone:

    ∂(P1; P2) = (∂P1; P2) + (P1; ∂P2),   ∂(case m → P_m) = case m → ∂P_m,
    ∂while^(T) = ∂(its T-fold unfolding).

`instrument` writes ONE program per site that serves every occurrence and every shift: it
takes two extra inputs ``(occurrence, shift)``, threads an execution counter through the
control flow around the site, and runs the site's gate with ``θ + shift`` exactly when the
counter equals ``occurrence``; its last output is the counter (how many times the site
ran). ``θ + shift`` at one occurrence, all else equal, is the Zhu derivative program of that
occurrence evaluated at a shift; the gate's spectrum gives the shifts
(`qdiff.quantum.lang.shift_rules`); the sites are found by `qdiff.quantum.lang.sites`.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> from qdiff.quantum.lang.examples import layers   # three ry(t) in a counted loop
>>> from qdiff.quantum.lang.sites import find_sites
>>> program = qdiff.trace(layers, 0.1)
>>> shifted = instrument(program, find_sites(program, [True])[0]).program
>>> [round(float(v), 6) for v in qm.run(shifted, 0.1, 1, np.pi / 2).values]  # 2nd one shifted
[-0.29552, 3.0]
>>> round(float(np.cos(3 * 0.1 + np.pi / 2)), 6)
-0.29552
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...ir.control_flow import sub_programs
from ...ir.core import Eqn, Literal, Program, Var
from ...ir.primitives import get_primitive
from ...ir.types import Tensor
from ..lang.sites import Site

COUNTER = Tensor((), "int64")
SHIFT = Tensor((), "float64")

# ------------------------------------------------------------------------ the transformation
@dataclass(frozen=True)
class Instrumented:
    """A site's instrumented program and the equations it added at the site: ``test``
    compares the counter with the occurrence, ``moved`` adds the shift to the angle
    ``θ`` (its first operand, perhaps converted), ``gate`` is the shifted gate."""

    program: Program
    site: Site
    test: Eqn
    moved: Eqn
    gate: Eqn


def instrument(program: Program, site: Site) -> Instrumented:
    """``program`` with two more inputs ``(occurrence, shift)`` and one more output (the
    number of times ``site`` ran): the site's angle becomes ``θ + shift`` at its
    ``occurrence``-th execution (from 0), and stays ``θ`` at every other one.

    The counter is threaded only through the control flow that encloses the site; the
    program is otherwise unchanged, loops stay loops. See the module docstring.
    """
    occurrence, shift = Var(COUNTER), Var(SHIFT)
    made: list[Eqn] = []
    eqns, count = _thread(program, site, occurrence, shift, Literal(np.int64(0)), made)
    # well-typed by construction (tests run the verifier on it): verifying here would cost
    # as much as running it
    result = Program((*program.inputs, occurrence, shift), tuple(eqns),
                     (*program.outputs, count), name=f"{program.name}_shifted")
    test, moved, gate = made
    return Instrumented(result, site, test, moved, gate)


def _thread(program: Program, site: Site, occurrence: Var, shift: Var,
            counter: object, made: list[Eqn], depth: int = 0) -> tuple[list[Eqn], object]:
    eqns = list(program.eqns)
    if depth == len(site.steps):
        added, counter, marked = _shifted_gate(eqns[site.index], site.slot, occurrence,
                                               shift, counter)
        eqns[site.index:site.index + 1] = added
        made.extend(marked)
        return eqns, counter
    index, key, branch = site.steps[depth]
    eqn = eqns[index]
    params = dict(eqn.params)
    new_subs: dict[tuple[str, int], Program] = {}
    for sub_key, b, sub, _ in sub_programs(eqn):
        on_path = (sub_key, b) == (key, branch)
        sub_occ, sub_shift, sub_counter = Var(COUNTER), Var(SHIFT), Var(COUNTER)
        if on_path:
            inner, sub_out = _thread(sub, site, sub_occ, sub_shift, sub_counter, made,
                                          depth + 1)
        else:
            inner, sub_out = list(sub.eqns), sub_counter
        lead = 1 if eqn.primitive.name == "loop" else 0
        inputs = (*sub.inputs[:lead], sub_occ, sub_shift, *sub.inputs[lead:], sub_counter)
        new_subs[(sub_key, b)] = Program(inputs, tuple(inner), (*sub.outputs, sub_out),
                                         name=sub.name)
    name = eqn.primitive.name
    if name == "loop":
        params["body"] = new_subs[("body", -1)]
        params["num_consts"] = params["num_consts"] + 2
        operands = (*eqn.inputs[:2], occurrence, shift, *eqn.inputs[2:])
    elif name == "while":
        params["cond"], params["body"] = new_subs[("cond", -1)], new_subs[("body", -1)]
        cc, bc = params["num_cond_consts"], params["num_body_consts"]
        params["num_cond_consts"], params["num_body_consts"] = cc + 2, bc + 2
        operands = (occurrence, shift, *eqn.inputs[:cc], occurrence, shift,
                    *eqn.inputs[cc:])
    else:
        params["branches"] = tuple(new_subs[("branches", b)]
                                   for b in range(len(params["branches"])))
        operands = (eqn.inputs[0], occurrence, shift, *eqn.inputs[1:])
    counter_out = Var(COUNTER)
    eqns[index] = Eqn(eqn.primitive, (*operands, counter), (*eqn.outputs, counter_out),
                      params)
    return eqns, counter_out


def _shifted_gate(eqn: Eqn, slot: int, occurrence: Var, shift: Var,
                  counter: object) -> tuple[list[Eqn], Var, tuple[Eqn, Eqn, Eqn]]:
    # θ' = θ + (counter == occurrence ? shift : 0);  counter' = counter + 1
    # Returns the equations, the counter after, and (test, moved, gate) for `Instrumented`.
    angle = eqn.inputs[1 + slot]
    angle_type = angle.type
    hit, delta, moved, after = Var(Tensor((), "bool")), Var(SHIFT), Var(SHIFT), Var(COUNTER)
    test = Eqn(get_primitive("eq"), (counter, occurrence), (hit,))
    out: list[Eqn] = [test, Eqn(get_primitive("select"), (hit, shift, Literal(0.0)), (delta,))]
    source = angle
    if angle_type != SHIFT:
        source = Var(SHIFT)
        out.append(Eqn(get_primitive("convert"), (angle,), (source,), {"dtype": "float64"}))
    shifted = Eqn(get_primitive("add"), (source, delta), (moved,))
    out.append(shifted)
    new_angle: Var = moved
    if angle_type != SHIFT:
        new_angle = Var(angle_type)
        out.append(Eqn(get_primitive("convert"), (moved,), (new_angle,),
                       {"dtype": angle_type.dtype}))
    inputs = list(eqn.inputs)
    inputs[1 + slot] = new_angle
    gate = Eqn(eqn.primitive, tuple(inputs), eqn.outputs, eqn.params)
    out.append(gate)
    out.append(Eqn(get_primitive("add"), (counter, Literal(np.int64(1))), (after,)))
    return out, after, (test, shifted, gate)
