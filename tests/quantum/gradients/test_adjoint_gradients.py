"""Adjoint derivatives of quantum programs against central finite differences of exact-mode
values and against closed forms (loops on measurements, postselection)."""

import numpy as np
import pytest
from quantum_programs_lib import coin_loop, postselected, until_one, von_neumann
from scipy.stats import unitary_group

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.quantum.gradients.gradient import gradient, jacobian

PARAMETRIC = ["rx", "ry", "rz", "phase", "u", "crx", "cry", "crz", "cphase", "rxx", "ryy",
              "rzz", "rzx", "pauli_rot"]
FIXED = ["h", "x", "sx", "t", "s", "cx", "cz", "iswap", "swap", "ch", "mcx", "unitary"]


def random_circuit(seed, num_qubits=3, depth=18):
    """A program of w: every parametric gate at least once, angles affine in shared w."""
    rng = np.random.default_rng(seed)
    names = list(PARAMETRIC) + list(rng.choice(PARAMETRIC + FIXED, depth - len(PARAMETRIC)))
    rng.shuffle(names)
    plan = []
    for name in names:
        spec_qubits = 3 if name == "pauli_rot" else (
            2 if name[0] == "c" or name in ("rxx", "ryy", "rzz", "rzx", "iswap", "swap",
                                            "unitary") else 1)
        if name == "mcx":
            spec_qubits = 3
        wires = [int(w) for w in rng.permutation(num_qubits)[:spec_qubits]]
        k = 3 if name == "u" else (0 if name in FIXED else 1)
        plan.append((name, wires, rng.integers(0, 4, k), rng.normal(size=k), rng.normal(size=k),
                     unitary_group.rvs(4, random_state=rng.integers(1 << 30))))

    def program(w):
        q = qm.qubits(num_qubits)
        for name, wires, which, scale, shift, matrix in plan:
            angles = [w[j] * a + b for j, a, b in zip(which, scale, shift)]
            ws = [q[i] for i in wires]
            if name == "pauli_rot":
                qm.pauli_rot(angles[0], "XYZ", ws)
            elif name == "mcx":
                qm.mcx(ws[:2], ws[2])
            elif name == "unitary":
                qm.unitary(matrix, ws)
            else:
                qm.GATES[name](*angles, *ws)
        return qm.expval("0.7*ZXI + XIY - 0.3*IZZ", q), qm.expval("YYX", q), qm.probs(q[:2])

    return program


@pytest.mark.parametrize("seed", range(4))
def test_adjoint_matches_finite_differences_on_random_circuits(seed):
    f = random_circuit(seed)
    w = np.random.default_rng(100 + seed).normal(size=4)
    cotangent = (0.8, -1.3, np.array([0.2, -0.5, 1.0, 0.1]))  # a random VJP
    adjoint = gradient(f, w, cotangent=cotangent)
    fd = gradient(f, w, cotangent=cotangent, method="finite-diff")
    np.testing.assert_allclose(adjoint.grad, fd.grad, atol=1e-7)
    # single observables and the batched Jacobian of all outputs
    jac = jacobian(f, w)
    for k, c in enumerate([(1.0, 0.0, np.zeros(4)), (0.0, 1.0, np.zeros(4))]):
        single = gradient(f, w, cotangent=c, method="finite-diff").grad
        np.testing.assert_allclose(jac[k], single, atol=1e-7)
    assert jac[2].shape == (4, 4)
    np.testing.assert_allclose(jac[2].sum(axis=0), 0.0, atol=1e-12)  # probabilities sum to 1


@pytest.mark.parametrize("loop, theta, expected", [
    (coin_loop, 0.7, 0.413667),     # d/dθ tan²(θ/2)
    (until_one, 0.7, -23.2994),     # d/dθ 1/sin²(θ/2)
    (von_neumann, 0.7, 0.0),        # the extractor is fair whatever θ
    (coin_loop, 1.3, None),
    (until_one, 2.2, None),
])
def test_unbounded_loops_match_closed_forms(loop, theta, expected):
    exact = {coin_loop: lambda t: np.tan(t / 2) ** 2, until_one: lambda t: 1 / np.sin(t / 2) ** 2,
             von_neumann: lambda t: 0.5}[loop]
    h = 1e-5
    closed = (exact(theta + h) - exact(theta - h)) / (2 * h)
    result = gradient(loop, theta)
    assert result.value == pytest.approx(exact(theta), rel=1e-8, abs=1e-9)
    assert result.grad == pytest.approx(closed, rel=1e-6, abs=1e-7)
    if expected is not None:
        assert result.grad == pytest.approx(expected, rel=1e-5, abs=1e-7)
    assert result.dropped_mass + result.unterminated_mass < 1e-9


