"""Certified remainders of exact-mode values and adjoint derivatives (loops on measurements).

Oracles: the closed forms of the loops in `quantum_programs_lib` and of the repeat-until-success
case study, and runs converged far below the bound (tol = 1e-15) where no closed form exists.
Each bound must cover the actual error, shrink with the tolerance, and stay within a small
factor of the error for memoryless loops.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from quantum_programs_lib import coin_loop, until_one, von_neumann

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError
from qdiff.quantum.certificate.loop_memory import memory_of
from qdiff.quantum.lang.fusion import fuse_gates

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "case_studies"))
import repeat_until_success as rus  # noqa: E402

THETA = 0.7


def _rounds(program):
    return lambda theta: program(theta) * 1.0


def _loop_of(f, *args):
    return next(e for e in qdiff.trace(f, *args).eqns if e.primitive.name == "while")


def state_dependent(theta, phi):
    """Exits with probability sin²(θ/2) or sin²((θ+φ)/2), as the control qubit says: the
    loop remembers the control's state (each failure updates it), so it is not memoryless."""
    q = qm.qubits(2)
    qm.h(q[1])
    count = qdiff.Cell(0)

    def body():
        qm.ry(theta, q[0])
        qm.cry(phi, q[1], q[0])
        count.set(count.value + 1)

    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    return count.value * 1.0 + qm.expval("ZZ", q)


FLOOR = min(np.sin(THETA / 2) ** 2, np.sin((THETA + 0.9) / 2) ** 2)


@pytest.mark.parametrize("tol", [1e-3, 1e-6, 1e-9])
def test_until_one_bounds_cover_the_closed_form_and_are_tight(tol):
    s, c = np.sin(THETA / 2), np.cos(THETA / 2)
    value, derivative = 1 / s ** 2, -c / s ** 3
    run = qm.run(until_one, THETA, tol=tol)
    g = qm.gradient(_rounds(until_one), THETA, tol=tol)
    assert run.remainder_reason is None and g.remainder_reason is None
    assert g.exit_probability == pytest.approx(s ** 2, rel=1e-9)
    value_error, grad_error = abs(run.values - value), abs(float(g.grad) - derivative)
    assert value_error <= run.remainder_bound <= 2 * value_error + 1e-9
    assert abs(float(g.value) - value) <= g.value_remainder_bound
    assert grad_error <= g.remainder_bound <= 10 * grad_error
    assert g.remainder_bound < 1e5 * tol  # it shrinks with the tolerance


@pytest.mark.parametrize("f, derivative", [
    (coin_loop, 2 * np.tan(THETA / 2) / np.cos(THETA / 2) ** 2 / 2),  # d tan²(θ/2)
    (von_neumann, 0.0),  # a fair coin whatever θ
])
def test_memoryless_loops_are_certified(f, derivative):
    for tol in (1e-4, 1e-8):
        g = qm.gradient(_rounds(f), THETA, tol=tol)
        assert g.remainder_reason is None
        assert abs(float(g.grad) - derivative) <= g.remainder_bound
    assert g.remainder_bound < 1e-4


def test_repeat_until_success_loss_is_certified():
    program = qdiff.trace(rus.loss_terms, 1.2)
    z, _ = (float(v) for v in qm.run(program, 1.2).values)
    weights = (2 * (z - rus.TARGET_Z), rus.RUNTIME_WEIGHT)
    _, _, dz, drounds = rus.closed_form(1.2)
    exact = weights[0] * dz + weights[1] * drounds
    for tol in (1e-4, 1e-8):
        g = qm.gradient(program, 1.2, cotangent=weights, tol=tol)
        assert g.remainder_reason is None
        assert abs(float(g.grad) - exact) <= g.remainder_bound
    assert g.remainder_bound < 1e-5


