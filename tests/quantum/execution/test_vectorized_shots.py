"""Sample mode on a batch of shots (`shot_batch`): means within 4 standard errors of the
exact values over several seeds, agreement with the trajectory runner, and the same
outputs' shapes and mass fields."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.ir.passes.unpack_scalars import unpack_scalars
from qdiff.quantum.execution.options import RunOptions
from qdiff.quantum.execution.run import sample_trajectories
from qdiff.quantum.execution.runner import NonTerminatingLoopError
from qdiff.quantum.execution.shot_batch import batch_covers, sample_batched
from qdiff.quantum.gradients.batched_shift import batched_parameter_shift
from qdiff.quantum.gradients.shift_gradient import sampled_parameter_shift
from tests.quantum.quantum_programs_lib import coin_loop, postselected, until_one, von_neumann

SEEDS = (0, 1, 2)
CASE_STUDIES = Path(__file__).resolve().parents[3] / "case_studies"


def _case_study(name):
    spec = importlib.util.spec_from_file_location(f"study_{name}", CASE_STUDIES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(CASE_STUDIES))  # the studies import their `common`
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(CASE_STUDIES))
    return module


def _batched(f, x, **settings):
    program = unpack_scalars(qdiff.trace(f, x))
    assert batch_covers(program)
    return sample_batched(program, [np.asarray(x)], RunOptions(mode="sample", **settings))


def _within(result, exact, sigmas=4.0):
    values = np.atleast_1d(np.asarray(result.values, np.float64))
    errors = np.atleast_1d(np.asarray(result.stderr, np.float64))
    assert np.all(np.abs(values - np.asarray(exact)) <= sigmas * errors + 1e-9), (
        values, exact, errors)


def measured_rotation(theta):
    """ry(θ) on q0, measure it, X on q1 when it read 1, then ry(θ/2) on q1 when it read 0:
    <Z q1> = sin²(θ/2)(-1) + cos²(θ/2) cos(θ/2)."""
    q = qm.qubits(2)
    qm.ry(theta, q[0])
    bit = qm.measure(q[0])
    qdiff.cond(bit == 1, lambda: qm.x(q[1]), lambda: qm.ry(theta / 2, q[1]))
    return qm.expval("IZ", q)


@pytest.mark.parametrize("seed", SEEDS)
def test_repeat_until_success_mean_within_four_standard_errors(seed):
    rus = _case_study("repeat_until_success")
    theta = 1.1
    z, rounds, _, _ = rus.closed_form(theta)
    result = _batched(rus.rus_rounds_and_z, theta, shots=4000, seed=seed)
    _within(result, [rounds, z])


@pytest.mark.parametrize("seed", SEEDS)
def test_coin_loop_mean_within_four_standard_errors(seed):
    theta = 1.3
    _within(_batched(coin_loop, theta, shots=4000, seed=seed), np.tan(theta / 2) ** 2)


@pytest.mark.parametrize("seed", SEEDS)
def test_mid_circuit_measurement_with_cond_within_four_standard_errors(seed):
    theta = 0.9
    s, c = np.sin(theta / 2) ** 2, np.cos(theta / 2) ** 2
    _within(_batched(measured_rotation, theta, shots=4000, seed=seed),
            -s + c * np.cos(theta / 2))


@pytest.mark.parametrize("seed", SEEDS)
def test_von_neumann_extractor_is_fair(seed):
    _within(_batched(von_neumann, 0.7, shots=4000, seed=seed), 0.5)


@pytest.mark.parametrize("seed", SEEDS)
def test_six_qubit_walk_mean_within_four_standard_errors(seed):
    walk = _case_study("quantum_walk")
    t = np.array([0.3, 1.2])
    p = float(qm.run(walk.success_probability, t).values)
    _within(_batched(walk.objective, t, shots=2000, seed=seed), walk.j_from_p(p))


def test_batch_and_trajectories_agree_statistically():
    theta = 1.3
    program = unpack_scalars(qdiff.trace(coin_loop, theta))
    options = RunOptions(mode="sample", shots=400, seed=5)
    one_by_one = sample_trajectories(program, [np.asarray(theta)], options)
    batch = sample_batched(program, [np.asarray(theta)], options.replace(shots=4000))
    spread = np.hypot(one_by_one.stderr, batch.stderr)
    assert abs(one_by_one.values - batch.values) <= 4 * spread


def test_qm_run_sample_mode_takes_the_batch():
    # the batch reads gates once per shot, unfused: gate_passes counts shots × gates
    result = qm.run(coin_loop, 1.3, mode="sample", shots=1000, seed=3)
    batch = _batched(coin_loop, 1.3, shots=1000, seed=3)
    assert result.values == batch.values and result.gate_passes == batch.gate_passes


def test_outputs_shapes_and_trajectories_as_the_trajectory_runner():
    def f(theta):
        q = qm.qubits(2)
        qm.ry(theta, q[0])
        bit = qm.measure(q[0])
        qdiff.cond(bit == 1, lambda: qm.h(q[1]), lambda: None)
        return qm.probs(q), qm.expval("ZZ", q), qnp.asarray(bit) * 1.0

    program = unpack_scalars(qdiff.trace(f, 0.8))
    options = RunOptions(mode="sample", shots=300, seed=2)
    batch = sample_batched(program, [np.asarray(0.8)], options)
    one_by_one = sample_trajectories(program, [np.asarray(0.8)], options)
    for a, b in zip(batch.values, one_by_one.values):
        assert np.shape(a) == np.shape(b)
    for a, b in zip(batch.stderr, one_by_one.stderr):
        assert np.shape(a) == np.shape(b)
    assert len(batch.trajectories) == batch.shots == 300
    assert [np.shape(v) for v in batch.trajectories[7]] == [(4,), (), ()]
    assert np.allclose(np.sum(batch.values[0]), 1.0)
    exact = qm.run(f, 0.8).values
    for value, error, truth in zip(batch.values, batch.stderr, exact):
        assert np.all(np.abs(value - truth) <= 4 * error + 1e-9)


def test_aborted_mass_as_the_trajectory_runner_books_it():
    theta, max_iter = 0.9, 2
    p = np.sin(theta / 2) ** 2
    program = unpack_scalars(qdiff.trace(lambda t: until_one(t, max_iter), theta))
    options = RunOptions(mode="sample", shots=4000, seed=1)
    batch = sample_batched(program, [np.asarray(theta)], options)
    aborted = (1 - p) ** max_iter
    assert abs(batch.aborted_mass - aborted) <= 4 * np.sqrt(aborted * (1 - aborted) / 4000)
    assert batch.shots + round(batch.aborted_mass * 4000) == 4000
    assert batch.postselection_probability == batch.shots / 4000
    assert batch.unterminated_mass == 0.0
    # the accepted shots' count is conditioned on the loop exiting
    exits = np.array([(1 - p) ** (k - 1) * p for k in range(1, max_iter + 1)])
    _within(batch, np.dot(np.arange(1, max_iter + 1), exits) / exits.sum())


def test_loop_cut_off_at_max_loop_iterations_is_unterminated_mass():
    theta = 0.3
    p = np.sin(theta / 2) ** 2
    batch = _batched(until_one, theta, shots=3000, seed=4, max_loop_iterations=3)
    # the test runs 4 times before the cut, the first on |0> (it goes on for sure)
    cut = (1 - p) ** 3
    assert abs(batch.unterminated_mass - cut) <= 4 * np.sqrt(cut * (1 - cut) / 3000)
    assert batch.aborted_mass == 0.0
    program = unpack_scalars(qdiff.trace(until_one, theta))
    one_by_one = sample_trajectories(program, [np.asarray(theta)], RunOptions(
        mode="sample", shots=3000, seed=4, max_loop_iterations=3))
    assert abs(one_by_one.unterminated_mass - cut) <= 4 * np.sqrt(cut * (1 - cut) / 3000)


def test_postselection_rejects_shots_as_the_trajectory_runner():
    x = 0.7
    batch = _batched(postselected, x, shots=4000, seed=6)
    assert abs(batch.postselection_probability - 0.5) <= 4 * np.sqrt(0.25 / 4000)
    _within(batch, -np.cos(x))


def test_loop_that_cannot_exit_is_an_error():
    def stuck(theta):
        q = qm.qubits(1)
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.rz(theta, q[0]))
        return qm.expval("Z", q)

    with pytest.raises(NonTerminatingLoopError, match="exit probability stayed zero"):
        qm.run(stuck, 0.4, mode="sample", shots=10, seed=0)


def test_program_outside_the_batch_falls_back_to_trajectories():
    def draws(theta):
        q = qm.qubits(1)
        qm.ry(theta, q[0])
        qm.measure(q[0])
        return qm.sample(q, shots=3)

    program = unpack_scalars(qdiff.trace(draws, 0.5))
    assert not batch_covers(program)
    result = qm.run(draws, 0.5, mode="sample", shots=20, seed=0)
    assert result.values.shape == (3, 1) and set(np.unique(result.values)) <= {0, 1}
    assert result.shots == 20


def test_chunks_of_shots_give_one_estimate(monkeypatch):
    from qdiff.quantum.execution import shot_batch
    monkeypatch.setattr(shot_batch, "CHUNK_BYTES", 16 * 2 * 64)  # 64 one-qubit shots a chunk
    result = _batched(until_one, 1.3, shots=1000, seed=8)
    assert result.shots == 1000
    _within(result, 1 / np.sin(0.65) ** 2)


# ------------------------------------------------------- the randomized parameter-shift estimator
def _shift_gradient(f, x, cotangent=None, **settings):
    return qm.gradient(f, x, cotangent=cotangent, mode="sample", method="parameter-shift",
                       **settings)


@pytest.mark.parametrize("seed", SEEDS)
def test_batched_shift_gradient_of_rus_within_four_standard_errors(seed):
    rus = _case_study("repeat_until_success")
    theta = 1.1
    _, _, dz, drounds = rus.closed_form(theta)
    program = qdiff.trace(rus.rus_rounds_and_z, theta)
    assert batched_parameter_shift(program, [np.asarray(theta)], [np.ones(()), np.ones(())],
                                   [0], RunOptions(mode="sample", shots=2)) is not None
    g = _shift_gradient(program, theta, (0.02, 1.0), shots=4000, seed=seed,
                        occurrences=("geometric", 0.5))
    assert abs(float(g.grad) - (0.02 * drounds + dz)) <= 4 * float(g.grad_stderr)


@pytest.mark.parametrize("seed", SEEDS)
def test_batched_shift_gradient_of_the_walk_within_four_standard_errors(seed):
    walk = _case_study("quantum_walk")
    t = np.array([0.3, 1.2])
    program = qdiff.trace(walk.objective, t)
    exact = qm.gradient(program, t, tol=1e-10).grad
    g = _shift_gradient(program, t, shots=2000, seed=seed)
    assert np.all(np.abs(g.grad - exact) <= 4 * g.grad_stderr), (g.grad, exact, g.grad_stderr)
    assert abs(g.value - qm.run(program, t, tol=1e-10).values) <= 4 * g.value_stderr


def test_batched_and_trajectory_shift_estimators_agree_statistically():
    theta = 1.3
    program = qdiff.trace(coin_loop, theta)
    options = RunOptions(mode="sample", shots=300, seed=3)
    one_by_one = sampled_parameter_shift(program, [np.asarray(theta)], [np.ones(())], [0],
                                         options)
    batch = batched_parameter_shift(program, [np.asarray(theta)], [np.ones(())], [0],
                                    options.replace(shots=3000))
    spread = np.hypot(one_by_one.grad_stderr[0], batch.grad_stderr[0])
    assert abs(one_by_one.grads[0] - batch.grads[0]) <= 4 * spread
    exact = np.tan(theta / 2) / np.cos(theta / 2) ** 2  # d tan²(θ/2)/dθ
    assert abs(batch.grads[0] - exact) <= 4 * batch.grad_stderr[0]
    assert batch.shots == 3000 and batch.num_evaluations == 10 * one_by_one.num_evaluations
    assert batch.num_derivative_programs == one_by_one.num_derivative_programs == 2


def test_shift_gradient_with_an_angle_from_a_loop_carry_takes_the_trajectories():
    def carried(theta):
        q = qm.qubits(1)
        angle = qdiff.Cell(theta)

        def body():
            qm.ry(angle.value, q[0])
            angle.set(angle.value * 0.5)

        qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body, max_iter=4)
        return qm.expval("Z", q)

    program = qdiff.trace(carried, 1.0)
    options = RunOptions(mode="sample", shots=10, seed=0)
    assert batched_parameter_shift(program, [np.asarray(1.0)], [np.ones(())], [0],
                                   options) is None
    g = _shift_gradient(program, 1.0, shots=400, seed=0)
    exact = qm.gradient(program, 1.0).grad
    assert abs(g.grad - exact) <= 4 * g.grad_stderr
