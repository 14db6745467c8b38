"""Checkpointed rounds of while loops for the adjoint method: memory bounded in the rounds.

The adjoint recorder (`adjoint.AdjointRunner`) keeps a record of every equation each branch
runs, and the states that measurements saw: a loop ending on a measurement that runs K
rounds would keep O(K) rounds of records (about 0.8 MB a round on the 6-qubit walk). Instead,
once a loop's first round is recorded, the rounds go into segments: when the records of a
segment pass `SEGMENT_RECORDS` records or `SEGMENT_BYTES` bytes of states, they are dropped
and replaced by one ``segment`` record holding a checkpoint (copies of the live branches at
the segment's start: weights, classical values and states) and the nodes of what the
segment returned (the branches that exited in it, the live ones at its end). The reverse
sweep reaches a segment record, runs its rounds again from the checkpoint on a fresh
recorder (exact mode is deterministic: the same branches, prunings and merges; sample mode
restores the random generator's state), moves the cotangents, adjoints and states of the
segment's outputs onto the replayed ones, sweeps the replayed records back and moves what
reached its inputs onto the checkpoint's nodes. Every derivative is the stored-record one,
to rounding (the same operations in the same order: equal to 1e-12 in the tests).

In exact mode each round's exits are branches of their own (a counter makes each exit
distinct): kept, they and their records after the loop grow with the rounds. For a loop at
the top of the recorded program (`execution.loop_exits`), the exits of a closing segment run to
the program's end at once (`run_exits`): the forward pass keeps their final branches' mass
and weighted outputs only (`FoldedExits`), and the replay runs them to the end again and
seeds their final branches (the sweep's ``final_seeds``), so their cotangents go back
through what follows the loop into the round they left.

The same functions serve the batched adjoint's tape (`batched_branch_adjoint._Tape`,
``vmap(grad(f))``): a recorder gives `checkpoint`, `value_bytes`, `node`, `weight_node`,
`forget`, `replayer`, `rerun_rounds`, `segment_record` and (for the exits) `merge`,
`run_equations` and `fold_exits`; a sweep gives `inner` and `move_state`.

Memory: one segment's records plus one checkpoint per segment (one state per live branch,
about a kilobyte on the walk: 10^4 rounds hold ~1 MB of checkpoints) plus the exits of the
open segment and of the first round. Time: each round runs twice forward and once
backward, linear in the rounds.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import repeat_until_one   # E[rounds] = 1/sin²(θ/2)
>>> from qdiff.quantum.gradients.adjoint import RecordedRun
>>> program = qdiff.trace(repeat_until_one, 0.7)
>>> stored, checkpointed = (RecordedRun(program, [0.7], checkpoints=c) for c in (False, True))
>>> any(r.kind == "segment" for r in checkpointed.runner.records)
True
>>> a, b = stored.vjp([1.0])[0], checkpointed.vjp([1.0])[0]
>>> bool(abs(a - b) <= 1e-12 * abs(a))
True
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...ir.core import Eqn
from ..execution.loop_exits import LoopExits, run_exits
from ..execution.runner import Item, loop_body, loop_test

SEGMENT_BYTES = 8 << 20
"""The most one segment's records may take (states and records, `RECORD_BYTES` each)."""

RECORD_BYTES = 2048
"""What one record takes besides its states (Python objects; measured on the walk)."""


@dataclass
class LoopRounds:
    """One run of a while loop under the recorder: its consts, the open segment, and where
    its exits go on (None: they stay branches until the loop ends)."""

    eqn: Eqn
    cond_consts: list[Any]
    body_consts: list[Any]
    segment: LoopSegment | None = None
    rounds: int = 0  # rounds run so far
    exits: LoopExits | None = None


@dataclass
class LoopSegment:
    """Rounds of a while loop that the reverse sweep replays: the checkpoint at their start
    and where the records they replace started (forward), then their inputs' and outputs'
    nodes once closed."""

    eqn: Eqn
    cond_consts: list[Any]
    body_consts: list[Any]
    start: list[Item]  # the live branches at the start, states copied
    rng: Any  # the random generator's state at the start (None: not drawn from yet)
    first_record: int
    first_node: int
    first_finished: int
    state_bytes: int
    checkpoint_bytes: int
    live_ids: list[int]  # ids of the live branches' values at the start (not the consts)
    rounds: int = 0
    in_nodes: list[int | None] = field(default_factory=list)
    out_nodes: list[int | None] = field(default_factory=list)
    exits: LoopExits | None = None  # set: its exits ran to the program's end in it
    # the batched run's members still running, by round of the segment where they changed
    masks: list[tuple[int, Any]] = field(default_factory=list)


