"""The adjoint method over measurement branches: exact derivatives of quantum programs.

A program with measurements denotes ``E = Σ_b w_b · g_b``: branch ``b`` has probability
weight ``w_b``, a normalized state and classical values, and ``g_b`` are its outputs. The
forward sweep is the branching runner itself; `AdjointRunner` records every equation it
executes in every branch. Branches share their prefix and a merge has several parents, so
the records form a DAG, and the reverse sweep walks it backwards once (reverse-mode AD over
the branch DAG): cotangents from the two outcomes of a measurement add up at the state
before it, so a loop with K enumerated iterations costs O(K), not O(K^2).

Conventions: for a classical value ``v`` the cotangent is ``∂J/∂v``; for a state ``ψ`` it is
the adjoint vector ``λ`` with ``dJ = 2 Re<λ|dψ>`` (for ``J = <ψ|O|ψ>``, ``λ = Oψ``). A sweep
takes several objectives ``J_r`` at once (the rows of a Jacobian): every cotangent has a
leading axis of rows, and each state one ψ with a stack of λ_r, so the gates undo ψ once for
all rows. The reverse sweep carries the pair (ψ, λ) backwards: gates are unitary, so ``ψ``
is uncomputed (``ψ_in = U^† ψ_out``), never stored; only measurements (and resets and
postselection) keep the state they saw, which the forward sweep holds anyway because it
branches there.
Classical equations use their registered VJP rules, so angles computed by classical code
(shared parameters, loop indices, classical loops and their reversal in ``qdiff.loops``)
are chain-ruled by the classical reverse mode.

Rules, one per record kind (``q`` = outcome probability, ``P`` = projector, ``A`` = the
reset flip or identity, ``G`` = a gate's generator, ``U(θ) = exp(-iθG)``):

- gate: ``θ̄ = 2 Im<λ_out|G ψ_out>``, ``ψ_in = U^†ψ_out``, ``λ_in = U^†λ_out``;
  multi-parameter gates (``u``) go through their rotation occurrences and global phase.
- measure/reset/postselect: ``ψ' = A P ψ / √q``, ``w' = w q``, ``q = |Pψ|²``:
  ``q̄ = w̄' w'/q - Re<λ'|ψ'>/q``, ``w̄ += w̄' w'/w``, ``λ_in = P (A^†λ'/√q + q̄ ψ)``.
- expval: ``λ_in = λ_out + ē O ψ``; probs: ``λ_in,i = λ_out,i + p̄_{j(i)} ψ_i``.
- merge of parents (w_i, φ_i) into (W = Σ w_i, φ_0): ``w̄_i = W̄``,
  ``v̄_i = (w_i/W) V̄``, ``λ_i = (w_i/W) <φ_0|φ_i> λ_V``.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> run = RecordedRun(qdiff.trace(rotation, 0.3), [0.3])
>>> bool(np.isclose(run.vjp([1.0])[0], -np.sin(0.3)))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...autodiff.tangents import add_tangents, cast_like, is_differentiable
from ...gpu import array_module_of
from ...ir.core import Eqn, Program
from ...ir.errors import QdiffError
from ...ir.passes.unpack_scalars import unpack_scalars
from ...ir.types import QState
from ..execution.options import DEFAULTS, RunOptions
from ..execution.runner import HANDLERS, BranchRunner, Item, _with_params, merge_groups
from ..execution.shot_readouts import estimated_expval
from ..lang.fusion import GATE_KINDS, gate_parts, gate_runs, plan_blocks
from ..lang.gate_forms import gate_form
from ..lang.gates import gate_spec
from ..lang.primitives import measure_p, pauli_sum_of
from ..simulator import GateOp, available_memory_bytes
from .loop_segments import (
    LoopRounds,
    end_round,
    holds_cotangents,
    replay_segment,
    rerun_rounds,
)

# The seeds of a final branch (weight, outputs) of the program: its weight's cotangent and
# each output's (None: not differentiated), one row per objective.
FinalSeeds = Callable[[float, list[Any]], tuple[np.ndarray, list[Any]]]

# Records whose second output is an expectation value read off the state.
READOUT_KINDS = ("expval", "probs", "statevector")

# Equations whose bodies the runner runs equation by equation: their records connect them.
STRUCTURAL = ("cond", "loop", "while")


@dataclass
class Record:
    """One equation executed on one branch (or one merge): nodes and values in and out."""

    kind: str
    eqn: Eqn | None
    in_nodes: list[int | None]
    in_values: list[Any]
    out_nodes: list[int | None]
    out_values: list[Any]
    w_in: int
    w_out: int
    weight_in: float
    weight_out: float
    parents: list[tuple[int, float, list[int | None], list[Any]]] = field(default_factory=list)
    segment: Any = None  # a ``segment`` record's `loop_segments.LoopSegment`


class AdjointRunner(BranchRunner):
    """The branching runner, recording what it executes for the reverse sweep."""

    def __init__(self, options: RunOptions = DEFAULTS):
        # every gate is its own record: the reverse sweep needs each generator, so no fusion
        super().__init__(options.replace(fuse=False))
        self.records: list[Record] = []
        self._objects: dict[int, tuple[Any, int]] = {}
        self._count = 0
        self.states: dict[int, Any] = {}  # state node -> forward object
        # gates not yet applied, per state buffer: they run in blocks when the state is read
        self._pending: dict[int, tuple[Any, list[GateOp]]] = {}
        # what the back end prepared for the reverse sweep's blocks, kept when several sweeps
        # will follow (`RecordedRun.vjp_rows`); None: not kept
        self.prepared_blocks: dict | None = None
        # while loops' rounds go into replayed segments (`loop_segments`): memory bounded in
        # the rounds; off, every round's records are kept (what parameter shift reads)
        self.checkpoints = False
        self.state_bytes = 0  # bytes of the states measurements, resets and merges made
        # with checkpoints, the exits of the top program's while loops whose segment closes
        # run to the program's end at once (`exits_to_end`): the forward pass keeps their
        # contribution to the values (`folded`), the replay of the segment regenerates them

    # -- nodes: a value's node is its object's identity (each output is a fresh object) ------
    def node(self, obj: Any) -> int | None:
        """The node of a recorded value, ``None`` for constants."""
        entry = self._objects.get(id(obj))
        return entry[1] if entry is not None and entry[0] is obj else None

    def _new(self, obj: Any) -> int:
        self._count += 1
        self._objects[id(obj)] = (obj, self._count)  # keeps obj alive: ids stay unique
        return self._count

    def track(self, value: Any) -> tuple[Any, int]:
        """A fresh object for ``value`` and its new node."""
        # device (CuPy) arrays stay where they are: a view is a fresh object there too
        fresh = value.view() if _on_array(value) else np.asarray(value)
        return fresh, self._new(fresh)

    def weight_node(self, weight: float) -> int:
        found = self.node(weight)
        return found if found is not None else self._new(weight)

    def track_inputs(self, values: Sequence[Any]) -> list[Any]:
        """Fresh objects for the program inputs, whose nodes receive the gradient."""
        return [self.track(np.asarray(v))[0] for v in values]

    # -- hooks of the runner -----------------------------------------------------------------
    def apply(self, eqn: Eqn, handler: Any, weight: float, inputs: list[Any]) -> list[Item]:
        name = eqn.primitive.name
        if name in GATE_KINDS:
            return self._record(eqn, weight, inputs, [(weight, [self._defer(eqn, inputs)])])
        if self._pending and any(isinstance(a.type, QState) for a in eqn.inputs):
            self.flush()
        if name == "expval" and self.readout_shots:  # estimated as a device measures it
            state = inputs[0]
            value = estimated_expval(self.backend, state, _num_qubits(state),
                                     eqn.params["terms"], eqn.params["wires"],
                                     self.readout_shots, self.rng)
            return self._record(eqn, weight, inputs, [(weight, [state, np.asarray(value)])])
        if name == "expval":  # <ψ|O|ψ>, all terms in one pass (the back end's kernel)
            state = inputs[0]
            value = self.backend.inner_pauli_sum(state, state, _num_qubits(state),
                                                 pauli_sum_of(eqn.params["terms"]),
                                                 list(eqn.params["wires"])).real
            return self._record(eqn, weight, inputs, [(weight, [state, np.asarray(value)])])
        if handler is not None and name in STRUCTURAL:
            return handler(self, eqn, weight, inputs)
        if name == "reset":  # record the outcome, which a reset does not return
            measured = HANDLERS[measure_p](self, _with_params(eqn, reset=True), weight, inputs)
            recorded = self._record(eqn, weight, inputs, measured)
            return [(w, outs[:1]) for w, outs in recorded]
        return self._record(eqn, weight, inputs, super().apply(eqn, handler, weight, inputs))

    def _record(self, eqn: Eqn, weight: float, inputs: list[Any],
                outcomes: list[Item]) -> list[Item]:
        in_nodes = [self.node(v) for v in inputs]
        w_in = self.weight_node(weight)
        is_state = [isinstance(v.type, QState) for v in eqn.outputs]
        # gates are swept in runs (`_gates`); every other kind has its rule in RULES
        name = eqn.primitive.name
        kind = "gate" if name in GATE_KINDS else name if name in _RECORD_KINDS else "classical"
        result = []
        for w, outs in outcomes:
            tracked, out_nodes = [], []
            for k, value in enumerate(outs):
                obj, n = self.track(value)
                tracked.append(obj)
                out_nodes.append(n)
                if k < len(is_state) and is_state[k]:
                    self.states[n] = obj
                    if kind != "gate":  # a gate's output is a view of its input's buffer
                        self.state_bytes += obj.nbytes
            w_out = w_in if w is weight else self._new(w)
            self.records.append(Record(kind, eqn, in_nodes, inputs, out_nodes, tracked,
                                       w_in, w_out, weight, w))
            result.append((w, tracked))
        return result

    def _defer(self, eqn: Eqn, inputs: list[Any]) -> Any:
        # The gates' output is their input buffer (gates run in place), updated later.
        state, *angles = inputs
        owner = _owner(state)
        values = [float(a) for a in angles]
        parts = gate_parts(eqn)
        # the specs are `gate_parts`'s, one object per equation (a user matrix's too)
        ops = [GateOp(spec, wires, tuple(values[lo:hi])) for spec, wires, lo, hi in parts]
        entry = self._pending.get(id(owner))
        if entry is None:
            self._pending[id(owner)] = (owner, ops)
        else:
            entry[1].extend(ops)
        self.gate_passes += len(parts)
        return state

    def flush(self) -> None:
        """Apply the deferred gates: blocks of the back end's fusion width, one pass each."""
        pending, self._pending = self._pending, {}
        for owner, ops in pending.values():
            apply_gates(self.backend, owner, ops)

    def merge(self, items: list[Item]) -> list[Item]:
        self.flush()
        merged = []
        for group in merge_groups(items):
            if len(group) == 1:
                merged.append(items[group[0]])
                continue
            total = sum(items[i][0] for i in group) * 1.0
            values = items[group[0]][1]
            tracked, out_nodes = [], []
            for value in values:
                obj, n = self.track(value)
                tracked.append(obj)
                out_nodes.append(n)
                if _is_state(value):
                    self.states[n] = obj
                    self.state_bytes += obj.nbytes
            parents = []
            for i in group:
                w, vals = items[i]
                nodes = [self.node(v) for v in vals]
                parents.append((self.weight_node(w), w, nodes, vals))
            self.records.append(Record("merge", None, [], [], out_nodes, tracked, 0,
                                       self._new(total), 0.0, total, parents))
            merged.append((total, tracked))
        return merged

    # -- while loops: rounds in checkpointed segments (`loop_segments`) ----------------------
    def start_rounds(self, eqn: Eqn, cond_consts: list[Any], body_consts: list[Any]) -> Any:
        exits, self._entering = self._entering, None  # a loop inside this one has none
        if not self.checkpoints:
            return None
        return LoopRounds(eqn, cond_consts, body_consts, exits=exits)

    def end_round(self, rounds: Any, live: list[Item], finished: list[Item]) -> None:
        if rounds is not None:
            end_round(self, rounds, live, finished)

    # what `loop_segments` asks of a recorder
    def checkpoint(self, values: list[Any]) -> list[Any]:
        """``values`` with their states copied (the run updates states in place)."""
        return [self.backend.copy(v) if _is_state(v) else v for v in values]

    def value_bytes(self, value: Any) -> int:
        return getattr(value, "nbytes", 8)

    def forget(self, key: int, node: int) -> None:
        """Drop the value of ``node`` (its object's id ``key``) that only dropped records read."""
        self._objects.pop(key, None)
        self.states.pop(node, None)

    def replayer(self) -> AdjointRunner:
        """A fresh recorder set up as this one, for a segment's replay."""
        sub = type(self)(self.options)
        sub.readout_shots = self.readout_shots
        sub.checkpoints = self.checkpoints
        return sub

    def rerun_rounds(self, segment: Any, cond_consts: list[Any], body_consts: list[Any],
                     live: list[Item]) -> tuple[list[Item], list[Item]]:
        return rerun_rounds(self, segment, cond_consts, body_consts, live)

    def segment_record(self, segment: Any) -> Record:
        return Record("segment", None, segment.in_nodes, [], segment.out_nodes, [], 0, 0,
                      0.0, 0.0, segment=segment)

    # -- the reverse sweep ------------------------------------------------------------------
    def reverse(self, weight_seeds: dict[int, np.ndarray], value_seeds: dict[int, Any],
                rows: int = 1,
                rules: dict[str, Callable[[Sweep, Record], None]] | None = None,
                final_seeds: FinalSeeds | None = None) -> Sweep:
        """Walk the records backwards from the seeds (each with a leading axis of ``rows``);
        ``sweep.ct`` holds the cotangent of every node. ``rules=CLASSICAL_RULES`` chain-rules
        the classical records only. ``final_seeds`` seeds the final branches that replayed
        segments make again (the exits the forward pass summed, `folded`)."""
        self.flush()
        sweep = Sweep(self, dict(weight_seeds), dict(value_seeds), rows,
                      RULES if rules is None else rules, final_seeds)
        sweep.walk(self.records)
        return sweep


