"""The fusion cost model: each block's width chosen by its price (``FusionWidth``: passes
over the state, the blocks' arithmetic in the gates' sparse forms) instead of the widest that
fits; never a dearer plan than the widest one, the same state to 1e-12, and the price the
fusion pass reports."""

import numpy as np
import pytest
from test_gate_fusion import ALL_GATES, _check_plan, _random_program

from qdiff import quantum as qm
from qdiff.quantum.lang.fusion import FusionWidth, fuse_gates, plan_blocks, plan_cost
from qdiff.quantum.lang.gate_forms import gate_form
from qdiff.quantum.simulator import get_backend, random_circuit

NUMBA_20 = get_backend("numba").fusion_width(20)


def test_the_back_ends_give_their_price_lists():
    assert isinstance(NUMBA_20, FusionWidth) and int(NUMBA_20) == 8 and not NUMBA_20.dense
    numpy_16 = get_backend("numpy").fusion_width(16)
    assert isinstance(numpy_16, FusionWidth) and int(numpy_16) == 5 and numpy_16.dense
    assert get_backend("numba").fusion_width(4) == 4  # small registers: the whole register


def test_a_block_on_the_lowest_wires_must_pay_for_its_transpose():
    # two one-qubit gates: on wires 5 and 9 one block (a pass saved); on wires 0 and 9 the
    # block kernel would transpose its batches (LOW_PASS_COST passes): two gates alone
    costs = [gate_form("h").cost] * 2
    assert plan_blocks([(5,), (9,)], NUMBA_20, costs) == [[0, 1]]
    assert plan_blocks([(0,), (9,)], NUMBA_20, costs) == [[0], [1]]
    # enough gates on wire 0 pay for it
    many = [(0,), (9,), (0, 9), (0,), (9,), (0, 9), (0,), (9,)]
    costs = [gate_form("h" if len(w) == 1 else "cx").cost for w in many]
    assert plan_blocks(many, NUMBA_20, costs) == [list(range(len(many)))]


def test_a_dense_block_wider_than_it_pays_is_split():
    # a back end multiplying 2^k x 2^k matrices: 8 multiply-adds per amplitude (three
    # wires) cost more than the pass they save over a one-qubit gate alone
    width = FusionWidth(3, flops_per_pass=1.0, dense=True)
    gates = [(0,), (1,), (0, 1), (2,)]
    costs = [2.0, 2.0, 0.0, 2.0]
    assert plan_blocks(gates, 3, costs) == [[0, 1, 2, 3]]  # the widest that fits
    assert plan_blocks(gates, width, costs) == [[0, 1, 2], [3]]
    assert plan_cost([[0, 1, 2], [3]], gates, costs, width) == 5.0 + 3.0


@pytest.mark.parametrize("seed", range(4))
def test_priced_plans_are_valid_and_never_dearer_than_the_widest(seed):
    rng = np.random.default_rng(seed)
    for width in (NUMBA_20, FusionWidth(5, flops_per_pass=16.0),
                  FusionWidth(4, flops_per_pass=0.5, low_pass_cost=6.0, low_bits=2)):
        for _ in range(20):
            n = int(rng.integers(3, 12))
            ops = random_circuit(n, int(rng.integers(1, 40)), rng)
            wires = [op.wires for op in ops]
            costs = [gate_form(op.gate).cost for op in ops]
            priced = plan_blocks(wires, width, costs)
            _check_plan(wires, priced, int(width))
            widest = plan_blocks(wires, int(width))
            assert (plan_cost(priced, wires, costs, width)
                    <= plan_cost(widest, wires, costs, width) + 1e-9)


def test_priced_fusion_computes_the_same_state_and_reports_its_price():
    rng = np.random.default_rng(18)
    n = 10  # the Numba back end prices its blocks from FUSION_MIN_QUBITS on
    ops = random_circuit(n, 80, rng, gates=ALL_GATES)
    program, angles = _random_program(n, ops)
    width = get_backend("numba").fusion_width(n)
    fused, stats = fuse_gates(program, width, report=True)
    _, widest = fuse_gates(program, int(width), report=True)
    assert 0 < stats.cost <= widest.cost + 1e-9 or widest.cost == 0
    assert stats.cost > 0 and stats.passes >= widest.passes
    reference = np.asarray(qm.run(program, angles, fuse=False, backend="numpy").values)
    for backend in ("numpy", "numba"):
        got = np.asarray(qm.run(fused, angles, fuse=False, backend=backend).values)
        assert np.abs(got - reference).max() < 1e-12
    got = np.asarray(qm.run(program, angles, fuse=True, backend="numba").values)
    assert np.abs(got - reference).max() < 1e-12