def loop_consts(loop: LoopRounds | LoopSegment) -> list[Any]:
    """The values a segment reads besides its live branches: the loop's consts, and what
    the rest of the program reads when its exits run there."""
    env = [] if loop.exits is None else list(loop.exits.env.values())
    return [*loop.cond_consts, *loop.body_consts, *env]


def item_nodes(runner: Any, items: list[Item]) -> list[int | None]:
    """Per branch, the node of its weight, then of each value (None: a constant)."""
    nodes: list[int | None] = []
    for w, values in items:
        nodes.append(runner.weight_node(w))
        nodes.extend(runner.node(v) for v in values)
    return nodes


def open_segment(runner: Any, rounds: LoopRounds, live: list[Item],
                 finished: list[Item]) -> None:
    """Start a segment at the live branches ``live``: checkpoint them."""
    runner.flush()  # the checkpoint copies states: their gates must have run
    start = [(w, runner.checkpoint(values)) for w, values in live]
    consts = loop_consts(rounds)
    in_nodes = [runner.node(c) for c in consts] + item_nodes(runner, live)
    rng = None if runner._rng is None else copy.deepcopy(runner._rng)
    size = sum(RECORD_BYTES + sum(runner.value_bytes(v) for v in values)
               for _, values in start)
    rounds.segment = LoopSegment(rounds.eqn, rounds.cond_consts, rounds.body_consts, start,
                                 rng, len(runner.records), runner._count, len(finished),
                                 runner.state_bytes, size, item_ids(live), in_nodes=in_nodes,
                                 exits=rounds.exits)


def item_ids(items: list[Item]) -> list[int]:
    """The ids of the branches' weights and values, in `item_nodes`'s order."""
    return [id(v) for w, values in items for v in (w, *values)]


def segment_full(runner: Any, rounds: LoopRounds, segment: LoopSegment) -> bool:
    """Whether the open segment is checkpointed now: when its records reach
    `SEGMENT_BYTES`, or when its length s reaches √(k C / R) for k rounds so far, C bytes
    a checkpoint and R bytes of records a round (s R ≥ k C / s): the segment and the
    checkpoints then each take about √(k C R), O(√rounds) memory."""
    held = (runner.state_bytes - segment.state_bytes
            + RECORD_BYTES * (len(runner.records) - segment.first_record))
    return (held >= SEGMENT_BYTES
            or segment.rounds * held >= rounds.rounds * segment.checkpoint_bytes)


def close_segment(runner: Any, segment: LoopSegment, live: list[Item],
                  finished: list[Item]) -> list[Any]:
    """Drop the segment's records and the values only they held; returns the records
    dropped (the caller puts the segment's own record in their place)."""
    outputs = finished[segment.first_finished:] + live
    segment.out_nodes = item_nodes(runner, outputs)
    dropped = runner.records[segment.first_record:]
    del runner.records[segment.first_record:]
    keep_out = {n for n in segment.out_nodes if n is not None}
    keep = keep_out | {n for n in segment.in_nodes if n is not None}
    objects = runner._objects
    stale = []
    for key in reversed(objects):  # the newest first: nodes made in the segment are last
        node = objects[key][1]
        if node <= segment.first_node:
            break
        if node not in keep:
            stale.append((key, node))
    # the live values the segment started from were looked up by its dropped records only
    consts = len(segment.in_nodes) - len(segment.live_ids)
    keep_out.update(segment.in_nodes[:consts])
    for key, node in zip(segment.live_ids, segment.in_nodes[consts:]):
        entry = objects.get(key)
        if node not in keep_out and entry is not None and entry[1] == node:
            stale.append((key, node))
    for key, node in stale:  # a value two live branches shared is listed twice
        runner.forget(key, node)
    return dropped