def _on_array(value: Any) -> bool:
    # a NumPy array, or a device (CuPy) array
    return isinstance(value, np.ndarray) or array_module_of(value) is not np


def _is_state(value: Any) -> bool:
    # a statevector, on the host or on a device: a loop's or a merge's states are kept and
    # swept as states wherever they live
    return _on_array(value) and value.ndim == 1 and value.dtype.kind == "c"


def _owner(array: Any) -> Any:
    """The array that owns a view's memory (the state buffer gates update in place): up a
    NumPy view's bases, or a device (CuPy) array's, whose bases are device arrays (not
    NumPy's: stopping at the view made every gate its own buffer, unfused)."""
    while isinstance(array.base, (np.ndarray, type(array))):
        array = array.base
    return array


def apply_gates(be: Any, state: Any, ops: list[GateOp]) -> Any:
    """Apply ``ops`` to ``state`` in place, in blocks of the back end's fusion width (the
    fusion pass's planner), each block in one pass over the state.

    >>> from qdiff.quantum.simulator import get_backend
    >>> be = get_backend("numpy")
    >>> psi = apply_gates(be, be.zero_state(2), [GateOp("h", (0,)), GateOp("cx", (0, 1))])
    >>> be.probs(psi, 2).round(3).tolist()
    [0.5, 0.0, 0.0, 0.5]
    """
    n = _num_qubits(state)
    width = be.fusion_width(n)
    if len(ops) == 1 or width < 1:  # 0: fusion does not pay at this size
        for op in ops:
            be.apply_gate(state, n, op.gate, list(op.wires), op.params)
        return state
    for wires, block in _planned(ops, width, forward=True):
        if len(block) == 1:
            op = ops[block[0]]
            be.apply_gate(state, n, op.gate, list(op.wires), op.params)
            continue
        be.apply_fused(state, n, wires, [ops[k] for k in block])
    return state


