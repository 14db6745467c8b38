"""Parameter shift: shift rules, the shifted-program transformation, exact and sampled
gradients, checked against the adjoint method, central differences and closed forms."""

import multiprocessing
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pytest
from quantum_programs_lib import coin_loop, postselected, until_one, von_neumann

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError
from qdiff.ir.verifier import verify
from qdiff.loops.occurrences import as_distribution, geometric, zeta
from qdiff.quantum.gradients.gradient import gradient, jacobian
from qdiff.quantum.gradients.parameter_shift import instrument
from qdiff.quantum.lang.gates import GATE_TABLE, GateSpec, gate_spec
from qdiff.quantum.lang.shift_rules import frequencies_of, gate_shift_rule, shift_rule
from qdiff.quantum.lang.sites import find_sites, occurrence_count

PARAMETRIC = sorted(n for n, s in GATE_TABLE.items() if isinstance(s, GateSpec) and s.num_params)


# ------------------------------------------------------------------------------ shift rules
@pytest.mark.parametrize("omega", [(1.0,), (0.5, 1.0), (1.0, 2.0, 3.0), (0.7, 1.4, 2.1, 2.8),
                                   (1.0, np.sqrt(2)), (0.3, 1.0, 2.5)])
def test_shift_rule_differentiates_every_trigonometric_polynomial_of_its_frequencies(omega):
    rng = np.random.default_rng(len(omega))
    a, b, c0 = rng.normal(size=len(omega)), rng.normal(size=len(omega)), rng.normal()

    def f(t):
        return c0 + sum(ai * np.cos(w * t) + bi * np.sin(w * t) for ai, bi, w in zip(a, b, omega))

    def df(t):
        return sum(-ai * w * np.sin(w * t) + bi * w * np.cos(w * t)
                   for ai, bi, w in zip(a, b, omega))

    rule = shift_rule(tuple(omega))
    assert rule.num_evaluations == 2 * len(omega)
    for t in (-1.3, 0.0, 0.4, 2.2):
        assert sum(coef * f(t + s) for s, coef in rule.terms()) == pytest.approx(df(t), abs=1e-9)


def test_shift_rules_of_the_literature():
    two = shift_rule((1.0,))
    assert two.shifts == pytest.approx((np.pi / 2,)) and two.coefficients == pytest.approx((0.5,))
    four = shift_rule((0.5, 1.0))
    assert four.shifts == pytest.approx((np.pi / 2, 3 * np.pi / 2))
    assert four.coefficients == pytest.approx(((np.sqrt(2) + 1) / (4 * np.sqrt(2)),
                                               -(np.sqrt(2) - 1) / (4 * np.sqrt(2))))
    assert frequencies_of((-1.0, 0.0)) == (1.0,)
    with pytest.raises(QdiffError, match="distinct positive"):
        shift_rule((1.0, 1.0))


@pytest.mark.parametrize("name", PARAMETRIC)
def test_gate_shift_rules_differentiate_the_gates(name):
    # f(θ) = <ψ|U(θ)^† O U(θ)|ψ> with a random state and Hermitian O, for each parameter
    spec = gate_spec(name)
    dim = 2 ** spec.num_qubits
    rng = np.random.default_rng(7)
    psi = rng.normal(size=dim) + 1j * rng.normal(size=dim)
    psi /= np.linalg.norm(psi)
    o = rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim))
    o = o + o.conj().T
    params = rng.uniform(-2, 2, spec.num_params)
    for slot in range(spec.num_params):
        def f(t, slot=slot):
            p = params.copy()
            p[slot] = t
            phi = spec.matrix(*p) @ psi
            return float(np.real(np.vdot(phi, o @ phi)))

        rule = gate_shift_rule(spec, slot)
        t, h = params[slot], 1e-6
        exact = (f(t + h) - f(t - h)) / (2 * h)
        assert sum(c * f(t + s) for s, c in rule.terms()) == pytest.approx(exact, abs=1e-6)


# --------------------------------------------------------------------- the transformation
def _ladder(w):
    q = qm.qubits(2)
    qm.h(q[0])

    def layer(i):
        qm.ry(w[0] * (i + 1), q[0])
        qm.cx(q[0], q[1])
        qm.rx(w[1], q[1])

    qdiff.fori_loop(0, 3, layer)
    qm.rz(0.3, q[1])  # a constant angle: no site
    return qm.expval("ZX", q)


