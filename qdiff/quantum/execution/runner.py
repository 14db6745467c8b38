"""Running quantum programs: branch enumeration (``exact``) and trajectories (``sample``).

A program with measurements denotes an expectation over outcomes. The runner carries a list
of branches, each a probability weight and the values of the program's vars (states kept
normalized). Measurement splits a branch in two (``exact``) or draws one outcome
(``sample``); reset is the sum of its two branches; postselection keeps one branch and
the value is conditioned on it. ``while M[q]=1 do S od`` means Σ_k E0 ∘ (S ∘ E1)^k: the
runner iterates until the live mass is below the tolerance ``tol``; branches below ``tol²``
are pruned. Mass removed by pruning, by loops cut off, and by bounded loops that abort
(``max_iter``) is reported, never renormalized away; `tail_certificate` turns it into a
certified bound on what the values and derivatives miss.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...gpu import array_module_of
from ...ir import pytree
from ...ir.control_flow import cond_p, loop_p, while_p
from ...ir.core import Eqn, Literal, Program
from ...ir.errors import QdiffError
from ...ir.primitives import Primitive
from ..lang import primitives as qp
from ..lang.fusion import fused_gate_p
from ..lang.primitives import QUANTUM_PRIMITIVES, pauli_sum_of
from ..simulator import get_backend
from .loop_exits import FOLD_EXITS, FoldedExits, LoopExits, foldable_loops, run_exits
from .options import DEFAULTS, RunOptions
from .reference import (
    apply_fused_gate_eqn,
    apply_gate_eqn,
    check_finite_angles,
    draw_bits,
    fused_program,
)
from .shot_readouts import estimated_expval, estimated_probs

Item = tuple[float, list[Any]]  # (weight, values)


class NonTerminatingLoopError(QdiffError):
    """A loop whose exit probability stays zero: it cannot terminate."""


@dataclass(kw_only=True)
class MassAccount:
    """What a run (or a derivative's runs) left out of the exact semantics.

    ``dropped_mass``: the probability that pruning below ``tol``² removed;
    ``unterminated_mass``: what loops still held when cut off; ``aborted_mass``: what bounded
    loops aborted (part of the semantics); ``postselection_probability``: how likely the
    postselection the values are conditioned on was; ``num_branches`` the branches
    enumerated and ``shots`` the trajectories that count (sample modes). ``remainder_bound``
    bounds, certified, how far the returned numbers are from the exact ones
    (`qdiff.quantum.certificate.tail`): infinite, with ``remainder_reason``, when the program
    is outside what the certificate covers.
    """

    num_branches: int = 1
    dropped_mass: float = 0.0
    unterminated_mass: float = 0.0
    aborted_mass: float = 0.0
    postselection_probability: float = 1.0
    shots: int | None = None
    remainder_bound: Any = None
    remainder_reason: str | None = None

    @property
    def missing_mass(self) -> float:
        """Probability the returned values do not account for."""
        return self.dropped_mass + self.unterminated_mass + self.aborted_mass


@dataclass
class QuantumResult(MassAccount):
    """Values of a quantum program with what the semantics had to drop, and how.

    ``values`` has the structure of the program's outputs. In ``exact`` and ``density`` mode
    they are expectations over branches (an array drawn by ``qm.sample`` is a mixture of the
    branches' draws instead; in ``sample`` mode its ``stderr`` is None); ``dropped_mass``: what
    pruning below ``tol`` removed, ``unterminated_mass`` what loops still held when cut off,
    ``aborted_mass`` what bounded loops aborted. With postselection, values are conditioned
    on it and ``postselection_probability`` says how likely it was. In ``sample`` mode ``stderr``
    holds the standard errors and ``shots`` the trajectories that count.
    ``gate_passes`` counts the gate applications (passes over a state) the run made, and
    ``passes_saved`` those that gate fusion saved (both summed over branches and shots).
    In ``exact`` mode ``remainder_bound`` (the structure of ``values``) bounds, certified,
    how far each value is from the exact one (`tail_certificate`); it is infinite, with
    ``remainder_reason``, when the program is outside what the certificate covers.
    """

    values: Any
    mode: str
    stderr: Any = None
    trajectories: list[Any] | None = field(default=None, repr=False)
    gate_passes: int = 0
    passes_saved: int = 0


def needs_runner(program: Program) -> bool:
    """Whether ``program`` contains quantum operations (directly or in sub-programs)."""
    cached = _QUANTUM_CACHE.get(id(program))
    if cached is not None and cached[0] is program:
        return cached[1]
    found = any(_eqn_is_quantum(eqn) for eqn in program.eqns)
    _QUANTUM_CACHE[id(program)] = (program, found)
    return found


_QUANTUM_CACHE: dict[int, tuple[Program, bool]] = {}


def _eqn_is_quantum(eqn: Eqn) -> bool:
    return eqn.primitive.name in QUANTUM_PRIMITIVES or any(
        needs_runner(sub) for _, sub in eqn.subprograms())


class RunAccounting:
    """What every runner of the semantics shares: the pruning tolerance, the loop limits, the
    random generator, and the probability mass the run pruned, cut off or aborted."""

    def __init__(self, options: RunOptions, zero_exit_limit: int, prune: float | None = None):
        self.options = options
        self.tol = tol = options.tol
        self.prune = tol if prune is None else prune
        self._rng: np.random.Generator | None = None  # made when first drawn from
        self.max_loop_iterations = options.max_loop_iterations
        self.zero_exit_limit = zero_exit_limit
        self.dropped = 0.0
        self.unterminated = 0.0
        self.aborted = 0.0
        self.postselected_away = 0.0
        self.samples: dict[int, np.ndarray] = {}  # arrays drawn by `sample`, by id
        # per run of a loop on a measurement: the masses of its rounds (`loop_run`), kept
        # where a certificate reads them (exact mode)
        self.loop_masses: list[tuple[list[float], list[float], list[float]]] = []
        self.keeps_loop_masses = False
        # the ids of the program's top-level while equations where known (`exits_to_end`):
        # the certificate reads no other loop's masses (a nested loop on a measurement is
        # outside it), so the runs of nested loops are not kept; None: every loop's are
        self.top_loops: set[int] | None = None

    @property
    def rng(self) -> np.random.Generator:
        """The run's random generator, seeded by ``options.seed`` (made on first use: a
        run that draws nothing does not pay for it)."""
        if self._rng is None:
            self._rng = np.random.default_rng(self.options.seed)
        return self._rng

    def keep_mass(self, weight: float) -> bool:
        """Whether a branch of probability ``weight`` survives pruning (else it is reported)."""
        if weight < self.prune:
            self.dropped += weight
            return False
        return True

    def loop_run(self, eqn: Eqn) -> tuple[list[float], list[float], list[float]]:
        """Fresh per-round lists for one run of the while equation ``eqn``: the mass entering
        its test, the mass seen exiting and the mass seen going on, round by round (kept for
        loops on a measurement with no bound, which `qdiff.quantum.certificate.tail` reads).
        Pruning below ``tol²`` may hide exits and continuations alike, so ``exited/entering``
        is a lower bound on a round's exit probability, whatever pruning hid."""
        entering: list[float] = []
        exited: list[float] = []
        going_on: list[float] = []
        if self.keeps_loop_masses and eqn.params["max_iter"] is None and (
                self.top_loops is None or id(eqn) in self.top_loops):
            self.loop_masses.append((entering, exited, going_on))
        return entering, exited, going_on

    def stop_loop(self, iterations: int, max_iter: int | None, live_mass: float,
                  exited_any: bool) -> bool:
        """Whether a while loop stops before iteration ``iterations + 1``, booking the mass
        still live; a loop that never exited for ``zero_exit_limit`` iterations is an error."""
        if max_iter is not None and iterations >= max_iter:
            self.aborted += live_mass  # while^(T): abort, mass dropped
            return True
        if iterations >= self.max_loop_iterations or (max_iter is None
                                                      and live_mass < self.tol):
            self.unterminated += live_mass
            return True
        if not exited_any and iterations >= self.zero_exit_limit:
            raise NonTerminatingLoopError(
                f"the while loop's exit probability stayed zero for {iterations} iterations: "
                "it cannot terminate (check the loop test and what the body prepares)")
        return False


class BranchRunner(RunAccounting):
    """One run of a program in ``exact`` or ``sample`` mode (see the module docstring)."""

    def __init__(self, options: RunOptions = DEFAULTS, zero_exit_limit: int = 1_000):
        mode, fuse = options.mode, options.fuse
        if mode not in ("exact", "sample"):
            raise QdiffError(f"mode must be 'exact', 'sample' or 'density', got {mode!r}")
        # the loop cut-off (tol) is what the tail bound is built on; single branches are only
        # pruned far below it, where their derivative (at most ∝ sqrt(mass)) is negligible
        super().__init__(options, zero_exit_limit, prune=options.tol ** 2)
        self.mode = mode
        self.keeps_loop_masses = mode == "exact"
        self.backend = get_backend(options.backend)
        self.rejected_shots = 0
        # gate fusion (`fusion.py`): on by default, with the back end's block width for the
        # register (none where fusing does not pay); an int forces that width
        self.fuse = True if fuse is None else fuse
        self.fusion_width = None if isinstance(fuse, bool) or fuse is None else int(fuse)
        self.gate_passes = 0
        self.passes_saved = 0
        # sample mode without mid-circuit measurements: readouts are estimated from this
        # many shots each (`shot_readouts`); None reads them exactly
        self.readout_shots: int | None = None
        # the exits of the top program's while loops may run to its end while the loop
        # still runs (`exits_to_end`, `loop_exits`): their contribution is kept in `folded`
        self._foldable: dict[int, tuple[Program, int, list[Any]]] = {}
        self._entering: LoopExits | None = None
        self._folding = False
        self.folded = FoldedExits()

    # -- programs ---------------------------------------------------------------------------
    def run_program(self, program: Program, items: list[Item]) -> list[Item]:
        """Run ``program`` on each (weight, inputs) item; returns (weight, outputs) items."""
        if self.fuse:
            program = fused_program(program, self.backend, self.fusion_width)[0]
        branches = [(w, dict(zip(program.inputs, values))) for w, values in items]
        return self.run_equations(program, 0, branches)

    def run_equations(self, program: Program, start: int,
                      branches: list[tuple[float, dict]]) -> list[Item]:
        """Run ``program``'s equations from index ``start`` on (weight, environment)
        branches; returns (weight, outputs) items (the adjoint recorder runs a loop's exits
        to the program's end with it)."""
        for eqn in program.eqns[start:]:
            branches = self._step(eqn, branches)
        return [(w, [_read(env, a) for a in program.outputs]) for w, env in branches]

    def exits_to_end(self, program: Program) -> None:
        """Let the exits of ``program``'s top-level while loops run to its end while the
        loop runs (`loop_exits.foldable_loops`): run ``program`` next."""
        if self.fuse:
            program = fused_program(program, self.backend, self.fusion_width)[0]
        self._foldable = {key: (program, index, reads)
                          for key, (index, reads) in foldable_loops(program).items()}
        self.top_loops = {id(e) for e in program.eqns if e.primitive is while_p}

    def fold_exits(self, exits: LoopExits, items: list[Item]) -> None:
        """Run a loop's exits ``items`` to the program's end and add what they contribute
        to `folded`."""
        self._folding = True
        try:
            self.folded.add(run_exits(self, exits, items))
        finally:
            self._folding = False

    def _step(self, eqn: Eqn, branches: list[tuple[float, dict]]) -> list[tuple[float, dict]]:
        found = self._foldable.get(id(eqn))
        if found is None or self._folding or found[0].eqns[found[1]] is not eqn:
            return self._step_branches(eqn, branches)
        program, index, reads = found
        result = []
        for branch in branches:  # the loop's exits go on with their own branch's values
            self._entering = LoopExits(program, index, {v: branch[1][v] for v in reads})
            result.extend(self._step_branches(eqn, [branch]))
        self._entering = None
        return result

    def _step_branches(self, eqn: Eqn, branches: list[tuple[float, dict]]
                       ) -> list[tuple[float, dict]]:
        handler = HANDLERS.get(eqn.primitive) if _eqn_is_quantum(eqn) else None
        result = []
        gate = eqn.primitive in GATE_PRIMITIVES
        for weight, env in branches:
            inputs = [_read(env, a) for a in eqn.inputs]
            if gate:
                check_finite_angles(eqn, inputs[1:])
            outcomes = self.apply(eqn, handler, weight, inputs)
            for k, (w, outs) in enumerate(outcomes):
                target = env if k == len(outcomes) - 1 else dict(env)
                target.update(zip(eqn.outputs, outs))
                result.append((w, target))
        return result

    def apply(self, eqn: Eqn, handler: Handler | None, weight: float,
              inputs: list[Any]) -> list[Item]:
        """The outcomes of one equation on one branch (a hook for the adjoint recorder)."""
        if handler is None:
            outs = eqn.primitive.impl("numpy")(*inputs, **eqn.params)
            return [(weight, outs if eqn.primitive.multiple_results else [outs])]
        return handler(self, eqn, weight, inputs)

    def start_rounds(self, eqn: Eqn, cond_consts: list[Any], body_consts: list[Any]) -> Any:
        """A hook at the start of a while loop's run: what it returns, `end_round` gets
        after each round (the adjoint recorder's checkpoints); here where the loop's exits
        go on (`exits_to_end`), or None."""
        exits, self._entering = self._entering, None  # a loop inside this one has none
        return exits

    def end_round(self, rounds: Any, live: list[Item], finished: list[Item]) -> None:
        """A hook after each round of a while loop: the live branches, and every branch
        that exited so far (the adjoint recorder may take exits out of ``finished``: it runs
        them to the program's end at once). Here, once more than `FOLD_EXITS` distinct
        exits are held, they run to the program's end (`fold_exits`): memory bounded in
        the rounds."""
        if rounds is None or len(finished) < FOLD_EXITS:
            return
        finished[:] = self.merge(finished)
        if len(finished) >= FOLD_EXITS // 2:
            self.fold_exits(rounds, finished[:])
            del finished[:]

    def merge(self, items: list[Item]) -> list[Item]:
        """Merge identical branches (`merge_branches`); the adjoint recorder records it."""
        return merge_branches(items)

    # -- measurement ------------------------------------------------------------------------
    def split(self, state: np.ndarray, wire: int) -> list[tuple[int, float, np.ndarray]]:
        """The outcomes of measuring ``wire``: (outcome, probability, normalized state)."""
        n = _num_qubits(state)
        outcomes = []
        for outcome in (0, 1):
            branch = self.backend.project(self.backend.copy(state), n, wire, outcome)
            p = float(self.backend.norm_squared(branch))
            if p > 0:
                outcomes.append((outcome, p, branch / np.sqrt(p)))
        return outcomes

    def choose(self, outcomes: list[tuple[int, float, np.ndarray]]) -> tuple[int, float, Any]:
        """Sample mode: draw one outcome with its probability."""
        probs = np.array([p for _, p, _ in outcomes])
        k = self.rng.choice(len(outcomes), p=probs / probs.sum())
        return outcomes[k]


def _read(env: dict, atom: Any) -> Any:
    return atom.value if isinstance(atom, Literal) else env[atom]


def _num_qubits(state: np.ndarray) -> int:
    return int(state.shape[0]).bit_length() - 1


# ---------------------------------------------------------------------- handlers, one per op
Handler = Callable[[BranchRunner, Eqn, float, list[Any]], list[Item]]


def _qalloc(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    return [(w, [r.backend.zero_state(eqn.params["num_qubits"], eqn.params["dtype"])])]


def _gate(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    state, *angles = inputs
    r.gate_passes += 1
    return [(w, [apply_gate_eqn(r.backend, state, angles, **eqn.params)])]


def _fused_gate(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    state, *angles = inputs
    r.gate_passes += 1
    r.passes_saved += len(eqn.params["parts"]) - 1
    return [(w, [apply_fused_gate_eqn(r.backend, state, angles, **eqn.params)])]


def _measure(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    (state,) = inputs
    wire, reset = eqn.params["wire"], eqn.params["reset"]
    outcomes = r.split(state, wire)
    if r.mode == "sample":
        outcomes = [r.choose(outcomes)]
        outcomes = [(m, 1.0, s) for m, _, s in outcomes]
    items = []
    for outcome, p, branch in outcomes:
        if reset and outcome == 1:
            branch = r.backend.apply_gate(branch, _num_qubits(branch), "x", [wire])
        if r.keep_mass(w * p):
            items.append((w * p, [branch, np.asarray(outcome, np.int64)]))
    return items


def _reset(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    items = _measure(r, _with_params(eqn, reset=True), w, inputs)
    return [(weight, [state]) for weight, (state, _bit) in items]


def _postselect(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    (state,) = inputs
    wire, value = eqn.params["wire"], eqn.params["value"]
    outcomes = r.split(state, wire)
    if r.mode == "sample":
        drawn = r.choose(outcomes)
        if drawn[0] != value:
            r.rejected_shots += 1
            return []
        return [(w, [drawn[2]])]
    items = []
    for outcome, p, branch in outcomes:
        if outcome == value:
            if r.keep_mass(w * p):
                items.append((w * p, [branch]))
        else:
            r.postselected_away += w * p
    return items


def _readout(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    (state,) = inputs
    n = _num_qubits(state)
    name = eqn.primitive.name
    shots = r.readout_shots
    if name == "expval" and shots:
        value = estimated_expval(r.backend, state, n, eqn.params["terms"],
                                 eqn.params["wires"], shots, r.rng)
    elif name == "expval":
        value = r.backend.expval_pauli_sum(state, n, pauli_sum_of(eqn.params["terms"]),
                                           list(eqn.params["wires"]))
    elif name == "probs":
        value = r.backend.to_numpy(r.backend.probs(state, n, list(eqn.params["wires"])))
        value = estimated_probs(value, shots, r.rng) if shots else value
    else:  # a copy: the branch goes on changing its state in place
        value = np.array(r.backend.to_numpy(state), eqn.params.get("dtype", "complex128"))
    return [(w, [state, np.asarray(value)])]


def _draw(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    """``sample``: draws from this branch's (normalized) state with the run's generator."""
    (state,) = inputs
    p = r.backend.to_numpy(r.backend.probs(state, _num_qubits(state), list(eqn.params["wires"])))
    return [(w, [state, remember_sample(r, draw_bits(p, eqn.params["shots"], r.rng))])]


def remember_sample(runner: Any, bits: np.ndarray) -> np.ndarray:
    """Mark ``bits`` as drawn by ``sample`` so that combining outputs mixes, not averages."""
    runner.samples[id(bits)] = bits
    return bits


def is_sample(runner: Any, value: Any) -> bool:
    """Whether ``value`` is an array that ``sample`` drew in this run (and nothing computed)."""
    return runner.samples.get(id(value)) is value


def mix_samples(arrays: list[np.ndarray], weights: Any, rng: np.random.Generator) -> np.ndarray:
    """Row i is row i of ``arrays[b]`` with b drawn with probability ∝ ``weights[b]``: shots
    drawn independently from the mixture of the branches' distributions.

    >>> a, b = np.zeros((4, 1), np.int64), np.ones((4, 1), np.int64)
    >>> mix_samples([a, b], [0.0, 1.0], np.random.default_rng(0)).ravel().tolist()
    [1, 1, 1, 1]
    """
    if len(arrays) == 1:
        return arrays[0]
    w = np.asarray(weights, np.float64)
    pick = rng.choice(len(arrays), size=arrays[0].shape[0], p=w / w.sum())
    return np.stack(arrays)[pick, np.arange(arrays[0].shape[0])]


def _qextend(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    # a new register is rare: its tensor product is formed on the host, then moved back
    extended = eqn.primitive.impl("numpy")(r.backend.to_numpy(inputs[0]), **eqn.params)
    return [(w, [r.backend.asarray(extended)])]


def _cond(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    index, *operands = inputs
    branches = eqn.params["branches"]
    chosen = branches[int(np.clip(int(index), 0, len(branches) - 1))]
    return r.run_program(chosen, [(w, operands)])


def _loop(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    start, stop, *rest = inputs
    k = eqn.params["num_consts"]
    consts, carry = rest[:k], rest[k:]
    items: list[Item] = [(w, carry)]
    dtype = np.asarray(start).dtype
    for i in range(int(start), int(stop)):
        index = np.asarray(i, dtype)
        items = r.run_program(eqn.params["body"], [(wi, [index, *consts, *c]) for wi, c in items])
    return items


def _while(r: BranchRunner, eqn: Eqn, w: float, inputs: list[Any]) -> list[Item]:
    p = eqn.params
    nc, nb = p["num_cond_consts"], p["num_body_consts"]
    cond_consts, body_consts, carry = inputs[:nc], inputs[nc:nc + nb], inputs[nc + nb:]
    live: list[Item] = [(w, carry)]
    finished: list[Item] = []
    iterations = 0
    exited_any = False
    dropped_before = r.dropped
    entering_masses, exit_masses, going_masses = r.loop_run(eqn)
    rounds = r.start_rounds(eqn, cond_consts, body_consts)
    while live:
        entering_masses.append(sum(wi for wi, _ in live))
        continuing, exits, tested_mass = loop_test(r, p, cond_consts, live)
        finished.extend(exits)
        exited_any = exited_any or bool(exits)
        going_on = sum(wi for wi, _ in continuing)
        exit_masses.append(tested_mass - going_on)
        going_masses.append(going_on)
        # pruned branches may have been exits: pruning never decides that a loop cannot end
        if not continuing or r.stop_loop(iterations, p["max_iter"], going_on,
                                         exited_any or r.dropped > dropped_before):
            break
        live = loop_body(r, p, body_consts, continuing)
        iterations += 1
        r.end_round(rounds, live, finished)
    return r.merge(finished)


def loop_test(r: BranchRunner, params: dict, cond_consts: list[Any], live: list[Item]
              ) -> tuple[list[Item], list[Item], float]:
    """A while loop's test on the live branches: (those going on, those exiting, the mass
    the test returned)."""
    tested = r.run_program(params["cond"], [(wi, [*cond_consts, *c]) for wi, c in live])
    continuing, exits = [], []
    for wi, (pred, *c) in tested:
        (continuing if bool(pred) else exits).append((wi, c))
    return continuing, exits, sum(wi for wi, _ in tested)


def loop_body(r: BranchRunner, params: dict, body_consts: list[Any],
              continuing: list[Item]) -> list[Item]:
    """A while loop's body on the branches going on, identical branches merged."""
    return r.merge(r.run_program(params["body"],
                                 [(wi, [*body_consts, *c]) for wi, c in continuing]))


def merge_branches(items: list[Item]) -> list[Item]:
    """Merge branches whose classical values agree and whose states are equal up to phase.

    A mixture of identical pure states is that state with the summed weight, so merging
    keeps loops such as the von Neumann extractor at a bounded number of live branches
    instead of doubling them every iteration.
    """
    return [(sum(items[i][0] for i in group), items[group[0]][1])
            for group in merge_groups(items)]


def merge_groups(items: list[Item], key: Callable[[Any], tuple] | None = None,
                 same: Callable[[Any, Any], bool] | None = None) -> list[list[int]]:
    """Indices of the branches that merge, one group per merged branch, in first-seen order:
    branches with equal ``key(values)`` (default: their classical values) whose values are
    ``same`` (default: their states agree up to phase) merge.

    >>> merge_groups([(0.5, [np.array(1)]), (0.25, [np.array(2)]), (0.25, [np.array(1)])])
    [[0, 2], [1]]
    """
    key = key or (lambda values: tuple(_classical_key(v) for v in values))
    same = same or (lambda a, b: all(_same_state(x, y) for x, y in zip(a, b)))
    buckets: dict[tuple, list[list[int]]] = {}
    groups: list[list[int]] = []
    for index, (_, values) in enumerate(items):
        bucket = buckets.setdefault(key(values), [])
        for group in bucket:
            if same(items[group[0]][1], values):
                group.append(index)
                break
        else:
            group = [index]
            bucket.append(group)
            groups.append(group)
    return groups


def _is_state(value: Any) -> bool:
    """Whether ``value`` is a statevector (a complex vector, in host or device memory)."""
    dtype = getattr(value, "dtype", None)
    return dtype is not None and dtype.kind == "c" and getattr(value, "ndim", 0) == 1


def _classical_key(value: Any) -> Any:
    if _is_state(value):
        return ("state", value.shape)  # compared by _same_state, where the state lives
    array = np.asarray(value)
    return (array.dtype.str, array.shape, array.tobytes())


def _same_state(a: Any, b: Any) -> bool:
    if not _is_state(a):
        return True  # classical values were equal by key
    return bool(abs(complex(array_module_of(a).vdot(a, b))) > 1.0 - 1e-12)


def _with_params(eqn: Eqn, **changes: Any) -> Eqn:
    return Eqn(eqn.primitive, eqn.inputs, eqn.outputs, {**eqn.params, **changes})


GATE_PRIMITIVES = frozenset((qp.gate_p, fused_gate_p))

# The operations on states and the control flow around them, by primitive (an equation of
# any other primitive runs on the reference interpreter, per branch).
HANDLERS: dict[Primitive, Handler] = {
    qp.qalloc_p: _qalloc, qp.qextend_p: _qextend, qp.gate_p: _gate, qp.measure_p: _measure,
    qp.reset_p: _reset, qp.postselect_p: _postselect, qp.expval_p: _readout,
    qp.probs_p: _readout, qp.statevector_p: _readout, cond_p: _cond, loop_p: _loop,
    while_p: _while, qp.sample_p: _draw, fused_gate_p: _fused_gate,
}


def _combine(items: list[Item], runner: Any, scale: float = 1.0) -> list[Any]:
    """The weighted sum over branches of each output divided by ``scale`` (bits and counts
    become expectations); arrays drawn by ``sample`` are mixed instead (`mix_samples`)."""
    if not items:
        return []
    outputs = []
    for k in range(len(items[0][1])):
        column = [outs[k] for _, outs in items]
        if all(is_sample(runner, v) for v in column):
            outputs.append(mix_samples(column, [w for w, _ in items], runner.rng))
        elif len(items) == 1 and items[0][0] == 1.0 and scale == 1.0 and np.ndim(column[0]):
            outputs.append(_as_number(column[0]))  # one branch: its array as it is (the
            # probabilities of 20 qubits: a copy of 8 MB, a tenth of a graph state's run)
        else:  # one new array, accumulated in place (a statevector output is big)
            total = items[0][0] * _as_number(column[0])
            for (w, _), v in zip(items[1:], column[1:]):
                total += w * _as_number(v)
            if scale != 1.0:
                total /= scale
            outputs.append(total)
    return outputs


def _as_number(value: Any) -> np.ndarray:
    array = np.asarray(value)
    return array if array.dtype.kind == "c" else array.astype(np.float64, copy=False)


def enumerated_outputs(runner: Any, program: Program,
                       items: list[Item]) -> tuple[list[Any], float]:
    """The flat outputs of enumerated branches (expectations, conditioned on postselection)
    and the postselection probability."""
    success = 1.0 - runner.postselected_away
    if runner.postselected_away > 0 and success <= runner.tol:
        raise QdiffError("postselection succeeds with probability 0: the value is undefined")
    folded = getattr(runner, "folded", None)
    if folded is not None and folded.branches:  # exits summed while their loop ran
        outputs = _combine(items, runner) or [np.zeros(a.type.shape) for a in program.outputs]
        return [(o + s) / success for o, s in zip(outputs, folded.sums)], success
    if not items:
        return [np.zeros(a.type.shape) for a in program.outputs], success
    return _combine(items, runner, success), success


def enumerated_result(runner: Any, program: Program, items: list[Item],
                      mode: str) -> QuantumResult:
    """The result of enumerated (weight, outputs) branches: expectations, conditioned on
    postselection, with the mass the runner dropped, cut off or aborted."""
    outputs, success = enumerated_outputs(runner, program, items)
    return QuantumResult(
        values=_structure(program, outputs), mode=mode,
        num_branches=len(items) + getattr(getattr(runner, "folded", None), "branches", 0),
        dropped_mass=runner.dropped, unterminated_mass=runner.unterminated,
        aborted_mass=runner.aborted, postselection_probability=success)


def _structure(program: Program, outputs: list[Any]) -> Any:
    outputs = [o[()] if isinstance(o, np.ndarray) and o.ndim == 0 else o for o in outputs]
    if program.out_tree is None:
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    return pytree.unflatten(program.out_tree, outputs)


