"""The adjoint method's reverse sweep over fused blocks (the Numba back end undoes a block of
gates in one pass over ψ and λ and reads every derivative of the block in that pass) gives
the gradient of the gate-by-gate sweep (the NumPy back end: one pass per gate and per
derivative) to 1e-12, on random circuits with every parametrized gate kind, on registers
where blocks are part of the register (n = 10) and where one block is the whole register
(n = 6); parameter shift is the independent check."""

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.quantum import gradient
from qdiff.quantum.gradients.adjoint import _adjoint_blocks
from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.gate_ops import GateOp

ONE_WIRE = {"rx": qm.rx, "ry": qm.ry, "rz": qm.rz, "phase": qm.phase}
TWO_WIRES = {"crx": qm.crx, "cry": qm.cry, "crz": qm.crz, "cphase": qm.cphase,
             "rxx": qm.rxx, "ryy": qm.ryy, "rzz": qm.rzz, "rzx": qm.rzx}
KINDS = [*ONE_WIRE, *TWO_WIRES, "u", "pauli_rot"]


def random_program(n: int, seed: int):
    """A program of every parametrized gate kind, each several times on random wires, with
    fixed gates between; returns (program, number of angles)."""
    rng = np.random.default_rng(seed)
    plan = []
    for _ in range(3):
        for kind in rng.permutation(KINDS):
            wires = [int(w) for w in rng.choice(n, 3, replace=False)]
            plan.append((str(kind), wires, str(rng.choice(["h", "cx", "sx"]))))
    count = sum(3 if kind == "u" else 1 for kind, _, _ in plan)

    def program(w):
        q = qm.qubits(n)
        k = 0
        for kind, (a, b, c), fixed in plan:
            if kind in ONE_WIRE:
                ONE_WIRE[kind](w[k], q[a])
            elif kind in TWO_WIRES:
                TWO_WIRES[kind](w[k], q[a], q[b])
            elif kind == "u":
                qm.u(w[k], w[k + 1], w[k + 2], q[a])
                k += 2
            else:
                qm.pauli_rot(w[k], "XYZ", [q[a], q[b], q[c]])
            k += 1
            if fixed == "cx":
                qm.cx(q[c], q[a])
            else:
                getattr(qm, fixed)(q[b])
        return qm.expval([(0.7, "Z" * 2 + "I" * (n - 2)), (-0.4, "X" + "Y" * (n - 1))], q)

    return qdiff.trace(program, np.zeros(count)), count


@pytest.mark.parametrize("n, seed", [(10, 0), (10, 1), (6, 2)])
def test_fused_adjoint_equals_the_gate_by_gate_adjoint_on_every_parametrized_gate(n, seed):
    program, count = random_program(n, seed)
    w = np.random.default_rng(seed + 10).uniform(-np.pi, np.pi, count)
    fused = gradient(program, w, backend="numba")
    by_gate = gradient(program, w, backend="numpy")
    assert abs(fused.value - by_gate.value) < 1e-12
    np.testing.assert_allclose(fused.grad, by_gate.grad, atol=1e-12, rtol=0)
    if n == 6:  # the independent oracle (2 runs per angle, 6 per controlled rotation)
        shift = gradient(program, w, backend="numpy", method="parameter-shift")
        np.testing.assert_allclose(fused.grad, shift.grad, atol=1e-10, rtol=0)


def test_the_sweep_runs_in_blocks_not_gate_by_gate():
    # the check above compares two different sweeps: the Numba back end undoes blocks of
    # several gates (fewer blocks than gates), the NumPy back end one gate at a time
    ops = [GateOp("ry", (w % 10,), (0.1 * w,)) for w in range(40)]
    blocks = _adjoint_blocks(ops, max(get_backend("numba").adjoint_width(10), 1))
    assert len(blocks) < len(ops) // 4
    assert sorted(k for _, block in blocks for k in block) == list(range(len(ops)))


def test_remembered_block_plans_tell_apart_widths_with_other_prices():
    # the plan of a gate run is remembered by its gates and the width; a FusionWidth is an
    # int, so two widths of one int but other prices must not share a plan
    from qdiff.quantum.gradients.adjoint import _costs, _planned
    from qdiff.quantum.lang.fusion import FusionWidth, plan_blocks

    ops = [GateOp("rz", (w,), (0.1 * w,)) for w in range(6)] + [GateOp("cz", (w, w + 1))
                                                                for w in range(5)]
    widths = [FusionWidth(3, diagonal_width=6),
              FusionWidth(3, flops_per_pass=2.0, dense=False, low_pass_cost=3.5, low_bits=3,
                          diagonal_width=6)]
    plans = []
    for width in widths:
        expected = plan_blocks([op.wires for op in ops], width, _costs(ops))
        plan = _planned(ops, width, forward=True)
        assert [block for _, block in plan] == expected
        assert _planned(ops, width, forward=True) is plan  # remembered
        assert all(wires == sorted({w for k in block for w in ops[k].wires})
                   for wires, block in plan)
        plans.append([block for _, block in plan])
    assert plans[0] != plans[1]