def test_postselection_uses_the_quotient_rule():
    result = gradient(postselected, 0.512)
    assert result.value == pytest.approx(-np.cos(0.512))
    assert result.grad == pytest.approx(np.sin(0.512)) and round(result.grad, 5) == 0.48992
    assert result.postselection_probability == pytest.approx(0.5)


def test_hybrid_program_chain_rules_classical_code():
    def loss(w, data):
        angles = qnp.tanh(w[:3] * data) + w[3]          # classical preprocessing
        q = qm.qubits(3)

        def layer(i):
            for k in range(3):
                qm.ry(angles[k] * (i + 1), q[k])          # loop-index angles
            qm.cx(q[0], q[1])
            qm.crz(w[4] * i, q[1], q[2])

        qdiff.fori_loop(0, 3, layer)
        energies = qnp.stack([qm.expval("ZII", q), qm.expval("IZZ", q), qm.expval("XXI", q)])
        return qnp.sum((energies - qnp.array([0.1, -0.2, 0.3])) ** 2)  # postprocessing

    w = np.array([0.3, -0.7, 0.5, 0.2, 0.9])
    data = np.array([1.0, 2.0, -1.5])
    adjoint = gradient(loss, w, data)
    fd = gradient(loss, w, data, method="finite-diff")
    np.testing.assert_allclose(adjoint.grad, fd.grad, atol=1e-7)
    both = gradient(loss, w, data, argnums=(0, 1))
    np.testing.assert_allclose(both.grad[0], adjoint.grad)
    np.testing.assert_allclose(both.grad[1], gradient(loss, w, data, argnums=1,
                                                      method="finite-diff").grad, atol=1e-7)


def test_measurements_conditions_resets_and_bounded_loops():
    def f(x):
        q = qm.qubits(2)
        qm.ry(x, q[0])
        qm.rx(2 * x, q[1])
        bit = qm.measure(q[0])
        qdiff.cond(bit == 1, lambda: qm.ry(x ** 2, q[1]), lambda: qm.rz(x, q[1]))
        qm.reset(q[0])
        qm.h(q[0])
        count = qdiff.Cell(0)

        def body():
            qm.rx(x + 0.3, q[0])
            count.set(count.value + 1)

        qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body, max_iter=4)
        return qm.expval("ZX", q) + 0.25 * count.value

    for x in (0.4, 1.1):
        adjoint = gradient(f, x)
        fd = gradient(f, x, method="finite-diff")
        assert adjoint.grad == pytest.approx(fd.grad, abs=1e-7)
        assert adjoint.aborted_mass > 0


def test_errors_are_clear():
    def two(x):
        q = qm.qubits(1)
        qm.rx(x, q[0])
        return qm.expval("Z", q), qm.expval("X", q)

    with pytest.raises(qdiff.QdiffError, match="method must be one of"):
        gradient(two, 0.1, method="backprop")
    with pytest.raises(qdiff.QdiffError, match="one scalar"):
        gradient(two, 0.1)
    with pytest.raises(qdiff.QdiffError, match="cotangent 1 has shape"):
        gradient(two, 0.1, cotangent=(1.0, np.ones(2)))


def test_qdiff_transformations_dispatch_on_quantum_programs():
    @qdiff.program
    def f(w):
        q = qm.qubits(2)
        qm.ry(w[0], q[0])
        qm.cx(q[0], q[1])
        qm.rx(w[1], q[1])
        return qm.expval("ZZ", q), qm.expval("XI", q)

    w = np.array([0.4, -0.9])
    jac = qdiff.jacobian(f)(w)
    expected = gradient(f, w, cotangent=(1.0, 0.0), method="finite-diff").grad
    np.testing.assert_allclose(jac[0], expected, atol=1e-7)
    value, back = qdiff.vjp(f, w)
    np.testing.assert_allclose(back((0.3, -2.0))[0], 0.3 * jac[0] - 2.0 * jac[1], atol=1e-12)
    assert value[0] == pytest.approx(np.cos(w[1]))

    def first(w):
        return f(w)[0]

    np.testing.assert_allclose(qdiff.grad(first)(w), jac[0], atol=1e-12)
    value, g = qdiff.value_and_grad(until_one)(0.7)
    assert (value, g) == (pytest.approx(1 / np.sin(0.35) ** 2), pytest.approx(-23.2994, rel=1e-5))
    traced = qdiff.trace(until_one, 0.7)
    assert qdiff.grad(traced)(0.7) == pytest.approx(-23.2994, rel=1e-5)