def test_a_loop_with_memory_needs_a_promised_exit_probability():
    coarse = qm.gradient(state_dependent, THETA, 0.9, argnums=(0, 1), tol=1e-4)
    assert np.isinf(coarse.remainder_bound[0]) and "not memoryless" in coarse.remainder_reason
    assert "wire 1" in coarse.remainder_reason
    converged = qm.gradient(state_dependent, THETA, 0.9, argnums=(0, 1), tol=1e-15)
    for tol in (1e-4, 1e-7):
        g = qm.gradient(state_dependent, THETA, 0.9, argnums=(0, 1), tol=tol,
                        exit_probability=FLOOR)
        assert g.remainder_reason is None and g.exit_probability == FLOOR
        for k in range(2):
            assert abs(float(g.grad[k]) - float(converged.grad[k])) <= g.remainder_bound[k]
        run = qm.run(state_dependent, THETA, 0.9, tol=tol, exit_probability=FLOOR)
        assert abs(run.values - float(converged.value)) <= run.remainder_bound
    assert max(g.remainder_bound) < 1e-2


def test_remainder_tol_is_met_or_refused():
    s = np.sin(THETA / 2)
    g = qm.gradient(_rounds(until_one), THETA, tol=1e-3, remainder_tol=1e-8)
    assert abs(float(g.grad) + np.cos(THETA / 2) / s ** 3) <= g.remainder_bound <= 1e-8
    run = qm.run(until_one, THETA, tol=1e-3, remainder_tol=1e-8)
    assert abs(run.values - 1 / s ** 2) <= run.remainder_bound <= 1e-8
    with pytest.raises(QdiffError, match="cannot be certified: the loop is not memoryless"):
        qm.gradient(state_dependent, THETA, 0.9, remainder_tol=1e-6)


def test_a_broken_promise_is_an_error():
    with pytest.raises(QdiffError, match="below the promised exit_probability=0.5"):
        qm.run(state_dependent, THETA, 0.9, exit_probability=0.5)
    with pytest.raises(QdiffError, match="below the promised"):
        qm.gradient(_rounds(until_one), THETA, exit_probability=0.5)


def _nested(theta):
    q = qm.qubits(1)

    def outer(i):
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.ry(theta, q[0]))

    qdiff.fori_loop(0, 2, outer)
    return qm.expval("Z", q)


def _varying_angle(theta):
    # memoryless (the coin q0 is re-prepared), but q1 turns by a different angle each round
    q = qm.qubits(2)
    count = qdiff.Cell(1.0)

    def body():
        qm.reset(q[0])
        qm.ry(theta, q[0])
        qm.ry(theta * count.value, q[1])
        count.set(count.value + 1.0)

    qm.ry(theta, q[0])
    qdiff.while_loop(lambda: qm.measure(q[0]) == 1, body)
    return qm.expval("IZ", q)


def _log_of_rounds(theta):
    return qnp.log(until_one(theta) * 1.0 + 1.0)


def _rounds_times_theta(theta):
    return until_one(theta) * theta  # d/dθ has a classical term that grows with the rounds


def _angle_from_rounds(theta):
    q = qm.qubits(2)
    count = qdiff.Cell(0.0)

    def body():
        qm.ry(theta, q[0])
        count.set(count.value + 1.0)

    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    qm.ry(theta * count.value, q[1])  # its sensitivity grows with the rounds too
    return qm.expval("IZ", q)


def _long_bounded_count(theta):
    # a bounded loop's counter grows with ITS rounds, not with the unbounded loop's
    q = qm.qubits(1)
    tries = qdiff.Cell(0)

    def retry():
        qm.ry(theta, q[0])
        tries.set(tries.value + 1)

    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, retry, max_iter=20_000)
    # the unbounded loop's wide turn ends it in a few rounds: each of the first loop's exits
    # (its own count) is a path of its own through it
    qdiff.while_loop(lambda: qm.measure(q[0]) == 1, lambda: qm.ry(theta + 2.0, q[0]))
    return tries.value * 1.0


