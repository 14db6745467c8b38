"""Per-member gradients of a batch of a quantum program with measurements and loops, by one
batched branching run and one reverse sweep over its branches (``qdiff.vmap(qdiff.grad(f))``).

The forward run is the batched branching simulation's (`execution.batched_branches`):
every branch holds the whole batch's states, ``(members, 2**n)``, and a weight per member.
Here a tape takes its place (`_Tape`, through the run's hooks) and records what it
executes on each branch: every equation, including those of ``cond``, ``loop`` and
``while`` bodies round after round, every mask of the weights (a ``cond`` on a per-member
value; a loop's exits, continuations and members whose loop stopped) and every merge of
branches. The branches share their prefix and merges have several parents, so the
records form a DAG and one backward walk over the tape visits each once. The reverse
sweep carries, per member, the cotangents of classical values and weights, the adjoint
vectors λ of the states (``dJ = 2 Re<λ|dψ>``) and the states ψ beside them, with the rules
of the unbatched sweep (`adjoint`), a leading axis of members instead of rows:

- gate: ``θ̄ = 2 Im<λ_out|G ψ_out>``, ``λ_in = U^†λ_out``, ``ψ_in = U^†ψ_out`` (each member
  its own ``U``; gates keep no state, the sweep uncomputes it);
- measure/reset/postselect: ``ψ' = A P ψ/√q``, ``w' = w q``: ``q̄ = w̄'w - Re<λ'|ψ'>/q``,
  ``w̄ = w̄'q``, ``λ_in = P(A^†λ'/√q + q̄ψ)``, zero for members without this branch;
- expval ``λ_in = λ_out + ē Oψ``; probs ``λ_in,i = λ_out,i + p̄_j(i) ψ_i``;
- a mask ``w' = [keep] w``: ``w̄ = [keep] w̄'``;
- a merge of parents ``(w_i, φ_i)`` into ``(W = Σ w_i, φ_0)``: ``w̄_i = W̄``,
  ``v̄_i = (w_i/W) V̄``, ``λ_i = (w_i/W) (phase of <φ_0|φ_i>) λ_V``;
- classical equations: their VJP programs batched (`batch_subprogram`).

The final value is ``Σ_b w_b g_b`` per member, divided by the kept mass ``Σ_b w_b`` where a
member was postselected (the unbatched convention, `adjoint.RecordedRun`), so values and
gradients are those of the unbatched adjoint member by member: a loop runs until every
member's mass going on is below ``tol``, each member cut off where it would be on its own
(its later rounds carry weight 0), and pruning, aborts at ``max_iter`` and merges are the
branching runner's. The tape keeps the state each measurement, readout and merge saw (one
``(members, 2**n)`` array a measurement, for both its outcomes; gates and the states
measurements leave none, the sweep carries those back). Memory is bounded in the rounds as
in the unbatched adjoint (`loop_segments`, whose schedule, closing and replay serve both):
a while loop's rounds after its first go into segments, each closed into one record with
a checkpoint of the live branches at its start (their pairs: the batched run never updates
a state in place, so nothing is copied) and the rounds at which members stopped running;
the sweep runs a segment's rounds again from it (`_Tape.rerun_rounds`, the forward run's
`loop_test` and `loop_body`) and sweeps them back. A loop at the top of the program runs a
closed segment's exits to the program's end at once (`exits_to_end`, `fold_exits`:
per member, their mass and weighted outputs stay) and the replay seeds them again.
``repeat_until_one`` through 1000 rounds (2 members) peaks at 0.9 MB of traced memory
against 12 MB with every round kept, and 4x the rounds takes about 2x the memory.

Claimed: programs the batched branches run (measurements, ``cond`` on outcomes or on
per-member values, resets, postselection, ``fori_loop`` with shared bounds and
``while_loop`` on measurements or on classical values, including plain loops of gates
with per-member trip counts), one scalar output. Where a member would warn or fail (more
than ``tol`` pruned or cut off, postselection that never succeeds, a loop that cannot
end, an angle that is not finite) or the run leaves its form (loop bounds that differ per
member, a classical equation carrying a state), each member is differentiated on its own,
warning or failing as ``qdiff.grad`` does. 64 members against a loop of
``value_and_grad`` calls (``benchmarks/batched_loops.py``: interleaved, best of 3, a 2-core
machine at a load average of 3.7-4.8, two runs): ``repeat_until_one`` 0.17-0.40 s against
2.5-6.0 s (0.07x), the walk ``cycle_walk`` 0.62-0.77 s against 13.9-14.9 s (0.04-0.05x),
the measuring ``fori_loop`` ``measured_rounds`` 12-33 ms against 0.79-1.93 s (0.02x).

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def reset_then_rotate(t):
...     q = qm.qubits(1)
...     qm.rx(t, q[0])
...     qm.reset(q[0])
...     qm.ry(t, q[0])
...     return qm.expval("Z", q)
>>> theta = np.array([0.3, 1.1])
>>> value, grad = branch_value_and_grad(qdiff.trace(reset_then_rotate, 0.1), [theta],
...                                     [True], 2, 0)
>>> np.allclose(value, np.cos(theta)), np.allclose(grad, -np.sin(theta))
(True, True)
>>> from qdiff.quantum.lang.examples import repeat_until_one   # E[rounds] = 1/sin²(θ/2)
>>> theta = np.array([0.9, 2.0, np.pi])      # about 130, 20 and 1 rounds
>>> grad = qdiff.vmap(qdiff.grad(qdiff.program(repeat_until_one)))(theta)
>>> np.allclose(grad, -np.cos(theta / 2) / np.sin(theta / 2) ** 3, rtol=1e-9, atol=1e-12)
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...autodiff.arguments import ArgNums, argnum_tuple, wrt_flags, wrt_tree
from ...autodiff.reverse import vjp_program
from ...autodiff.tangents import is_differentiable
from ...batching import register_batched_gradient
from ...ir import pytree
from ...ir.control_flow import cond_p, loop_p, while_p
from ...ir.core import Eqn, Program
from ...ir.interpreter import evaluate
from ...ir.passes import unpack_scalars
from ..execution import batched_branches as bb
from ..execution.batched import (
    batched_part,
    observable_rows,
    readout_adjoint,
)
from ..execution.loop_exits import FoldedExits, LoopExits, foldable_loops, run_exits
from ..execution.options import DEFAULTS
from ..execution.runner import NonTerminatingLoopError
from ..lang import primitives as qp
from ..lang.primitives import pauli_sum_of
from .adjoint import probability_cotangent
from .gradient import gradient, report_truncation
from .loop_segments import LoopRounds, LoopSegment, end_round, replay_segment

__all__ = ["branch_value_and_grad"]


@dataclass
class _Record:
    """One step of one branch: an equation executed (``eqn``), or, with ``eqn`` None, the
    weights masked (``mask``: the members kept) or branches merged (``parents``: per
    parent, its weights' node, weights, values' nodes and values). Nodes and values in and
    out, the weights' nodes and values. Gates keep no state and measurements only the one
    they saw (`_NO_STATE` in place of the others): the sweep carries states beside λ."""

    eqn: Eqn | None
    in_nodes: list[int | None]
    in_values: list[tuple[Any, bool]]
    out_nodes: list[int | None]
    out_values: list[tuple[Any, bool]]
    w_in: int
    w_out: int
    weight_in: np.ndarray
    weight_out: np.ndarray
    mask: np.ndarray | None = None
    parents: list[tuple[int, np.ndarray, list[int | None], list[Any]]] | None = None
    segment: LoopSegment | None = None  # rounds of a while loop the sweep replays


class _Value(tuple):
    """A value of the batched run, ``(value, batched)``, that knows its node: it flows
    through the batched branches' handlers, loops and merges like the plain pair."""

    node: int | None = None


