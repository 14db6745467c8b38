"""Runs of one-qubit gates in a block are multiplied into one 2x2 each, all runs of the block
in one compiled call (``block_encoding.fill_folds``): every way a gate enters the product
(a constant, a Pauli rotation of its angle, a matrix computed at the call: a raw matrix or
a parametric gate such as ``u``), and the op kind that follows the product, against the
dense matrices on random states."""

import numpy as np
import pytest

from qdiff.quantum.lang.gates import gate_spec
from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.block_encoding import (
    OP_DENSE1,
    OP_DIAG,
    OP_PERM,
    OP_REAL1,
    encode_block,
)
from qdiff.quantum.simulator.gate_ops import GateOp
from tests.quantum.simulator.test_blocks_on_zero_wires import random_unitary
from tests.quantum.simulator.test_paired_block_ops import dense_result
from tests.quantum.simulator.test_sparse_gates import random_state, tolerance

RNG = np.random.default_rng(83)

# one-qubit gates of every kind a run takes: constants, rotations about X, Y, Z, and
# parametric gates that are no Pauli rotation
_ONE_QUBIT = {"h": 0, "x": 0, "s": 0, "t": 0, "sx": 0, "rx": 1, "ry": 1, "rz": 1, "phase": 1,
              "u": 3}


def random_runs(wires, count):
    names = sorted(_ONE_QUBIT)
    ops = []
    for k in range(count):
        w = int(RNG.choice(wires))
        if k % 7 == 3:
            ops.append(GateOp(random_unitary(2, RNG), (w,), ()))
            continue
        if k % 5 == 1:  # a rotation about every one-qubit Pauli word, I included
            word = "IXYZ"[k % 4]
            ops.append(GateOp(gate_spec("pauli_rot", pauli=word), (w,),
                              (float(RNG.uniform(-3, 3)),)))
            continue
        name = names[int(RNG.integers(len(names)))]
        ops.append(GateOp(name, (w,), tuple(float(a) for a in
                                            RNG.uniform(-3, 3, _ONE_QUBIT[name]))))
        if k % 11 == 5:  # a two-qubit gate closes the runs on its wires
            a, b = (int(x) for x in RNG.permutation(wires)[:2])
            ops.append(GateOp("cx", (a, b)))
    return ops


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_runs_of_every_gate_kind_match_the_dense_matrices(dtype):
    n = 10
    be = get_backend("numba")
    for wires in ((0, 1, 2), (1, 4, 5, 8), (2, 3, 4, 5, 6, 7)):
        for _ in range(4):
            ops = random_runs(wires, 30)
            psi = random_state(n, dtype)
            got = be.apply_fused(psi.copy(), n, wires, ops)
            np.testing.assert_allclose(got, dense_result(psi, n, ops), rtol=0,
                                       atol=10 * tolerance(dtype), err_msg=f"{wires}, {ops}")


def test_the_op_kind_follows_the_product_of_the_run():
    # rx(a) rx(-a) is the identity (diagonal), x after rz is anti-diagonal (a permutation
    # with phases), ry ry is real, and a phase after ry makes a complex 2x2
    cases = [([GateOp("rx", (0,), (0.7,)), GateOp("rx", (0,), (-0.7,))], OP_DIAG),
             ([GateOp("rz", (0,), (0.7,)), GateOp("x", (0,))], OP_PERM),
             ([GateOp("ry", (0,), (0.7,)), GateOp("ry", (0,), (0.2,))], OP_REAL1),
             ([GateOp("ry", (0,), (0.7,)), GateOp("phase", (0,), (0.2,))], OP_DENSE1)]
    be = get_backend("numba")
    for ops, kind in cases:
        kinds, *_ = encode_block((0, 1), ops + [GateOp("cx", (0, 1))])
        assert kinds[0] == kind, (ops, kinds)
        psi = random_state(9, np.complex128)
        got = be.apply_fused(psi.copy(), 9, (0, 1), ops)
        np.testing.assert_allclose(got, dense_result(psi, 9, ops), atol=1e-12)


def test_a_raw_matrix_in_a_run_is_read_at_every_call():
    m = random_unitary(2, RNG)
    ops = [GateOp("ry", (0,), (0.3,)), GateOp(m, (0,), ()), GateOp("cx", (0, 1))]
    before = encode_block((0, 1), ops)[5].copy()
    m[:] = m @ random_unitary(2, RNG)  # changed in place: the same array, new entries
    after = encode_block((0, 1), ops)[5]
    assert not np.allclose(before, after)
    psi = random_state(9, np.complex128)
    got = get_backend("numba").apply_fused(psi.copy(), 9, (0, 1), ops)
    np.testing.assert_allclose(got, dense_result(psi, 9, ops), atol=1e-12)