class Sweep:
    """The state of one reverse sweep over ``rows`` objectives at once: classical cotangents
    (a leading axis of rows), the stacks of adjoints λ (one row each) and the uncomputed ψ."""

    def __init__(self, runner: AdjointRunner, weights: dict[int, np.ndarray], values: dict,
                 rows: int = 1, rules: dict[str, Callable[[Sweep, Record], None]] | None = None,
                 final_seeds: FinalSeeds | None = None):
        self.runner = runner
        self.rules = RULES if rules is None else rules
        self.final_seeds = final_seeds
        self.be = runner.backend
        self.rows = rows
        self.ct: dict[int, Any] = {**values}
        for n, w in weights.items():
            self.ct[n] = self.ct.get(n, 0.0) + w
        self.lam: dict[int, Any] = {}
        self.psi: dict[int, Any] = {}
        self.readouts: dict[int, Any] = {}  # id(record) -> its value's cotangent (classical)
        self._owned: dict[int, np.ndarray] = {}  # float64 sums this sweep made: updated in place
        self.producers: dict[int, Record] = {}  # a state node -> the record that made it

    def walk(self, records: list[Record]) -> None:
        """Walk ``records`` (a run's, or a replayed segment's) backwards by the sweep's rules;
        the states that no record consumes start as copies of the forward ones."""
        quantum = self.rules is RULES
        if quantum:
            consumed = {n for r in records for n in r.in_nodes}
            consumed.update(n for r in records for p in r.parents for n in p[2])
            self.producers.update((n, r) for r in records for n in r.out_nodes)
            for n, obj in self.runner.states.items():
                if n not in consumed and n not in self.psi:
                    self.psi[n] = self.be.copy(obj)
        i = len(records) - 1
        while i >= 0:
            if quantum and records[i].kind == "gate":  # a run of gates on one state, at once
                gates, deferred, i = _gate_run(records, i)
                _gates(self, gates)
                for record in deferred:
                    _classical(self, record)
                continue
            self.rules[records[i].kind](self, records[i])
            i -= 1

    # what `loop_segments.replay_segment` asks of a sweep
    def inner(self, runner: AdjointRunner) -> Sweep:
        """A sweep like this one over a segment's replay ``runner``."""
        return Sweep(runner, {}, {}, self.rows, self.rules, self.final_seeds)

    def move_state(self, inner: Sweep, mine: int, theirs: int, value: Any) -> None:
        """Move what a replay's sweep ``inner`` holds of its input state ``mine`` onto the
        checkpoint's node ``theirs`` (``value``: the checkpoint's copy of it)."""
        if _is_state(value):
            psi = inner.psi.pop(mine, None)
            self.psi[theirs] = self.be.copy(value) if psi is None else psi
            self.add_lam(theirs, inner.lam.pop(mine, None))

    def _own(self, array: np.ndarray) -> np.ndarray:
        self._owned[id(array)] = array  # keeps it alive: ids stay unique
        return array

    def add(self, node: int | None, value: Any) -> None:
        if node is None or value is None:
            return
        have = self.ct.get(node)
        if (isinstance(have, np.ndarray) and isinstance(value, np.ndarray)
                and have.shape == value.shape and have.dtype == value.dtype == np.float64):
            # what add_tangents computes, without tracing
            if self._owned.get(id(have)) is have:
                have += value
            else:
                self.ct[node] = self._own(have + value)
        else:
            self.ct[node] = add_tangents(have, value)

    def add_at(self, node: int | None, shape: tuple[int, ...], index: Any,
               value: np.ndarray) -> None:
        """``ct[node][:, index] += value`` for a float64 cotangent of ``shape`` per row (the
        transpose of selecting ``index``), without a zero array per call."""
        if node is None:
            return
        shape = (self.rows, *shape)
        index = (slice(None), *index)
        have = self.ct.get(node)
        if not (isinstance(have, np.ndarray) and self._owned.get(id(have)) is have):
            if have is not None and not (isinstance(have, np.ndarray) and have.shape == shape
                                         and have.dtype == np.float64):
                spread = np.zeros(shape)
                spread[index] = value
                self.add(node, spread)
                return
            have = self._own(np.zeros(shape) if have is None else have.copy())
            self.ct[node] = have
        have[index] += value

    def add_lam(self, node: int | None, value: Any) -> None:
        if node is None or value is None:
            return
        have = self.lam.get(node)
        if have is None:
            self.lam[node] = value
        else:
            have += value

    def state_pair(self, node: int) -> tuple[Any, Any]:
        psi = self.psi.pop(node, None)
        if psi is None:
            raise QdiffError("internal: a state was neither uncomputed nor stored")
        return psi, self.lam.pop(node, None)

    def weight_cotangent(self, record: Record) -> np.ndarray:
        """w̄' of a record (one per row) that may keep its input weight (then w̄' is read,
        not taken)."""
        if record.w_out == record.w_in:
            return np.asarray(self.ct.get(record.w_in, self.zeros()), np.float64)
        w_bar = np.asarray(self.ct.pop(record.w_out, self.zeros()), np.float64)
        if record.weight_in:
            self.ct[record.w_in] = (self.ct.get(record.w_in, 0.0)
                                    + w_bar * (record.weight_out / record.weight_in))
        return w_bar

    def zeros(self) -> np.ndarray:
        return np.zeros(self.rows)

    def overlaps(self, lam: Any, psi: Any) -> np.ndarray:
        """``<λ_r|ψ>`` for every row of the stack (complex128)."""
        return np.array([self.be.inner(row, psi) for row in lam], np.complex128)

    def outer(self, scales: np.ndarray, state: Any) -> Any:
        """The stack of rows ``scales[r] * state``."""
        xp = self.be.xp
        return xp.outer(xp.asarray(scales, dtype=state.dtype), state)