def _sampled_rounds(theta):
    q = qm.qubits(1)
    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.ry(theta, q[0]))
    return qm.sample([q[0]], shots=4) * 1.0


@pytest.mark.parametrize("f, reason, values_too", [
    (_nested, "inside a loop or a branch", True),
    (_varying_angle, "changes from round to round", False),
    (_angle_from_rounds, "changes from round to round or from path to path", False),
    (_log_of_rounds, "no growth rule for 'log'", True),
    (_rounds_times_theta, "by classical code too", False),
    (_sampled_rounds, "draws samples", True),
    (_long_bounded_count, "a bounded loop of more than 10000 rounds", True),
])
def test_what_the_certificate_does_not_cover_is_infinite_with_the_reason(f, reason,
                                                                        values_too):
    # angles and classical paths only matter to derivatives: the values stay certified
    run = qm.run(f, THETA, tol=1e-6, seed=1)
    assert np.all(np.isinf(run.remainder_bound)) == values_too
    if values_too:
        assert reason in run.remainder_reason
    if f is _sampled_rounds:
        return  # draws have no derivative
    g = qm.gradient(f, THETA, tol=1e-6)
    assert np.isinf(g.remainder_bound) and reason in g.remainder_reason
    assert np.isinf(g.value_remainder_bound) == values_too


def test_nothing_left_out_is_certified_exactly():
    def hybrid(w):
        q = qm.qubits(2)
        qm.ry(qnp.tanh(w[0]), q[0])
        qm.cx(q[0], q[1])
        bit = qm.measure(q[0])
        qm.rx(w[1] * bit, q[1])
        return qnp.log(qm.expval("ZZ", q) + 2.0)

    g = qm.gradient(hybrid, np.array([0.3, 0.8]))
    assert g.remainder_reason is None and np.all(g.remainder_bound == 0)
    assert qm.run(hybrid, np.array([0.3, 0.8])).remainder_bound == 0


def test_pruned_branches_are_bounded():
    # tol = 1e-2 prunes branches below 1e-4: the outcome 1 (probability sin²(θ/2) ≈ 9e-6)
    def rare(theta):
        q = qm.qubits(2)
        qm.ry(theta, q[0])
        qm.measure(q[0])
        qm.rx(theta, q[1])
        return qm.expval("ZI", q) + 2 * qm.expval("IZ", q)

    theta = 0.006
    g = qm.gradient(rare, theta, tol=1e-2)
    exact = qm.gradient(rare, theta, tol=1e-15)
    assert g.dropped_mass == pytest.approx(np.sin(theta / 2) ** 2, rel=1e-6)
    error = abs(float(g.grad) - float(exact.grad))
    assert error > 1e-4  # the pruned branch's derivative is ∝ sqrt(its mass), not its mass
    assert error <= g.remainder_bound < 0.1


