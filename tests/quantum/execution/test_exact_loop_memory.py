"""The exact run of a long loop on a measurement: its exits run to the program's end while
the loop runs (`qdiff/quantum/execution/loop_exits.py`), so its memory does not grow with
the rounds, and its values are those of the exits kept to the loop's end."""

import tracemalloc
import warnings

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.execution import runner
from qdiff.quantum.execution.options import RunOptions


def counted_wide(x):
    """A round resets q0 and turns it by ry(x) until it reads 1, on an 8-qubit register (each
    exit holds a 4 kB state); after the loop a gate, a readout and the counter times x."""
    q = qm.qubits(8)
    k = qdiff.Cell(0)

    def body():
        qm.reset(q[0])
        qm.ry(x, q[0])
        k.set(k.value + 1)

    for wire in range(1, 8):
        qm.h(q[wire])
    body()
    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    qm.rx(x, q[0])
    return k.value * x + qm.expval("ZX", [q[0], q[1]])


def _run(program, x, rounds):
    options = RunOptions(max_loop_iterations=rounds, backend="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the loop is cut off on purpose
        return qm.run(program, x, options=options)


def test_memory_of_the_exact_run_does_not_grow_with_the_rounds():
    # every exit kept to the loop's end: about 4.5 kB a round, 4x the peak at 4x the rounds
    program = qdiff.trace(counted_wide, 0.05)

    def peak(rounds):
        tracemalloc.start()
        try:
            _run(program, 0.05, rounds)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    _run(program, 0.05, 2)
    small, large = peak(300), peak(1200)
    assert large < 1.5 * small, f"{small / 1e6:.2f} MB at 300 rounds, {large / 1e6:.2f} MB at 1200"


@pytest.mark.parametrize("x", [0.05, 0.7])
def test_exits_summed_while_the_loop_runs_give_the_values_of_exits_kept(monkeypatch, x):
    program = qdiff.trace(counted_wide, x)
    folded = _run(program, x, 700)
    monkeypatch.setattr(runner, "FOLD_EXITS", 10 ** 9)
    kept = _run(program, x, 700)
    np.testing.assert_allclose(folded.values, kept.values, rtol=1e-12)
    assert folded.unterminated_mass == kept.unterminated_mass
    assert folded.num_branches >= kept.num_branches