def _num_qubits(state: Any) -> int:
    return int(state.shape[0]).bit_length() - 1


# ------------------------------------------------------------------------------------ rules
def _classical(sweep: Sweep, record: Record) -> None:
    # v̄_in = vjp(v̄_out): the primitive's registered (tapeless) reverse rule, run eagerly,
    # row by row.
    cts_out = [sweep.ct.pop(n, None) if n is not None else None for n in record.out_nodes]
    if record.w_out != record.w_in:
        sweep.weight_cotangent(record)
    if all(c is None for c in cts_out):
        return
    eqn = record.eqn
    assert eqn is not None
    wanted = [n is not None and is_differentiable(a.type)
              for n, a in zip(record.in_nodes, eqn.inputs)]
    if not any(wanted):
        return
    selection = _SELECTIONS.get(eqn.primitive.name)
    x = record.in_values[0] if record.in_values else None
    if selection is not None and isinstance(x, np.ndarray) and x.dtype == np.float64 \
            and all(c is None or np.asarray(c).dtype == np.float64 for c in cts_out):
        selection(sweep, record, cts_out)
        return
    rule = eqn.primitive.vjp
    if rule is None:
        raise QdiffError(f"primitive {eqn.primitive.name!r} has no reverse-mode (VJP) rule")
    per_row: list[list[Any]] = []
    for r in range(sweep.rows):
        row = [None if c is None or not is_differentiable(v.type)
               else cast_like(np.asarray(c)[r, ...], v.type)
               for c, v in zip(cts_out, eqn.outputs)]
        per_row.append(rule(row, record.in_values, record.out_values, wanted, **eqn.params))
    for k, (n, a, flag) in enumerate(zip(record.in_nodes, eqn.inputs, wanted)):
        found = [cts[k] for cts in per_row]
        if flag and any(c is not None for c in found):
            sweep.add(n, np.stack([np.zeros(a.type.shape, a.type.np_dtype) if c is None
                                   else np.asarray(cast_like(c, a.type)) for c in found]))


# The ops that select gate angles from a parameter array, transposed without tracing:
# x̄ = ȳ moved back where y came from (their registered rules, on float64 arrays, all rows).
def _reshape_transpose(sweep: Sweep, record: Record, cts_out: list[Any]) -> None:
    x = record.in_values[0]
    if cts_out[0] is not None:
        sweep.add(record.in_nodes[0], np.asarray(cts_out[0]).reshape((sweep.rows, *x.shape)))


def _slice_transpose(sweep: Sweep, record: Record, cts_out: list[Any]) -> None:
    p = record.eqn.params  # type: ignore[union-attr]
    if cts_out[0] is not None:
        index = tuple(slice(a, b, c) for a, b, c in zip(p["start"], p["limit"], p["strides"]))
        sweep.add_at(record.in_nodes[0], record.in_values[0].shape, index, cts_out[0])


def _unpack_transpose(sweep: Sweep, record: Record, cts_out: list[Any]) -> None:
    # y_k = x.flat[i_k]  ⇒  x̄.flat[i_k] += ȳ_k (an index may repeat)
    x = record.in_values[0]
    found = [(i, c) for i, c in zip(record.eqn.params["indices"], cts_out)  # type: ignore
             if c is not None]
    if not found:
        return
    flat = np.zeros((sweep.rows, x.size))
    np.add.at(flat, (slice(None), np.array([i for i, _ in found])),
              np.stack([np.asarray(c).reshape(sweep.rows) for _, c in found], axis=1))
    sweep.add(record.in_nodes[0], flat.reshape((sweep.rows, *x.shape)))


_SELECTIONS = {"reshape": _reshape_transpose, "slice": _slice_transpose,
               "unpack": _unpack_transpose}


def _gate_run(records: list[Record], i: int) -> tuple[list[Record], list[Record], int]:
    """The run of gate records on one state that ends at ``records[i]`` (last first), the
    classical records met inside it (they only chain-rule the angles, so they may run after
    the gates), and the index where the walk stops."""
    gates = [records[i]]
    deferred: list[Record] = []
    node = records[i].in_nodes[0]
    j = i - 1
    while j >= 0:
        record = records[j]
        if record.kind == "gate" and record.out_nodes[0] == node:
            gates.append(record)
            node = record.in_nodes[0]
        elif record.kind == "classical" and record.w_out == record.w_in:
            deferred.append(record)
        else:
            break
        j -= 1
    return gates, deferred, j