def test_sites_are_the_gate_angles_that_depend_on_the_inputs():
    program = qdiff.trace(_ladder, np.zeros(2))
    sites = find_sites(program, [True])
    assert [s.spec.name for s in sites] == ["ry", "rx"]
    assert occurrence_count(program, sites[0], [3]) == 3
    assert find_sites(program, [False]) == []

    def carried(t):  # an angle carried by the loop, updated from the input each iteration
        q = qm.qubits(1)
        qdiff.fori_loop(0, 2, lambda i, a: (qm.rx(a, q[0]), a + t)[1], 0.0)
        return qm.expval("Z", q)

    assert len(find_sites(qdiff.trace(carried, 0.1), [True])) == 1


def test_instrumented_program_shifts_exactly_one_occurrence():
    w = np.array([0.4, -0.7])
    program = qdiff.trace(_ladder, w)
    site = find_sites(program, [True])[0]
    shifted = instrument(program, site).program
    verify(shifted)

    def unrolled(w, k, s):  # the same program written out, occurrence k of ry shifted by s
        q = qm.qubits(2)
        qm.h(q[0])
        for i in range(3):
            qm.ry(w[0] * (i + 1) + qnp.where(k == i, s, 0.0), q[0])
            qm.cx(q[0], q[1])
            qm.rx(w[1], q[1])
        qm.rz(0.3, q[1])
        return qm.expval("ZX", q)

    for k in range(3):
        value, count = qm.run(shifted, w, k, 0.9).values
        assert count == 3
        assert value == pytest.approx(float(qm.run(unrolled, w, k, 0.9).values), abs=1e-12)
    # an occurrence that never happens leaves the program as it was
    assert qm.run(shifted, w, 7, 0.9).values[0] == pytest.approx(
        float(qm.run(_ladder, w).values), abs=1e-12)


# --------------------------------------------------------- exact gradients against oracles
def _every_gate(w):
    q = qm.qubits(3)
    qm.rx(w[0], q[0]); qm.ry(w[1], q[1]); qm.rz(w[2], q[2]); qm.h(q[2])
    qm.crx(w[3], q[0], q[1]); qm.cry(w[4], q[1], q[2]); qm.crz(w[5], q[2], q[0])
    qm.phase(w[6], q[1]); qm.cphase(w[7], q[0], q[2])
    qm.rxx(w[8], q[0], q[1]); qm.ryy(w[9], q[1], q[2]); qm.rzz(w[10], q[0], q[2])
    qm.rzx(w[11], q[1], q[0]); qm.u(w[12], w[13], w[14], q[1])
    qm.pauli_rot(w[15], "XYZ", [q[0], q[1], q[2]])
    qm.ry(w[0] * w[1], q[2])  # a shared, nonlinear use of two parameters
    return qm.expval([(0.6, "ZZI"), (-1.1, "XIY")], q), qm.probs([q[0], q[1]])


def test_every_parametric_gate_is_covered():
    program = qdiff.trace(_every_gate, np.zeros(16))
    names = {s.spec.name for s in find_sites(program, [True])}
    assert names == set(PARAMETRIC) | {"pauli_rot"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_circuits_shift_adjoint_and_differences_agree(seed):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-2, 2, 16)
    ct = (rng.normal(size=()), rng.normal(size=4))
    shift = gradient(_every_gate, w, cotangent=ct, method="parameter-shift")
    adjoint = gradient(_every_gate, w, cotangent=ct)
    differences = gradient(_every_gate, w, cotangent=ct, method="finite-diff")
    assert np.allclose(shift.grad, adjoint.grad, atol=1e-10)
    assert np.allclose(shift.grad, differences.grad, atol=1e-6)
    # one derivative program per gate angle (17, u has three), two runs each, four for
    # the three controlled rotations
    assert shift.num_derivative_programs == 17
    assert shift.num_evaluations == 2 * 17 + 2 * 3


def test_jacobians_over_many_observables_agree():
    w = np.random.default_rng(5).uniform(-2, 2, 16)
    by_shift = jacobian(_every_gate, w, method="parameter-shift")
    by_adjoint = jacobian(_every_gate, w)
    for a, b in zip(by_shift, by_adjoint):
        assert a.shape == b.shape and np.allclose(a, b, atol=1e-10)
    out, tangent = qdiff.jvp(_every_gate, (w,), (np.ones(16),), method="parameter-shift")
    assert np.allclose(tangent[1], by_adjoint[1].sum(axis=-1), atol=1e-10)


def _hybrid(w, x):
    angles = qnp.tanh(w) * 2.0 + x  # classical pre-processing

    q = qm.qubits(2)

    def layer(i):
        qm.ry(angles[0] * (i + 1), q[0])
        qm.cx(q[0], q[1])
        qm.rx(angles[1] - 0.5 * i, q[1])
        qm.crz(angles[2], q[1], q[0])

    qdiff.fori_loop(0, 3, layer)
    e1, e2 = qm.expval("ZI", q), qm.expval("XY", q)
    return (e1 - 0.3) ** 2 + qnp.sin(e2) * w[0] + x * e1  # classical post-processing


