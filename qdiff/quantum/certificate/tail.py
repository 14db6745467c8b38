"""Certified bounds on what an exact-mode run leaves out: values and adjoint derivatives.

An exact run sums a loop on a measurement round by round until the mass still going on is
below ``tol``, and prunes branches far below that (`runner`). This module bounds what the
returned numbers miss, with the sums of `qdiff.loops.tail`, from:

- the loop's exit probability: exact when the loop is memoryless (`loop_memory`), else the
  ``exit_probability`` the caller promises, checked against every round the run saw;
- each gate's sensitivity, ``max frequency × |∂angle/∂input|`` (the angle derivatives come
  from the recorded run's classical sweep), summed per round, before and after the loop;
- the objective's growth ``A + B n`` (`output_growth`).

The certificate covers programs with at most one loop on a measurement, at the top level,
whose gate angles do not change from round to round. Otherwise the bounds are infinite and
``reason`` says what is missing: a number that is not certified is never reported as if
it were.

>>> from qdiff import quantum as qm
>>> from qdiff.quantum.lang.examples import repeat_until_one   # rounds until a 1 is read
>>> g = qm.gradient(repeat_until_one, 0.7, tol=1e-9)
>>> exact = -np.cos(0.35) / np.sin(0.35) ** 3      # d/dθ 1/sin²(θ/2)
>>> bool(abs(g.grad - exact) <= g.remainder_bound < 1e-4), g.remainder_reason
(True, None)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.core import Eqn, Program
from ...ir.errors import QdiffError
from ...ir.pytree import split_flat
from ...loops.tail import TailBound, loop_tail, pruned_tail, to_go
from ..lang.sites import Site, find_sites, postselects, static_bound, walk_dependence
from .loop_memory import memory_of
from .output_growth import growth


@dataclass
class Certificate:
    """Bounds on ``|exact - returned|``: ``value`` for the objective ``c · values``,
    ``grads`` per differentiated flat input (elementwise); infinite with ``reason`` when
    the program is outside what the certificate covers."""

    value: float
    grads: list[np.ndarray]
    reason: str | None = None
    exit_probability: float | None = None


def certify(program: Program, leaves: Sequence[Any], run: Any, cotangents: Sequence[Any],
            positions: Sequence[int], exit_probability: float | None = None) -> Certificate:
    """The certificate of a recorded exact run (`adjoint.RecordedRun`) of ``program`` for
    the objective ``Σ_j c_j · E_j`` and its derivatives in the flat inputs ``positions``.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> from qdiff.quantum.gradients.adjoint import RecordedRun
    >>> def coin(theta):  # re-flip until heads: E[flips] = 1/sin²(θ/2)
    ...     q = qm.qubits(1)
    ...     flips = qdiff.Cell(0.0)
    ...     def flip():
    ...         qm.reset(q[0]); qm.ry(theta, q[0]); flips.set(flips.value + 1.0)
    ...     flip()
    ...     qdiff.while_loop(lambda: qm.measure(q[0]) == 0, flip)
    ...     return flips.value
    >>> program = qdiff.trace(coin, 1.0)
    >>> run = RecordedRun(program, [1.0], qm.RunOptions(tol=1e-6))
    >>> found = certify(program, [1.0], run, [np.ones(())], [0])
    >>> error = abs(run.vjp([np.ones(())])[0] + np.cos(0.5) / np.sin(0.5) ** 3)
    >>> bool(error <= found.grads[0] < 1e-2), round(found.exit_probability, 6)
    (True, 0.229849)
    """
    shapes = [np.shape(leaves[k]) for k in positions]
    value = np.inf
    try:
        cut = _Cut(program, run.runner, exit_probability)
        if cut.nothing_left_out:
            return Certificate(0.0, [np.zeros(s) for s in shapes])
        a = b = 0.0
        for c, bound in zip(cotangents, cut.growth(leaves)):
            weight = float(np.sum(np.abs(c)))
            if weight and bound is None:
                raise _Uncertified(f"an output has no bound on its size ({cut.why_unbounded})")
            if weight:
                a, b = a + weight * bound[0], b + weight * bound[1]
        scale = a + b * cut.longest
        # the value's bound needs no derivatives: it stands even where theirs cannot
        value = _rounded(cut.bound((a, b), None).value, scale)
        if _classical_paths(program, cotangents, positions):
            raise _Uncertified("an output depends on the inputs by classical code too")
        sens = _Sensitivities(program, leaves, run, positions, cut.loop)
        bound = cut.bound((a, b), sens)
        return Certificate(value, _split(_rounded(bound.derivative,
                                                  scale * sens.path(cut.longest)), shapes),
                           None, cut.p)
    except _Uncertified as missing:
        return Certificate(value, [np.full(s, np.inf) for s in shapes], str(missing))


def certify_values(program: Program, leaves: Sequence[Any], runner: Any,
                   exit_probability: float | None = None) -> tuple[list[float], str | None]:
    """Per output of an exact run (`runner.BranchRunner`), a bound on how far its value is
    from the exact one (elementwise), and why the bounds are infinite, if they are.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> from qdiff.quantum.execution.runner import BranchRunner
    >>> def flips(theta):
    ...     q = qm.qubits(1)
    ...     count = qdiff.Cell(0)
    ...     def body():
    ...         qm.ry(theta, q[0]); count.set(count.value + 1)
    ...     qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    ...     return count.value, qm.expval("Z", q)
    >>> program, runner = qdiff.trace(flips, 1.0), BranchRunner(qm.RunOptions(tol=1e-6))
    >>> items = runner.run_program(program, [(1.0, [np.asarray(1.0)])])
    >>> bounds, why = certify_values(program, [1.0], runner)
    >>> values = [sum(w * float(outs[k]) for w, outs in items) for k in range(2)]
    >>> exact = [1 / np.sin(0.5) ** 2, -1.0]  # E[rounds]; the loop ends in |1>
    >>> [bool(abs(v - e) <= b < 1e-4) for v, e, b in zip(values, exact, bounds)], why
    ([True, True], None)
    """
    count = len(program.outputs)
    try:
        cut = _Cut(program, runner, exit_probability)
        if cut.nothing_left_out:
            return [0.0] * count, None
        bounds = []
        for bound in cut.growth(leaves):
            if bound is None:
                bounds.append(np.inf)
                continue
            tail = cut.bound(bound, None)
            bounds.append(_rounded(tail.value, bound[0] + bound[1] * cut.longest))
        return bounds, (None if all(np.isfinite(bounds)) else
                        f"an output has no bound on its size ({cut.why_unbounded})")
    except _Uncertified as missing:
        return [np.inf] * count, str(missing)


class _Uncertified(Exception):
    pass


class _Cut:
    """What an exact run cut off: the loop's runs and their masses round by round, what was
    pruned, and the exit probability every round has."""

    def __init__(self, program: Program, runner: Any, exit_probability: float | None):
        self.program, self.runner = program, runner
        self.runs = runner.loop_masses  # every run of the one loop `_the_loop` allows
        self.nothing_left_out = runner.dropped == 0 and runner.unterminated == 0 and not any(
            going_on[-1] > 0 for _, _, going_on in self.runs)
        self.longest = max((len(going_on) - 1 for _, _, going_on in self.runs), default=0)
        self.why_unbounded: str | None = None
        self.p = 1.0
        self.loop: Eqn | None = None
        if self.nothing_left_out:  # every exact run gets here: no analysis of the program
            return
        self.loop = _the_loop(program)
        if postselects(program):
            raise _Uncertified("postselected values are ratios; the certificate bounds sums")
        if any(e.primitive.name == "sample" for e in program.all_eqns()):
            raise _Uncertified("the program draws samples (qm.sample): its outputs are draws, "
                               "not expectations")
        cut_off = sum(going_on[-1] for _, _, going_on in self.runs)
        if runner.unterminated > cut_off * (1 + 1e-9) + 1e-300:
            raise _Uncertified("a bounded loop was cut at max_loop_iterations")
        if self.loop is not None:
            self.p = _exit_probability(self.loop, self.runs, exit_probability,
                                       pruned=runner.dropped > 0)

    def growth(self, leaves: Sequence[Any]) -> list[Any]:
        found = growth(self.program, leaves)
        self.why_unbounded = found.reason
        return found.bounds

    def bound(self, growth: tuple[float, float], sens: _Sensitivities | None) -> TailBound:
        """Value and derivative remainders for an objective of growth ``(A, B)``; without
        ``sens``, of the value alone."""
        a, b = growth
        zero = 0.0 if sens is None else np.zeros_like(sens.round)
        round_, after, before, first = ((zero,) * 4 if sens is None else
                                        (sens.round, sens.after, sens.before, sens.first))
        p = self.p
        total = TailBound(0.0, zero)
        for entering, _, going_on in self.runs:  # one tail per run of the loop (own cut-off)
            tail = loop_tail(p=p, sensitivity=round_, after=after, growth=(a, b),
                             going_on=going_on, before=before + round_ * entering[0],
                             first=first)
            total = TailBound(total.value + tail.value, total.derivative + tail.derivative)
        value_to_go, future = to_go(p=p, growth=(a, b), rounds=self.longest,
                                    sensitivity=round_, after=after)
        path = zero if sens is None else sens.path(self.longest)
        pruned = pruned_tail(mass=self.runner.dropped, path_sensitivity=path,
                             value_bound=value_to_go, future=future)
        return TailBound(total.value + pruned.value, total.derivative + pruned.derivative)


def tighten(attempt: Callable[[float], tuple[Any, float, str | None]], tol: float,
            remainder_tol: float | None, rounds: int = 6) -> Any:
    """``attempt(tol)`` returns a result, its largest certified bound and why that bound is
    infinite (if it is); with a ``remainder_tol``, cut loops off later until the bound is
    at most it. The bounds scale about like the mass cut off, so each retry lowers ``tol``
    by their ratio (and a margin for the rounds the longer sum adds). A program outside the
    certificate cannot meet a ``remainder_tol``: that is an error, with the reason.

    >>> tighten(lambda tol: (tol, 10 * tol, None), 1e-3, 1e-6) <= 1e-7
    True
    """
    result, largest, reason = attempt(tol)
    if remainder_tol is None:
        return result
    if remainder_tol <= 0:
        raise QdiffError(f"remainder_tol must be positive, got {remainder_tol}")
    for _ in range(rounds):
        if not np.isfinite(largest):
            raise QdiffError(f"remainder_tol={remainder_tol:g} cannot be certified: {reason}")
        if largest <= remainder_tol or tol < 1e-300:
            return result
        tol *= min(0.5, 0.1 * remainder_tol / largest)
        result, largest, reason = attempt(tol)
    if largest > remainder_tol:
        raise QdiffError(f"the certified remainder is {largest:.3g} after {rounds} tighter "
                         f"sums, above remainder_tol={remainder_tol:g}")
    return result


def _rounded(bound: Any, scale: Any) -> Any:
    """A bound with room for the rounding of the sums it bounds: relative 1e-9, and 1e-13
    of the size of the terms summed (some hundred times the double-precision epsilon)."""
    return bound * (1 + 1e-9) + 1e-13 * scale


def _split(flat: Any, shapes: list[tuple]) -> list[np.ndarray]:
    size = sum(int(np.prod(s)) for s in shapes)
    return split_flat(np.broadcast_to(np.asarray(flat, np.float64), (size,)).copy(), shapes)


def _the_loop(program: Program) -> Eqn | None:
    top = [e for e in program.eqns if e.primitive.name == "while" and e.params["max_iter"] is None]
    nested = [e for e in program.all_eqns() if e.primitive.name == "while"
              and e.params["max_iter"] is None and not any(e is t for t in top)]
    if nested:
        raise _Uncertified("a loop on a measurement inside a loop or a branch")
    if len(top) > 1:
        raise _Uncertified(f"{len(top)} loops on measurements (the certificate covers one)")
    return top[0] if top else None


def _exit_probability(loop: Eqn, runs: list[tuple[list[float], list[float], list[float]]],
                      promised: float | None, pruned: bool) -> float:
    """The exit probability every round has: observed when the loop is memoryless, else
    the promised one, checked against the rounds the run saw."""
    # a lower bound per round seen: exits seen over the mass that entered the test (pruned
    # branches may have been exits or continuations)
    seen = [e / t for entering, exited, _ in runs
            for t, e in zip(entering[1:], exited[1:]) if t > 0]
    if promised is not None:
        if not 0 < promised <= 1:
            raise QdiffError(f"exit_probability must be in (0, 1], got {promised}")
        # the promise is checked on the rounds that nothing was pruned from (exact rates)
        exact = [e / t for entering, exited, going_on in runs
                 for t, e, g in zip(entering[1:], exited[1:], going_on[1:])
                 if t > 0 and e + g >= t * (1 - 1e-12)]
        for observed in exact:
            if observed < promised - 1e-9:
                raise QdiffError(
                    f"the loop exits with probability {observed:.6g} in a round, below the "
                    f"promised exit_probability={promised:g}: the promise does not hold")
    memory = memory_of(loop)
    if memory is None and seen:
        if min(seen) <= 0:
            raise _Uncertified("branches pruned below tol² hid the loop's exits in a round: "
                               "use a smaller tol, or pass exit_probability=")
        return min(seen)  # memoryless: every round exits with at least this probability
    if memory is not None and promised is None:
        raise _Uncertified(f"the loop is not memoryless ({memory}); pass exit_probability= "
                           "(a lower bound on every round's exit probability) to certify it")
    if promised is not None:
        return promised
    if any(going_on[-1] > 0 for _, _, going_on in runs):
        raise _Uncertified("the loop was cut before its first round: no exit probability")
    if pruned:  # a pruned branch may have gone on: no round tells how likely exits are
        raise _Uncertified("branches pruned below tol² hid the loop's rounds: use a smaller "
                           "tol, or pass exit_probability=")
    return 1.0


class _Sensitivities:
    """Per differentiated input element: a round's gate sensitivity ``C``, what runs after
    the loop (``C_after``), the perturbation the loop starts with (``D_0``), and one path's
    sum before the loop."""

    def __init__(self, program: Program, leaves: Sequence[Any], run: Any,
                 positions: Sequence[int], loop: Eqn | None):
        self.run, self.positions = run, list(positions)
        size = sum(int(np.prod(np.shape(leaves[k]))) for k in positions)
        self.round, self.after, self.before, self.first = (np.zeros(size) for _ in range(4))
        loop_index = -1 if loop is None else program.eqns.index(loop)
        unsteady = _unsteady_gates(program, loop)
        flags = [k in positions for k in range(len(leaves))]
        self._tangents: dict[int, np.ndarray] = {}
        for site in find_sites(program, flags):
            top = site.steps[0][0] if site.steps else site.index
            frequency = max(site.rule.frequencies)
            records = run.records_of(site.eqn)
            if id(site.eqn) in unsteady:
                raise _Uncertified(f"the angle of {site.describe()} changes from round to "
                                   "round or from path to path")
            if top == loop_index:
                if not records:
                    continue  # never ran: the loop never went on, nothing is cut off
                count = static_bound(program, site, unbounded_rounds=1) or 0
                self.round += count * frequency * self._tangent(records[0], site)
                continue
            count = static_bound(program, site)
            if count is None or (count and not records):
                raise _Uncertified(f"no derivative for the angle of {site.describe()}")
            largest = np.max([self._tangent(r, site) for r in records], axis=0) if records \
                else np.zeros(size)
            if top > loop_index >= 0:
                self.after += count * frequency * largest
            else:
                self.first += count * frequency * largest
                for record in records:
                    self.before += record.weight_in * frequency * self._tangent(record, site)

    def path(self, rounds: int) -> np.ndarray:
        """The most one path's gate sensitivities add up to in ``rounds`` rounds."""
        return self.first + (rounds + 1) * self.round + self.after

    def _tangent(self, record: Any, site: Site) -> np.ndarray:
        node = record.in_nodes[1 + site.slot]
        if node is None:
            return np.zeros_like(self.round)
        if node not in self._tangents:
            grads, _ = self.run.classical_vjp({node: 1.0})
            self._tangents[node] = np.abs(np.concatenate(
                [np.ravel(grads[k]) for k in self.positions]))
        return self._tangents[node]