def _gates(sweep: Sweep, gates: list[Record]) -> None:
    # The gate rule on a run of gates (last first), in blocks: θ̄ = 2 Im<λ|Gψ>, ψ <- U^†ψ,
    # λ <- U^†λ (every λ of the stack against the one ψ), gate by gate from the last; gates
    # on disjoint wires commute (and commute with each other's generators), so a block may
    # reorder them. A u gate goes through its rotations; its global phase e^{iα} commutes
    # with everything: α's part of θ̄ is -2 α' Im<λ|ψ>, the same anywhere in the run, and
    # ψ, λ take e^{-iα} once.
    be = sweep.be
    psi, lam = sweep.state_pair(gates[0].out_nodes[0])
    n = _num_qubits(psi)
    ops: list[GateOp] = []
    want: list[bool] = []
    slots: list[tuple[int, int]] = []  # (record, angle) of each op's derivative
    phases: list[tuple[int, int, float]] = []  # (record, angle, dα/dangle)
    alpha = 0.0
    for index, record in enumerate(reversed(gates)):
        values = [float(a) for a in record.in_values[1:]]
        nodes = record.in_nodes[1:]
        for spec, wires, lo, hi in gate_parts(record.eqn):  # type: ignore[arg-type]
            angles = tuple(values[lo:hi])
            wanted = lam is not None and (nodes[lo] is not None if hi - lo == 1 else
                                          any(k is not None for k in nodes[lo:hi]))
            if wanted and spec.generator is None and spec.num_params:
                # u(θ, φ, λ) = e^{iα} rz(φ) ry(θ) rz(λ): its rotations, in application order
                for o in spec.occurrences:
                    ops.append(GateOp(gate_spec(o.gate), tuple(wires[w] for w in o.wires),
                                      (angles[o.param_index],)))
                    want.append(True)
                    slots.append((index, lo + o.param_index))
                phase = spec.global_phase
                assert phase is not None
                alpha += phase(*angles)
                for j in range(spec.num_params):  # α is affine in the angles: a central
                    step = np.eye(spec.num_params)[j]  # difference is exact
                    slope = (phase(*np.add(angles, step))
                             - phase(*np.subtract(angles, step))) / 2
                    phases.append((index, lo + j, slope))
                continue
            ops.append(GateOp(spec, wires, angles))
            want.append(wanted and spec.num_params == 1)
            slots.append((index, lo))
    if lam is not None:
        # θ̄ per angle and row, the records' angles one after another (in application order)
        starts = np.cumsum([0] + [len(r.in_values) - 1 for r in reversed(gates)])
        grads = np.zeros((int(starts[-1]), sweep.rows))
        if phases:
            overlap = sweep.overlaps(lam, psi)
            for index, j, slope in phases:
                grads[starts[index] + j] -= 2 * slope * overlap.imag
    width = max(be.adjoint_width(n), 1)
    blocks = _adjoint_blocks(ops, width)
    supports = _block_supports(ops, blocks, _start_support(sweep, gates[-1].in_nodes[0]))
    found = []  # (block, its derivatives in the back end's memory): one copy back for all
    for (wires, block), support in zip(reversed(blocks), reversed(supports)):
        m = n if support is None else be.adjoint_register_qubits(n, support, len(wires))
        if m < _num_qubits(psi):  # ψ is zero past 2^m from here on: both run on that part
            psi, lam = psi[:1 << m], None if lam is None else be.xp.ascontiguousarray(
                lam[..., :1 << m])
        g = be.adjoint_block(psi, lam, _num_qubits(psi), wires, [ops[k] for k in block],
                             [want[k] for k in block], sweep.runner.prepared_blocks)
        if lam is not None:
            found.append((block, g))
    if found:
        values = be.to_numpy(be.xp.concatenate([g for _, g in found], axis=1))
        order = [k for block, _ in found for k in block]
        columns = [c for c, k in enumerate(order) if want[k]]
        angles_at = np.array([starts[slots[order[c]][0]] + slots[order[c]][1] for c in columns],
                             np.int64)
        np.add.at(grads, angles_at, values.T[columns])  # an angle may drive several gates
    if alpha:
        factor = np.exp(-1j * alpha)
        psi *= factor
        if lam is not None:
            lam *= factor
    if lam is not None:
        for record, start in zip(reversed(gates), starts.tolist()):
            for node, g in zip(record.in_nodes[1:], grads[start:]):
                if node is not None:
                    sweep.add(node, g)
    first = gates[-1].in_nodes[0]
    sweep.psi[first] = psi
    sweep.add_lam(first, lam)


def _start_support(sweep: Sweep, node: int) -> int | None:
    """The qubits m below which the state of ``node`` may be nonzero, where the record that
    made it says so (a fresh ``|0...0>``: 0; ``|0>_new ⊗ ψ_in``: ψ_in's qubits), else None.
    Both records read only the part of ``λ`` below 2^m (``_qalloc`` none of it)."""
    record = sweep.producers.get(node)
    if record is None or record.out_nodes[0] != node:
        return None
    if record.kind == "qalloc":
        return 0
    if record.kind == "qextend":
        return _num_qubits(record.in_values[0])
    return None


def _block_supports(ops: Sequence[GateOp], blocks: list[tuple[list[int], list[int]]],
                    start: int | None) -> list[int | None]:
    """Per block of a gate run that starts on a state zero past amplitude 2^start: the
    qubits below which the state after the block may be nonzero (start, or one past the
    highest wire of that block and of every block before it); all None for other states.

    The reverse sweep undoes a block on ψ equal to that state, so ψ and every λ may run on
    their first 2^m amplitudes: ``Im<λ|Gψ>`` reads only those, the gates leave the part
    below 2^m to itself, and what the sweep leaves above it goes to a record that does
    not read it (:func:`_start_support`).

    >>> ops = [GateOp("h", (0,)), GateOp("cx", (0, 3)), GateOp("h", (1,))]
    >>> _block_supports(ops, [([0], [0]), ([0, 3], [1]), ([1], [2])], 0)
    [1, 4, 4]
    >>> _block_supports(ops, [([0], [0])], None)
    [None]
    """
    if start is None:
        return [None] * len(blocks)
    supports = []
    m = start
    for _, block in blocks:
        m = max([m, *(w + 1 for k in block for w in ops[k].wires)])
        supports.append(m)
    return supports


def _costs(ops: Sequence[GateOp]) -> list[float]:
    """The gates' arithmetic per amplitude in their sparse forms (a raw matrix: dense), the
    prices the planner weighs with the back end's (``FusionWidth``): the forward pass and
    the reverse sweep plan a run of gates alike."""
    return [float(len(op.gate)) if isinstance(op.gate, np.ndarray) else gate_form(op.gate).cost
            for op in ops]


def _adjoint_blocks(ops: list[GateOp], width: int) -> list[tuple[list[int], list[int]]]:
    """(wires, op indices) of the blocks of a gate run in execution order: the fusion pass's
    planner, with gates wider than three wires alone (a dense block matrix would be big)."""
    return _planned(ops, width, forward=False)


_PLANS: dict[tuple[Any, ...], tuple[list[Any], list[tuple[list[int], list[int]]]]] = {}


def _planned(ops: list[GateOp], width: int, forward: bool
             ) -> list[tuple[list[int], list[int]]]:
    """The block plan of a gate run (``forward``: as :func:`apply_gates` runs it, else as the
    reverse sweep does, :func:`_adjoint_blocks`), remembered by the run's gates and wires: a
    gradient plans the same run twice, and an optimization loop asks again at every step
    (n = 16, 10 layers of the ansatz: 0.053 s a gradient before, 0.049 s after)."""
    # a FusionWidth is an int with prices: equal ints may price blocks differently
    prices = tuple(sorted(getattr(width, "__dict__", {}).items()))
    key = (int(width), prices, forward, tuple([(id(op.gate), tuple(op.wires)) for op in ops]))
    hit = _PLANS.get(key)
    if hit is not None:
        return hit[1]
    if forward:
        plan = [(sorted({w for k in block for w in ops[k].wires}), block)
                for block in plan_blocks([op.wires for op in ops], width, _costs(ops))]
    else:
        plan = _plan_reverse(ops, width)
    if len(_PLANS) > 256:
        _PLANS.clear()
    _PLANS[key] = ([op.gate for op in ops], plan)  # the gates stay alive: their ids stay theirs
    return plan


def _plan_reverse(ops: list[GateOp], width: int) -> list[tuple[list[int], list[int]]]:
    blocks: list[tuple[list[int], list[int]]] = []
    start = 0
    for end in [k for k, op in enumerate(ops) if len(op.wires) > 3] + [len(ops)]:
        if end > start:
            for block in plan_blocks([ops[k].wires for k in range(start, end)], width,
                                     _costs(ops[start:end])):
                indices = [start + k for k in block]
                blocks.append((sorted({w for k in indices for w in ops[k].wires}), indices))
        if end < len(ops):
            blocks.append((sorted(ops[end].wires), [end]))
        start = end + 1
    return blocks