def replay_segment(sweep: Any, segment: LoopSegment,
                   walk: Callable[[Any, list[Any]], None]) -> None:
    """The reverse sweep through a segment: rerun its rounds from the checkpoint on a
    fresh recorder, move the outputs' cotangents, adjoints and states onto the replayed
    outputs, ``walk`` the replayed records back, and move what reached the replayed
    inputs onto the checkpoint's nodes."""
    sub = sweep.runner.replayer()
    if segment.rng is not None:
        sub._rng = copy.deepcopy(segment.rng)
    kept = loop_consts(segment)
    consts = sub.checkpoint(kept)
    start = [(w, sub.checkpoint(values)) for w, values in segment.start]
    # the replayed inputs get nodes where the recorded ones had them (the replay may update
    # its copies of the states in place; the checkpoint's stay as they were)
    in_values: list[Any] = [*consts]
    checkpoint: list[Any] = [*kept]
    for (w, values), (_, held) in zip(start, segment.start):
        in_values.extend([w, *values])
        checkpoint.extend([w, *held])
    sub_in = []
    for value, node in zip(in_values, segment.in_nodes):
        found = sub.node(value) if node is not None else None
        sub_in.append(None if node is None else found if found is not None else sub._new(value))
    nc, nb = len(segment.cond_consts), len(segment.body_consts)
    live, finished = sub.rerun_rounds(segment, consts[:nc], consts[nc:nc + nb], start)
    finals: list[Item] = []
    if segment.exits is not None:  # the exits ran to the program's end: again, here
        exits = replace(segment.exits, env=dict(zip(segment.exits.env, consts[nc + nb:])))
        finals, finished = run_exits(sub, exits, finished), []
    sub.flush()
    sub_out = item_nodes(sub, finished + live)
    inner = sweep.inner(sub)
    if sweep.final_seeds is not None:  # the readout's seeds on the final branches
        for w, outs in finals:
            weight_seed, value_seeds = sweep.final_seeds(w, outs)
            inner.add(sub.weight_node(w), weight_seed)
            for value, seed in zip(outs, value_seeds):
                inner.add(sub.node(value), seed)
    moved: set[int] = set()
    for mine, theirs in zip(sub_out, segment.out_nodes):
        if mine is None or theirs is None or theirs in moved:
            continue
        moved.add(theirs)
        for table in ("ct", "psi", "lam"):
            value = getattr(sweep, table).pop(theirs, None)
            if value is not None:
                getattr(inner, table)[mine] = value
    walk(inner, sub.records)
    moved.clear()
    for mine, theirs, value in zip(sub_in, segment.in_nodes, checkpoint):
        if mine is None or theirs is None or theirs in moved:
            continue
        moved.add(theirs)
        sweep.add(theirs, inner.ct.pop(mine, None))
        sweep.move_state(inner, mine, theirs, value)


def rerun_rounds(runner: Any, segment: LoopSegment, cond_consts: list[Any],
                 body_consts: list[Any], live: list[Item]) -> tuple[list[Item], list[Item]]:
    """A segment's rounds run again from its checkpoint ``live`` by the branching runner:
    (the live branches at its end, the branches that exited in it)."""
    params = segment.eqn.params
    finished: list[Item] = []
    for _ in range(segment.rounds):
        continuing, exits, _ = loop_test(runner, params, cond_consts, live)
        finished.extend(exits)
        live = loop_body(runner, params, body_consts, continuing)
    return live, finished


def end_round(runner: Any, rounds: LoopRounds, live: list[Item], finished: list[Item]
              ) -> None:
    """After a round of a while loop: the first round's records stay (the tail certificate
    reads them) and the checkpoint of the first segment is taken; a segment full by
    `segment_full` closes into one record (``runner.segment_record``) and the next opens."""
    rounds.rounds += 1
    segment = rounds.segment
    if segment is None:
        open_segment(runner, rounds, live, finished)
        return
    segment.rounds += 1
    if segment_full(runner, rounds, segment):
        if rounds.exits is not None:  # the segment's exits: run to the end, summed
            leaving = finished[segment.first_finished:]
            del finished[segment.first_finished:]
            runner.fold_exits(rounds.exits, leaving)
            runner.flush()
        close_segment(runner, segment, live, finished)
        runner.records.append(runner.segment_record(segment))
        open_segment(runner, rounds, live, finished)


def holds_cotangents(sweep: Any, segment: LoopSegment) -> bool:
    """Whether anything reached the segment's outputs (a classical sweep skips it if not)."""
    return any(n is not None and (n in sweep.ct or n in sweep.lam)
               for n in segment.out_nodes)