def test_independent_evaluations_run_on_a_process_pool():
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    f = random_circuit(7, depth=len(PARAMETRIC))
    w = np.array([0.1, 0.5, -0.3, 0.8])
    cotangent = (1.0, 0.5, np.array([0.0, 1.0, 0.0, 0.0]))
    local = gradient(f, w, cotangent=cotangent, method="finite-diff")
    # spawned workers: forking a process that runs threads (JAX's, in this suite) can deadlock
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        pooled = gradient(f, w, cotangent=cotangent, method="finite-diff", executor=pool)
    np.testing.assert_allclose(pooled.grad, local.grad, atol=1e-12)
    np.testing.assert_allclose(pooled.grad, gradient(f, w, cotangent=cotangent).grad, atol=1e-7)


def test_sample_mode_gradients_are_unbiased_with_shrinking_errors():
    exact = 0.413667  # d/dθ tan²(θ/2) at θ = 0.7
    small = gradient(coin_loop, 0.7, mode="sample", shots=300, seed=11)
    large = gradient(coin_loop, 0.7, mode="sample", shots=1200, seed=12)
    for result in (small, large):
        assert abs(result.grad - exact) < 4 * result.grad_stderr
        assert abs(result.value - np.tan(0.35) ** 2) < 4 * result.value_stderr
    assert large.grad_stderr < 0.8 * small.grad_stderr  # ~1/2 for 4x the shots (heavy tails)

    post = gradient(postselected, 0.512, mode="sample", shots=800, seed=5)
    assert abs(post.grad - np.sin(0.512)) <= 4 * post.grad_stderr + 1e-12
    assert post.postselection_probability == pytest.approx(0.5, abs=0.1)


def test_sample_readouts_are_refused_clearly():
    def f(x):
        q = qm.qubits(1)
        qm.rx(x, q[0])
        draws = qm.sample(shots=10)
        return qm.expval("Z", q) + qnp.sum(draws) * 0.0

    with pytest.raises(qdiff.QdiffError, match="qm.sample cannot be differentiated"):
        gradient(f, 0.3)


def test_quantum_options_on_a_classical_program_are_an_error():
    with pytest.raises(qdiff.QdiffError, match="no quantum operations"):
        qdiff.grad(lambda x: x * x, method="finite-diff")(2.0)
    with pytest.raises(qdiff.QdiffError, match="tol"):
        qdiff.value_and_grad(lambda x: x * x, tol=1e-9)(2.0)


def test_jacobian_rows_are_swept_in_batches(monkeypatch):
    # 9 qubits: the Numba block kernel runs (it needs 32 groups of the other wires) on a
    # stack of λ; at most 3 rows per sweep, and the sweeps reuse what it prepared per block
    from qdiff.quantum.gradients import adjoint
    from qdiff.quantum.gradients.adjoint import RecordedRun

    def layers(w):
        q = qm.qubits(9)
        for layer in range(2):
            for k in range(9):
                qm.ry(w[layer, k], q[k])
                qm.crz(0.5 * w[layer, k], q[k], q[(k + 1) % 9])
            for k in range(8):
                qm.cx(q[k], q[k + 1])
        return qnp.stack([qm.expval("ZZ", [q[k], q[k + 1]]) for k in range(8)])

    monkeypatch.setattr(adjoint, "MAX_ROWS_PER_SWEEP", 3)
    w = np.random.default_rng(1).normal(size=(2, 9))
    run = RecordedRun(qdiff.trace(layers, w), [w])
    rows = [[np.eye(8)[k]] for k in range(8)]
    assert run.rows_per_sweep() == 3
    batched = run.vjp_rows(rows)
    assert run.runner.prepared_blocks is None  # kept only while the rows are swept
    for row, found in zip(rows, batched):
        assert np.allclose(found[0], run.vjp(row)[0], atol=1e-12)  # a sweep of one row
    fd = gradient(layers, w, cotangent=rows[3][0], method="finite-diff")
    assert np.allclose(batched[3][0], fd.grad, atol=1e-6)