def _unsteady_gates(program: Program, loop: Eqn | None) -> set[int]:
    """Gate equations whose angles may differ between rounds or paths: they depend on
    measurement outcomes, on expectation values, on what the loop carries from round to
    round, or on what it returns. Their sensitivity in rounds not summed is unknown."""
    unsteady: set[int] = set()
    random_outputs = ("measure", "expval", "probs", "sample", "statevector")

    def visit(eqn: Eqn, in_flags: list[bool], steps: Any, index: int) -> list[bool] | None:
        if eqn.primitive.name == "gate" and any(in_flags[1:]):
            unsteady.add(id(eqn))
        if eqn.primitive.name in random_outputs or eqn is loop:
            return [True] * len(eqn.outputs)
        return None

    walk_dependence(program, [False] * len(program.inputs), (), visit)
    if loop is not None:
        p = loop.params
        carried = len(p["body"].outputs)
        walk_dependence(p["cond"], [False] * p["num_cond_consts"] + [True] * carried, (), visit)
        walk_dependence(p["body"], [False] * p["num_body_consts"] + [True] * carried, (), visit)
    return unsteady


def _classical_paths(program: Program, cotangents: Sequence[Any],
                     positions: Sequence[int]) -> bool:
    """Whether an output in the objective depends on a differentiated input by classical
    code alone (a term like ``w · rounds``: its derivative grows with the rounds)."""
    flags = [k in positions for k in range(len(program.inputs))]
    reached = walk_dependence(program, flags, (), lambda *_: None, through_quantum=False)
    return any(hit and np.any(np.asarray(c) != 0) for hit, c in zip(reached, cotangents))
