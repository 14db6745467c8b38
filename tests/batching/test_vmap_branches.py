"""`qdiff.vmap` of quantum programs with measurements: one batched branching simulation
(`execution/batched_branches.py`) whose values equal the member-by-member loop's, for
loops ending on a measurement, a branch on a mid-circuit outcome, resets and
postselection; their per-member gradients equal the loop's too (without loops, one batched
sweep: tests/quantum/gradients/test_batched_branch_gradients.py)."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.quantum.execution.batched_branches import branches_claim
from qdiff.quantum.lang.examples import repeat_until_one
from tests.quantum.quantum_programs_lib import coin_loop, postselected, until_one, von_neumann

B = 6
rng = np.random.default_rng(5)


def feedforward(w):
    """ry, cx, a mid-circuit measurement and a cond on its outcome, an angle that depends
    on the batched input in both branches."""
    q = qm.qubits(3)
    qm.ry(w[0], q[0]); qm.cx(q[0], q[1]); qm.rx(w[1], q[2])
    bit = qm.measure(q[0])
    qdiff.cond(bit, lambda: qm.rx(w[1] * w[2], q[1]), lambda: qm.ry(qnp.sin(w[2]), q[2]))
    qm.crz(w[2], q[1], q[2])
    return qm.expval("IZZ + 0.5*XII", q) + qnp.asarray(bit) * w[0]


def resets(w):
    """A register measured with reset and reset again, rotations between."""
    q = qm.qubits(2)
    qm.ry(w[0], q[0]); qm.cx(q[0], q[1])
    first = qm.measure(q[1], reset=True)
    qm.rx(w[1], q[1]); qm.reset(q[0]); qm.ry(w[0] * w[1], q[0])
    return qm.expval("ZX", q) + 0.25 * qnp.asarray(first)


def postselected_pair(w):
    q = qm.qubits(2)
    qm.ry(w[0], q[0]); qm.cx(q[0], q[1]); qm.rx(w[1], q[1])
    qm.postselect(q[1], 1)
    return qm.expval("ZI", q)


def _loop(fn, xs):
    return np.stack([np.asarray(fn(x), np.float64) for x in xs])


def _runs(monkeypatch):
    """Count the batched branching runs (and their batch sizes)."""
    module = importlib.import_module("qdiff.quantum.execution.batched_branches")
    vmap_module = importlib.import_module("qdiff.batching.vmap")
    sizes = []
    runners = list(vmap_module._BATCHED_RUNNERS)
    for k, (claims, run) in enumerate(runners):
        if run is module.run_branches:
            def counted(program, values, flags, size, run=run):
                sizes.append(size)
                return run(program, values, flags, size)
            runners[k] = (claims, counted)
    monkeypatch.setattr(vmap_module, "_BATCHED_RUNNERS", runners)
    return sizes


CASES = [
    ("repeat_until_one", repeat_until_one, lambda: rng.uniform(0.6, 2.5, B)),
    ("until_one_bounded", lambda t: until_one(t, max_iter=4), lambda: rng.uniform(0.3, 2, B)),
    ("coin_loop", coin_loop, lambda: rng.uniform(0.3, 1.5, B)),
    ("von_neumann", von_neumann, lambda: rng.uniform(1.2, 2.0, B)),
    ("feedforward", feedforward, lambda: rng.uniform(-2, 2, (B, 3))),
    ("resets", resets, lambda: rng.uniform(-2, 2, (B, 2))),
    ("postselected", postselected, lambda: rng.uniform(-1, 1, B)),
    ("postselected_pair", postselected_pair, lambda: rng.uniform(0.5, 2.5, (B, 2))),
]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_values_equal_the_member_by_member_loop(name, fn, inputs, monkeypatch):
    program = qdiff.program(fn)
    xs = inputs()
    assert branches_claim(program.trace(xs[0]), [True])
    sizes = _runs(monkeypatch)
    with warnings.catch_warnings(record=True) as batched_warnings:
        warnings.simplefilter("always")
        got = qdiff.vmap(program)(xs)
    with warnings.catch_warnings(record=True) as member_warnings:
        warnings.simplefilter("always")
        want = _loop(program, xs)
    # the batch warns as its members do (von Neumann's loop is cut off with a little more
    # than tol left: the batch then runs member by member, each warning)
    assert len(batched_warnings) == len(member_warnings)
    assert sizes == [B]   # one batched run
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_closed_forms():
    theta = rng.uniform(0.6, 2.5, B)
    np.testing.assert_allclose(qdiff.vmap(qdiff.program(repeat_until_one))(theta),
                               1 / np.sin(theta / 2) ** 2, rtol=1e-9)
    np.testing.assert_allclose(qdiff.vmap(qdiff.program(coin_loop))(theta),
                               np.tan(theta / 2) ** 2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(qdiff.vmap(qdiff.program(postselected))(theta), -np.cos(theta),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,fn,inputs", [c for c in CASES if c[0] in (
    "repeat_until_one", "feedforward", "resets", "postselected_pair")],
    ids=["repeat_until_one", "feedforward", "resets", "postselected_pair"])
def test_gradients_equal_the_member_by_member_loop(name, fn, inputs):
    program = qdiff.program(fn)
    xs = inputs()
    grad = qdiff.grad(program)
    np.testing.assert_allclose(qdiff.vmap(grad)(xs), _loop(grad, xs), rtol=1e-12, atol=1e-12)


def shared_and_batched(w, x):
    # x shared by the batch, w per member: a cond on w, then one on a measurement
    q = qm.qubits(2)
    qm.ry(w, q[0]); qm.rx(x, q[1])
    qdiff.cond(w > 0.0, lambda: qm.cx(q[0], q[1]), lambda: qm.h(q[1]))
    bit = qm.measure(q[1])
    qdiff.cond(bit, lambda: qm.rz(x, q[0]), lambda: qm.rx(x * w, q[0]))
    return qm.expval("XZ", q)


def test_a_shared_input_and_a_cond_on_a_batched_value():
    program = qdiff.program(shared_and_batched)
    w = rng.uniform(-2, 2, B)
    assert branches_claim(program.trace(w[0], 0.3), [True, False])
    got = qdiff.vmap(program, in_axes=(0, None))(w, 0.3)
    np.testing.assert_allclose(got, [program(v, 0.3) for v in w], rtol=1e-12, atol=1e-12)


def test_a_loop_that_cannot_end_is_the_members_error():
    def stuck(theta):
        q = qm.qubits(1)
        qm.ry(theta * 0.0, q[0])
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.rz(theta, q[0]))
        return qm.expval("Z", q)

    with pytest.raises(qm.NonTerminatingLoopError):
        qdiff.vmap(qdiff.program(stuck))(np.array([0.5, 1.0]))


def test_map_over_a_loop_on_a_measurement_equals_the_loop():
    program = qdiff.program(repeat_until_one)
    theta = rng.uniform(0.6, 2.5, B)
    np.testing.assert_allclose(qdiff.map(program, theta), _loop(program, theta), rtol=1e-12)
