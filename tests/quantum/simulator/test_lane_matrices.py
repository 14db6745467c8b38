"""`lane_matrices` through `batched.lane_circuit_and_inverses`: each entry's matrix for every
member equals the product of its gates' dense matrices (``GateSpec.matrix`` at the member's
angle), and the inverses are their adjoints, last entry first; permutation entries and the
lanes that pad the last tile are zero. Runs of one, three and four one-wire gates, a
multi-angle gate (``u``), controlled and two-wire rotations, fixed gates, a CNOT ladder,
an angle the batch shares, and 70 members (two tiles of 35)."""

from __future__ import annotations

import numpy as np

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.execution.batched import (
    angle_rows,
    angle_table,
    batched_circuit,
    lane_circuit,
    lane_circuit_and_inverses,
    one_wire_runs,
)

MEMBERS = 70


def circuit(w, x):
    q = qm.qubits(3)
    qm.ry(w[0], q[0]); qm.rz(w[1], q[0]); qm.rx(w[2] * x, q[0])
    qm.h(q[1]); qm.u(w[3], w[4], w[5], q[1])
    qm.ry(x, q[2])
    qm.cx(q[0], q[1]); qm.cx(q[1], q[2])
    qm.crx(w[6], q[2], q[0]); qm.rxx(w[7], q[0], q[2]); qm.rz(w[8], q[1])
    qm.cz(q[0], q[1])
    return qm.expval("ZZI", q)


def _dense_entry(gates, table, member) -> np.ndarray:
    """The oracle: the entry's gates' matrices multiplied in NumPy (later gates on the left;
    a run of several one-wire gates as 2x2 blocks)."""
    product = None
    for gate in gates:
        spec = gate.acting
        m = spec.matrix(table[gate.angle, member]) if gate.angle is not None else spec.matrix()
        if len(gates) > 1:
            m = m[:2, :2]
        product = m if product is None else m @ product
    out = np.zeros((4, 4), complex)
    out[:product.shape[0], :product.shape[1]] = product
    return out


def test_lane_matrices_equal_the_products_of_the_gates_dense_matrices():
    rng = np.random.default_rng(5)
    w = rng.uniform(-np.pi, np.pi, (MEMBERS, 9))
    program = qdiff.program(circuit).trace(w[0], 0.3)
    c = batched_circuit(program)
    table = angle_table(c, angle_rows(c, [w, np.float64(0.3)], (True, False), MEMBERS),
                        MEMBERS)
    (_, _, _, mats, tables), inverses = lane_circuit_and_inverses(c, table)
    np.testing.assert_array_equal(mats, lane_circuit(c, table)[3])
    order, runs, permutes, _ = one_wire_runs(c)
    assert len(tables) == 1 and {1, 3, 4} <= set(np.diff(runs)[permutes < 0].tolist())
    tiles, entries, _, _, _, lanes = mats.shape
    assert (tiles, lanes) == (2, 35)
    for t in range(tiles):
        for lane in range(lanes):
            b = t * lanes + lane
            got = mats[t, :, 0, :, :, lane] + 1j * mats[t, :, 1, :, :, lane]
            undo = inverses[t, ::-1, 0, :, :, lane] + 1j * inverses[t, ::-1, 1, :, :, lane]
            for e in range(entries):
                gates = [c.gates[g] for g in order[runs[e]:runs[e + 1]]]
                want = np.zeros((4, 4)) if permutes[e] >= 0 or b >= MEMBERS \
                    else _dense_entry(gates, table, b)
                np.testing.assert_allclose(got[e], want, rtol=0, atol=1e-14)
                np.testing.assert_allclose(undo[e], want.conj().T, rtol=0, atol=1e-14)
