"""Sites: the gate angles of a program that depend on the differentiated inputs.

A *site* is a ``gate`` equation, anywhere in the program (inside loop bodies, while tests
and bodies, cond branches), whose angle depends on the inputs; dependence is followed through
every operation and through loop carries. The parameter-shift transformation shifts sites
(`qdiff.quantum.gradients.parameter_shift`), and the loop certificate bounds their
sensitivities (`qdiff.quantum.certificate`): both read this analysis.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import layers   # three ry(t) in a counted loop
>>> [site.describe() for site in find_sites(qdiff.trace(layers, 0.1), [True])]
['ry (parameter 0) at eqn 1 body > eqn 0']
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ...ir.control_flow import carried_outputs, sub_programs
from ...ir.core import Eqn, Literal, Program, Var
from ...ir.errors import QdiffError
from ...ir.types import QState
from .gates import GateSpec, gate_spec
from .primitives import QUANTUM_PRIMITIVES
from .shift_rules import ShiftRule, gate_shift_rule

# A step into a sub-program: (equation index, sub-program param, branch index or -1).
Step = tuple[int, str, int]


@dataclass(frozen=True)
class Site:
    """One differentiable angle of one gate equation: where it is and its shift rule."""

    steps: tuple[Step, ...]
    index: int
    slot: int
    eqn: Eqn

    @cached_property
    def spec(self) -> GateSpec:
        return gate_spec(self.eqn.params["name"], **(self.eqn.params.get("static") or {}))

    @cached_property
    def rule(self) -> ShiftRule:
        # read for every sample of the randomized estimator: built once
        return gate_shift_rule(self.spec, self.slot)

    def describe(self) -> str:
        path = [f"eqn {i} " + (key if b < 0 else f"branch {b}") for i, key, b in self.steps]
        return f"{self.spec.name} (parameter {self.slot}) at " + " > ".join(
            [*path, f"eqn {self.index}"])


# ------------------------------------------------------------------------------- the sites
def find_sites(program: Program, active_inputs: Sequence[bool]) -> list[Site]:
    """The gate angles of ``program`` that depend on the inputs flagged in ``active_inputs``.

    Dependence is followed through every operation and through loop carries (to a fixed
    point), so a rotation by a loop-carried angle computed from the input is a site.
    """
    found: dict[tuple, Site] = {}

    def visit(eqn: Eqn, in_flags: list[bool], steps: tuple[Step, ...], index: int) -> None:
        if eqn.primitive.name == "gate":
            for slot, flag in enumerate(in_flags[1:]):
                if flag:
                    found[(steps, index, slot)] = Site(steps, index, slot, eqn)

    walk_dependence(program, list(active_inputs), (), visit)
    return sorted(found.values(), key=lambda s: (s.steps, s.index, s.slot))


READOUTS = ("expval", "probs", "statevector")
# Operations that keep a value affine in the readouts (with the operand positions that may
# carry readouts: None = any, else the listed ones, and at most one of them).
_AFFINE: dict[str, tuple[int, ...] | None] = {
    **{name: None for name in ("add", "sub", "neg", "reduce_sum", "reshape", "slice",
                               "concatenate", "convert", "broadcast_in_dim", "transpose",
                               "real", "rev", "gather", "dynamic_slice", "stop_gradient")},
    "mul": (0, 1), "einsum": (0, 1), "div": (0,), "select": (1, 2),
}


def check_readout_use(program: Program, branching: bool) -> None:
    """Refuse programs whose shift-rule derivative would be wrong, with the reason.

    Shifting one gate leaves the rest of the program fixed only if no expectation value
    feeds a quantum operation, a loop bound or a branch decision (feedback of expectations is
    not physical either). With measurement branches the value is ``Σ_b w_b g_b``; it is a
    trigonometric polynomial in a shifted angle only when each ``g_b`` is affine in the
    branch's expectations.
    """

    def visit(eqn: Eqn, in_flags: list[bool], steps: tuple[Step, ...],
              index: int) -> list[bool] | None:
        name = eqn.primitive.name
        if name == "statevector":
            raise _refuse(eqn, "the program reads the state, which is no expectation value")
        if name in READOUTS:
            if any(in_flags):
                raise _refuse(eqn, "an expectation value feeds a quantum operation")
            return [False, True]
        if not any(in_flags):
            return None
        if any(isinstance(a.type, QState) for a in eqn.inputs):
            raise _refuse(eqn, "an expectation value feeds a quantum operation")
        if name in ("loop", "cond") and any(in_flags[:2 if name == "loop" else 1]):
            raise _refuse(eqn, "an expectation value decides control flow")
        if branching and name not in ("loop", "while", "cond"):
            allowed = _AFFINE.get(name, ())
            flagged = [k for k, f in enumerate(in_flags) if f]
            if name not in _AFFINE or (allowed is not None and (
                    len(flagged) > 1 or flagged[0] not in allowed)):
                raise _refuse(eqn, f"the outputs are not affine in the branches' expectation "
                                   f"values ({name})")
        return None

    def predicate(eqn: Eqn, key: str, out_flags: list[bool]) -> None:
        if key == "cond" and out_flags[0]:
            raise _refuse(eqn, "an expectation value decides control flow")

    walk_dependence(program, [False] * len(program.inputs), (), visit, predicate)


def _refuse(eqn: Eqn, why: str) -> QdiffError:
    return QdiffError(f"parameter shift cannot differentiate this program: {why} "
                      f"(`{eqn.primitive.name}`); use method='adjoint' or 'finite-diff'")


def walk_dependence(program: Program, flags: list[bool], steps: tuple[Step, ...], visit: Any,
                    on_sub_outputs: Any = None, through_quantum: bool = True) -> list[bool]:
    """Forward dependence from ``flags`` through ``program``: calls ``visit(eqn, in_flags,
    steps, index)`` on every equation (it may return output flags to add) and
    ``on_sub_outputs(eqn, key, flags)`` with each sub-program's output flags. With
    ``through_quantum=False`` dependence stops at quantum operations (classical paths only).
    """
    active = {v for v, flag in zip(program.inputs, flags) if flag}

    def is_active(atom: object) -> bool:
        return isinstance(atom, Var) and atom in active

    for index, eqn in enumerate(program.eqns):
        in_flags = [is_active(a) for a in eqn.inputs]
        extra = visit(eqn, in_flags, steps, index)
        if extra is not None:
            active.update(v for v, flag in zip(eqn.outputs, extra) if flag)
        subs = list(sub_programs(eqn))
        if not subs:
            if any(in_flags) and (through_quantum or eqn.primitive.name not in QUANTUM_PRIMITIVES):
                active.update(eqn.outputs)
            continue
        operands = list(in_flags)
        while True:  # loop carries: iterate until the activity of the carry settles
            outs = [False] * len(eqn.outputs)
            changed = False
            for key, b, sub, operand_of in subs:
                sub_flags = [o is not None and operands[o] for o in operand_of]
                sub_out = walk_dependence(sub, sub_flags, (*steps, (index, key, b)), visit,
                                          on_sub_outputs, through_quantum)
                if on_sub_outputs is not None:
                    on_sub_outputs(eqn, key, sub_out)
                for m, o in carried_outputs(eqn, key, sub):
                    if sub_out[m] and not operands[o]:
                        operands[o] = changed = True
                if eqn.primitive.name == "cond":
                    outs = [a or b_ for a, b_ in zip(outs, sub_out)]
            if not changed:
                break
        if eqn.primitive.name != "cond":
            first = len(eqn.inputs) - len(eqn.outputs)
            outs = operands[first:]
        active.update(v for v, flag in zip(eqn.outputs, outs) if flag)
    return [is_active(a) for a in program.outputs]


def branches(program: Program) -> bool:
    """Whether ``program`` measures, resets or postselects anywhere (its runs branch)."""
    return any(e.primitive.name in ("measure", "reset", "postselect", "sample")
               for e in program.all_eqns())


def postselects(program: Program) -> bool:
    """Whether ``program`` postselects anywhere (its values are conditional)."""
    return any(e.primitive.name == "postselect" for e in program.all_eqns())


def occurrence_count(program: Program, site: Site, trip_counts: Sequence[int]) -> int:
    """How often ``site`` can run at most when the loops around it run at most
    ``trip_counts[j]`` times (outermost first): Zhu's occurrence count for ``while^(T)``.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import layers   # three ry(t) in a counted loop
    >>> p = qdiff.trace(layers, 0.2)
    >>> occurrence_count(p, find_sites(p, [True])[0], [5])
    5
    """
    loops = [s for s in _eqns_on_path(program, site.steps)
             if s.primitive.name in ("loop", "while")]
    if len(trip_counts) != len(loops):
        raise QdiffError(f"the site is inside {len(loops)} loop(s); got {len(trip_counts)} "
                         "trip count(s)")
    return int(np.prod([int(t) for t in trip_counts])) if loops else 1


def static_bound(program: Program, site: Site, unbounded_rounds: int | None = None
                 ) -> int | None:
    """The most times ``site`` can run, when every loop around it has a static trip count
    (literal bounds, or ``max_iter``); None when some loop around it is unbounded, unless
    ``unbounded_rounds`` says how many rounds to count for such loops (1: per round).

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import layers, repeat_until_one
    >>> p = qdiff.trace(layers, 0.2)
    >>> static_bound(p, find_sites(p, [True])[0])
    3
    >>> p = qdiff.trace(repeat_until_one, 0.2)
    >>> static_bound(p, find_sites(p, [True])[0]), static_bound(p, find_sites(p, [True])[0], 1)
    (None, 1)
    """
    trips = []
    for (_, key, _), eqn in zip(site.steps, _eqns_on_path(program, site.steps)):
        name = eqn.primitive.name
        if name == "loop":
            start, stop = eqn.inputs[:2]
            if not (isinstance(start, Literal) and isinstance(stop, Literal)):
                return None
            trips.append(max(int(stop.value) - int(start.value), 0))
        elif name == "while":
            rounds = eqn.params["max_iter"]
            if rounds is None:
                if unbounded_rounds is None:
                    return None
                trips.append(unbounded_rounds)
                continue
            trips.append(rounds + (key == "cond"))  # the test runs once more
    return occurrence_count(program, site, trips)


def _eqns_on_path(program: Program, steps: tuple[Step, ...]) -> list[Eqn]:
    eqns = []
    for index, key, b in steps:
        eqn = program.eqns[index]
        eqns.append(eqn)
        sub = eqn.params[key]
        program = sub[b] if b >= 0 else sub
    return eqns
