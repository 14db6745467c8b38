"""``qdiff.vmap(qdiff.grad(f))`` of programs with measurements, ``cond`` on outcomes, resets
and postselection: one batched branching run and one reverse sweep over its branches
(`gradients/batched_branch_adjoint.py`), equal to the loop of unbatched adjoint gradients
and to central finite differences."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.lang.examples import repeat_until_one
from tests.batching.test_vmap_branches import (
    feedforward,
    postselected_pair,
    resets,
    shared_and_batched,
)

B = 6
rng = np.random.default_rng(11)
module = importlib.import_module("qdiff.quantum.gradients.batched_branch_adjoint")


def _spy(monkeypatch, owner, name, counts, key):
    """Count calls of ``owner.name`` into ``counts[key]``, still calling it."""
    original = getattr(owner, name)

    def counted(*args):
        counts[key] += 1
        return original(*args)

    monkeypatch.setattr(owner, name, counted)


def _sweeps(monkeypatch):
    """Count the batched sweeps over branches (and the batches that left the form)."""
    counts = {"sweeps": 0, "member_by_member": 0}
    _spy(monkeypatch, module, "_recorded", counts, "sweeps")
    _spy(monkeypatch, module, "_member_by_member", counts, "member_by_member")
    return counts


def _loop(fn, xs):
    return np.stack([np.asarray(fn(x), np.float64) for x in xs])


def _central_differences(program, x, h=1e-6):
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        out.flat[i] = (program(x + e) - program(x - e)) / (2 * h)
    return out


def zero_probability_branch(w):
    """A measurement whose outcome 1 has probability 0 for members with w[0] = 0, a cond
    on it, and a rotation that depends on the batched input in both branches."""
    q = qm.qubits(2)
    qm.ry(w[0], q[0])
    bit = qm.measure(q[0])
    qdiff.cond(bit, lambda: qm.rx(w[1], q[1]), lambda: qm.ry(w[1] * w[0], q[1]))
    return qm.expval("ZZ + 0.5*IX", q)


CASES = [
    ("branch_on_a_measurement", feedforward, lambda: rng.uniform(-2, 2, (B, 3))),
    ("resets", resets, lambda: rng.uniform(-2, 2, (B, 2))),
    ("postselection", postselected_pair, lambda: rng.uniform(0.5, 2.5, (B, 2))),
    ("zero_probability_branch", zero_probability_branch,
     lambda: np.column_stack([np.r_[0.0, np.pi, rng.uniform(-2, 2, B - 2)],
                              rng.uniform(-2, 2, B)])),
]


@pytest.mark.parametrize("name,fn,inputs", CASES, ids=[c[0] for c in CASES])
def test_batched_gradients_equal_the_member_by_member_loop(name, fn, inputs, monkeypatch):
    program = qdiff.program(fn)
    xs = inputs()
    counts = _sweeps(monkeypatch)
    got_value, got = qdiff.vmap(qdiff.value_and_grad(program))(xs)
    assert counts == {"sweeps": 1, "member_by_member": 0}
    want = _loop(qdiff.grad(program), xs)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_value, _loop(program, xs), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got[2], _central_differences(program, xs[2]), atol=1e-7)


def test_a_shared_input_and_a_cond_on_a_batched_value(monkeypatch):
    program = qdiff.program(shared_and_batched)
    w = rng.uniform(-2, 2, B)
    counts = _sweeps(monkeypatch)
    gw, gx = qdiff.vmap(qdiff.grad(program, argnums=(0, 1)), in_axes=(0, None))(w, 0.3)
    assert counts["sweeps"] == 1
    want = [qdiff.grad(program, argnums=(0, 1))(v, 0.3) for v in w]
    np.testing.assert_allclose(gw, [g[0] for g in want], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gx, [g[1] for g in want], rtol=1e-12, atol=1e-12)


def test_loops_on_measurements_run_as_one_sweep(monkeypatch):
    # more loop cases: tests/quantum/gradients/test_batched_loop_gradients.py
    program = qdiff.program(repeat_until_one)
    theta = rng.uniform(0.6, 2.5, 3)
    counts = _sweeps(monkeypatch)
    got = qdiff.vmap(qdiff.grad(program))(theta)
    assert counts == {"sweeps": 1, "member_by_member": 0}
    np.testing.assert_allclose(got, _loop(qdiff.grad(program), theta), rtol=1e-12)


def test_postselection_that_never_succeeds_for_a_member_is_that_members_error(monkeypatch):
    program = qdiff.program(postselected_pair)
    xs = np.array([[1.0, 0.5], [0.0, 0.0]])   # the second member never reads 1
    counts = _sweeps(monkeypatch)
    with pytest.raises(qdiff.QdiffError, match="probability 0"):
        qdiff.grad(program)(xs[1])
    with pytest.raises(qdiff.QdiffError, match="probability 0"):
        qdiff.vmap(qdiff.grad(program))(xs)
    assert counts == {"sweeps": 1, "member_by_member": 1}