def _projective(sweep: Sweep, record: Record) -> None:
    # ψ' = A P ψ/√q, w' = w q: q̄ = w̄'w'/q - Re<λ'|ψ'>/q, λ_in = P(A^†λ'/√q + q̄ ψ).
    eqn = record.eqn
    assert eqn is not None
    be = sweep.be
    wire = eqn.params["wire"]
    if eqn.primitive.name == "postselect":
        outcome, flip = eqn.params["value"], False
    else:
        outcome = int(record.out_values[1])
        flip = outcome == 1 and (eqn.primitive.name == "reset" or eqn.params.get("reset"))
    stored = record.in_values[0]
    n = _num_qubits(stored)
    psi_out, lam_out = sweep.state_pair(record.out_nodes[0])
    w_bar = sweep.weight_cotangent(record)
    projected = be.project(be.copy(stored), n, wire, outcome)
    q = be.norm_squared(projected)
    lam_in = None
    q_bar = probability_cotangent(w_bar, record.weight_out, q,
                                  None if lam_out is None else sweep.overlaps(lam_out, psi_out))
    if lam_out is not None:
        for row in lam_out:
            if flip:
                be.apply_gate(row, n, "x", [wire])
            be.project(row, n, wire, outcome)
        lam_in = lam_out / np.sqrt(q)
    if np.any(q_bar):
        term = sweep.outer(q_bar, projected)
        lam_in = term if lam_in is None else lam_in + term
    node = record.in_nodes[0]
    if node not in sweep.psi:
        sweep.psi[node] = be.copy(stored)
    sweep.add_lam(node, lam_in)


def probability_cotangent(w_bar: Any, weight_out: Any, q: Any, overlap: Any = None) -> Any:
    """``q̄ = w̄'w'/q - Re<λ'|ψ'>/q`` of an outcome of probability ``q`` (``w' = w q``), from
    the outgoing weight's cotangent and ``<λ'|ψ'>`` (None: no adjoint); elementwise, so the
    rows of a sweep or the members of a batch (`batched_branch_adjoint`) take it alike.

    >>> float(probability_cotangent(2.0, 0.3, 0.5, 0.1 + 0.2j))
    1.0
    """
    q_bar = w_bar * (weight_out / q)
    return q_bar if overlap is None else q_bar - np.real(overlap) / q


def _readout(sweep: Sweep, record: Record) -> None:
    # expval: λ_in = λ_out + ē Oψ; probs: λ_in,i = λ_out,i + p̄_{j(i)} ψ_i.
    eqn = record.eqn
    assert eqn is not None
    be = sweep.be
    psi, lam = sweep.state_pair(record.out_nodes[0])
    value_bar = sweep.ct.pop(record.out_nodes[1], None)
    n = _num_qubits(psi)
    extra = None
    if value_bar is not None:
        name = eqn.primitive.name
        wires = list(eqn.params.get("wires", ()))
        value_bar = np.asarray(value_bar, np.float64)
        if name == "expval":  # λ_r += ē_r Oψ, in place, in one pass each
            if lam is None:
                lam = be.xp.zeros((sweep.rows, *psi.shape), psi.dtype)
            observable = pauli_sum_of(eqn.params["terms"])
            for row, scale in zip(lam, value_bar.reshape(sweep.rows).tolist()):
                if scale:
                    be.add_pauli_sum(row, psi, n, observable, wires, scale=scale)
        elif name == "probs":
            xp = be.xp
            extra = xp.ascontiguousarray(
                psi[None, :] * xp.asarray(value_bar[:, _bucket(n, wires)], psi.real.dtype))
        else:
            raise QdiffError(f"{name}: its value cannot be differentiated; use expval or probs")
    node = record.in_nodes[0]
    sweep.psi[node] = psi
    sweep.add_lam(node, lam)
    sweep.add_lam(node, extra)


def _bucket(n: int, wires: list[int]) -> np.ndarray:
    """For each basis index, its outcome index on ``wires`` (``wires[0]`` least significant)."""
    index = np.arange(2 ** n)
    return sum(((index >> w) & 1) << k for k, w in enumerate(wires))


def _qalloc(sweep: Sweep, record: Record) -> None:
    # a fresh |0..0> depends on nothing
    sweep.psi.pop(record.out_nodes[0], None)
    sweep.lam.pop(record.out_nodes[0], None)


def _qextend(sweep: Sweep, record: Record) -> None:
    # ψ_out = |0>_new ⊗ ψ_in: ψ_in and λ_in are the leading block
    psi, lam = sweep.state_pair(record.out_nodes[0])
    size = record.in_values[0].shape[0]
    sweep.psi[record.in_nodes[0]] = psi[:size].copy()
    sweep.add_lam(record.in_nodes[0], None if lam is None else lam[:, :size].copy())


def _merge(sweep: Sweep, record: Record) -> None:
    # w̄_i = W̄; v̄_i = (w_i/W) V̄; λ_i = (w_i/W) <φ_0|φ_i> λ_V.
    total = record.weight_out
    w_bar = sweep.ct.pop(record.w_out, sweep.zeros())
    outs = []
    for n, value in zip(record.out_nodes, record.out_values):
        if _is_state(value):
            outs.append(sweep.state_pair(n))
        else:
            outs.append(sweep.ct.pop(n, None))
    for index, (w_node, w, nodes, values) in enumerate(record.parents):
        share = w / total
        sweep.ct[w_node] = sweep.ct.get(w_node, 0.0) + w_bar
        for n, value, out in zip(nodes, values, outs):
            if not _is_state(value):
                sweep.add(n, None if out is None else share * np.asarray(out))
                continue
            psi, lam = out
            if index == 0:
                sweep.psi[n] = psi if len(record.parents) == 1 else sweep.be.copy(psi)
                phase = 1.0
            else:
                sweep.psi[n] = sweep.be.copy(value)
                overlap = sweep.be.inner(psi, value)  # <φ_0|φ_i>, a phase
                phase = overlap / abs(overlap)
            if lam is not None:
                sweep.add_lam(n, (share * phase) * lam)


def _sample(sweep: Sweep, record: Record) -> None:
    raise QdiffError("a program reading qm.sample cannot be differentiated: the draws are "
                     "integers; differentiate probs or expval instead")


def _readout_cotangent(sweep: Sweep, record: Record) -> None:
    # classical-only sweep: the cotangent stops at the readout, whose derivative the caller
    # obtains otherwise (parameter shift)
    sweep.readouts[id(record)] = sweep.ct.pop(record.out_nodes[1], None)


def _merge_classical(sweep: Sweep, record: Record) -> None:
    # v̄_i = (w_i/W) V̄ for the classical values; weights and states are not followed
    outs = [None if _is_state(v) else sweep.ct.pop(n, None)
            for n, v in zip(record.out_nodes, record.out_values)]
    for _, w, nodes, values in record.parents:
        for n, value, out in zip(nodes, values, outs):
            if out is not None and not _is_state(value):
                sweep.add(n, (w / record.weight_out) * np.asarray(out))


