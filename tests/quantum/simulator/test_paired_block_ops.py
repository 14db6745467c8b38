"""One-qubit runs on two wires applied in one sweep of the Numba block kernel (real pairs,
``rx``-like pairs), the contiguous spans those sweeps take while no permutation has moved a
block's rows, and the one-pass |amplitude|^2 of ``probs``: against the dense matrices of the
gates (``embed``, entry by entry) on random states, complex64 and complex128."""

import numpy as np
import pytest

from qdiff.quantum.lang.gates import gate_spec
from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.block_encoding import (
    OP_DIAG,
    OP_PERM,
    OP_REAL2,
    OP_XPAIR,
    encode_block,
)
from qdiff.quantum.simulator.gate_ops import GateOp
from tests.quantum.simulator.test_sparse_gates import embed, random_state, tolerance

RNG = np.random.default_rng(31)


def dense_result(psi, n, ops):
    want = psi.astype(complex)
    for op in ops:
        matrix = op.gate if isinstance(op.gate, np.ndarray) else gate_spec(op.gate).matrix(
            *op.params)
        want = embed(matrix, op.wires, n) @ want
    return want


def test_rx_runs_on_two_wires_share_one_sweep_and_ry_runs_theirs():
    ops = ([GateOp("rx", (w,), (0.2 + w,)) for w in (0, 2, 5, 6)]
           + [GateOp("rx", (0,), (0.4,))]  # a run: rx rx is still rx-like
           + [GateOp("ry", (w,), (0.3,)) for w in (1, 3)])
    kinds, _, ntg, tgts, *_ = encode_block(range(7), ops)
    assert sorted(kinds.tolist()) == [OP_REAL2, OP_XPAIR, OP_XPAIR]
    # a phase in the run makes it a general complex 2x2: not paired as rx-like
    kinds, *_ = encode_block(range(3), [GateOp("rx", (0,), (0.2,)), GateOp("rz", (0,), (0.1,)),
                                        GateOp("rx", (0,), (0.3,)), GateOp("rx", (1,), (0.5,))])
    assert OP_XPAIR not in kinds.tolist()


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("first", ["none", "cx", "rzz"])
@pytest.mark.parametrize("closing", [False, True])
def test_paired_runs_match_the_dense_matrices_on_every_wire_placement(dtype, first, closing):
    # n = 10, blocks of 5 wires (32 groups: the block kernel runs); layers of rx, ry and h
    # on every wire, the pairs' rows contiguous spans (no permutation yet) or not (a cx
    # first); a diagonal opening or closing the block is multiplied in at the gather or the
    # scatter
    n = 10
    be = get_backend("numba")
    for wires in ((0, 1, 2, 3, 4), (1, 4, 5, 8, 9), (0, 2, 3, 7, 9)):
        for gate in ("rx", "ry", "h"):
            ops = []
            if first == "cx":
                ops.append(GateOp("cx", (wires[3], wires[1])))
            elif first == "rzz":
                ops.append(GateOp("rzz", (wires[0], wires[4]), (0.7,)))
            for w in RNG.permutation(wires):
                params = () if gate == "h" else (float(RNG.uniform(-np.pi, np.pi)),)
                ops.append(GateOp(gate, (int(w),), params))
            ops.append(GateOp("rx", (wires[2],), (1.3,)))
            if closing:
                ops += [GateOp("cz", (wires[1], wires[3])), GateOp("rz", (wires[0],), (0.4,))]
            psi = random_state(n, dtype)
            got = be.apply_fused(psi.copy(), n, wires, ops)
            assert got.dtype == dtype
            np.testing.assert_allclose(got, dense_result(psi, n, ops), rtol=0,
                                       atol=5 * tolerance(dtype),
                                       err_msg=f"{gate} on {wires}, {first}, {closing}")


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_probs_is_the_squared_modulus_in_float64_on_every_back_end(dtype):
    psi = random_state(11, dtype)
    want = np.abs(psi.astype(complex)) ** 2
    for name in ("numpy", "numba"):
        got = get_backend(name).probs(psi, 11)
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        np.testing.assert_allclose(get_backend(name).probs(psi, 11, [3, 0]),
                                   _marginal(want, [3, 0]), rtol=1e-12, atol=0)


def _marginal(p, wires):
    out = np.zeros(1 << len(wires))
    for i, v in enumerate(p):
        out[sum(((i >> w) & 1) << j for j, w in enumerate(wires))] += v
    return out


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_an_rzz_rx_ladder_takes_one_diagonal_and_rx_pairs_not_a_sweep_per_gate(dtype):
    # the order a QAOA layer arrives in from the planner: h, rzz(w-1, w), rx(w-1), ...; the
    # h runs wait and pair up, the rzz gates merge into one diagonal that opens the rx pairs
    wires = (1, 2, 3, 4, 5, 6)
    ops = [GateOp("h", (wires[0],))]
    for a, b in zip(wires, wires[1:]):
        ops += [GateOp("h", (b,)), GateOp("rzz", (a, b), (0.3 + a,)),
                GateOp("rx", (a,), (0.7 - b,))]
    ops.append(GateOp("rx", (wires[-1],), (0.2,)))
    kinds, *_ = encode_block(wires, ops)
    assert kinds.tolist() == [OP_REAL2] * 3 + [OP_DIAG] + [OP_XPAIR] * 3
    n = 10
    psi = random_state(n, dtype)
    got = get_backend("numba").apply_fused(psi.copy(), n, wires, ops)
    np.testing.assert_allclose(got, dense_result(psi, n, ops), rtol=0,
                               atol=5 * tolerance(dtype))


def test_a_layer_between_cx_gates_keeps_its_pairs_when_hoisting_would_split_them():
    # efficient_su2's order: ry, rz on every wire, a cx chain, the next ry, rz layer; hoisted,
    # the next layer's runs would sit between the cx gates and flush one by one
    wires = (0, 1, 2, 3)
    layer = [GateOp(g, (w,), (0.1 * w + 0.3,)) for w in wires for g in ("ry", "rz")]
    ops = layer + [GateOp("cx", (a, b)) for a, b in zip(wires, wires[1:])] + layer
    kinds, *_ = encode_block(wires, ops)
    # the first layer's rz gates wait past the cx chain (one diagonal, conjugated)
    assert kinds.tolist() == [OP_REAL2, OP_REAL2] + [OP_PERM] * 3 + [
        OP_DIAG, OP_REAL2, OP_REAL2, OP_DIAG]
    n = 9
    psi = random_state(n, np.complex128)
    got = get_backend("numba").apply_fused(psi.copy(), n, wires, ops)
    np.testing.assert_allclose(got, dense_result(psi, n, ops), rtol=0, atol=1e-12)
