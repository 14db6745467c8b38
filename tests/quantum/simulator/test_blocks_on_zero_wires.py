"""Fused blocks on a state whose high wires are still |0> (the Numba back end's
``apply_fused`` on a fresh ``zero_state``: a block on the wires below m runs on the first 2^m
amplitudes, a first block anywhere writes U|0> into its 2^k amplitudes), complex64 and
complex128, blocks at every wire position, against dense matrices applied by ``tensordot``
to the whole state (the oracle); and states changed by other operations in between, which
must be run on in full."""

import numpy as np
import pytest

from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.gate_ops import GateOp

N = 10  # at least FUSION_MIN_QUBITS: the block kernel's layouts, not the whole register


def tolerance(dtype):
    return 2e-6 if dtype == np.complex64 else 1e-12


def random_unitary(dim, rng):
    q, r = np.linalg.qr(rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim)))
    return q * (np.diagonal(r) / np.abs(np.diagonal(r)))


def dense_apply(psi, n, matrix, wires):
    """``matrix`` (its local bit j = wire wires[j]) on the n-qubit state ``psi``: the oracle."""
    k = len(wires)
    t = psi.astype(complex).reshape((2,) * n)  # axis a = wire n - 1 - a
    axes = [n - 1 - w for w in reversed(wires)]  # the matrix's row bits, most significant first
    m = matrix.reshape((2,) * (2 * k))
    t = np.tensordot(m, t, axes=(list(range(k, 2 * k)), axes))
    return np.moveaxis(t, list(range(k)), axes).reshape(-1)


def block_ops(wires, rng):
    """A block on ``wires``: random one- and two-qubit unitaries, a named gate, a diagonal."""
    ops = [GateOp(random_unitary(2, rng), (w,)) for w in wires]
    for a, b in zip(wires, wires[1:]):
        ops.append(GateOp(random_unitary(4, rng), (a, b)))
    ops.append(GateOp("h", (wires[-1],)))
    if len(wires) > 1:
        ops += [GateOp("cz", (wires[0], wires[-1])), GateOp("rzz", (wires[-1], wires[0]), (0.7,))]
    return ops


def zero_vector(n):
    psi = np.zeros(1 << n, complex)
    psi[0] = 1
    return psi


def run_oracle(psi, n, ops):
    from qdiff.quantum.lang.gates import gate_spec

    for op in ops:
        m = op.gate if isinstance(op.gate, np.ndarray) else gate_spec(op.gate).matrix(*op.params)
        psi = dense_apply(psi, n, np.asarray(m), op.wires)
    return psi


BLOCKS = [(0, 1, 2), (0, 1, 2, 3, 4, 5, 6, 7), (3, 4, 5, 6), (1, 5, 8), (6, 7, 8, 9),
          (9,), (0, 9), (2, 3, 4, 5, 6, 7, 8, 9)]


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("wires", BLOCKS)
def test_first_block_on_a_fresh_state_matches_the_dense_matrices(wires, dtype):
    rng = np.random.default_rng(sum(wires) + len(wires))
    be = get_backend("numba")
    ops = block_ops(wires, rng)
    want = run_oracle(zero_vector(N), N, ops)
    got = be.apply_fused(be.zero_state(N, dtype), N, wires, ops)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, atol=10 * tolerance(dtype), rtol=0)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_blocks_reaching_higher_wires_one_after_another_match_the_dense_matrices(dtype):
    # the part not zero grows 2^3, 2^8, 2^9, then the whole state; then lower wires again
    rng = np.random.default_rng(7)
    be = get_backend("numba")
    plan = [(0, 1, 2), (2, 5, 7), (0, 8), (3, 9), (0, 1, 2, 3), (4, 6)]
    psi = be.zero_state(N, dtype)
    want = zero_vector(N)
    for wires in plan:
        ops = block_ops(wires, rng)
        psi = be.apply_fused(psi, N, wires, ops)
        want = run_oracle(want, N, ops)
        np.testing.assert_allclose(psi, want, atol=20 * tolerance(dtype), rtol=0,
                                   err_msg=f"after the block on {wires}")


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_a_fresh_state_changed_by_another_operation_runs_in_full(dtype):
    # a gate on the top wire between the blocks: the amplitudes past 2^3 are no longer zero,
    # a block on wires 0-2 must run on all of them
    rng = np.random.default_rng(3)
    be = get_backend("numba")
    first, second = block_ops((0, 1, 2), rng), block_ops((1, 2), rng)
    psi = be.apply_fused(be.zero_state(N, dtype), N, (0, 1, 2), first)
    psi = be.apply_gate(psi, N, "h", [9])
    psi = be.apply_fused(psi, N, (1, 2), second)
    want = run_oracle(run_oracle(zero_vector(N), N, first), N, [GateOp("h", (9,))])
    np.testing.assert_allclose(psi, run_oracle(want, N, second), atol=20 * tolerance(dtype),
                               rtol=0)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_a_fresh_state_overwritten_in_place_runs_in_full(dtype):
    # written by NumPy, not by a back-end operation: amplitude 0 no longer 1 tells
    rng = np.random.default_rng(4)
    be = get_backend("numba")
    psi = be.zero_state(N, dtype)
    start = rng.normal(size=1 << N) + 1j * rng.normal(size=1 << N)
    start /= np.linalg.norm(start)
    psi[:] = start
    ops = block_ops((0, 1, 2), rng)
    np.testing.assert_allclose(be.apply_fused(psi, N, (0, 1, 2), ops),
                               run_oracle(start.astype(dtype), N, ops),
                               atol=20 * tolerance(dtype), rtol=0)


def test_a_copy_of_a_fresh_state_runs_in_full_and_leaves_the_original_alone():
    rng = np.random.default_rng(5)
    be = get_backend("numba")
    psi = be.zero_state(N)
    twin = be.copy(psi)
    twin[1:] = 0.5  # not |0...0>, and not the remembered state
    twin /= np.linalg.norm(twin)
    ops = block_ops((0, 1), rng)
    want = run_oracle(twin, N, ops)
    np.testing.assert_allclose(be.apply_fused(twin, N, (0, 1), ops), want, atol=1e-12)
    np.testing.assert_allclose(be.apply_fused(psi, N, (0, 1), ops),
                               run_oracle(zero_vector(N), N, ops),
                               atol=1e-12)
