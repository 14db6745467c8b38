"""Batches of a quantum program with measurements as one batched branching simulation
(`qdiff.vmap`, exact mode).

The branching runner (`runner.py`) enumerates a program's measurement branches for one set
of inputs. Here every branch holds the whole batch: a ``(members, 2**n)`` array of states
(each row normalized) and a weight per member, so a measurement splits the batch's branch
in two once, each member keeping its own probability of each outcome. A branch's bits are
the same for every member (that is what the branch is), so a ``cond`` on them picks one
branch program for the batch; a ``cond`` on a value that differs per member runs each
branch program with the weights of the members that take it. A ``while`` loop on a
measurement runs until every member's live mass is below ``tol`` (a member whose loop is
cut off, or ends, keeps weight zero in the branches still going on); resets and
postselection act on the batch's branches likewise. Classical equations run batched (the
batching rules of `qdiff.batching`), gates on every row with each member's matrix
(`simulator.batched_kernels`).

The values are those of the branching runner member by member: the same expectations,
pruning (a member's branch below ``tol²`` is dropped and booked), cut-offs and
postselection. Where a member's values would carry a warning or an error (more than
``tol`` left out, a loop that cannot end, postselection that never succeeds), or the
program leaves this form at run time (bounds that differ per member), the batch runs
member by member instead, so those are raised as they are for one member.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import repeat_until_one   # mean rounds 1 / sin²(θ/2)
>>> theta = np.array([0.7, 1.0, 2.0])
>>> rounds = run_branches(qdiff.trace(repeat_until_one, 0.1), [theta], [True], 3)[0]
>>> np.allclose(rounds, 1 / np.sin(theta / 2) ** 2)
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...batching import register_batched_runner
from ...batching.interpreter import batch_subprogram
from ...ir import pytree
from ...ir.control_flow import cond_p, loop_p, while_p
from ...ir.core import Eqn, Literal, Program, Var
from ...ir.interpreter import evaluate
from ...ir.passes import unpack_scalars
from ...ir.types import Bit, QState
from ..lang import primitives as qp
from ..lang.gates import GateSpec, gate_spec
from ..lang.primitives import QUANTUM_PRIMITIVES, pauli_sum_of
from ..simulator.batched_kernels import run_circuit
from .batched import (
    BatchedCircuit,
    batched_circuit,
    gate_step,
    lowered_gates,
    member_matrices,
    observable_rows,
    outcome_index,
)
from .options import DEFAULTS
from .run import call_quantum_program
from .runner import NonTerminatingLoopError
from .runner import merge_groups as merge_index_groups

# the quantum primitives the batched branches run (others: member by member)
_OPERATIONS = frozenset(("qalloc", "gate", "measure", "reset", "postselect", "expval",
                         "probs", "bit_to_int"))


class _MemberByMember(Exception):
    """The batch leaves the batched form at run time: its members run one by one."""


def _accepts(program: Program) -> bool:
    """Whether every quantum operation of ``program`` (sub-programs included) is one the
    batched branches run, on one register, with gates `lowered_gates` batches."""
    registers = 0
    for eqn in program.all_eqns():
        name = eqn.primitive.name
        if name in QUANTUM_PRIMITIVES:
            if name not in _OPERATIONS:
                return False
            if name == "qalloc":
                registers += 1
                if eqn.params["dtype"] != "complex128":
                    return False
            if name == "gate" and _gate_circuit(eqn, 0) is None:   # (no tables made)
                return False
    return registers == 1 and not any(isinstance(a.type, (QState, Bit))
                                      for a in program.outputs)


_ACCEPTED: dict[int, tuple[Program, bool]] = {}


def branches_claim(program: Program, flags: Sequence[bool]) -> bool:
    """Whether the batched branches run ``program``: it measures (or branches, or loops on
    the state) so that `batched_circuit` does not take it, and `_accepts` it."""
    hit = _ACCEPTED.get(id(program))
    if hit is None or hit[0] is not program:
        if len(_ACCEPTED) > 1024:
            _ACCEPTED.clear()
        hit = (program, batched_circuit(program) is None and _accepts(program))
        _ACCEPTED[id(program)] = hit
    return hit[1]


class _Batch:
    """One run of a batch: the tolerances of exact mode and, per member, the mass pruned,
    cut off, aborted and postselected away."""

    def __init__(self, size: int):
        self.size = size
        self.tol = DEFAULTS.tol
        self.prune = DEFAULTS.tol ** 2
        self.max_loop_iterations = DEFAULTS.max_loop_iterations
        self.zero_exit_limit = 1_000
        self.dropped = np.zeros(size)
        self.unterminated = np.zeros(size)
        self.aborted = np.zeros(size)
        self.postselected_away = np.zeros(size)

    def kept(self, weights: np.ndarray) -> np.ndarray:
        """``weights`` with members below the pruning threshold set to zero (booked)."""
        low = weights < self.prune
        self.dropped += np.where(low, weights, 0.0)
        return np.where(low, 0.0, weights)

    # hooks: the batched adjoint's tape (`gradients.batched_branch_adjoint`) records them
    def apply(self, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
        """The outcomes, (weights, outputs), of one equation on one branch."""
        handler = _HANDLERS.get(eqn.primitive)
        if handler is None:
            return [(weights, _classical(eqn, inputs, self.size))]
        return handler(self, eqn, weights, inputs)

    def masked(self, weights: np.ndarray, keep: np.ndarray) -> np.ndarray:
        """``weights`` of the members ``keep`` holds, zero for the others (a ``cond`` on a
        per-member value, a loop's exits, continuations and stopped members)."""
        return np.where(keep, weights, 0.0)

    def merged(self, items: list) -> list:
        """Branches whose classical values agree and whose states agree up to phase for
        every member merged into one, the weights summed (`merge_groups`)."""
        return [(sum(items[i][0] for i in group), items[group[0]][1])
                for group in merge_groups(items)]

    def start_rounds(self, eqn: Eqn, cond_consts: list, body_consts: list) -> Any:
        """At the start of a while loop's run: what `end_round` gets after each round (the
        batched adjoint's checkpointed segments; here None)."""
        return None

    def end_round(self, rounds: Any, live: list, finished: list, running: np.ndarray
                  ) -> None:
        """After each round of a while loop: its live branches, every branch that exited so
        far and the members whose loop still ran the round's body."""


# a branch: (weights (members,), {var: (value, batched)})
Branch = tuple[np.ndarray, dict]


def _read(env: dict, atom: Any) -> tuple[Any, bool]:
    return (atom.value, False) if isinstance(atom, Literal) else env[atom]


def _run(batch: _Batch, program: Program, branches: list[Branch]) -> list[Branch]:
    """``program``'s equations on (weights, environment) branches."""
    for eqn in program.eqns:
        branches = run_equation(batch, eqn, branches)
    return branches


def run_equation(batch: _Batch, eqn: Eqn, branches: list[Branch]) -> list[Branch]:
    """One equation on (weights, environment) branches."""
    out: list[Branch] = []
    for weights, env in branches:
        outcomes = batch.apply(eqn, weights, [_read(env, a) for a in eqn.inputs])
        for k, (w, outs) in enumerate(outcomes):
            target = env if k == len(outcomes) - 1 else dict(env)
            target.update(zip(eqn.outputs, outs))
            out.append((w, target))
    return out


@functools.lru_cache(maxsize=1024)
def _equation_program(eqn: Eqn) -> Program:
    """One classical equation as a program of its distinct var inputs."""
    inputs = tuple(a for a in dict.fromkeys(eqn.inputs) if isinstance(a, Var))
    return Program(inputs, (eqn,), tuple(eqn.outputs), name=eqn.primitive.name)


@functools.lru_cache(maxsize=1024)
def _batched_equation(eqn: Eqn, flags: tuple[bool, ...], size: int) -> tuple[Program, tuple]:
    """`_equation_program` batched for ``flags``, and which of its outputs are batched."""
    batched, natural = batch_subprogram(_equation_program(eqn), flags, size)
    return batched, tuple(natural)


def _classical(eqn: Eqn, inputs: list[tuple[Any, bool]], size: int) -> list[tuple[Any, bool]]:
    if any(isinstance(a.type, QState) for a in (*eqn.inputs, *eqn.outputs)):
        raise _MemberByMember  # control flow of another form carrying the state
    program = _equation_program(eqn)
    found = dict(zip(eqn.inputs, inputs))
    args = [found[v][0] for v in program.inputs]
    flags = tuple(found[v][1] for v in program.inputs)
    if not any(flags):
        return [(np.asarray(o), False) for o in evaluate(program, *args)]
    batched, natural = _batched_equation(eqn, flags, size)
    return [(np.asarray(o), b) for o, b in zip(evaluate(batched, *args), natural)]


# ------------------------------------------------------------------------------- operations
def _qalloc(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    psi = np.zeros((batch.size, 1 << eqn.params["num_qubits"]), np.complex128)
    psi[:, 0] = 1.0
    return [(weights, [(psi, True)])]


def _one_gate(spec: GateSpec, wires: tuple[int, ...], angles: int,
              num_qubits: int) -> BatchedCircuit | None:
    """One gate as a circuit of the gates `lowered_gates` makes of it (None: it has no
    batched form); their angles are the gate's, by position."""
    gates = lowered_gates(spec, wires, range(angles))
    return None if gates is None else BatchedCircuit(None, None, None, tuple(gates), (),
                                                     num_qubits)


@functools.lru_cache(maxsize=1024)
def _gate_circuit(eqn: Eqn, num_qubits: int) -> BatchedCircuit | None:
    """`_one_gate` of a gate equation on a register of ``num_qubits`` wires (cached per
    equation: its static arguments may hold a matrix, which no cache key can)."""
    spec = gate_spec(eqn.params["name"], **(eqn.params.get("static") or {}))
    return _one_gate(spec, tuple(eqn.params["wires"]), len(eqn.inputs) - 1, num_qubits)


def apply_gate(circuit: BatchedCircuit, g: int, rows: np.ndarray, mats: np.ndarray,
               inverse: bool = False) -> np.ndarray:
    """Gate ``g`` of ``circuit`` applied to every row of ``rows``, in place, with each
    member's matrices ``mats`` (`gate_matrices`; for ``inverse``, their adjoints, which
    undo it)."""
    kinds, first, last, tables = gate_step(circuit, g, inverse)
    return run_circuit(rows, kinds, first, last, np.ascontiguousarray(mats[:, g:g + 1]), tables)


@functools.lru_cache(maxsize=1024)
def _fixed_matrices(circuit: BatchedCircuit, size: int, inverse: bool) -> np.ndarray:
    mats = member_matrices(circuit, [], size)
    return np.ascontiguousarray(mats.conj().swapaxes(-1, -2)) if inverse else mats


def gate_matrices(circuit: BatchedCircuit, angles: Sequence[Any], size: int,
                  inverse: bool = False) -> np.ndarray:
    """`member_matrices` of a one-gate circuit (``inverse``: their adjoints, which undo it);
    a gate without angles has one matrix for every member, made once per batch size (the
    fixed gates of a loop's rounds would otherwise copy it per member, per round).

    >>> hadamard = _one_gate(gate_spec("h"), (0,), 0, 1)
    >>> mats = gate_matrices(hadamard, [], 3)
    >>> mats.shape, gate_matrices(hadamard, [], 3) is mats
    ((3, 1, 4, 4), True)
    """
    if not angles:
        return _fixed_matrices(circuit, size, inverse)
    mats = member_matrices(circuit, angles, size)
    return np.ascontiguousarray(mats.conj().swapaxes(-1, -2)) if inverse else mats


def _gate(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    (psi, _), *angles = inputs
    if not all(np.all(np.isfinite(a)) for a, _ in angles):
        raise _MemberByMember  # the member's error names the gate (`check_finite_angles`)
    circuit = _gate_circuit(eqn, psi.shape[1].bit_length() - 1)
    mats = gate_matrices(circuit, [a for a, _ in angles], batch.size)
    moved = psi.copy()
    for g in range(len(circuit.gates)):
        apply_gate(circuit, g, moved, mats)
    return [(weights, [(moved, True)])]


def _outcomes(batch: _Batch, psi: np.ndarray, wire: int, weights: np.ndarray
              ) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(outcome, each member's weight times its probability, the normalized states) of
    measuring ``wire``, for the outcomes some member can see."""
    ones = ((np.arange(psi.shape[1]) >> wire) & 1).astype(bool)
    found = []
    for outcome, mask in ((0, ~ones), (1, ones)):
        branch = np.where(mask, psi, 0.0)
        p = np.einsum("bi,bi->b", branch.conj(), branch).real
        if np.any(p > 0):
            scale = np.where(p > 0, 1.0 / np.sqrt(np.where(p > 0, p, 1.0)), 0.0)
            found.append((outcome, weights * p, branch * scale[:, None]))
    return found


def _measure(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    (psi, _), = inputs
    wire, reset = eqn.params["wire"], eqn.params["reset"]
    items = []
    for outcome, w, branch in _outcomes(batch, psi, wire, weights):
        if reset and outcome == 1:
            index = np.arange(psi.shape[1])
            branch = branch[:, index ^ (1 << wire)]
        w = batch.kept(w)
        if np.any(w > 0):
            items.append((w, [(branch, True), (np.asarray(outcome, np.int64), False)]))
    return items


def _reset(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    eqn = Eqn(eqn.primitive, eqn.inputs, eqn.outputs, {**eqn.params, "reset": True})
    return [(w, [state]) for w, (state, _bit) in _measure(batch, eqn, weights, inputs)]


def _postselect(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    (psi, _), = inputs
    items = []
    for outcome, w, branch in _outcomes(batch, psi, eqn.params["wire"], weights):
        if outcome == eqn.params["value"]:
            w = batch.kept(w)
            if np.any(w > 0):
                items.append((w, [(branch, True)]))
        else:
            batch.postselected_away += w
    return items


def _readout(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    (psi, _), = inputs
    n = psi.shape[1].bit_length() - 1
    wires = tuple(eqn.params["wires"])
    if eqn.primitive.name == "probs":
        value = np.zeros((batch.size, 1 << len(wires)))
        np.add.at(value, (slice(None), outcome_index(n, wires)), (psi.conj() * psi).real)
    else:
        rows = observable_rows(psi, n, pauli_sum_of(eqn.params["terms"]), wires)
        value = np.einsum("bi,bi->b", psi.conj(), rows).real
    return [(weights, [(psi, True), (value, True)])]


def _choices(batch: _Batch, index: tuple[Any, bool], count: int, weights: np.ndarray
             ) -> list[tuple[int, np.ndarray]]:
    """(branch program, the weights of the members that take it) of a ``cond``."""
    value, batched = index
    chosen = np.clip(np.asarray(value).astype(np.int64), 0, count - 1)
    if not batched:
        return [(int(chosen), weights)]
    return [(k, batch.masked(weights, chosen == k)) for k in range(count)
            if np.any((chosen == k) & (weights > 0))]


def _cond(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    index, *operands = inputs
    programs = eqn.params["branches"]
    items = []
    for k, w in _choices(batch, index, len(programs), weights):
        env = dict(zip(programs[k].inputs, operands))
        for w_out, env_out in _run(batch, programs[k], [(w, env)]):
            items.append((w_out, [_read(env_out, a) for a in programs[k].outputs]))
    return items


def _body(batch: _Batch, program: Program, items: list) -> list:
    """``program`` run on each (weights, inputs) item; (weights, outputs) items."""
    out = []
    for w, values in items:
        for w_out, env in _run(batch, program, [(w, dict(zip(program.inputs, values)))]):
            out.append((w_out, [_read(env, a) for a in program.outputs]))
    return out


def _loop(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    (start, start_batched), (stop, stop_batched), *rest = inputs
    if start_batched or stop_batched:
        raise _MemberByMember  # trip counts that differ per member
    k = eqn.params["num_consts"]
    consts, carry = rest[:k], rest[k:]
    items = [(weights, carry)]
    dtype = np.asarray(start).dtype
    for i in range(int(start), int(stop)):
        index = (np.asarray(i, dtype), False)
        items = _body(batch, eqn.params["body"], [(w, [index, *consts, *c]) for w, c in items])
    return items


def _while(batch: _Batch, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
    p = eqn.params
    nc, nb = p["num_cond_consts"], p["num_body_consts"]
    cond_consts, body_consts, carry = inputs[:nc], inputs[nc:nc + nb], inputs[nc + nb:]
    live = [(weights, carry)]
    finished = []
    running = np.ones(batch.size, bool)
    exited_any = np.zeros(batch.size, bool)
    dropped_before = batch.dropped.copy()
    iterations = 0
    rounds = batch.start_rounds(eqn, cond_consts, body_consts)
    while live:
        continuing, exits = loop_test(batch, p, cond_consts, live)
        finished.extend(exits)
        for ends, _ in exits:
            exited_any |= ends > 0
        going_on = sum((w for w, _ in continuing), np.zeros(batch.size))
        # each member stops where the branching runner stops its loop (`stop_loop`)
        stops = going_on == 0
        if p["max_iter"] is not None and iterations >= p["max_iter"]:
            batch.aborted += np.where(running & ~stops, going_on, 0.0)
            stops[:] = True
        else:
            cut = ~stops & ((iterations >= batch.max_loop_iterations)
                            | ((p["max_iter"] is None) & (going_on < batch.tol)))
            batch.unterminated += np.where(running & cut, going_on, 0.0)
            stops |= cut
            seen = exited_any | (batch.dropped > dropped_before)
            if iterations >= batch.zero_exit_limit and np.any(running & ~stops & ~seen):
                raise _MemberByMember  # a loop that cannot end: its member's error
        running &= ~stops
        if not np.any(running):
            break
        live = loop_body(batch, p, body_consts, continuing, running)
        iterations += 1
        batch.end_round(rounds, live, finished, running)
    return batch.merged(finished)


def loop_test(batch: _Batch, params: dict, cond_consts: list, live: list
              ) -> tuple[list, list]:
    """A while loop's test on the live branches: (those going on, those exiting), each
    branch's weights masked to the members that go on or exit there."""
    tested = _body(batch, params["cond"], [(w, [*cond_consts, *c]) for w, c in live])
    continuing, exits = [], []
    for w, ((pred, _), *c) in tested:
        go = np.broadcast_to(np.asarray(pred, bool), (batch.size,))
        if np.any(~go & (w > 0)):
            exits.append((batch.masked(w, ~go), c))
        if np.any(go & (w > 0)):
            continuing.append((batch.masked(w, go), c))
    return continuing, exits


def loop_body(batch: _Batch, params: dict, body_consts: list, continuing: list,
              running: np.ndarray) -> list:
    """A while loop's body on the branches going on, for the members still ``running``;
    identical branches merged."""
    # a member that stopped has weight 0 already in most branches: masked where not
    return batch.merged(_body(batch, params["body"], [
        (w if np.all(running | (w == 0)) else batch.masked(w, running), [*body_consts, *c])
        for w, c in continuing]))


def merge_groups(items: list) -> list[list[int]]:
    """Indices of the branches that merge, one group per merged branch: those whose
    classical values agree and whose states agree up to phase for every member (loops such
    as the von Neumann extractor keep a bounded number of live branches). Branches are
    compared within buckets of equal classical values only.

    >>> psi, one, two = np.array([[1.0, 0.0]], complex), np.asarray(1), np.asarray(2)
    >>> merge_groups([(np.ones(1), [(psi, True), (one, False)]),
    ...               (np.ones(1), [(1j * psi, True), (one, False)]),   # the same up to phase
    ...               (np.ones(1), [(psi, True), (two, False)])])
    [[0, 1], [2]]
    """
    return merge_index_groups(
        items, key=lambda values: tuple(_classical_key(x) for x, _ in values),
        same=_same_states)


def _is_states(x: np.ndarray) -> bool:
    return x.dtype.kind == "c" and x.ndim == 2


def _classical_key(value: Any) -> tuple:
    x = np.asarray(value)
    return (x.dtype.str, x.shape) if _is_states(x) else (x.dtype.str, x.shape, x.tobytes())


def _same_states(a: list, b: list) -> bool:
    for (x, _), (y, _) in zip(a, b):
        if _is_states(x) and not np.all(
                np.abs(np.einsum("bi,bi->b", x.conj(), y)) > 1.0 - 1e-12):
            return False
    return True


# the operations on states and the control flow around them, by primitive (any other
# equation is classical and runs batched)
_HANDLERS = {
    qp.qalloc_p: _qalloc, qp.gate_p: _gate, qp.measure_p: _measure, qp.reset_p: _reset,
    qp.postselect_p: _postselect, qp.expval_p: _readout, qp.probs_p: _readout,
    cond_p: _cond, loop_p: _loop, while_p: _while,
}


def _member_by_member(program: Program, values: Sequence[Any], flags: Sequence[bool],
                      size: int) -> list[Any]:
    rows = [call_quantum_program(program, [np.asarray(v)[b] if f else v
                                           for v, f in zip(values, flags)])
            for b in range(size)]
    rows = [pytree.flatten(r)[0] for r in rows]
    return [np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(program.outputs))]


def run_branches(program: Program, values: Sequence[Any], flags: Sequence[bool],
                 size: int) -> list[Any]:
    """The outputs of ``program`` for a batch (``values`` flat, batch axis first where
    ``flags`` says so), each with the batch axis first, from one batched branching run."""
    flat = unpack_scalars(program)
    batch = _Batch(size)
    env = {v: (np.asarray(x), bool(f)) for v, x, f in zip(flat.inputs, values, flags)}
    try:
        items = _run(batch, flat, [(np.ones(size), env)])
    except (_MemberByMember, NonTerminatingLoopError):
        return _member_by_member(program, values, flags, size)
    success = 1.0 - batch.postselected_away
    left_out = batch.dropped + batch.unterminated
    if np.any(left_out > batch.tol) or np.any((batch.postselected_away > 0)
                                              & (success <= batch.tol)):
        return _member_by_member(program, values, flags, size)
    outputs = []
    for atom in flat.outputs:
        t = atom.type
        total = np.zeros((size, *t.shape))
        for w, env in items:
            value, _ = _read(env, atom)
            total += w.reshape(size, *[1] * len(t.shape)) * np.asarray(value, np.float64)
        outputs.append((total / success.reshape(size, *[1] * len(t.shape))).astype(
            t.np_dtype if t.np_dtype.kind in "fc" else np.float64))
    return outputs


register_batched_runner(branches_claim, run_branches)

__all__ = ["apply_gate", "branches_claim", "gate_matrices", "loop_body", "loop_test",
           "merge_groups", "run_branches", "run_equation"]