def test_hybrid_loss_by_shift_equals_adjoint():
    w, x = np.array([0.3, -0.8, 1.1]), 0.25
    g_shift = qdiff.grad(_hybrid, argnums=(0, 1), method="parameter-shift")(w, x)
    g_adjoint = qdiff.grad(_hybrid, argnums=(0, 1))(w, x)
    g_diff = qdiff.grad(_hybrid, argnums=(0, 1), method="finite-diff")(w, x)
    for a, b, c in zip(g_shift, g_adjoint, g_diff):
        assert np.allclose(a, b, atol=1e-10) and np.allclose(a, c, atol=1e-6)
    assert np.all(np.abs(g_shift[0]) > 1e-3)


def _cases_and_loops(t):
    q = qm.qubits(2)
    qm.ry(t[0], q[0])
    bit = qm.measure(q[0])
    qdiff.cond(bit == 1, lambda: qm.rx(t[1], q[1]), lambda: qm.ry(t[1] * 2, q[1]))
    count = qdiff.Cell(0)

    def body():
        qm.ry(t[0], q[1])
        qm.crx(t[1], q[1], q[0])
        count.set(count.value + 1)

    qdiff.while_loop(lambda: qm.measure(q[1]) == 0, body, max_iter=3)
    return qm.expval("ZZ", q) + 0.5 * count.value


def test_cases_and_bounded_loops_follow_zhu_with_few_derivative_programs():
    t = np.array([0.9, 0.4])
    shift = gradient(_cases_and_loops, t, method="parameter-shift")
    assert np.allclose(shift.grad, gradient(_cases_and_loops, t).grad, atol=1e-10)
    assert np.allclose(shift.grad, gradient(_cases_and_loops, t, method="finite-diff").grad,
                       atol=1e-6)
    # occurrence count of the parameters: ry(t0) once plus 3 per loop site; both branches
    # of the case once each: 1 + 1 + 1 + 3 + 3
    program = qdiff.trace(_cases_and_loops, t)
    sites = find_sites(program, [True])
    bound = sum(occurrence_count(program, s, [3] * ("body" in s.describe())) for s in sites)
    assert bound == 9
    assert shift.num_derivative_programs <= bound
    for site in sites:  # the counter threads through cond branches and the while loop
        verify(instrument(program, site).program)


def test_postselection_uses_the_quotient_rule():
    result = gradient(postselected, 0.512, method="parameter-shift")
    assert result.value == pytest.approx(-np.cos(0.512), abs=1e-12)
    assert result.grad == pytest.approx(np.sin(0.512), abs=1e-12)
    assert result.postselection_probability == pytest.approx(0.5)


def test_unbounded_loops_exact_closed_forms():
    assert gradient(coin_loop, 0.7, method="parameter-shift").grad == pytest.approx(
        0.413667, abs=1e-6)
    # every occurrence is one shifted program (each a run of the whole loop): a looser
    # tolerance keeps the series short (1e-5: relative error 4e-4, 93 programs)
    result = gradient(until_one, 0.7, method="parameter-shift", tol=1e-5)
    exact = -np.cos(0.35) / np.sin(0.35) ** 3
    assert exact == pytest.approx(-23.2994, abs=1e-4)
    assert result.grad == pytest.approx(exact, rel=1e-3)
    assert result.num_derivative_programs > 50
    fair = gradient(von_neumann, 2.0, method="parameter-shift", tol=1e-7)  # value off by 9e-8
    assert abs(fair.grad) < 1e-6 and fair.value == pytest.approx(0.5, abs=1e-6)


def test_shifted_programs_run_on_a_process_pool():
    w = np.array([0.3, -0.8, 1.1])
    # spawned workers: forking a process that runs threads (JAX's, in this suite) can deadlock
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        pooled = gradient(_hybrid, w, 0.25, method="parameter-shift", executor=pool)
    assert np.allclose(pooled.grad, gradient(_hybrid, w, 0.25).grad, atol=1e-10)


