"""The adjoint through loops on measurements with the rounds in checkpointed segments
(`qdiff/quantum/gradients/loop_segments.py`): the same derivatives as with every round's
records stored (to 1e-12 relative), against closed forms and central finite differences, and
memory that stays far below one state per round."""

import sys
import tracemalloc
import warnings
from pathlib import Path

import numpy as np
import pytest
from quantum_programs_lib import coin_loop, until_one, von_neumann

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.execution.options import RunOptions
from qdiff.quantum.gradients import loop_segments
from qdiff.quantum.gradients.adjoint import RecordedRun

sys.path.insert(0, str(Path(__file__).parents[3] / "case_studies"))
import quantum_walk  # noqa: E402
import repeat_until_success as rus  # noqa: E402


def both_ways(program, args, options, rows):
    """The VJP of every row of cotangents, with every round stored and checkpointed, and the
    checkpointed run (to count its segments)."""
    found = []
    for checkpoints in (False, True):
        run = RecordedRun(program, args, options, checkpoints=checkpoints)
        found.append(run.vjp_rows(rows))
    return found[0], found[1], run


def assert_same(stored, checkpointed):
    for row_stored, row_checkpointed in zip(stored, checkpointed):
        for a, b in zip(row_stored, row_checkpointed):
            scale = max(float(np.max(np.abs(a))), 1e-300)
            np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12 * scale)


def segments(run):
    return sum(r.kind == "segment" for r in run.runner.records)


@pytest.fixture(params=["sqrt schedule", "a segment a round"])
def schedule(request, monkeypatch):
    if request.param == "a segment a round":  # the byte cap closes every segment at once
        monkeypatch.setattr(loop_segments, "SEGMENT_BYTES", 1)
    return request.param


@pytest.mark.parametrize("rounds", [3, 9])
def test_walk_gradient_with_checkpointed_rounds_equals_stored_rounds(rounds, schedule):
    program = qdiff.trace(quantum_walk.rounds, np.zeros(2))
    options = RunOptions(max_loop_iterations=rounds, backend="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stored, checkpointed, run = both_ways(program, [np.array([0.3, 1.2])], options,
                                              [[np.ones(())]])
    assert segments(run) >= 1
    assert_same(stored, checkpointed)


def test_walk_gradient_with_checkpointed_rounds_matches_central_differences():
    # the loop cut off after 6 rounds is a fixed function of t: its FD derivative is exact
    program = qdiff.trace(quantum_walk.rounds, np.zeros(2))
    options = RunOptions(max_loop_iterations=6, backend="numpy")
    t, h = np.array([0.3, 1.2]), 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = RecordedRun(program, [t], options, checkpoints=True)
        grad = run.vjp([np.ones(())])[0]

        def value(x):
            return float(RecordedRun(program, [x], options).values[0])

        fd = [(value(t + h * e) - value(t - h * e)) / (2 * h) for e in np.eye(2)]
    assert segments(run) >= 1
    np.testing.assert_allclose(grad, fd, rtol=1e-7)


@pytest.mark.parametrize("tol", [1e-6, 1e-12])
def test_rus_gradients_with_checkpointed_rounds_equal_stored_and_closed_form(tol, schedule):
    theta = 1.1
    program = qdiff.trace(rus.rus_rounds_and_z, theta)
    rows = [[np.ones(()), np.zeros(())], [np.zeros(()), np.ones(())]]  # E[rounds], <Z>
    options = RunOptions(tol=tol, backend="numpy")
    stored, checkpointed, run = both_ways(program, [theta], options, rows)
    assert segments(run) >= 1
    assert_same(stored, checkpointed)
    _, _, d_z, d_rounds = rus.closed_form(theta)
    # the loop is summed until the mass going on is below tol: the tail it cuts off moves
    # dE[rounds]/dθ by about 1e-3 at tol = 1e-6
    np.testing.assert_allclose([checkpointed[0][0], checkpointed[1][0]], [d_rounds, d_z],
                               atol=1e-6 if tol < 1e-9 else 3e-3)


@pytest.mark.parametrize("program, theta", [(coin_loop, 2.2), (until_one, 0.9),
                                            (von_neumann, 1.3)])
def test_library_loops_with_checkpointed_rounds_equal_stored_rounds(program, theta, schedule):
    traced = qdiff.trace(program, theta)
    stored, checkpointed, run = both_ways(traced, [theta], RunOptions(tol=1e-10, backend="numpy"),
                                          [[np.ones(())]])
    assert segments(run) >= 1
    assert_same(stored, checkpointed)


def test_sample_mode_trajectory_with_checkpointed_rounds_replays_its_draws():
    # the replay restores the random generator: the same trajectory, the same derivative
    program = qdiff.trace(until_one, 0.3)
    for seed in range(3):
        options = RunOptions(mode="sample", seed=seed, backend="numpy")
        stored, checkpointed, run = both_ways(program, [0.3], options, [[np.ones(())]])
        assert segments(run) >= 1
        assert_same(stored, checkpointed)