def test_loop_memory_light_cone():
    assert memory_of(_loop_of(rus.rus_rounds_and_z, 1.2)) is None  # read on its control only
    assert memory_of(_loop_of(von_neumann, THETA)) is None  # tests measured bits, reset each round

    def kicked(theta):
        q = qm.qubits(2)
        qm.h(q[1])
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0,
                         lambda: (qm.rz(theta, q[1]), qm.cz(q[1], q[0]), qm.h(q[0])))
        return qm.expval("ZI", q)

    assert "wire 1" in memory_of(_loop_of(kicked, THETA))  # phase kickback: q1 matters

    def diagonal_only(theta):
        q = qm.qubits(2)
        qm.h(q[1])
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0,
                         lambda: (qm.ry(theta, q[0]), qm.cz(q[1], q[0])))
        return qm.expval("ZI", q)

    assert memory_of(_loop_of(diagonal_only, THETA)) is None  # cz leaves Z statistics alone

    def do_while(after_measure=None):
        def program(theta):
            q = qm.qubits(1)
            last = qdiff.Cell(0)
            rounds = qdiff.Cell(0)

            def body():
                qm.ry(theta, q[0])
                last.set(qnp.asarray(qm.measure(q[0])))
                rounds.set(rounds.value + 1)
                if after_measure is not None:
                    after_measure(q[0], rounds.value)

            qdiff.while_loop(lambda: last.value == 0, body)
            return qm.expval("Z", q)

        return program

    # going on means the body measured 0 last, so the round starts in |0>
    remembers_a_bit = do_while()
    assert memory_of(_loop_of(remembers_a_bit, THETA)) is None
    g = qm.gradient(remembers_a_bit, THETA, tol=1e-6)
    exact = qm.gradient(remembers_a_bit, THETA, tol=1e-15)
    assert g.remainder_reason is None
    assert abs(float(g.grad) - float(exact.grad)) <= g.remainder_bound < 1e-3
    # the same one-qubit gate after the measurement every round leaves a known state ...
    turned_after = do_while(lambda wire, rounds: qm.rx(0.8, wire))
    assert memory_of(_loop_of(turned_after, THETA)) is None
    g = qm.gradient(turned_after, THETA, tol=1e-9)
    exact = qm.gradient(turned_after, THETA, tol=1e-15)
    assert g.remainder_reason is None
    assert abs(float(g.grad) - float(exact.grad)) <= g.remainder_bound < 1e-3
    # ... a gate whose angle changes with the rounds, or that entangles, does not
    by_round = do_while(lambda wire, rounds: qm.ry(0.1 * rounds, wire))
    assert "wire 0" in memory_of(_loop_of(by_round, THETA))

    def entangled(theta):
        q = qm.qubits(2)
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0,
                         lambda: (qm.ry(theta, q[1]), qm.cx(q[1], q[0])))
        return qm.expval("ZI", q)

    # a body whose gates are fused is read gate by gate: the cx still carries wire 1
    fused = fuse_gates(qdiff.trace(entangled, THETA), max_qubits=2)
    loop = next(e for e in fused.eqns if e.primitive.name == "while")
    assert [e.primitive.name for e in loop.params["body"].eqns] == ["fused_gate"]
    assert "wire 1" in memory_of(loop)


def _random_memoryless_loop(rng):
    """A loop whose coin q0 is re-prepared every round (memoryless), entangled with q1 and
    q2 that carry over, with random angles that are multiples of θ and φ."""
    a, b, c, d = rng.uniform(0.4, 1.6, 4)
    going_on = int(rng.integers(2))
    weight = rng.uniform(-1, 1)

    def program(theta, phi):
        q = qm.qubits(3)
        qm.ry(a * theta, q[1])
        qm.rx(phi, q[2])
        rounds = qdiff.Cell(0)

        def body():
            qm.reset(q[0])
            qm.ry(b * theta + 0.3, q[0])
            qm.crx(c * phi, q[0], q[1])
            qm.cry(d * theta, q[1], q[2])
            rounds.set(rounds.value + 1)

        body()
        qdiff.while_loop(lambda: qm.measure(q[0]) == going_on, body)
        return weight * rounds.value + qm.expval("IZZ", q) - 0.5 * qm.expval("XXI", q)

    return program


@pytest.mark.parametrize("seed", range(4))
def test_random_memoryless_loops_are_covered(seed):
    program = _random_memoryless_loop(np.random.default_rng(seed))
    args = (0.8, -0.6)
    assert memory_of(_loop_of(program, *args)) is None
    converged = qm.gradient(program, *args, argnums=(0, 1), tol=1e-15)
    for tol in (1e-3, 1e-6):
        g = qm.gradient(program, *args, argnums=(0, 1), tol=tol)
        assert g.remainder_reason is None
        assert abs(float(g.value) - float(converged.value)) <= g.value_remainder_bound
        for k in range(2):
            error = abs(float(g.grad[k]) - float(converged.grad[k]))
            assert error <= g.remainder_bound[k]
