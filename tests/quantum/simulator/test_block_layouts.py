"""The block kernel's batch layouts (contiguous rows, runs of 2^w contiguous groups below the
lowest block wire w >= 2, a transpose below that), each on a random state against the dense
matrices of the block's gates (the oracle), complex64 and complex128: blocks whose lowest
wire is 0 to 4, at 8 wires (a batch of 128 groups) and at 3 (2048 groups)."""

import numpy as np
import pytest

from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.indexing import index_layout
from qdiff.quantum.simulator.numba_block_kernels import (
    BLOCK_AMPS,
    MIN_BATCH,
    block_chunk,
    block_low,
    block_touch,
)
from tests.quantum.simulator.test_blocks_on_zero_wires import block_ops, run_oracle
from tests.quantum.simulator.test_sparse_gates import random_state, tolerance

N = 14  # above MIN_BATCH groups for an 8-wire block, with B = 128 groups to a batch


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("wires", [(0, 3, 9), (1, 2, 5, 6, 9, 10, 12, 13),
                                   (2, 3, 7, 8, 9, 10, 12, 13), (2, 6, 11),
                                   (3, 4, 5, 6, 7, 8, 9, 10), (4, 9, 11),
                                   (6, 7, 8, 9, 10, 11, 12, 13)])
def test_blocks_on_every_layout_match_the_dense_matrices(wires, dtype):
    assert_block_matches_dense(wires, dtype, seed=sum(wires))


def assert_block_matches_dense(wires, dtype, seed, num_qubits=N):
    """A random block of gates on ``wires``, applied by the Numba block kernel to a random
    state of ``num_qubits``, equals its gates' dense matrices applied one by one."""
    rng = np.random.default_rng(seed)
    psi = random_state(num_qubits, dtype)
    ops = block_ops(list(wires), rng)
    got = get_backend("numba").apply_fused(psi.copy(), num_qubits, wires, ops)
    assert got.dtype == dtype
    expected = run_oracle(psi.astype(np.complex128), num_qubits, ops)
    assert np.max(np.abs(got - expected)) < tolerance(dtype)


@pytest.mark.parametrize("wires", [(0, 3, 9), (1, 2, 5, 6, 9, 10, 12, 13), (4, 9, 11),
                                   (0, 1, 2, 3, 4, 5, 6, 7), (6, 7, 8, 9, 10, 11, 12, 13)])
def test_touch_reads_each_line_of_a_batch_once_and_only_for_blocks_with_gaps(wires):
    # block_touch streams a batch's memory in before the gather: one read per cache line of
    # every chunk of the batch, nothing outside it; block_chunk asks for it only where the
    # block's wires inside a chunk leave gaps (the gather would sweep the chunk several times)
    layout = index_layout(N, wires)
    groups = 1 << (N - len(wires))
    B = min(groups, max(MIN_BATCH, BLOCK_AMPS >> len(wires)))  # as NumbaBackend.apply_fused
    chunk, touch, heads_outer = block_chunk(B, layout.positions, block_low(layout.offsets))
    inside = [w for w in wires if (1 << w) < chunk]
    assert touch == (len(inside) >= 2 and inside[-1] - inside[0] >= len(inside))
    g0 = groups - B  # the last batch
    batch = {sum(((g0 + b) >> j & 1) << w for j, w in enumerate(sorted(
        set(range(N)) - set(wires)))) | int(o) for b in range(B) for o in layout.offsets}
    psi = np.zeros(1 << N, complex)
    marks = np.arange(1 << N, dtype=float)
    psi.real = marks
    base = min(batch)
    sink = np.zeros(1)
    block_touch(psi, base, chunk, layout.offsets, sink)
    lines = sorted({i - i % 4 for i in batch})
    assert sink[0] == base + sum(lines)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("wires", [(0, 1, 14, 15), (0, 13, 14, 15), (1, 13, 14, 15)])
def test_transposes_by_row_heads_match_the_dense_matrices(wires, dtype):
    # a transposed batch whose chunks hold one or two row heads is read a row head at a
    # time (layout 3); n = 16 so that a batch (2048 groups) is two chunks or more
    n = 16
    layout = index_layout(n, wires)
    B = max(MIN_BATCH, BLOCK_AMPS >> len(wires))
    assert block_chunk(B, layout.positions, block_low(layout.offsets))[2]
    assert_block_matches_dense(wires, dtype, seed=sum(wires), num_qubits=n)
