"""Arrays inside compiled loops: an iteration's scratch arrays are allocated once, before
the loop, and a result whose operands are dead is stored in one of their arrays (a carry
rebuilt in place). Each case checks the compiled result against the interpreter (the
oracle) and the generated source for the allocations the rule removes, or keeps where an
array outlives its iteration (never a timing)."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from qdiff.loops import memory
from tests.backends import assert_agree

RNG = np.random.default_rng(5)
ALLOCATIONS = ("np.empty(", "np.zeros(", "np.full(", ".copy()")


def _allocations_in_loops(source: str) -> list[str]:
    """The allocating lines of ``source`` written inside a ``for`` or ``while`` loop."""
    found, loops = [], []  # indentations of the loops open at the current line
    for line in source.splitlines():
        indent = len(line) - len(line.lstrip())
        while loops and indent <= loops[-1]:
            loops.pop()
        if loops and any(a in line for a in ALLOCATIONS):
            found.append(line.strip())
        if line.lstrip().startswith(("for ", "while ")):
            loops.append(indent)
    return found


def _agrees(program, *args) -> str:
    """``program`` compiled and interpreted, checked equal; the generated source."""
    compiled = CompiledProgram(program)
    got, want = compiled(*args), program(*args)
    for k, (a, b) in enumerate(zip(got if isinstance(got, tuple) else (got,),
                                   want if isinstance(want, tuple) else (want,))):
        assert_agree(a, b, f"output {k}")
    return compiled.source


def _cell(main, state, xs):
    """An LSTM-like recurrence: gates from a concatenation, a carry rebuilt by stacking."""
    def step(t, carry):
        hidden, cell = carry[0], carry[1]
        gates = qnp.concatenate([xs[t], hidden]) * main[0] + main[1]
        forget = 1.0 / (1.0 + qnp.exp(-gates[:4]))
        change = qnp.tanh(gates[4:])
        cell = cell * forget + (1.0 - forget) * change
        return qnp.stack([qnp.tanh(cell) * forget, cell])
    return qnp.sum(qdiff.fori_loop(0, xs.shape[0], step, state) ** 2)


CELL_ARGS = (RNG.normal(size=(2, 8)), RNG.normal(size=(2, 4)), RNG.normal(size=(12, 4)))


def test_reversed_loop_allocates_no_arrays_per_iteration():
    """The gradient of a recurrence of small array operations (the D-LSTM's shape): its
    forward sweep and its reversed loop allocate every scratch array once, and rebuild
    their carries in the carries' own arrays."""
    gradient = qdiff.grad(_cell, argnums=(0, 1))
    program = gradient.trace(*CELL_ARGS)
    source = _agrees(program, *CELL_ARGS)
    assert _allocations_in_loops(source) == []
    assert "np.empty" in source  # the scratch arrays, before the loops


def test_primal_loop_allocates_no_arrays_per_iteration():
    program = qdiff.trace(_cell, *CELL_ARGS)
    assert _allocations_in_loops(_agrees(program, *CELL_ARGS)) == []


def test_array_made_in_an_iteration_and_carried_on_is_allocated_per_iteration():
    """A carry the body makes from other positions of the old one (a roll) needs a new
    array each iteration: the old one is still read while it is written."""
    def f(x):
        return qdiff.fori_loop(0, 5, lambda i, v: qnp.roll(v, 1) * 1.5 + qnp.sin(v), x)
    x = RNG.normal(size=6)
    source = _agrees(qdiff.trace(f, x), x)
    assert _allocations_in_loops(source)


def test_array_handed_to_an_inner_loop_as_its_carry_is_not_shared_across_iterations():
    """An outer iteration's array passed to an inner loop as its carry comes back as the
    outer carry (the inner loop takes the array, no copy): allocated once, it would be the
    next iteration's carry and the array being written at the same time."""
    def f(x):
        def outer(i, v):
            w = qnp.roll(v, 1) * 1.5 + qnp.cos(v)
            return qdiff.fori_loop(0, 3, lambda j, u: u * 0.5 + 1.0, w)
        return qdiff.fori_loop(0, 4, outer, x)
    x = RNG.normal(size=5)
    _agrees(qdiff.trace(f, x), x)


def test_array_stored_into_a_carry_buffer_is_copied_not_aliased():
    """An iteration's array written into a carried buffer (a stored history) is copied
    there, so the array itself may be reused by the next iteration."""
    def f(x):
        def step(i, carry):
            v, history = carry
            v = qnp.roll(v, 1) * 0.9 + qnp.tanh(v)
            return v, history.at[i].set(v)
        _, history = qdiff.fori_loop(0, 4, step, (x, qnp.zeros((4, 3))))
        return history
    x = RNG.normal(size=3)
    _agrees(qdiff.trace(f, x), x)


def test_while_loop_scratch_arrays_allocated_once():
    def f(x):
        def body(carry):
            v, n = carry
            return qnp.concatenate([v[1:], v[:1]]) * 0.5 + qnp.exp(-v * v), n + 1
        return qdiff.while_loop(lambda c: c[1] < 6, body, (x, 0))[0]
    x = RNG.normal(size=4)
    _agrees(qdiff.trace(f, x), x)


def test_parallel_map_keeps_its_per_row_arrays_in_the_row():
    """Under ``parallel=True`` a ``map``'s rows run on several threads: arrays its lambda
    allocates stay in the row (one per thread), not before the loop."""
    def f(xs):
        return qdiff.map(lambda row: qnp.sum(qnp.roll(row, 1) * row), xs)
    xs = RNG.normal(size=(6, 5))
    program = qdiff.trace(f, xs)
    compiled = CompiledProgram(program, parallel=True)
    assert_agree(compiled(xs), program(xs), "map")
    assert "prange" in compiled.source


def test_small_checkpoint_buffers_do_not_read_the_memory_available_on_every_call(
        monkeypatch: pytest.MonkeyPatch):
    """Reading the memory available costs as much as a small compiled gradient: a buffer
    far below what was free within the last second is not checked again, a large one is
    (and still raises)."""
    reads = []
    monkeypatch.setattr(memory, "available_memory_bytes",
                        lambda: reads.append(1) or 1 << 30)
    monkeypatch.setattr(memory, "_recent", [-float("inf"), 0.0])
    for _ in range(100):
        memory.check_buffer_memory(100, 8)
    assert len(reads) == 1
    with pytest.raises(memory.CheckpointMemoryError):
        memory.check_buffer_memory(1 << 20, 1 << 12)


@pytest.mark.parametrize("shape", [(1, 1), (2, 1), (1, 3)])
def test_forward_derivative_of_a_column_min_does_not_overwrite_its_argument(shape):
    """The jvp of ``min(x, axis=0)`` transposes ``x``; with only unit axes moved, the
    compiled transpose is a view of the argument, so a dead transpose's array is not free
    for another result (it was: the argument, and the min, changed)."""
    x, t = RNG.normal(size=shape), RNG.normal(size=shape)
    primal = qdiff.trace(lambda v: qnp.min(v, axis=0), x)
    _agrees(qdiff.trace(lambda v, w: qdiff.jvp(primal, (v,), (w,)), x, t), x, t)


def test_reduce_returning_its_row_does_not_overwrite_the_argument():
    """A ``reduce`` whose lambda returns its row made the accumulator a view of the
    argument's last row; the nest after it, storing into the dead result in place, wrote
    into the caller's array. The row is now copied, as a loop carry would be."""
    def f(xs):
        last = qdiff.reduce(lambda a, x: x, qnp.zeros(3), xs)
        z = qnp.exp(last) * 2.0
        return z, qdiff.reduce(lambda a, x: a + x * z, qnp.zeros(3), xs)
    xs = RNG.normal(size=(5, 3))
    kept = xs.copy()
    _agrees(qdiff.trace(f, xs), xs)
    np.testing.assert_array_equal(xs, kept)