def test_batched_rows_through_measurements_merges_and_postselection():
    # every record kind with a stack of rows: measurements (their outcomes' weights), a
    # branch whose outcomes merge, a reset, a bounded loop on a measurement, a u gate (its
    # global phase), expval and probs readouts; and the quotient rule of postselection, per
    # row. Rows against finite differences of each output.
    def f(x):
        q = qm.qubits(3)
        qm.ry(x[0], q[0])
        qm.rx(x[1], q[1])
        qm.u(x[0], x[1], 0.3, q[2])
        qm.cx(q[2], q[1])
        bit = qm.measure(q[0])
        qdiff.cond(bit == 1, lambda: qm.ry(x[1] ** 2, q[1]), lambda: qm.rz(x[0], q[1]))
        qm.reset(q[0])
        qm.h(q[0])
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.rx(x[0] + 0.3, q[0]),
                         max_iter=3)
        qm.cry(x[1], q[0], q[2])
        return qm.expval("ZXI", q), qm.expval("0.5*XYZ - IIY", q), qm.probs(q[1:])

    def g(x):
        q = qm.qubits(3)
        qm.h(q[0])
        qm.cx(q[0], q[1])
        qm.rx(x[0], q[1])
        qm.ry(x[1], q[2])
        qm.cx(q[2], q[0])
        qm.postselect(q[1], 1)
        return qm.expval("ZII", q), qm.probs(q[2:])

    x = np.array([0.7, -0.4])
    for program, outputs in ((f, 3), (g, 2)):
        batched = jacobian(program, x)
        fd = jacobian(program, x, method="finite-diff")
        for k in range(outputs):
            np.testing.assert_allclose(batched[k], fd[k], atol=1e-7)


def test_gate_runs_are_one_record_each_and_fused_programs_differentiate():
    # the recorder runs each run of gates as one record; a gate of the program still has a
    # record of its own (its angles, the run's weight) for the consumers that look it up
    from qdiff.quantum.gradients.adjoint import RecordedRun
    from qdiff.quantum.lang.fusion import fuse_gates

    w = np.random.default_rng(7).normal(size=4)
    program = qdiff.trace(random_circuit(2), w)
    run = RecordedRun(program, [w])
    gates = [e for e in program.eqns if e.primitive.name == "gate"]
    assert sum(r.kind == "gate" for r in run.runner.records) < len(gates)
    for eqn in gates:
        (record,) = run.records_of(eqn)
        assert record.eqn is eqn and len(record.in_values) == len(eqn.inputs)
        assert record.weight_in == 1.0
    # parameter shift finds each occurrence's angle through these records
    cotangent = (0.8, -1.3, np.array([0.2, -0.5, 1.0, 0.1]))
    np.testing.assert_allclose(gradient(program, w, cotangent=cotangent,
                                        method="parameter-shift").grad,
                               gradient(program, w, cotangent=cotangent).grad, atol=1e-9)
    # a program whose gates are already fused (fused_gate equations) differentiates alike,
    # by every method (they read its gates one by one), with the same certificate
    fused = fuse_gates(program, max_qubits=2)
    assert any(e.primitive.name == "fused_gate" for e in fused.eqns)
    fd = gradient(program, w, cotangent=cotangent, method="finite-diff").grad
    for method in ("adjoint", "parameter-shift"):
        np.testing.assert_allclose(gradient(fused, w, cotangent=cotangent, method=method).grad,
                                   fd, atol=1e-7)
    loop = qdiff.trace(until_one, 0.7)
    plain, fused_loop = (gradient(p, 0.7, tol=1e-6) for p in (loop, fuse_gates(loop, 2)))
    assert fused_loop.remainder_bound == pytest.approx(plain.remainder_bound)
    assert abs(float(fused_loop.grad) + 23.2994) <= fused_loop.remainder_bound


def test_jacobian_of_an_empty_output_and_no_rows():
    from qdiff.quantum.gradients.adjoint import RecordedRun

    def f(w):
        q = qm.qubits(2)
        qm.ry(w[0], q[0])
        qm.rx(w[1], q[1])
        return qm.expval("ZY", q), qnp.zeros((0,)) + w[1]

    w = np.array([0.3, 0.2])
    readout, empty = jacobian(f, w)
    np.testing.assert_allclose(readout, [-np.sin(0.3) * -np.sin(0.2), np.cos(0.3) * -np.cos(0.2)],
                               atol=1e-12)
    assert empty.shape == (0, 2)
    run = RecordedRun(qdiff.trace(f, w), [w])
    assert run.vjp_rows([]) == []
    (row,) = run.vjp_rows([[1.0, np.zeros(0)]])
    assert isinstance(row[0], np.ndarray) and row[0].shape == (2,)