def _node(pair: Any) -> int | None:
    return getattr(pair, "node", None)


_NO_STATE = (None, True)  # a state left out of a record: the sweep carries it beside λ


def _state_bytes(pairs: list) -> int:
    return sum(x.nbytes for x, _ in pairs if isinstance(x, np.ndarray) and bb._is_states(x))


class _Tape(bb._Batch):
    """The batched branching run (`batched_branches`), recording every equation, mask and
    merge on every branch, loop bodies included; with ``checkpoints``, a while loop's
    rounds after its first go into segments that the sweep replays (`loop_segments`)."""

    _rng = None  # exact mode draws nothing: a segment's replay has no generator to restore

    def __init__(self, size: int, checkpoints: bool = True):
        super().__init__(size)
        self.checkpoints = checkpoints
        self.records: list[_Record] = []
        self._count = 0
        self.state_bytes = 0  # bytes of the states the records keep (`segment_full`)
        # the weights' nodes by id (keeps them alive: ids unique); values carry their own
        self._objects: dict[int, tuple[np.ndarray, int]] = {}
        # `checkpoint`'s pairs by the id of the value (kept alive: ids unique)
        self._fresh: dict[int, tuple[Any, Any]] = {}
        # the top-level while loops whose exits run to the program's end (`exits_to_end`),
        # the exits of the loop starting now, and what the folded exits contributed
        self._foldable: dict[int, list] = {}
        self._entering: LoopExits | None = None
        self._folding = False
        self.folded = FoldedExits()

    def new(self) -> int:
        self._count += 1
        return self._count

    def value(self, value: Any, batched: bool) -> _Value:
        """``(value, batched)`` with a new node."""
        pair = _Value((value, batched))
        pair.node = self.new()
        return pair

    def weight_node(self, weights: np.ndarray) -> int:
        found = self.node(weights)
        return found if found is not None else self._new(weights)

    # what `loop_segments` asks of a recorder
    def node(self, value: Any) -> int | None:
        """The node of a value (a `_Value`) or of weights, None for a constant."""
        found = self._objects.get(id(value))
        return found[1] if found is not None and found[0] is value else _node(value)

    def _new(self, value: Any) -> int:
        node = self.new()
        if isinstance(value, _Value):
            value.node = node
        else:
            self._objects[id(value)] = (value, node)
        return node

    def checkpoint(self, values: list) -> list:
        """``values`` as inputs of a replay: fresh pairs without nodes, one per value (a
        value may come twice: as a const of the test and of the body); the run never
        updates a state in place, so nothing is copied."""
        fresh = []
        for v in values:
            found = self._fresh.get(id(v))
            if found is None or found[0] is not v:
                found = self._fresh[id(v)] = (v, _Value(v)) if isinstance(v, _Value) else (v, v)
            fresh.append(found[1])
        return fresh

    def value_bytes(self, value: Any) -> int:
        return getattr(value[0], "nbytes", 8) if isinstance(value, tuple) else value.nbytes

    def forget(self, key: int, node: int) -> None:
        self._objects.pop(key, None)

    def flush(self) -> None:
        """Nothing waits: every gate ran when recorded."""

    def replayer(self) -> _Tape:
        sub = _Tape(self.size, self.checkpoints)
        sub.tol, sub.prune = self.tol, self.prune
        sub.max_loop_iterations, sub.zero_exit_limit = self.max_loop_iterations, \
            self.zero_exit_limit
        return sub

    def rerun_rounds(self, segment: LoopSegment, cond_consts: list, body_consts: list,
                     live: list) -> tuple[list, list]:
        """A segment's rounds run again from its checkpoint ``live``, each member running
        where it ran (`_Tape.end_round`)."""
        params = segment.eqn.params
        changes = dict(segment.masks)
        running, finished = None, []
        for k in range(segment.rounds):
            continuing, exits = bb.loop_test(self, params, cond_consts, live)
            finished.extend(exits)
            running = changes.get(k, running)
            live = bb.loop_body(self, params, body_consts, continuing, running)
        return live, finished

    # a top-level while loop's exits run to the program's end when their segment closes
    def exits_to_end(self, program: Program) -> None:
        """Let the exits of ``program``'s top-level while loops run to its end while the
        loop runs (`loop_exits.foldable_loops`): run ``program`` next."""
        self._foldable = {key: reads for key, (_, reads) in foldable_loops(program).items()}

    def run_equations(self, program: Program, start: int, branches: list) -> list:
        """``program``'s equations from index ``start`` on (weights, environment)
        branches; (weights, outputs) items."""
        for index in range(start, len(program.eqns)):
            eqn = program.eqns[index]
            reads = None if self._folding else self._foldable.get(id(eqn))
            if reads is None:
                branches = bb.run_equation(self, eqn, branches)
                continue
            found = []
            for branch in branches:  # the loop's exits go on with their own branch's values
                self._entering = LoopExits(program, index, {v: branch[1][v] for v in reads})
                found.extend(bb.run_equation(self, eqn, [branch]))
            self._entering = None
            branches = found
        return [(w, [bb._read(env, a) for a in program.outputs]) for w, env in branches]

    def merge(self, items: list) -> list:
        """`merged` (what `loop_exits.run_exits` calls)."""
        return self.merged(items)

    def fold_exits(self, exits: LoopExits, items: list) -> None:
        """Run a loop's exits ``items`` to the program's end and add what they contribute
        to `folded`, per member."""
        self._folding = True
        try:
            finals = run_exits(self, exits, items)
        finally:
            self._folding = False
        self.folded.add([(w, [_score(x, self.size) for x in outs]) for w, outs in finals])

    def segment_record(self, segment: LoopSegment) -> _Record:
        return _Record(None, segment.in_nodes, [], segment.out_nodes, [], 0, 0, None, None,
                       segment=segment)

    def start_rounds(self, eqn: Eqn, cond_consts: list, body_consts: list) -> Any:
        exits, self._entering = self._entering, None  # a loop inside this one has none
        return LoopRounds(eqn, cond_consts, body_consts, exits=exits) if self.checkpoints \
            else None

    def end_round(self, rounds: Any, live: list, finished: list, running: np.ndarray) -> None:
        if rounds is None:
            return
        segment = rounds.segment
        if segment is not None and (not segment.masks
                                    or not np.array_equal(segment.masks[-1][1], running)):
            segment.masks.append((segment.rounds, running.copy()))
        end_round(self, rounds, live, finished)

    def apply(self, eqn: Eqn, weights: np.ndarray, inputs: list) -> list:
        if eqn.primitive in (cond_p, loop_p, while_p):  # their bodies' equations are recorded
            return super().apply(eqn, weights, inputs)
        if eqn.primitive is qp.reset_p:   # the outcome is recorded: the rule needs it
            measured = Eqn(eqn.primitive, eqn.inputs, eqn.outputs, {**eqn.params, "reset": True})
            outcomes = bb._measure(self, measured, weights, inputs)
        else:
            outcomes = super().apply(eqn, weights, inputs)
        w_in = self.weight_node(weights)
        in_nodes = [_node(x) for x in inputs]
        # a gate keeps no state (the sweep uncomputes it), a measurement only the one it saw
        kept_in = [_NO_STATE, *inputs[1:]] if eqn.primitive is qp.gate_p else list(inputs)
        self.state_bytes += _state_bytes(kept_in)
        out = []
        for w, values in outcomes:
            pairs = [self.value(x, b) for x, b in values]
            kept_out = [_NO_STATE if bb._is_states(x) else p for (x, _), p in zip(values, pairs)]
            w_out = w_in if w is weights else self.weight_node(w)
            self.records.append(_Record(eqn, in_nodes, kept_in, [p.node for p in pairs],
                                        kept_out, w_in, w_out, weights, w))
            out.append((w, pairs))
        return out

    def masked(self, weights: np.ndarray, keep: np.ndarray) -> np.ndarray:
        w = super().masked(weights, keep)
        node = self.weight_node(weights)
        self.records.append(_Record(None, [], [], [], [], node, self.weight_node(w), weights,
                                    w, mask=np.array(keep, bool)))  # a copy: `running` changes
        return w

    def merged(self, items: list) -> list:
        out = []
        for group in bb.merge_groups(items):
            if len(group) == 1:
                out.append(items[group[0]])
                continue
            total = sum(items[i][0] for i in group)
            pairs = [self.value(x, b) for x, b in items[group[0]][1]]
            parents = [(self.weight_node(items[i][0]), items[i][0],
                        [_node(x) for x in items[i][1]], items[i][1]) for i in group]
            self.state_bytes += sum(_state_bytes(items[i][1]) for i in group)
            self.records.append(_Record(None, [], [], [p.node for p in pairs], pairs, 0,
                                        self.weight_node(total), total, total,
                                        parents=parents))
            out.append((total, pairs))
        return out