# ------------------------------------------------------------------------- refused programs
def test_programs_shift_rules_cannot_differentiate_are_refused():
    def feedback(t):
        q = qm.qubits(1)
        qm.ry(t, q[0])
        qm.rx(qm.expval("Z", q), q[0])
        return qm.expval("Z", q)

    with pytest.raises(QdiffError, match="feeds a quantum operation"):
        gradient(feedback, 0.3, method="parameter-shift")

    def nonlinear_after_measuring(t):
        q = qm.qubits(2)
        qm.ry(t, q[0])
        qm.measure(q[0])
        qm.ry(t, q[1])
        return qm.expval("ZI", q) ** 2

    with pytest.raises(QdiffError, match="not affine"):
        gradient(nonlinear_after_measuring, 0.3, method="parameter-shift")

    def outcome_dependent_angle(t):
        q = qm.qubits(2)
        qm.ry(t, q[0])
        bit = qnp.asarray(qm.measure(q[0]))
        qm.ry(t * (1.0 + bit), q[1])
        return qm.expval("IZ", q)

    def state_read(t):
        q = qm.qubits(1)
        qm.ry(t, q[0])
        return qnp.real(qm.state(q)[0])

    with pytest.raises(QdiffError, match="reads the state"):
        gradient(state_read, 0.3, method="parameter-shift")

    with pytest.raises(QdiffError, match="different angles"):
        gradient(outcome_dependent_angle, 0.3, method="parameter-shift")
    # sample mode weights each path by its own angle's derivative
    sampled = gradient(outcome_dependent_angle, 0.3, method="parameter-shift", mode="sample",
                       shots=400, seed=2)
    exact = gradient(outcome_dependent_angle, 0.3).grad
    assert abs(sampled.grad - exact) < 4 * sampled.grad_stderr
    with pytest.raises(QdiffError, match="occurrences="):
        gradient(coin_loop, 0.3, occurrences="zeta")
    with pytest.raises(QdiffError, match="postselection"):
        gradient(postselected, 0.3, method="parameter-shift", mode="sample", shots=10)


# ---------------------------------------------------------------------------- sample mode
def test_occurrence_distributions_are_normalized():
    for p in (zeta(0.5), zeta(2.0), geometric(0.9), as_distribution(None)):
        head = sum(p.pmf(i) for i in range(1, 200_001))
        # the tail beyond N: ≤ ∫_N^∞ x^-(1+δ) dx / ζ for zeta, q^N for geometric
        if p.kind == "zeta":
            tail = 200_000 ** -p.parameter / p.parameter / p.pmf(1)
        else:
            tail = p.parameter ** 200_000
        assert head <= 1 + 1e-12 and head + tail >= 1 - 1e-12
    rng = np.random.default_rng(0)
    draws = np.array([zeta(1.0).sample(rng) for _ in range(20_000)])
    assert np.mean(draws == 1) == pytest.approx(zeta(1.0).pmf(1), abs=0.01)
    with pytest.raises(QdiffError):
        geometric(1.0)


def test_randomized_estimator_is_unbiased_for_unbounded_loops():
    exact = 0.4136670
    small = gradient(coin_loop, 0.7, method="parameter-shift", mode="sample", shots=300,
                     seed=11)
    large = gradient(coin_loop, 0.7, method="parameter-shift", mode="sample", shots=1200,
                     seed=12)
    for result in (small, large):
        assert abs(result.grad - exact) < 4 * result.grad_stderr
        assert result.value == pytest.approx(np.tan(0.35) ** 2, abs=4 * result.value_stderr)
    # four times the samples, half the standard error
    assert 0.35 < large.grad_stderr / small.grad_stderr < 0.7
    rus = gradient(until_one, 0.7, method="parameter-shift", mode="sample", shots=400, seed=5,
                   occurrences=("geometric", 0.9))
    assert abs(rus.grad - (-23.29935)) < 4 * rus.grad_stderr


def test_sampled_shift_without_loops_estimates_from_shots_and_with_bounded_loops_unbiased():
    w = np.array([0.3, -0.8, 1.1])

    def straight(w):
        q = qm.qubits(2)
        qm.ry(qnp.tanh(w[0]), q[0]); qm.crx(w[1], q[0], q[1]); qm.rz(w[2] * w[0], q[1])
        qm.h(q[1])
        return (qm.expval("ZX", q) - 0.2) ** 2

    # no measurement: each shifted program's readouts are estimated from the shots
    sampled = gradient(straight, w, method="parameter-shift", mode="sample", shots=2000,
                       seed=0)
    assert np.all(np.abs(sampled.grad - gradient(straight, w).grad)
                  < 4 * sampled.grad_stderr)
    looped = gradient(_hybrid, w, 0.25, method="parameter-shift", mode="sample", shots=200,
                      seed=0)
    exact = gradient(_hybrid, w, 0.25).grad
    assert np.all(np.abs(looped.grad - exact) < 4 * looped.grad_stderr)


def test_readouts_nothing_differentiates_are_skipped():
    def partly_read(w):
        q = qm.qubits(2)
        qm.ry(w[0], q[0])
        qm.cx(q[0], q[1])
        unused = qm.probs(q)  # read, never used
        qm.rx(w[1], q[1])
        del unused
        return qm.expval("ZZ", q) ** 2

    w = np.array([0.3, 0.4])
    assert np.allclose(qdiff.grad(partly_read, method="parameter-shift")(w),
                       qdiff.grad(partly_read)(w), atol=1e-12)
