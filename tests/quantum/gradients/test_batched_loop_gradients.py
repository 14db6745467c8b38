"""``qdiff.vmap(qdiff.grad(f))`` of programs whose ``while`` and ``fori`` loops measure: one
batched branching run that records every round and one reverse sweep
(`gradients/batched_branch_adjoint.py`), equal to the loop of unbatched adjoint gradients to
1e-12, to central finite differences of the exact value and to closed forms; where a member
would warn or fail, the batch goes member by member and warns or fails as they do."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.lang.examples import cycle_walk, measured_rounds, repeat_until_one
from tests.quantum.gradients.test_batched_branch_gradients import _loop, _sweeps
from tests.quantum.quantum_programs_lib import coin_loop, until_one, von_neumann

rng = np.random.default_rng(17)


def merging_rounds(w):
    """Each round measures ``rx(w[0])|0>`` with reset: both outcomes leave the same state (up
    to the phase -i) and values, so they merge; the loop is repeat-until-one on the second
    qubit: E[rounds] = 1/sin²(w[1]/2), whatever w[0]."""
    q = qm.qubits(2)
    count = qdiff.Cell(0)

    def body():
        qm.rx(w[0], q[0]); qm.reset(q[0])
        qm.ry(w[1], q[1])
        count.set(count.value + 1)

    qdiff.while_loop(lambda: qm.measure(q[1]) == 0, body)
    return count.value * 1.0


def nested_loops(w):
    """Rounds on a measurement whose body holds a counted loop of gates and a classical
    while loop of resets (their outcomes merge): the body rotates q1 by w[0] in all, so
    E[rounds] = 1/sin²(w[0]/2), whatever w[1]."""
    q = qm.qubits(2)
    count = qdiff.Cell(0.0)

    def body():
        qdiff.fori_loop(0, 2, lambda i: qm.ry(w[0] * (i + 1) / 3, q[1]))

        def scrub(k):
            qm.rx(w[1], q[0]); qm.reset(q[0])
            return k + 1

        qdiff.while_loop(lambda k: k < 2, scrub, 0)
        count.set(count.value + 1.0)

    qdiff.while_loop(lambda: qm.measure(q[1]) == 0, body)
    return count.value


def cond_in_a_loop(w):
    """A ``cond`` on a per-member value inside a loop on a measurement."""
    q = qm.qubits(2)
    count = qdiff.Cell(0.0)

    def body():
        qdiff.cond(w[1] > 0.0, lambda: qm.ry(w[0], q[1]), lambda: qm.rx(w[0] * w[1], q[1]))
        count.set(count.value + w[1] ** 2)

    qdiff.while_loop(lambda: qm.measure(q[1]) == 0, body)
    return count.value


def postselected_after_a_loop(w):
    q = qm.qubits(2)
    qm.h(q[0]); qm.cx(q[0], q[1]); qm.rx(w[1], q[0])
    count = qdiff.Cell(0.0)

    def body():
        qm.ry(w[0], q[1])
        count.set(count.value + 1.0)

    qdiff.while_loop(lambda: qm.measure(q[1]) == 0, body)
    qm.postselect(q[0], 1)
    return count.value + qm.expval("ZZ", q)


def rotated_per_member(w):
    """A loop of gates whose trip count, ceil(w[1]), differs from member to member:
    <Z> = cos(ceil(w[1]) w[0])."""
    q = qm.qubits(1)

    def body(k):
        qm.ry(w[0], q[0])
        return k + 1.0

    qdiff.while_loop(lambda k: k < w[1], body, 0.0)
    return qm.expval("Z", q)


def walk_steps(theta: float) -> float:
    """E[steps] of `cycle_walk` from its transfer matrix on the surviving sites 0 and 1 (no
    qdiff): amplitudes a[site, coin], the coin ry(θ)·T·H, coin 1 moves +1, coin 0 moves -1,
    sites 2 and 3 absorb. E[steps] = Σ_k P(steps > k) = 1 + Σ_{k≥1} |a_k|²."""
    c, s = np.cos(theta / 2), np.sin(theta / 2)
    coin = np.array([[c, -s], [s, c]]) @ np.diag([1, np.exp(1j * np.pi / 4)]) \
        @ np.array([[1, 1], [1, -1]]) / np.sqrt(2)
    a = np.array([[1.0, 0.0], [0.0, 0.0]], complex)   # site 0, coin 0
    total = 1.0
    for _ in range(100_000):
        b = a @ coin.T                                  # the coin on each site
        a = np.array([[b[1, 0], 0.0], [0.0, b[0, 1]]])  # 1 -> 0 with coin 0, 0 -> 1 with 1
        left = float(np.sum(np.abs(a) ** 2))
        total += left
        if left < 1e-16:
            return total
    raise AssertionError("the walk did not end")


def _central(program, x, h=1e-5):
    x = np.asarray(x, np.float64)
    out = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        out.flat[i] = (float(program(x + e)) - float(program(x - e))) / (2 * h)
    return out


def _batched_equals_the_loop(fn, xs, monkeypatch):
    program = qdiff.program(fn)
    counts = _sweeps(monkeypatch)
    value, grad = qdiff.vmap(qdiff.value_and_grad(program))(xs)
    assert counts == {"sweeps": 1, "member_by_member": 0}   # one batched run and sweep
    # the unbatched value_and_grad, member by member (its value is the adjoint run's: with
    # postselection it divides by the kept mass, where a call divides by 1 - the mass
    # postselected away; they differ by what was cut off, below tol)
    members = [qdiff.value_and_grad(program)(x) for x in xs]
    np.testing.assert_allclose(grad, np.stack([np.asarray(g, np.float64) for _, g in members]),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(value, [float(v) for v, _ in members], rtol=1e-12, atol=1e-12)
    return program, value, grad


def test_repeat_until_one_members_ending_at_different_rounds(monkeypatch):
    # θ = π exits in the first round with probability 1 (up to rounding); θ = 0.7 needs
    # ~200 rounds before its mass going on is below tol, θ = 3 about 10
    theta = np.r_[np.pi, 0.7, 3.0, rng.uniform(0.8, 2.5, 3)]
    program, value, grad = _batched_equals_the_loop(repeat_until_one, theta, monkeypatch)
    np.testing.assert_allclose(value, 1 / np.sin(theta / 2) ** 2, rtol=1e-10)
    np.testing.assert_allclose(grad, -np.cos(theta / 2) / np.sin(theta / 2) ** 3,
                               rtol=1e-9, atol=1e-12)
    for k in (1, 3):
        np.testing.assert_allclose(grad[k], _central(program, theta[k]), rtol=1e-6)


def test_walk_on_a_cycle(monkeypatch):
    theta = np.r_[0.3, 1.0, 2.0, 4.7]
    program, value, grad = _batched_equals_the_loop(cycle_walk, theta, monkeypatch)
    np.testing.assert_allclose(value, [walk_steps(t) for t in theta], rtol=1e-10)
    for k in (0, 2):
        np.testing.assert_allclose(grad[k], _central(program, theta[k]), rtol=1e-6)
        fd = (walk_steps(theta[k] + 1e-5) - walk_steps(theta[k] - 1e-5)) / 2e-5
        np.testing.assert_allclose(grad[k], fd, rtol=1e-6)


def test_a_loop_probability_of_zero_in_the_first_round(monkeypatch):
    # θ = 0: the test reads 0 with probability exactly 1, the loop never runs its body;
    # E[count] = tan²(θ/2)
    theta = np.r_[0.0, rng.uniform(0.3, 1.5, 4)]
    program, value, grad = _batched_equals_the_loop(coin_loop, theta, monkeypatch)
    np.testing.assert_allclose(value, np.tan(theta / 2) ** 2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad, np.tan(theta / 2) / np.cos(theta / 2) ** 2,
                               rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(grad[2], _central(program, theta[2]), rtol=1e-6)


def _rounds_gradient_in_closed_form(program, w, grad, coin, member):
    """E[rounds] = 1/sin²(θ/2) of the coin angle ``w[:, coin]``: its derivative
    -cos(θ/2)/sin³(θ/2), none for the other input; one member against central differences."""
    theta = w[:, coin]
    np.testing.assert_allclose(grad[:, coin], -np.cos(theta / 2) / np.sin(theta / 2) ** 3,
                               rtol=1e-9)
    np.testing.assert_allclose(grad[:, 1 - coin], 0.0, atol=1e-9)
    np.testing.assert_allclose(grad[member], _central(program, w[member]), rtol=1e-6,
                               atol=1e-6)


def test_merged_branches_in_a_loop(monkeypatch):
    w = np.column_stack([rng.uniform(0.5, 2.5, 5), rng.uniform(1.0, 2.5, 5)])
    program, value, grad = _batched_equals_the_loop(merging_rounds, w, monkeypatch)
    _rounds_gradient_in_closed_form(program, w, grad, coin=1, member=1)


def test_nested_loops(monkeypatch):
    w = np.column_stack([rng.uniform(1.2, 2.5, 3), rng.uniform(-2, 2, 3)])
    program, _, grad = _batched_equals_the_loop(nested_loops, w, monkeypatch)
    _rounds_gradient_in_closed_form(program, w, grad, coin=0, member=2)


def test_fori_loop_that_measures(monkeypatch):
    xs = rng.uniform(-2, 2, (5, 2))
    program, _, grad = _batched_equals_the_loop(measured_rounds, xs, monkeypatch)
    np.testing.assert_allclose(grad[3], _central(program, xs[3]), rtol=1e-6, atol=1e-8)


FORMS = [
    ("cond_on_a_member_value_in_a_loop", cond_in_a_loop,
     lambda: np.column_stack([rng.uniform(0.8, 2.5, 5), [-1.0, 0.5, -0.3, 1.2, 0.7]])),
    ("aborted_at_max_iter", lambda t: until_one(t, max_iter=4) * 1.0,
     lambda: rng.uniform(0.3, 2.0, 5)),
    ("postselected_after_a_loop", postselected_after_a_loop,
     lambda: rng.uniform(0.8, 2.5, (5, 2))),
]


@pytest.mark.parametrize("name,fn,inputs", FORMS, ids=[f[0] for f in FORMS])
def test_more_loop_forms(name, fn, inputs, monkeypatch):
    xs = inputs()
    program, _, grad = _batched_equals_the_loop(fn, xs, monkeypatch)
    np.testing.assert_allclose(grad[1], _central(program, xs[1]), rtol=1e-6, atol=1e-6)


def test_loop_of_gates_with_per_member_trip_counts(monkeypatch):
    w = np.column_stack([rng.uniform(-2, 2, 4), [0.5, 1.5, 2.5, 3.2]])
    _, value, grad = _batched_equals_the_loop(rotated_per_member, w, monkeypatch)
    trips = np.ceil(w[:, 1])
    np.testing.assert_allclose(value, np.cos(trips * w[:, 0]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grad[:, 0], -trips * np.sin(trips * w[:, 0]), rtol=1e-12,
                               atol=1e-12)


def test_member_by_member_fallback_keeps_the_members_truncation_warnings(monkeypatch):
    # von Neumann's loop is cut off with a little more than tol still going on: each
    # member's gradient warns, and so does the batch (which goes member by member), once per
    # member (its fallback used to drop them)
    program = qdiff.program(von_neumann)
    theta = rng.uniform(1.2, 2.0, 3)
    counts = _sweeps(monkeypatch)
    with warnings.catch_warnings(record=True) as batched:
        warnings.simplefilter("always")
        got = qdiff.vmap(qdiff.grad(program))(theta)
    with warnings.catch_warnings(record=True) as members:
        warnings.simplefilter("always")
        want = _loop(qdiff.grad(program), theta)
    assert counts == {"sweeps": 1, "member_by_member": 1}
    assert [str(w.message) for w in batched] == [str(w.message) for w in members]
    assert any(issubclass(w.category, qm.TruncationWarning) for w in members)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_loop_that_cannot_end_is_the_members_error(monkeypatch):
    def stuck(theta):
        q = qm.qubits(1)
        qm.ry(theta * 0.0, q[0])
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.rz(theta, q[0]))
        return qm.expval("Z", q)

    counts = _sweeps(monkeypatch)
    with pytest.raises(qm.NonTerminatingLoopError):
        qdiff.vmap(qdiff.grad(qdiff.program(stuck)))(np.array([0.5, 1.0]))
    assert counts == {"sweeps": 1, "member_by_member": 1}


def test_a_nan_angle_in_a_batch_is_the_members_error(monkeypatch):
    program = qdiff.program(repeat_until_one)
    counts = _sweeps(monkeypatch)
    with pytest.raises(qdiff.QdiffError, match="not finite"):
        qdiff.vmap(qdiff.grad(program))(np.array([0.7, np.nan]))
    assert counts == {"sweeps": 1, "member_by_member": 1}
    with pytest.raises(qdiff.QdiffError, match="not finite"):
        qdiff.vmap(program)(np.array([0.7, np.nan]))
