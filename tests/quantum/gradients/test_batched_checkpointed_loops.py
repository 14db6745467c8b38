"""``qdiff.vmap(qdiff.grad(f))`` through loops on measurements with the rounds in checkpointed
segments (`loop_segments`, replayed by the batched sweep of `batched_branch_adjoint`) and the
exits of a closed segment run to the program's end at once: the same gradients as the batched
sweep that keeps every round and as the loop of unbatched ``value_and_grad`` calls (1e-12),
the members' aborts and warnings unchanged, and a traced peak that grows like the square
root of the rounds."""

from __future__ import annotations

import importlib
import tracemalloc

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.gradients import loop_segments
from qdiff.quantum.lang.examples import cycle_walk, measured_rounds, repeat_until_one
from tests.quantum.gradients import test_batched_loop_gradients as stored_rounds
from tests.quantum.gradients.test_batched_branch_gradients import _spy
from tests.quantum.gradients.test_batched_loop_gradients import (
    _batched_equals_the_loop,
    cond_in_a_loop,
    merging_rounds,
    nested_loops,
    postselected_after_a_loop,
    rotated_per_member,
)
from tests.quantum.quantum_programs_lib import coin_loop, until_one

module = importlib.import_module("qdiff.quantum.gradients.batched_branch_adjoint")
rng = np.random.default_rng(23)


def gate_after_the_loop(x):
    """Each round resets the qubit and turns it by ry(x[0]) until it reads 1; after the loop a
    gate on the exit's state, and the counter times x[1], a value from before the loop (the
    exits run to the end read it)."""
    q = qm.qubits(1)
    k = qdiff.Cell(0)
    scale = x[1] * 2.0

    def body():
        qm.reset(q[0])
        qm.ry(x[0], q[0])
        k.set(k.value + 1)

    body()
    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    qm.rx(x[0], q[0])
    return k.value * scale + qm.expval("Z", q)


CASES = [
    ("repeat_until_one", repeat_until_one, lambda: np.r_[0.5, 3.0, rng.uniform(0.8, 2.5, 2)]),
    ("cycle_walk", cycle_walk, lambda: np.r_[0.3, 2.0, 4.7]),
    ("a_reset_loop", coin_loop, lambda: np.r_[0.0, rng.uniform(0.3, 1.5, 3)]),
    ("merged_branches", merging_rounds,
     lambda: np.column_stack([rng.uniform(0.5, 2.5, 3), rng.uniform(1.0, 2.5, 3)])),
    ("nested_loops", nested_loops,
     lambda: np.column_stack([rng.uniform(1.2, 2.5, 3), rng.uniform(-2, 2, 3)])),
    ("cond_on_a_member_value", cond_in_a_loop,
     lambda: np.column_stack([rng.uniform(0.8, 2.5, 4), [-1.0, 0.5, -1.3, 1.2]])),
    ("aborted_at_max_iter", lambda t: until_one(t, max_iter=40) * 1.0,
     lambda: rng.uniform(0.2, 0.6, 3)),
    ("postselected_after_a_loop", postselected_after_a_loop,
     lambda: rng.uniform(0.8, 2.5, (3, 2))),
    ("per_member_trip_counts", rotated_per_member,
     lambda: np.column_stack([rng.uniform(-2, 2, 4), [0.5, 1.5, 2.5, 3.2]])),
    ("fori_loop_that_measures", measured_rounds, lambda: rng.uniform(-2, 2, (3, 2))),
    ("gate_after_the_loop", gate_after_the_loop,
     lambda: np.column_stack([rng.uniform(0.6, 2.0, 3), rng.uniform(-1, 1, 3)])),
]


@pytest.fixture(params=["sqrt schedule", "a segment a round"])
def schedule(request, monkeypatch):
    if request.param == "a segment a round":  # the byte cap closes every segment at once
        monkeypatch.setattr(loop_segments, "SEGMENT_BYTES", 1)
    return request.param


