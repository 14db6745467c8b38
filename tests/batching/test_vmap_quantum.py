"""`qdiff.vmap` of quantum programs: one batched statevector simulation (values, and
per-member gradients by one batched adjoint sweep) equal to a Python loop over the members,
and programs outside its reach (mid-circuit measurements, loops carrying the state) run
member by member with the same results."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.quantum.execution.batched import (
    batched_circuit,
    observable_diagonal,
    observable_rows,
    one_wire_runs,
)
from qdiff.quantum.gradients import batched_adjoint
from qdiff.quantum.gradients.batched_adjoint import checkpoint_segments
from qdiff.quantum.lang.examples import layers, repeat_until_one
from qdiff.quantum.lang.observables import PauliSum
from qdiff.quantum.simulator import get_backend

rng = np.random.default_rng(3)
B = 5


def hybrid(w, x):
    """Angles from classical code (a loop included), every kernel kind of gate, two
    readouts and a loss on them."""
    q = qm.qubits(3)
    s = qdiff.fori_loop(0, 3, lambda i, c: qnp.sin(c + w[i]), 0.1)
    qm.ry(w[0] * x, q[0]); qm.rx(qnp.tanh(w[1]), q[1]); qm.h(q[2])
    qm.rz(s, q[0]); qm.cx(q[0], q[1]); qm.crx(w[2], q[1], q[2]); qm.cry(w[0] + w[1], q[2], q[0])
    qm.crz(w[1] * 2, q[0], q[2]); qm.cz(q[1], q[0]); qm.rzz(w[2] - x, q[0], q[2])
    qm.swap(q[0], q[1]); qm.phase(w[0], q[1]); qm.ch(q[2], q[1]); qm.ryy(x, q[1], q[2])
    qm.ry(0.3, q[2])
    a = qm.expval("ZZI + 0.5*XIY", q)
    b = qm.expval("IXZ", q)
    return (a - 0.2) ** 2 + qnp.sin(b) * x


def _loop(fn, *args, axes):
    rows = []
    for b in range(B):
        rows.append(fn(*[a if ax is None else a[b] for a, ax in zip(args, axes)]))
    if isinstance(rows[0], tuple):
        return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))
    return np.stack([np.asarray(r) for r in rows])


def test_hybrid_program_is_one_batched_simulation():
    program = qdiff.program(hybrid)
    w, x = rng.uniform(-1, 1, (B, 3)), rng.uniform(-1, 1, B)
    assert batched_circuit(program.trace(w[0], x[0])) is not None
    np.testing.assert_allclose(qdiff.vmap(program)(w, x), _loop(program, w, x, axes=(0, 0)),
                               rtol=1e-12, atol=1e-12)
    got = qdiff.vmap(program, in_axes=(0, None))(w, 0.4)
    np.testing.assert_allclose(got, _loop(program, w, 0.4, axes=(0, None)), rtol=1e-12,
                               atol=1e-12)


def test_per_member_gradients_equal_a_loop_of_adjoint_gradients():
    program = qdiff.program(hybrid)
    w, x = rng.uniform(-1, 1, (B, 3)), rng.uniform(-1, 1, B)
    grad = qdiff.grad(program, argnums=(0, 1))
    got = qdiff.vmap(grad)(w, x)
    want = _loop(grad, w, x, axes=(0, 0))
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)
    value, g0 = qdiff.vmap(qdiff.value_and_grad(program), in_axes=(0, None))(w, 0.4)
    np.testing.assert_allclose(value, _loop(program, w, 0.4, axes=(0, None)), rtol=1e-12)
    np.testing.assert_allclose(g0, _loop(qdiff.grad(program), w, 0.4, axes=(0, None)),
                               rtol=1e-10, atol=1e-12)
    # and the loop of gradients agrees with central differences
    h = 1e-6
    e = np.eye(3)[1]
    fd = (program(w[0] + h * e, x[0]) - program(w[0] - h * e, x[0])) / (2 * h)
    assert abs(want[0][0][1] - fd) < 1e-7


def test_gradients_from_checkpoints_equal_those_of_the_sweep_that_undoes_the_states(
        monkeypatch):
    program = qdiff.program(hybrid)
    w, x = rng.uniform(-1, 1, (B, 3)), rng.uniform(-1, 1, B)
    circuit = batched_circuit(program.trace(w[0], x[0]))
    assert checkpoint_segments(circuit, B) is not None
    # a run of three one-wire gates needs states inside it: the sweep undoes the states
    assert checkpoint_segments(batched_circuit(qdiff.program(layers).trace(0.1)), 3) is None
    grad = qdiff.grad(program, argnums=(0, 1))
    from_checkpoints = qdiff.vmap(grad)(w, x)
    monkeypatch.setattr(batched_adjoint, "CHECKPOINT_BYTES", 0)   # past the memory budget
    assert checkpoint_segments(circuit, B) is None
    for got, undone in zip(from_checkpoints, qdiff.vmap(grad)(w, x)):
        np.testing.assert_allclose(got, undone, rtol=1e-12, atol=1e-13)


def classifier(w, x):
    """Probabilities of two wires after a data-encoding circuit, and a loss on them."""
    q = qm.qubits(3)
    for k in range(3):
        qm.ry(x * (k + 1), q[k]); qm.rz(w[k], q[k])
    qm.cx(q[0], q[1]); qm.cry(w[1] * w[2], q[1], q[2])
    p = qm.probs([q[0], q[2]])
    return qnp.sum(p * np.array([0.1, -0.4, 0.7, 0.2])) + qm.expval("ZII", q) * p[1]


def test_probabilities_are_batched_values_and_gradients():
    program = qdiff.program(classifier)
    w, x = rng.uniform(-1, 1, (B, 3)), rng.uniform(-1, 1, B)
    assert batched_circuit(program.trace(w[0], x[0])) is not None
    np.testing.assert_allclose(qdiff.vmap(program)(w, x), _loop(program, w, x, axes=(0, 0)),
                               rtol=1e-12, atol=1e-12)
    grad = qdiff.grad(program, argnums=(0, 1))
    for g, r in zip(qdiff.vmap(grad)(w, x), _loop(grad, w, x, axes=(0, 0))):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-12)


def test_counted_loops_carrying_the_state_are_unrolled_into_the_circuit():
    theta = np.array([0.5, 0.9, 1.3])
    looped = qdiff.program(layers)                    # three ry(θ) in a fori_loop
    assert batched_circuit(looped.trace(0.1)) is not None
    np.testing.assert_allclose(qdiff.vmap(looped)(theta), np.cos(3 * theta), atol=1e-12)
    np.testing.assert_allclose(qdiff.vmap(qdiff.grad(looped))(theta), -3 * np.sin(3 * theta),
                               atol=1e-10)


def test_programs_outside_the_batched_form_run_member_by_member():
    theta = np.array([0.5, 0.9, 1.3])

    def traced_bound(t, n):                           # a loop carrying the state, traced bound
        q = qm.qubits(1)
        qdiff.fori_loop(0, n, lambda i: qm.ry(t, q[0]))
        return qm.expval("Z", q)

    program = qdiff.program(traced_bound)
    assert batched_circuit(program.trace(0.1, 3)) is None
    np.testing.assert_allclose(qdiff.vmap(program, in_axes=(0, None))(theta, 3),
                               np.cos(3 * theta), atol=1e-12)
    np.testing.assert_allclose(qdiff.vmap(qdiff.grad(program), in_axes=(0, None))(theta, 3),
                               -3 * np.sin(3 * theta), atol=1e-10)
    measured = qdiff.program(repeat_until_one)        # a loop on a measurement
    assert batched_circuit(measured.trace(0.1)) is None
    got = qdiff.vmap(measured)(theta)
    np.testing.assert_allclose(got, [measured(t) for t in theta], rtol=1e-12)


def test_tracing_a_vmapped_quantum_program_is_a_clear_error():
    program = qdiff.program(hybrid)
    with pytest.raises(qdiff.QdiffError, match="runs on the simulator"):
        qdiff.grad(lambda w: qnp.sum(qdiff.vmap(program, in_axes=(0, None))(w, 0.3)))(
            np.ones((B, 3)))


def test_a_member_with_a_nan_angle_is_an_error_naming_it():
    program = qdiff.program(hybrid)
    w = rng.uniform(-1, 1, (B, 3))
    w[2, 0] = np.nan
    with pytest.raises(qdiff.QdiffError, match="batch member 2 is not finite"):
        qdiff.vmap(program, in_axes=(0, None))(w, 0.4)


def test_classical_code_calling_a_quantum_gradient_runs_member_by_member():
    # d/dθ <Z> after ry(θ) is -sin θ; the program holding the derivative call is claimed
    # by its whole-program rule, so vmap runs it member by member
    theta = np.array([0.2, 0.7, 1.4])
    rotated = qdiff.program(lambda t: _z_after_ry(t))
    scaled = lambda t: t * qdiff.grad(rotated)(t)  # noqa: E731
    np.testing.assert_allclose(qdiff.vmap(scaled)(theta), -theta * np.sin(theta), atol=1e-12)
    np.testing.assert_allclose(qdiff.vmap(qdiff.grad(scaled))(theta),
                               -np.sin(theta) - theta * np.cos(theta), atol=1e-10)


def _z_after_ry(t):
    q = qm.qubits(1)
    qm.ry(t, q[0])
    return qm.expval("Z", q)


def test_map_over_a_circuit_runs_its_rows_as_one_batched_simulation(monkeypatch):
    import importlib

    from qdiff.classical import soacs

    vmap_module = importlib.import_module("qdiff.batching.vmap")
    runs = []

    def spy(program, flags):
        found = original(program, flags)
        if found is None:
            return None

        def counted(*args):
            runs.append(args[3])
            return found(*args)

        return counted

    original = vmap_module.claimed_runner
    monkeypatch.setattr(soacs, "MAP_BODY_RUNNERS", [spy])
    program = qdiff.program(hybrid)
    w = rng.uniform(-1, 1, (B, 3))
    got = qdiff.map(lambda row: program(row, 0.4), w)
    np.testing.assert_allclose(got, _loop(program, w, 0.4, axes=(0, None)), rtol=1e-12,
                               atol=1e-12)
    assert runs == [B]   # one batched run of all B rows


def test_runs_of_one_wire_gates_have_the_gradients_of_a_loop():
    # runs of several one-wire gates on one wire (Pauli rotations, a phase gate, fixed
    # gates) are undone in one pass each by the batched adjoint sweep; wire 9 has pairs
    # further apart than a block of the sweep
    def runs(w):
        q = qm.qubits(10)
        qm.h(q[9]); qm.h(q[0])
        for k, wire in enumerate((0, 9, 4)):
            qm.rx(w[k], q[wire]); qm.ry(w[k + 1] * 2, q[wire]); qm.h(q[wire])
            qm.phase(w[k + 2], q[wire]); qm.rz(w[k] - w[k + 1], q[wire])
        qm.cx(q[0], q[9]); qm.ry(w[0], q[9]); qm.rz(w[1], q[9])
        return qm.expval("X" + "I" * 8 + "Z", q) + 0.5 * qm.expval("Y" + "I" * 9, q)

    program = qdiff.program(runs)
    w = rng.uniform(-2, 2, (B, 5))
    assert batched_circuit(program.trace(w[0])) is not None
    got = qdiff.vmap(qdiff.grad(program))(w)
    np.testing.assert_allclose(got, _loop(qdiff.grad(program), w, axes=(0,)), rtol=1e-10,
                               atol=1e-12)


def test_runs_of_permutation_gates_have_the_values_and_gradients_of_a_loop():
    # the entangling CNOT chain (a SWAP and a CNOT after it) becomes one
    # permutation table in the batched kernels and is scattered back in the adjoint sweep
    def chain(w):
        q = qm.qubits(5)
        for layer in range(2):
            for k in range(5):
                qm.ry(w[layer, k], q[k]); qm.rz(w[layer, k] * 0.5 + layer, q[k])
            for k in range(4):
                qm.cx(q[k], q[k + 1])
            qm.swap(q[0], q[4]); qm.cx(q[4], q[2])
        return qm.expval("ZIZII + 0.3*IXIIY", q)

    program = qdiff.program(chain)
    w = rng.uniform(-2, 2, (B, 2, 5))
    circuit = batched_circuit(program.trace(w[0]))
    assert circuit is not None and (one_wire_runs(circuit)[2] >= 0).sum() == 2
    np.testing.assert_allclose(qdiff.vmap(program)(w), _loop(program, w, axes=(0,)),
                               rtol=1e-12, atol=1e-12)
    got = qdiff.vmap(qdiff.grad(program))(w)
    np.testing.assert_allclose(got, _loop(qdiff.grad(program), w, axes=(0,)), rtol=1e-10,
                               atol=1e-12)


def z_only(w):
    """A Z-only observable (an identity term, a coefficient, a ZZ term) on permuted wires."""
    q = qm.qubits(4)
    for k in range(4):
        qm.ry(w[k], q[k]); qm.rz(w[k] * w[(k + 1) % 4], q[k])
    qm.cx(q[0], q[1]); qm.cx(q[2], q[3]); qm.crx(w[1], q[3], q[0])
    e = qm.expval("0.5*III - 2*ZIZ + 0.7*IZI", [q[3], q[0], q[2]])
    return e ** 2 + qm.expval("ZZ", [q[1], q[2]])


def test_z_only_observables_taken_as_a_diagonal_give_the_rows_values_and_gradients_of_a_loop():
    obs = PauliSum("0.5*III - 2*ZIZ + 0.7*IZI")
    psi = rng.normal(size=(3, 16)) + 1j * rng.normal(size=(3, 16))
    want = np.stack([get_backend("numpy").apply_pauli_sum(row.copy(), 4, obs, [3, 0, 2])
                     for row in psi])
    np.testing.assert_allclose(observable_rows(psi, 4, obs, [3, 0, 2]), want, atol=1e-12)
    assert observable_diagonal(4, PauliSum("XZ"), (0, 1)) is None
    program = qdiff.program(z_only)
    w = rng.uniform(-1, 1, (B, 4))
    assert batched_circuit(program.trace(w[0])) is not None
    np.testing.assert_allclose(qdiff.vmap(program)(w), _loop(program, w, axes=(0,)),
                               rtol=1e-12, atol=1e-12)
    grad = qdiff.grad(program)
    np.testing.assert_allclose(qdiff.vmap(grad)(w), _loop(grad, w, axes=(0,)), rtol=1e-10,
                               atol=1e-12)


def test_members_in_two_lane_tiles_have_the_values_and_gradients_of_a_loop():
    # 70 members: two tiles of 35 lanes in the batched kernels; two-wire and controlled
    # rotations, a run of three rotations on a wire (undone two and one) and a fixed gate
    # inside a run
    def circuit(w):
        q = qm.qubits(5)
        for k in range(5):
            qm.ry(w[k], q[k]); qm.h(q[k]); qm.rz(w[k] * w[0], q[k])
        qm.rx(w[1], q[2]); qm.rzz(w[2], q[0], q[3]); qm.crx(w[3], q[4], q[1])
        qm.rxx(w[4] - w[0], q[2], q[1]); qm.cx(q[1], q[2]); qm.cry(w[0], q[1], q[4])
        return qm.expval("ZIIXZ + 0.4*IYIIZ", q)

    program = qdiff.program(circuit)
    members = 70
    w = rng.uniform(-2, 2, (members, 5))
    assert batched_circuit(program.trace(w[0])) is not None
    both = qdiff.value_and_grad(program)
    values, grads = qdiff.vmap(both)(w)
    loop = [both(row) for row in w]
    np.testing.assert_allclose(values, [v for v, _ in loop], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(grads, np.stack([g for _, g in loop]), rtol=1e-12, atol=1e-12)


def test_a_large_checkpoint_workspace_is_not_kept_after_the_call(monkeypatch):
    # the forward run's checkpoints (up to 1 GiB) stayed allocated on the thread after the
    # gradient returned
    from qdiff.quantum.execution import batched  # noqa: PLC0415

    small = batched._workspace((4, 8))
    assert batched._workspace((4, 8)) is small  # kept: the next call reuses it
    monkeypatch.setattr(batched, "KEPT_WORKSPACE_BYTES", 1024)
    large = batched._workspace((64, 8))
    assert large.shape == (64, 8) and batched._workspace((64, 8)) is not large
    assert getattr(batched._WORKSPACES, "array", None) is None


def indexed_ansatz(w, x):
    """Every angle an element of the parameter array `w`, one of them on two gates."""
    q = qm.qubits(3)
    qm.ry(w[0, 0], q[0]); qm.ry(w[0, 1], q[1]); qm.rx(w[1, 2], q[2])
    qm.cx(q[0], q[1]); qm.crz(w[1, 0], q[1], q[2]); qm.rz(w[0, 1], q[2])
    return qm.expval("ZZI + 0.5*XIY", q) * x


def test_angles_gathered_from_a_parameter_array_have_the_gradients_of_a_loop():
    from qdiff.quantum.execution.batched import angle_gather
    program = qdiff.program(indexed_ansatz)
    w, x = rng.uniform(-1, 1, (B, 2, 3)), rng.uniform(0.5, 1, B)
    assert angle_gather(batched_circuit(program.trace(w[0], x[0]))) is not None
    for axes, args in (((0, 0), (w, x)), ((None, 0), (w[0], x)), ((0, None), (w, 0.7))):
        rows = [[a if ax is None else a[b] for a, ax in zip(args, axes)] for b in range(B)]
        for argnums in (0, (0, 1), 1):
            both = qdiff.value_and_grad(program, argnums=argnums)
            value, grads = qdiff.vmap(both, in_axes=axes)(*args)
            want = [both(*row) for row in rows]
            np.testing.assert_allclose(value, [v for v, _ in want], rtol=1e-12, atol=1e-12)
            grads, = (grads,) if isinstance(argnums, tuple) else ((grads,),)
            for k, g in enumerate(grads):
                r = [gs[k] if isinstance(argnums, tuple) else gs for _, gs in want]
                np.testing.assert_allclose(g, np.stack(r), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(qdiff.vmap(program, in_axes=axes)(*args),
                                   _loop(program, *args, axes=axes), rtol=1e-12, atol=1e-12)
