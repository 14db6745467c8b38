"""Where sample mode's batch keeps its states (`simulator.shot_states`): the array-module
operations (NumPy here, the same code on CuPy on a GPU) against dense matrices and the Numba
kernels, and whole sample-mode runs with ``backend="numpy"`` giving the Numba runs' numbers
(same seeds, same streams, same outcomes)."""

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.gpu import cupy_available
from qdiff.ir.passes.unpack_scalars import unpack_scalars
from qdiff.quantum.execution.options import RunOptions
from qdiff.quantum.execution.shot_batch import sample_batched
from qdiff.quantum.simulator.shot_states import (
    ArrayShotStates,
    HostShotStates,
    block_index,
    shot_states,
)
from tests.quantum.quantum_programs_lib import coin_loop, postselected, until_one

NUM_QUBITS = 4


def _random_batch(rows, dtype, seed=0):
    rng = np.random.default_rng(seed)
    state = rng.normal(size=(rows, 1 << NUM_QUBITS)) + 1j * rng.normal(size=(rows, 1 << NUM_QUBITS))
    return (state / np.linalg.norm(state, axis=1, keepdims=True)).astype(dtype)


def _random_blocks(count, width, seed=1):
    rng = np.random.default_rng(seed)
    blocks = rng.normal(size=(count, 1 << width, 1 << width)) + 1j * rng.normal(
        size=(count, 1 << width, 1 << width))
    return np.linalg.qr(blocks)[0]  # unitary


def _dense(block, targets, control_mask):
    """The register-wide matrix of ``block`` on ``targets`` where ``control_mask``'s wires are
    1 (bit j of the block's index is ``targets[j]``): built entry by entry, independently of
    the index tables."""
    size = 1 << NUM_QUBITS
    matrix = np.zeros((size, size), complex)
    for col in range(size):
        if col & control_mask != control_mask:
            matrix[col, col] = 1
            continue
        local = sum(((col >> t) & 1) << j for j, t in enumerate(targets))
        rest = col & ~sum(1 << t for t in targets)
        for row_local in range(1 << len(targets)):
            row = rest | sum(((row_local >> j) & 1) << t for j, t in enumerate(targets))
            matrix[row, col] = block[row_local, local]
    return matrix


GATE_SHAPES = [((0,), 0), ((3,), 0), ((1,), 0b0001), ((0,), 0b1000), ((2,), 0b1011),
               ((0, 1), 0), ((3, 1), 0), ((2, 0), 0b1000), ((1, 3, 0), 0), ((0, 2), 0b0010)]


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("targets,control_mask", GATE_SHAPES)
def test_array_blocks_equal_the_dense_matrix_and_the_numba_kernel(targets, control_mask, dtype):
    rows = 5
    state = _random_batch(rows, dtype)
    blocks = _random_blocks(3, len(targets))
    which = np.array([0, 2, 1, 2, 0])
    want = np.stack([_dense(blocks[w], targets, control_mask) @ s
                     for w, s in zip(which, state.astype(complex))])
    got = ArrayShotStates(np).apply_block(state.copy(), list(targets), control_mask,
                                          blocks, which)
    numba = HostShotStates().apply_block(state.copy(), list(targets), control_mask,
                                         blocks.astype(dtype), which)
    tol = 1e-12 if dtype == np.complex128 else 1e-5
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, atol=tol)
    np.testing.assert_allclose(got, numba, atol=tol)
    # one block shared by every row
    shared = ArrayShotStates(np).apply_block(state.copy(), list(targets), control_mask,
                                             blocks[:1], np.zeros(rows, np.int64))
    np.testing.assert_allclose(shared, (_dense(blocks[0], targets, control_mask)
                                        @ state.astype(complex).T).T, atol=tol)


def test_block_index_lists_each_base_with_its_target_settings():
    # a block on wire 2 controlled by wire 0, 3 qubits: bases 0b001 and 0b011
    assert block_index(3, (2,), 0b001).tolist() == [[1, 5], [3, 7]]
    assert block_index(3, (0, 2), 0).tolist() == [[0, 1, 4, 5], [2, 3, 6, 7]]


@pytest.mark.parametrize("wire", range(NUM_QUBITS))
@pytest.mark.parametrize("to_zero", [False, True])
def test_array_weights_and_collapse_equal_the_numba_kernels(wire, to_zero):
    state = _random_batch(6, np.complex128, seed=wire)
    host, array = HostShotStates(), ArrayShotStates(np)
    weights = array.wire_weights(state, wire)
    np.testing.assert_allclose(weights, host.wire_weights(state, wire), atol=1e-14)
    bit = (np.arange(1 << NUM_QUBITS) >> wire) & 1
    np.testing.assert_allclose(weights[:, 1], (np.abs(state) ** 2 * bit).sum(axis=1))
    outcome = np.array([0, 1, 1, 0, 1, 0])
    scale = 1 / np.sqrt(weights[np.arange(6), outcome])
    got = array.collapse(state.copy(), wire, outcome, scale, to_zero)
    np.testing.assert_allclose(got, host.collapse(state.copy(), wire, outcome, scale, to_zero),
                               atol=1e-14)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0)
    if to_zero:  # after a reset the wire reads 0
        assert np.all(got[:, bit == 1] == 0)


