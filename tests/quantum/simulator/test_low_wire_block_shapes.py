"""Blocks whose lowest wire is 0, 1 or 2, in every shape the block kernel's batch layouts
take (k = 1..8 wires: contiguous, with a gap of one wire, with the top wire as a far one),
complex64 and complex128, on a random state against the dense matrices of the block's gates
applied by ``tensordot`` (the oracle). Contiguous blocks on wires 2..k+1 with k >= 6
transpose their batches; the rest from wire 2 gather runs of 4 groups."""

import numpy as np
import pytest

from qdiff.quantum.simulator.numba_block_kernels import TRANSPOSE_FROM_TWO, transposes_from_two
from tests.quantum.simulator.test_block_layouts import assert_block_matches_dense

N = 14  # a batch of at least MIN_BATCH groups for 8 wires


def shapes():
    found = {}
    for low in (0, 1, 2):
        for k in range(1, 9):
            run = tuple(range(low, low + k))
            for ws in (run, run[:-1] + (low + k,), run[:-1] + (N - 1,)):
                found[ws] = None
    return list(found)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("wires", shapes(), ids=str)
def test_low_wire_blocks_of_every_shape_match_the_dense_matrices(wires, dtype):
    assert_block_matches_dense(wires, dtype, seed=len(wires) * 100 + sum(wires), num_qubits=N)


def test_only_wide_contiguous_blocks_from_wire_two_transpose():
    assert transposes_from_two(np.arange(2, 2 + TRANSPOSE_FROM_TWO))
    assert transposes_from_two(np.arange(2, 10))
    assert not transposes_from_two(np.arange(2, 1 + TRANSPOSE_FROM_TWO))  # narrow
    assert not transposes_from_two(np.array([2, 3, 4, 5, 6, 8]))  # a gap
    assert not transposes_from_two(np.array([2, 3, 4, 5, 6, 13]))  # a far wire
    assert not transposes_from_two(np.arange(3, 9))  # from wire 3: contiguous rows