def _skip(sweep: Sweep, record: Record) -> None:
    pass


def _segment(sweep: Sweep, record: Record) -> None:
    # rounds of a while loop checkpointed by `loop_segments`: replayed, then swept back
    replay_segment(sweep, record.segment, Sweep.walk)


def _segment_classical(sweep: Sweep, record: Record) -> None:
    if holds_cotangents(sweep, record.segment):
        _segment(sweep, record)


RULES: dict[str, Callable[[Sweep, Record], None]] = {
    "classical": _classical, "measure": _projective, "reset": _projective,
    "postselect": _projective, "expval": _readout, "probs": _readout,
    "statevector": _readout, "qalloc": _qalloc, "qextend": _qextend, "merge": _merge,
    "sample": _sample, "segment": _segment,
}

_RECORD_KINDS = frozenset((*RULES, "gate"))

# The classical part of the chain rule alone: gates, weights and states are not followed.
CLASSICAL_RULES: dict[str, Callable[[Sweep, Record], None]] = {
    **{kind: _skip for kind in RULES}, "classical": _classical, "merge": _merge_classical,
    "gate": _skip, **{kind: _readout_cotangent for kind in READOUT_KINDS},
    "segment": _segment_classical,
}


# ---------------------------------------------------------------------------------- drivers
class RecordedRun:
    """One recorded exact-mode run of a program; `vjp` runs a reverse sweep per cotangent,
    `vjp_rows` one sweep per stack of cotangents.

    The sweeps share the forward run, so a Jacobian over many outputs costs one forward
    sweep and a reverse sweep per batch of rows.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> @qdiff.program
    ... def two(t):
    ...     q = qm.qubits(1)
    ...     qm.rx(t, q[0])
    ...     return qm.expval("Z", q), qm.expval("Y", q)
    >>> run = RecordedRun(two.trace(0.2), [0.2])
    >>> [round(float(run.vjp([c, 1 - c])[0]), 8) for c in (1.0, 0.0)] == [
    ...     round(-np.sin(0.2), 8), round(-np.cos(0.2), 8)]
    True
    """

    def __init__(self, program: Program, args: Sequence[Any], options: RunOptions = DEFAULTS,
                 readout_shots: int | None = None, checkpoints: bool = False):
        self.program = program
        self.runner = runner = AdjointRunner(options)
        # while loops' rounds in replayed segments (`loop_segments`): memory bounded in the
        # rounds, the records of later rounds not kept (parameter shift reads them all)
        runner.checkpoints = checkpoints
        # readouts estimated from this many shots each (`shot_readouts`): the classical
        # sweeps then linearize the post-processing at the estimates, as on a device
        runner.readout_shots = readout_shots
        mode, tol = options.mode, options.tol
        self.inputs = runner.track_inputs(args)
        self.input_nodes = [runner.node(v) for v in self.inputs]
        # one record for all the angles read from a parameter array, not two per angle,
        # and one for each run of gates, not one per gate
        runs, self.origins = gate_runs(unpack_scalars(program))
        if checkpoints and mode == "exact" and not readout_shots:
            # exact mode enumerates every round's exits: those of a closed segment run to
            # the end at once and leave their sums (the sample mode's draws keep their order)
            runner.exits_to_end(runs)
        self.items = runner.run_program(runs, [(1.0, self.inputs)])
        runner.flush()
        folded = runner.folded
        self.weights = [(runner.weight_node(w), w) for w, _ in self.items]
        self.mass = sum(w for w, _ in self.items) + folded.mass
        self.num_branches = len(self.items) + folded.branches
        # in sample mode a rejected trajectory is a zero, not an error
        self.postselected = mode == "exact" and runner.postselected_away > 0
        if self.postselected and self.mass <= tol:
            raise QdiffError("postselection succeeds with probability 0: the value is undefined")
        self.raw_values = [sum((w * np.asarray(outs[k], np.float64) for w, outs in self.items),
                               folded.sums[k] if folded.sums else np.zeros(atom.type.shape))
                           for k, atom in enumerate(program.outputs)]
        norm = self.mass if self.postselected else 1.0
        self.values = [v / norm for v in self.raw_values]
        self._mass_grads: list[Any] | None = None
        self._by_eqn: dict[int, list[Record]] | None = None

    def records_of(self, eqn: Eqn) -> list[Record]:
        """The records of ``eqn``'s executions, in order (the run's records, grouped once).
        A gate of the program has a record of its own here, cut out of its run's record."""
        if self._by_eqn is None:
            self._by_eqn = {}
            for record in self.runner.records:
                for view in self._gate_records(record):
                    self._by_eqn.setdefault(id(view.eqn), []).append(view)
        return [r for r in self._by_eqn.get(id(eqn), []) if r.eqn is eqn]

    def _gate_records(self, record: Record) -> list[Record]:
        """A run's record as one record per gate of the program (other records as they are):
        the gate's own angles, the run's state and weights."""
        found = self.origins.get(id(record.eqn))
        if found is None or found[0] is not record.eqn:
            return [record]
        views = []
        assert record.eqn is not None
        for (_, _, lo, hi), gate in zip(gate_parts(record.eqn), found[1]):
            views.append(Record("gate", gate, [record.in_nodes[0], *record.in_nodes[1 + lo:1 + hi]],
                                [record.in_values[0], *record.in_values[1 + lo:1 + hi]],
                                record.out_nodes, record.out_values, record.w_in, record.w_out,
                                record.weight_in, record.weight_out))
        return views

    def vjp_rows(self, rows: Sequence[Sequence[Any]], conditioned: bool = True
                 ) -> list[list[np.ndarray]]:
        """`vjp` for every row of cotangents (a Jacobian), in batched sweeps: each sweep
        undoes the gates on ψ once for a stack of rows (`rows_per_sweep`), and the sweeps
        share what the back end prepares for each gate block (the same gates at the same
        angles)."""
        seeds = [self.output_seeds(row) for row in rows]
        if not seeds:
            return []
        size = self.rows_per_sweep()
        self.runner.prepared_blocks = {} if len(seeds) > size else None
        try:
            out: list[list[np.ndarray]] = []
            for start in range(0, len(seeds), size):
                out.extend(self._conditioned(seeds[start:start + size], conditioned,
                                             rows[start:start + size]))
            return out
        finally:
            self.runner.prepared_blocks = None

    def vjp(self, cotangents: Sequence[Any], conditioned: bool = True) -> list[np.ndarray]:
        """``Σ_j c_j · ∂E_j/∂inputs``, one array per program input.

        With postselection, ``E = F/P`` is conditioned on it; ``conditioned=False`` gives
        the derivative of the unnormalized ``F = Σ_b w_b g_b`` instead.
        """
        return self._conditioned([self.output_seeds(cotangents)], conditioned, [cotangents])[0]

    def rows_per_sweep(self) -> int:
        """How many rows one batched sweep takes: at most ``MAX_ROWS_PER_SWEEP``, a stack of
        λ of at most ``STACK_BYTES`` (a larger stack leaves the cache: at n = 16, 2 rows a
        sweep took 148 ms for 16 rows, 16 rows a sweep 178 ms; at n = 20 one row a sweep is
        fastest), and at most a quarter of the memory available."""
        largest = max((int(np.size(obj)) * np.dtype(obj.dtype).itemsize
                       for obj in self.runner.states.values()), default=0)
        if not largest:
            return MAX_ROWS_PER_SWEEP
        free = self.runner.backend.available_bytes()
        free = available_memory_bytes() if free is None else free
        fits = min(STACK_BYTES, free // 4) if free else STACK_BYTES
        return int(max(1, min(MAX_ROWS_PER_SWEEP, fits // largest)))

    def _conditioned(self, seeds: list[tuple[dict, dict]], conditioned: bool,
                     rows: Sequence[Sequence[Any]]) -> list[list[np.ndarray]]:
        cts = [[np.asarray(c, np.float64) for c in row] for row in rows]
        grads = self._sweep(*_stack_seeds(seeds), len(seeds), self._final_seeds(cts))
        if not (self.postselected and conditioned):
            return [[g[r, ...] for g in grads] for r in range(len(seeds))]
        # a conditioned value F/P: the quotient rule (∂F·P - F·∂P)/P^2, P = Σ_b w_b, and
        # F = Σ_b w_b (c·g_b) = c·(the unnormalized values)
        out = []
        for r, row in enumerate(cts):
            weighted = sum(float(np.vdot(c, v)) for c, v in zip(row, self.raw_values))
            out.append([(g[r, ...] * self.mass - weighted * dm) / self.mass ** 2
                        for g, dm in zip(grads, self.mass_vjp())])
        return out

    def mass_vjp(self) -> list[np.ndarray]:
        """``∂P/∂inputs`` for the kept probability mass ``P = Σ_b w_b``."""
        if self._mass_grads is None:
            def unit(w: float, outs: list[Any]) -> tuple[np.ndarray, list[Any]]:
                return np.ones(1), [None] * len(outs)

            grads = self._sweep({n: np.ones(1) for n, _ in self.weights}, {}, 1, unit)
            self._mass_grads = [g[0, ...] for g in grads]
        return self._mass_grads

    def _sweep(self, weight_seeds: dict[int, np.ndarray], value_seeds: dict[int, Any],
               rows: int, final_seeds: FinalSeeds | None = None) -> list[np.ndarray]:
        seen = self.runner.reverse(weight_seeds, value_seeds, rows, final_seeds=final_seeds).ct
        return [_as_float(seen.get(n), v, rows) for n, v in zip(self.input_nodes, self.inputs)]

    def _branch_seeds(self, cts: list[np.ndarray], w: float, outs: list[Any]
                      ) -> tuple[float, list[Any]]:
        """A final branch's seeds for ``Σ_j c_j E_j``: its weight gets ``c · g_b``, each
        differentiable output ``w_b c`` (None for the others)."""
        score = sum(float(np.vdot(c, np.asarray(o, np.float64))) for c, o in zip(cts, outs))
        return score, [w * c if is_differentiable(atom.type) else None
                       for c, atom in zip(cts, self.program.outputs)]

    def _final_seeds(self, rows: list[list[np.ndarray]]) -> FinalSeeds | None:
        """`_branch_seeds` of every row, stacked: the seeds of the final branches that the
        replayed segments make again (None when the forward pass summed none)."""
        if not self.runner.folded.branches:
            return None

        def seeds(w: float, outs: list[Any]) -> tuple[np.ndarray, list[Any]]:
            per_row = [self._branch_seeds(cts, w, outs) for cts in rows]
            values = [None if per_row[0][1][k] is None
                      else np.stack(np.broadcast_arrays(*[found[1][k] for found in per_row]))
                      for k in range(len(outs))]
            return np.array([found[0] for found in per_row]), values

        return seeds

    def output_seeds(self, cotangents: Sequence[Any]) -> tuple[dict[int, float], dict]:
        """The reverse sweep's seeds for ``Σ_j c_j E_j``: per branch, the weight gets
        ``c · g_b`` and each differentiable output value ``w_b c``."""
        runner, program = self.runner, self.program
        cts = [np.asarray(c, np.float64) for c in cotangents]
        if len(cts) != len(program.outputs):
            raise QdiffError(
                f"expected {len(program.outputs)} output cotangent(s), got {len(cts)}")
        weight_seeds: dict[int, float] = {}
        value_seeds: dict[int, Any] = {}
        for (w_node, w), (_, outs) in zip(self.weights, self.items):
            score, seeds = self._branch_seeds(cts, w, outs)
            weight_seeds[w_node] = weight_seeds.get(w_node, 0.0) + score
            for o, seed in zip(outs, seeds):
                n = runner.node(o)
                if n is not None and seed is not None:
                    value_seeds[n] = add_tangents(value_seeds.get(n), seed)
        return weight_seeds, value_seeds

    def classical_vjp(self, value_seeds: dict[int, Any]) -> tuple[list[np.ndarray], Sweep]:
        """The classical part of a VJP: cotangents through classical records only; the
        sweep's ``readouts`` hold what reached each readout record."""
        batched = {n: np.asarray(v)[None] for n, v in value_seeds.items()}
        sweep = self.runner.reverse({}, batched, 1, CLASSICAL_RULES)
        sweep.readouts = {k: None if v is None else np.asarray(v)[0]
                          for k, v in sweep.readouts.items()}
        grads = [_as_float(sweep.ct.get(n), v, 1)[0]
                 for n, v in zip(self.input_nodes, self.inputs)]
        return grads, sweep


MAX_ROWS_PER_SWEEP = 16
"""Rows of a Jacobian that one batched reverse sweep takes at most (more rows, smaller
batches of each state in the block kernel's cache)."""

STACK_BYTES = 2 << 20
"""The most a sweep's stack of adjoints may take (about two cores' L2): 16 rows at n = 12,
2 at n = 16, 1 from n = 17 on (then the rows still share the forward run and the prepared
gate blocks)."""


def _stack_seeds(seeds: list[tuple[dict, dict]]) -> tuple[dict[int, np.ndarray], dict]:
    """One sweep's seeds from every row's (weight seeds, value seeds): a leading axis of
    rows, zeros where a row has no seed."""
    stacked: list[dict] = []
    for k in range(2):  # weights, values
        out = {}
        for n in dict.fromkeys(n for row in seeds for n in row[k]):
            values = [np.asarray(row[k].get(n, 0.0), np.float64) for row in seeds]
            shape = np.broadcast_shapes(*(v.shape for v in values))
            out[n] = np.stack([np.broadcast_to(v, shape) for v in values])
        stacked.append(out)
    return stacked[0], stacked[1]


def _as_float(value: Any, like: Any, rows: int) -> np.ndarray:
    if value is None:
        return np.zeros((rows, *np.shape(like)))
    return np.asarray(value, np.float64).reshape((rows, *np.shape(like)))