def test_qm_gradient_checkpoints_loops_and_keeps_its_certificate():
    # qm.gradient's adjoint checkpoints the rounds; the certificate reads the first round
    theta = 1.1
    program = qdiff.trace(rus.rus_rounds_and_z, theta)
    found = qm.gradient(program, theta, cotangent=(np.ones(()), np.zeros(())), tol=1e-6,
                        backend="numpy")
    closed = rus.closed_form(theta)[3]
    assert abs(float(found.grad) - closed) <= float(np.max(found.remainder_bound)) + 1e-12
    assert np.isfinite(found.remainder_bound).all()


def drifting(x):
    """Eleven qubits; a round rotates the flag by 1e-4 (its exits weigh less than the pruning
    threshold tol² = 1e-8, so no branch leaves) and the data by rx(x), until the flag reads 1."""
    q = qm.qubits(11)
    for wire in q[1:]:
        qm.h(wire)

    def body():
        qm.ry(1e-4, q[0])
        qm.rx(x, q[1])
        qm.cx(q[1], q[2])

    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    return qm.expval("Z" * 11, q)


def test_adjoint_memory_through_1500_rounds_stays_far_below_one_state_a_round():
    # every round keeps at least its measured state when stored (1500 x 32 kB = 49 MB); the
    # checkpointed segments keep O(sqrt(rounds)) of them (about 5 MB here)
    rounds, state_bytes = 1500, 32 * 2 ** 10
    program = qdiff.trace(drifting, 0.3)
    options = RunOptions(tol=1e-4, max_loop_iterations=rounds, backend="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        RecordedRun(program, [0.3], options.replace(max_loop_iterations=2)).vjp([1.0])
        tracemalloc.start()
        try:
            run = RecordedRun(program, [0.3], options, checkpoints=True)
            run.vjp([np.ones(())])
            peak = tracemalloc.get_traced_memory()[1]
            print(f"peak {peak / 1e6:.1f} MB")
        finally:
            tracemalloc.stop()
    assert run.runner.unterminated > 0.99  # the loop ran every round
    assert peak < rounds * state_bytes / 4, f"peak {peak / 1e6:.1f} MB"


def counted(x):
    """A round resets the qubit and turns it by ry(x) until it reads 1; after the loop, a gate
    on the exit's state and the counter times x (a value from before the loop)."""
    q = qm.qubits(1)
    k = qdiff.Cell(0)

    def body():
        qm.reset(q[0])
        qm.ry(x, q[0])
        k.set(k.value + 1)

    body()
    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    qm.rx(x, q[0])
    return k.value * x + qm.expval("Z", q)


def test_exits_run_to_the_end_in_segments_give_the_stored_gradient(schedule):
    # each round's exit (its own counter) runs the gate, readout and product after the loop
    # when its segment closes, and again in the segment's replay
    program = qdiff.trace(counted, 1.2)
    options = RunOptions(tol=1e-8, backend="numpy")
    stored, checkpointed, run = both_ways(program, [1.2], options, [[np.ones(())]])
    assert run.runner.folded.branches > 0
    assert_same(stored, checkpointed)
    h = 1e-5

    def value(x):
        return float(RecordedRun(program, [x], options, checkpoints=True).values[0])

    np.testing.assert_allclose(checkpointed[0][0], (value(1.2 + h) - value(1.2 - h)) / (2 * h),
                               rtol=1e-6)


def test_adjoint_memory_per_round_does_not_grow_with_the_rounds():
    # the exits of closed segments leave only their summed outputs: 4x the rounds stays
    # below 2.5x the traced peak (every exit kept with its records after the loop: ~3x)
    program = qdiff.trace(counted, 0.05)

    def peak(rounds):
        options = RunOptions(max_loop_iterations=rounds, backend="numpy")
        tracemalloc.start()
        try:
            RecordedRun(program, [0.05], options, checkpoints=True).vjp([np.ones(())])
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        peak(2)
        small, large = peak(25), peak(100)
    assert large < 2.5 * small, f"{small / 1e3:.0f} kB at 25 rounds, {large / 1e3:.0f} kB at 100"


def postselected_after_loop(x):
    q = qm.qubits(2)
    k = qdiff.Cell(0)

    def body():
        qm.reset(q[0])
        qm.ry(x, q[0])
        qm.rx(0.3 * x, q[1])
        k.set(k.value + 1)

    body()
    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    qm.postselect(q[1], 0)
    qm.ry(x, q[1])
    return k.value * x + qm.expval("ZZ", q), qm.probs([q[1]])


@pytest.mark.parametrize("conditioned", [True, False])
def test_postselection_after_exits_run_to_the_end_gives_the_stored_jacobian(conditioned):
    # the exits' final branches count in the postselected mass and its derivative
    program = qdiff.trace(postselected_after_loop, 1.1)
    options = RunOptions(tol=1e-8, backend="numpy")
    rows = [[np.ones(()), np.zeros(2)], [np.zeros(()), np.array([0.3, -1.0])]]
    found = []
    for checkpoints in (False, True):
        run = RecordedRun(program, [1.1], options, checkpoints=checkpoints)
        assert run.postselected
        found.append(run.vjp_rows(rows, conditioned=conditioned))
    assert run.runner.folded.branches > 0
    assert_same(*found)
