"""Blocks of diagonal gates applied as one table in one contiguous sweep (the Numba back
end's ``apply_fused`` on diagonal gates, ``DIAGONAL_TABLE``): every diagonal gate of the
table and the diagonal Qiskit library gates, on blocks of up to 12 wires that include the
lowest and the highest wire, complex64 and complex128, against the product of the gates'
diagonals built entry by entry from their matrices."""

import numpy as np
import pytest
from test_sparse_gates import GATES, params_of, random_state, tolerance

from qdiff.quantum.lang.gate_forms import gate_form
from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.gate_ops import GateOp
from qdiff.quantum.simulator.numba_backend import all_diagonal

DIAGONAL = sorted(name for name, spec in GATES.items() if gate_form(spec).kind == "diagonal")


def full_diagonal(ops, n):
    """The diagonal of the gates' product on the register: entry i of each gate's matrix
    diagonal at the gate's local index of i (the oracle)."""
    i = np.arange(1 << n)
    d = np.ones(1 << n, complex)
    for op in ops:
        local = sum(((i >> w) & 1) << j for j, w in enumerate(op.wires))
        d *= np.diagonal(op.gate.matrix(*op.params))[local]
    return d


def test_the_diagonal_gates_are_found():
    assert {"rz", "cz", "cphase", "rzz", "ccz", "csdg"} <= set(DIAGONAL)
    assert not all_diagonal([GateOp("h", (0,))]) and not all_diagonal([])


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", DIAGONAL)
def test_diagonal_blocks_match_the_product_of_the_gate_diagonals(name, dtype):
    spec = GATES[name]
    n = 13
    rng = np.random.default_rng(len(name))
    be = get_backend("numba")
    for block in ((0, 1, 2, 5, 9, 12), (0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 2), (6, 12)):
        if spec.num_qubits > len(block):
            continue
        wires = tuple(int(w) for w in rng.choice(block, spec.num_qubits, replace=False))
        ops = [GateOp(spec, wires, params_of(spec)),
               GateOp(GATES["cphase"], (block[0], block[-1]), (0.41,)),
               GateOp(GATES["rz"], (block[1],), (-1.3,)),
               GateOp(GATES["rzz"], (block[-1], block[0]), (2.2,))]
        psi = random_state(n, dtype)
        want = full_diagonal(ops, n) * psi.astype(complex)
        got = be.apply_fused(psi.copy(), n, block, ops)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, atol=5 * tolerance(dtype), rtol=0,
                                   err_msg=f"{name} on {wires} in block {block}")


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", DIAGONAL)
def test_single_diagonal_gates_on_a_large_register_match_their_diagonal(name, dtype):
    # from FUSION_MIN_QUBITS on, a diagonal gate that changes every amplitude runs as a table
    # sweep; the others through the group kernel: both on the lowest and on high wires
    spec = GATES[name]
    n = 10
    be = get_backend("numba")
    for wires in ((0, 9, 4, 1)[:spec.num_qubits], (7, 2, 8, 5)[:spec.num_qubits]):
        if len(wires) < spec.num_qubits:
            continue
        op = GateOp(spec, wires, params_of(spec))
        psi = random_state(n, dtype)
        want = full_diagonal([op], n) * psi.astype(complex)
        got = be.apply_gate(psi.copy(), n, spec, wires, op.params)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, atol=5 * tolerance(dtype), rtol=0,
                                   err_msg=f"{name} on {wires}")