class _Sweep:
    """The reverse sweep: per-member cotangents ``ct`` (classical values and weights,
    ``(members, *shape)``), adjoint vectors ``lam`` and the states ``psi`` beside them (a
    state's consumer sets it: a gate's is uncomputed, ``ψ_in = U^†ψ_out``)."""

    def __init__(self, runner: _Tape, final_seeds: Any = None):
        self.runner = runner
        # seeds of the final branches that replayed segments make again (`loop_segments`)
        self.final_seeds = final_seeds
        self.size = runner.size
        self.ct: dict[int, np.ndarray] = {}
        self.lam: dict[int, np.ndarray] = {}
        self.psi: dict[int, np.ndarray] = {}

    # what `loop_segments.replay_segment` asks of a sweep
    def inner(self, runner: _Tape) -> _Sweep:
        """A sweep over a segment's replay ``runner``."""
        return _Sweep(runner, self.final_seeds)

    def move_state(self, inner: _Sweep, mine: int, theirs: int, value: Any) -> None:
        """Move the adjoint (and state) that a replay's sweep ``inner`` holds for its input
        ``mine`` onto the checkpoint's node ``theirs``."""
        lam, psi = inner.pair(mine)
        if lam is not None:
            self.add_lam(theirs, lam, psi)

    def add(self, node: int | None, value: Any) -> None:
        if node is not None and value is not None:
            have = self.ct.get(node)
            self.ct[node] = value if have is None else have + value

    def add_lam(self, node: int | None, value: np.ndarray, psi: np.ndarray) -> None:
        """``λ[node] += value``, the node's state ``psi`` kept for the rule that made it."""
        if node is not None:
            have = self.lam.get(node)
            self.lam[node] = value if have is None else have + value
            self.psi.setdefault(node, psi)

    def pair(self, node: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        return self.lam.pop(node, None), self.psi.pop(node, None)

    def walk(self, records: list[_Record]) -> None:
        for record in reversed(records):
            if record.segment is not None:
                replay_segment(self, record.segment, _Sweep.walk)
                continue
            if record.eqn is None:
                (_merge if record.parents is not None else _mask)(self, record)
                continue
            _RULES.get(record.eqn.primitive, _classical)(self, record)


def _mask(sweep: _Sweep, record: _Record) -> None:
    # w_out = [keep] w_in: w̄_in += [keep] w̄_out
    w_bar = sweep.ct.pop(record.w_out, None)
    if w_bar is not None:
        sweep.add(record.w_in, np.where(record.mask, w_bar, 0.0))


def _merge(sweep: _Sweep, record: _Record) -> None:
    # (W = Σ w_i, φ_0): w̄_i = W̄, v̄_i = (w_i/W) V̄, λ_i = (w_i/W) (phase of <φ_0|φ_i>) λ_V
    total = record.weight_out
    w_bar = sweep.ct.pop(record.w_out, None)
    outs = [sweep.pair(n) if bb._is_states(x) else sweep.ct.pop(n, None)
            for n, (x, _) in zip(record.out_nodes, record.out_values)]
    positive = total > 0
    for w_node, w, nodes, values in record.parents or []:
        share = np.where(positive, w / np.where(positive, total, 1.0), 0.0)
        sweep.add(w_node, w_bar)
        for n, (x, _), (first, _), out in zip(nodes, values, record.out_values, outs):
            if not bb._is_states(x):
                if out is not None:
                    sweep.add(n, share.reshape(-1, *[1] * (np.ndim(out) - 1)) * out)
                continue
            lam = out[0]
            if lam is not None:
                overlap = np.einsum("bi,bi->b", first.conj(), x)
                size = np.abs(overlap)
                phase = np.where(size > 0, overlap / np.where(size > 0, size, 1.0), 1.0)
                sweep.add_lam(n, (share * phase)[:, None] * lam, x)


def _members(value: Any, batched: bool, size: int) -> np.ndarray:
    x = np.asarray(value)
    return x if batched else np.broadcast_to(x, (size, *x.shape))


def _gate(sweep: _Sweep, record: _Record) -> None:
    # gate by gate of the equation's lowered gates (`lowered_gates`), from its last:
    # θ̄_k += 2 Im<λ_out|G ψ_out> for the gate's angle k, λ_in = U^†λ_out, ψ_in = U^†ψ_out
    lam, psi_out = sweep.pair(record.out_nodes[0])
    if lam is None:
        return
    _, *angles = record.in_values
    n = psi_out.shape[1].bit_length() - 1
    circuit = bb._gate_circuit(record.eqn, n)
    # λ and ψ undone in one call: the members' rows stacked twice, each with its inverse
    twice = [np.concatenate([a, a]) if b else a for a, b in angles]
    inverse = bb.gate_matrices(circuit, twice, 2 * sweep.size, inverse=True)
    both = np.concatenate([lam, psi_out])
    for g in range(len(circuit.gates) - 1, -1, -1):
        gate = circuit.gates[g]
        if gate.angle is not None and record.in_nodes[1 + gate.angle] is not None:
            lam, psi = both[:sweep.size], both[sweep.size:]
            moved = observable_rows(psi, n, gate.spec.generator, gate.wires)
            sweep.add(record.in_nodes[1 + gate.angle],
                      2.0 * np.einsum("bi,bi->b", lam.conj(), moved).imag)
        bb.apply_gate(circuit, g, both, inverse, inverse=True)
    sweep.add_lam(record.in_nodes[0], both[:sweep.size], both[sweep.size:])


def _projective(sweep: _Sweep, record: _Record) -> None:
    # ψ' = A P ψ/√q, w' = w q: q̄ = w̄'w - Re<λ'|ψ'>/q, w̄ = w̄'q, λ_in = P(A^†λ'/√q + q̄ψ)
    eqn = record.eqn
    psi, _ = record.in_values[0]
    wire = eqn.params["wire"]
    if eqn.primitive is qp.postselect_p:
        outcome, flip = eqn.params["value"], False
    else:
        outcome = int(record.out_values[1][0])
        flip = outcome == 1 and (eqn.primitive is qp.reset_p or eqn.params["reset"])
    mask = ((np.arange(psi.shape[1]) >> wire) & 1) == outcome
    projected = np.where(mask, psi, 0.0)
    q = np.einsum("bi,bi->b", projected.conj(), projected).real
    alive = record.weight_out > 0
    safe_q = np.where(alive, q, 1.0)
    w_bar = sweep.ct.pop(record.w_out, None)
    w_bar = np.zeros(sweep.size) if w_bar is None else np.where(alive, w_bar, 0.0)
    sweep.add(record.w_in, w_bar * q)
    lam, psi_out = sweep.pair(record.out_nodes[0])   # ψ' as the sweep carried it back
    lam_in = np.zeros_like(psi)
    if lam is not None:
        lam = np.where(alive[:, None], lam, 0.0)
    overlap = None if lam is None else np.einsum("bi,bi->b", lam.conj(), psi_out)
    q_bar = probability_cotangent(w_bar, record.weight_out, safe_q, overlap)
    if lam is not None:
        if flip:
            lam = lam[:, np.arange(psi.shape[1]) ^ (1 << wire)]
        lam_in = np.where(mask, lam, 0.0) / np.sqrt(safe_q)[:, None]
    sweep.add_lam(record.in_nodes[0], lam_in + q_bar[:, None] * projected, psi)


def _readout(sweep: _Sweep, record: _Record) -> None:
    # expval: λ_in = λ_out + ē Oψ; probs: λ_in,i = λ_out,i + p̄_j(i) ψ_i
    eqn = record.eqn
    psi, _ = record.in_values[0]
    lam, _ = sweep.pair(record.out_nodes[0])
    value_bar = sweep.ct.pop(record.out_nodes[1], None)
    if value_bar is not None:
        n = psi.shape[1].bit_length() - 1
        obs = None if eqn.primitive is qp.probs_p else pauli_sum_of(eqn.params["terms"])
        term = readout_adjoint(np, psi, n, obs, tuple(eqn.params["wires"]), value_bar,
                               lambda x, o, w: observable_rows(x, n, o, w))
        lam = term if lam is None else lam + term
    if lam is not None:
        sweep.add_lam(record.in_nodes[0], lam, psi)


def _qalloc(sweep: _Sweep, record: _Record) -> None:
    sweep.pair(record.out_nodes[0])


@functools.lru_cache(maxsize=1024)
def _equation_vjp(eqn: Eqn, active: tuple[bool, ...]) -> Program:
    return vjp_program(bb._equation_program(eqn), list(active), with_primal=False)


def _classical(sweep: _Sweep, record: _Record) -> None:
    # v̄_in = the equation's VJP program, batched over the members
    eqn = record.eqn
    cts = [sweep.ct.pop(n, None) for n in record.out_nodes]
    if all(c is None for c in cts):
        return
    program = bb._equation_program(eqn)
    found = {a: (v, n) for a, v, n in zip(eqn.inputs, record.in_values, record.in_nodes)}
    active = tuple(found[v][1] is not None and is_differentiable(v.type)
                   for v in program.inputs)
    if not any(active):
        return
    seeds = [np.zeros((sweep.size, *a.type.shape)) if c is None else c
             for c, a in zip(cts, eqn.outputs) if is_differentiable(a.type)]
    values = [found[v][0][0] for v in program.inputs]
    flags = (*(found[v][0][1] for v in program.inputs), *[True] * len(seeds))
    back = batched_part(_equation_vjp(eqn, active), flags, sweep.size, True)
    grads = evaluate(back, *values, *seeds)
    for g, v in zip(grads, [v for v, a in zip(program.inputs, active) if a]):
        sweep.add(found[v][1], np.asarray(g, np.float64).reshape(sweep.size, *v.type.shape))


_RULES = {qp.gate_p: _gate, qp.measure_p: _projective, qp.reset_p: _projective,
          qp.postselect_p: _projective, qp.expval_p: _readout, qp.probs_p: _readout,
          qp.qalloc_p: _qalloc}


class _LeavesForm(Exception):
    """The batch leaves the batched form: its members are differentiated one by one."""


def _recorded(program: Program, values: Sequence[Any], flags: Sequence[bool], size: int,
              active: Sequence[bool], checkpoints: bool = True
              ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Each member's value and cotangents of the ``active`` flat inputs (``checkpoints``:
    while loops' rounds in replayed segments and the exits of a closed segment run to the
    program's end at once, `loop_segments`; off, every round and exit kept)."""
    flat = unpack_scalars(program)
    tape = _Tape(size, checkpoints)
    if checkpoints:
        tape.exits_to_end(flat)
    inputs = [tape.value(np.asarray(x), bool(f)) for x, f in zip(values, flags)]
    try:
        items = tape.run_equations(flat, 0, [(np.ones(size), dict(zip(flat.inputs, inputs)))])
    except (bb._MemberByMember, NonTerminatingLoopError) as error:
        raise _LeavesForm from error
    folded = tape.folded
    mass = sum((w for w, _ in items), np.zeros(size)) + folded.mass
    postselected = tape.postselected_away > 0
    if (np.any(tape.dropped + tape.unterminated > tape.tol)
            or np.any(postselected & (mass <= tape.tol))):
        raise _LeavesForm   # a member warns or fails: as it does on its own
    out = flat.outputs[0]
    raw = sum((w * _score(outs[0], size) for w, outs in items),
              folded.sums[0] if folded.sums else np.zeros(size))
    norm = np.where(postselected, mass, 1.0)

    def seeds(w: np.ndarray, outs: list) -> tuple[np.ndarray, list]:
        # J = F/P: w̄ = g/P - F/P², ḡ = w/P (also the final branches a replay makes again)
        g = _score(outs[0], size)
        value_seeds = [w / norm] if is_differentiable(out.type) else [None]
        return g / norm - np.where(postselected, raw / norm ** 2, 0.0), value_seeds

    sweep = _Sweep(tape, seeds if folded.branches else None)
    for w, outs in items:
        weight_seed, (value_seed,) = seeds(w, outs)
        sweep.add(tape.weight_node(w), weight_seed)
        sweep.add(_node(outs[0]), value_seed)
    sweep.walk(tape.records)
    grads = [sweep.ct.get(x.node, np.zeros((size, *np.shape(v)[1 if f else 0:])))
             for x, v, f, a in zip(inputs, values, flags, active) if a]
    return raw / norm, grads


def _score(output: tuple[Any, bool], size: int) -> np.ndarray:
    """A final branch's scalar output, one float per member."""
    return _members(*output, size).astype(np.float64)


def _member_by_member(program: Program, values: Sequence[Any], flags: Sequence[bool],
                      size: int, argnums: ArgNums) -> tuple[Any, Any]:
    results = []
    for b in range(size):
        result = gradient(program, *[np.asarray(v)[b] if f else v for v, f in zip(values, flags)],
                          argnums=argnums)
        report_truncation(program.name, result, DEFAULTS)   # what `qdiff.grad` warns
        results.append(result)
    leaves = [pytree.flatten(r.grad)[0] for r in results]
    tree = pytree.flatten(results[0].grad)[1]
    value = np.array([float(np.asarray(r.value).reshape(())) for r in results])
    return value, pytree.unflatten(tree, [np.stack([np.asarray(g[k], np.float64)
                                                    for g in leaves])
                                          for k in range(len(leaves[0]))])


def branch_value_and_grad(program: Program, values: Sequence[Any], flags: Sequence[bool],
                          size: int, argnums: ArgNums) -> tuple[Any, Any]:
    """Each member's value and gradient (with respect to ``argnums``, structured like
    them) of a scalar-valued ``program`` with measurements, batch axis first, from one
    batched branching run and one reverse sweep over its branches."""
    numbers = argnum_tuple(argnums, program, "grad")
    active = wrt_flags(program, numbers, "grad")
    try:
        value, grads = _recorded(program, values, flags, size, active)
    except _LeavesForm:
        return _member_by_member(program, values, flags, size, argnums)
    return value, pytree.unflatten(wrt_tree(program, argnums, numbers), grads)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    return (len(program.outputs) == 1 and program.out_types[0].shape == ()
            and bb.branches_claim(program, flags))


register_batched_gradient(_claims, branch_value_and_grad)