def test_array_readouts_equal_dense_oracles():
    state = _random_batch(4, np.complex128, seed=3) * 2.0  # unnormalized rows
    states = ArrayShotStates(np)
    unit = state / np.linalg.norm(state, axis=1, keepdims=True)
    # ⟨X0 Z2⟩ + 0.5 ⟨Z1⟩: masks x, z per term
    x0z2 = np.kron(np.kron(np.kron(np.eye(2), [[1, 0], [0, -1]]), np.eye(2)), [[0, 1], [1, 0]])
    z1 = np.kron(np.kron(np.eye(4), [[1, 0], [0, -1]]), np.eye(2))
    observable = x0z2 + 0.5 * z1
    want = np.einsum("ri,ij,rj->r", unit.conj(), observable, unit).real
    got = states.expval(state, [0b0001, 0], [0b0100, 0b0010], [1.0, 0.5])
    np.testing.assert_allclose(got, want, atol=1e-13)
    probs = states.probs(state, (2, 0))  # bit 0 of the index is wire 2
    p = np.abs(unit.reshape(4, 2, 2, 2, 2)) ** 2  # axes: wires 3, 2, 1, 0
    np.testing.assert_allclose(probs, p.sum(axis=(1, 3)).transpose(0, 2, 1).reshape(4, 4),
                               atol=1e-14)
    np.testing.assert_allclose(states.normalized(state, "complex64"), unit, atol=1e-6)


def test_the_back_end_names_where_the_states_live():
    assert type(shot_states("auto")) is HostShotStates
    assert type(shot_states("numba")) is HostShotStates
    assert isinstance(shot_states("numpy"), ArrayShotStates)
    if not cupy_available():
        with pytest.raises(RuntimeError, match="CuPy"):
            shot_states("cupy")


def _run(f, x, backend, **settings):
    program = unpack_scalars(qdiff.trace(f, x))
    return sample_batched(program, [np.asarray(x)], RunOptions(mode="sample", backend=backend,
                                                               **settings))


def _assert_same_values(result, reference):
    pairs = zip(result.values, reference.values) if isinstance(reference.values, tuple) else [
        (result.values, reference.values)]
    for a, b in pairs:
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def _walk_step(t):
    q = qm.qubits(3)
    qm.h(q[0])

    def body():
        qm.ry(t, q[0])
        qm.cx(q[0], q[1])
        qm.mcx([q[0], q[1]], q[2])
        qm.apply("crx", [t / 3], [q[1], q[2]])
        qm.apply("rzz", [t], [q[2], q[0]])
        qm.cz(q[2], q[0])
        return None

    qdiff.while_loop(lambda: qm.measure(q[2]) == 0, body, max_iter=60)
    return qm.expval("ZII", q) + qm.expval("IXI", q), qm.probs([q[0], q[1]])


@pytest.mark.parametrize("f,x,settings", [
    (until_one, 0.9, {}), (coin_loop, 1.3, {}), (postselected, 0.7, {}),
    (_walk_step, 0.8, {}), (until_one, 0.3, {"max_loop_iterations": 3}),
    (lambda t: until_one(t, 2), 0.9, {})],
    ids=["until_one", "coin_loop", "postselected", "walk_step", "cut_off", "aborted"])
def test_numpy_states_give_the_numba_runs_numbers(f, x, settings):
    numba = _run(f, x, "numba", shots=3000, seed=4, **settings)
    array = _run(f, x, "numpy", shots=3000, seed=4, **settings)
    assert array.shots == numba.shots
    assert (array.aborted_mass, array.unterminated_mass, array.postselection_probability) == (
        numba.aborted_mass, numba.unterminated_mass, numba.postselection_probability)
    _assert_same_values(array, numba)


def test_numpy_states_give_the_numba_shift_gradient():
    def run(backend):
        return qm.gradient(until_one, 1.1, mode="sample", method="parameter-shift",
                           shots=2000, seed=3, backend=backend)

    array, numba = run("numpy"), run("numba")
    for field in ("value", "grad", "value_stderr", "grad_stderr"):
        np.testing.assert_allclose(getattr(array, field), getattr(numba, field), rtol=1e-12)


@pytest.mark.parametrize("f,x", [(coin_loop, 1.3), (postselected, 0.7), (_walk_step, 0.8)],
                         ids=["coin_loop", "postselected", "walk_step"])
def test_device_states_on_a_stand_in_for_cupy_give_the_numba_numbers(f, x, monkeypatch):
    # the CuPy code path on a NumPy stand-in that plays device arrays and counts copies:
    # the same numbers, and a copy back per measurement and readout, not per shot
    from qdiff.quantum.execution import shot_batch
    from tests.quantum.simulator.counting_cupy import CountingCupy

    numba = _run(f, x, "numba", shots=3000, seed=4)
    device = CountingCupy()
    monkeypatch.setattr(shot_batch, "shot_states", lambda backend: ArrayShotStates(device))
    stand_in = _run(f, x, "numba", shots=3000, seed=4)
    _assert_same_values(stand_in, numba)
    assert 0 < device.counts["d2h"] < 200


# ------------------------------------------------------------------- on a GPU (CuPy), where present
@pytest.mark.skipif(not cupy_available(), reason="CuPy with a CUDA device is not available")
@pytest.mark.parametrize("f,x", [(until_one, 0.9), (coin_loop, 1.3), (postselected, 0.7),
                                 (_walk_step, 0.8)],
                         ids=["until_one", "coin_loop", "postselected", "walk_step"])
def test_gpu_states_give_the_numba_runs_numbers(f, x):
    numba = _run(f, x, "numba", shots=3000, seed=4)
    gpu = _run(f, x, "cupy", shots=3000, seed=4)
    assert gpu.shots == numba.shots
    _assert_same_values(gpu, numba)
    shift = [qm.gradient(until_one, 1.1, mode="sample", method="parameter-shift", shots=2000,
                         seed=3, backend=backend).grad for backend in ("cupy", "numba")]
    np.testing.assert_allclose(*shift, rtol=1e-12)