def _replays(monkeypatch):
    """Count the segments the batched sweep replays and the exits folded while loops ran."""
    counts = {"replays": 0, "folds": 0}
    _spy(monkeypatch, module, "replay_segment", counts, "replays")
    _spy(monkeypatch, module._Tape, "fold_exits", counts, "folds")
    return counts


def _stored_and_checkpointed(fn, xs):
    program = qdiff.trace(fn, xs[0])
    flags, size = [True], len(xs)
    return [module._recorded(program, [xs], flags, size, [True], checkpoints=c)
            for c in (False, True)]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_checkpointed_rounds_give_the_stored_rounds_gradient(name, fn, inputs, schedule,
                                                             monkeypatch):
    xs = inputs()
    counts = _replays(monkeypatch)
    (value, (grad,)), (value_c, (grad_c,)) = _stored_and_checkpointed(fn, xs)
    scale = max(float(np.max(np.abs(grad))), 1.0)
    np.testing.assert_allclose(grad_c, grad, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(value_c, value, rtol=1e-12, atol=1e-12)
    if schedule == "a segment a round" and name not in ("fori_loop_that_measures",):
        assert counts["replays"] > 0


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_a_segment_a_round_equals_the_loop_of_value_and_grad(name, fn, inputs, monkeypatch):
    monkeypatch.setattr(loop_segments, "SEGMENT_BYTES", 1)
    _batched_equals_the_loop(fn, inputs(), monkeypatch)


def test_exits_of_closed_segments_run_to_the_end(monkeypatch):
    # θ = 0.5: ~450 rounds; each closed segment's exits run the gate, readout and product
    # after the loop at once, and again in its replay
    xs = np.column_stack([[0.5, 1.1], [0.7, -0.4]])
    counts = _replays(monkeypatch)
    (_, (grad,)), (_, (grad_c,)) = _stored_and_checkpointed(gate_after_the_loop, xs)
    assert counts["folds"] > 0 and counts["replays"] > 0
    np.testing.assert_allclose(grad_c, grad, rtol=1e-12, atol=1e-12)


def test_truncation_warnings_unchanged_with_a_segment_a_round(monkeypatch):
    # von Neumann's loop is cut off with a little more than tol going on: every member warns,
    # so the batch goes member by member and warns as they do, segments or not
    monkeypatch.setattr(loop_segments, "SEGMENT_BYTES", 1)
    stored_rounds.test_member_by_member_fallback_keeps_the_members_truncation_warnings(
        monkeypatch)


def _theta_for(rounds: float) -> float:
    """repeat_until_one's angle whose mass going on falls below tol = 1e-12 after about
    ``rounds`` rounds: (1 - sin²(θ/2))^rounds = 1e-12."""
    return float(2 * np.arcsin(np.sqrt(-np.log(1e-12) / rounds)))


def _traced_peak(rounds: int, checkpoints: bool) -> float:
    program = qdiff.trace(repeat_until_one, 0.3)
    theta = _theta_for(rounds) * np.array([1.0, 1.02])
    tracemalloc.start()
    try:
        module._recorded(program, [theta], [True], 2, [True], checkpoints=checkpoints)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_batched_gradient_memory_at_4x_the_rounds_stays_far_below_4x():
    # every round kept: ~12 kB a round (its records, and its exit run to the end after the
    # loop); in segments, with the exits of closed segments folded, O(sqrt(rounds))
    _traced_peak(60, True)
    small, large = _traced_peak(200, True), _traced_peak(800, True)
    stored = _traced_peak(200, False)
    note = f"{small / 1e3:.0f} kB at 200 rounds, {large / 1e3:.0f} kB at 800, " \
           f"{stored / 1e3:.0f} kB at 200 with every round kept"
    print(note)
    assert large < 3.0 * small, note
    assert large < stored / 2, note   # 4x the rounds in less than half the stored peak


@pytest.mark.slow
def test_batched_gradient_memory_from_1000_to_4000_rounds_stays_near_2x():
    small, large = _traced_peak(1000, True), _traced_peak(4000, True)
    note = f"{small / 1e3:.0f} kB at 1000 rounds, {large / 1e3:.0f} kB at 4000"
    print(note)
    assert large < 2.5 * small, note
