"""The fusion cost model: each block's width chosen by its price (``FusionWidth``: passes
over the state, the blocks' arithmetic in the gates' sparse forms) instead of the widest that
fits; never a dearer plan than the widest one, the same state to 1e-12, and the price the
fusion pass reports."""

import numpy as np
import pytest
from test_gate_fusion import ALL_GATES, _check_plan, _random_program

import qdiff
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
    # (not fewer passes necessarily: diagonal sweeps and merged neighbours may save passes)
    assert stats.cost > 0
    reference = np.asarray(qm.run(program, angles, fuse=False, backend="numpy").values)
    for backend in ("numpy", "numba"):
        got = np.asarray(qm.run(fused, angles, fuse=False, backend=backend).values)
        assert np.abs(got - reference).max() < 1e-12
    got = np.asarray(qm.run(program, angles, fuse=True, backend="numba").values)
    assert np.abs(got - reference).max() < 1e-12


def _check_commuting_plan(gate_wires, diagonal, blocks, width):
    # every gate once; gates on a shared wire keep their order unless both are diagonal
    order = [i for block in blocks for i in block]
    assert sorted(order) == list(range(len(gate_wires)))
    position = {g: k for k, g in enumerate(order)}
    for i in range(len(gate_wires)):
        for j in range(i + 1, len(gate_wires)):
            if set(gate_wires[i]) & set(gate_wires[j]) and not (diagonal[i] and diagonal[j]):
                assert position[i] < position[j], (i, j, blocks)
    for block in blocks:
        wires = set().union(*(gate_wires[i] for i in block))
        limit = width.diagonal_width if all(diagonal[i] for i in block) else int(width)
        assert len(wires) <= max(limit, int(width)) or len(block) == 1


@pytest.mark.parametrize("seed", range(3))
def test_diagonal_blocks_merge_only_across_gates_they_commute_with(seed):
    rng = np.random.default_rng(seed)
    gates = ["h", "rx", "cx", "cz", "cphase", "rzz", "rz", "crz", "mcz", "s"]
    for _ in range(20):
        n = int(rng.integers(4, 16))
        ops = random_circuit(n, int(rng.integers(5, 60)), rng, gates=gates)
        wires = [op.wires for op in ops]
        forms = [gate_form(op.gate) for op in ops]
        costs = [f.cost for f in forms]
        diagonal = [f.kind == "diagonal" for f in forms]
        width = FusionWidth(4, flops_per_pass=2.0, dense=False, diagonal_width=7)
        plan = plan_blocks(wires, width, costs, diagonal)
        _check_commuting_plan(wires, diagonal, plan, width)
        assert (plan_cost(plan, wires, costs, width, diagonal)
                <= plan_cost(plan_blocks(wires, width, costs), wires, costs, width, diagonal)
                + 1e-9)


def qft_program(n):
    def qft(angles):
        q = qm.qubits(n)
        for w in range(n):
            qm.ry(angles[w], q[w])
        for j in reversed(range(n)):
            qm.h(q[j])
            for k in reversed(range(j)):
                qm.cphase(np.pi / 2 ** (j - k), q[j], q[k])
        return qm.state(q)
    return qft


def test_the_qft_runs_its_phases_as_few_diagonal_sweeps():
    # the controlled phases between the H gates commute: the planner gathers them into
    # diagonal blocks wider than the block kernel's (one table sweep each)
    n = 12
    angles = np.linspace(0.1, 1.2, n)
    program = qdiff.trace(qft_program(n), angles)
    width = get_backend("numba").fusion_width(n)
    assert width.diagonal_width == 12
    fused, stats = fuse_gates(program, width, report=True)
    plain = FusionWidth(*width.__reduce__()[1][:5])  # the same price list, no table sweep
    _, without = fuse_gates(program, plain, report=True)
    assert stats.passes <= without.passes and stats.cost < without.cost
    assert stats.widest > int(width)
    reference = np.asarray(qm.run(program, angles, fuse=False, backend="numpy").values)
    got = np.asarray(qm.run(program, angles, backend="numba").values)
    assert np.abs(got - reference).max() < 1e-12
    # the QFT of a product state, from its definition: amplitude k of QFT|x> summed over x
    psi = np.ones(1)
    for w in range(n):  # ry(a)|0> on wire w (wire 0 least significant)
        psi = np.kron([np.cos(angles[w] / 2), np.sin(angles[w] / 2)], psi)
    size = 1 << n
    x = np.arange(size)
    rev = np.array([int(format(k, f"0{n}b")[::-1], 2) for k in range(size)])
    dft = np.exp(2j * np.pi * np.outer(x, x) / size) / np.sqrt(size)
    assert np.abs(got - (dft @ psi)[rev]).max() < 1e-10


def test_a_graph_state_gathers_its_cz_gates_into_diagonal_sweeps():
    # h on every wire, then cz on a ring and chords, in the order a transpiler interleaves
    # them: moved late, the cz gates leave the h blocks alone and fill diagonal sweeps
    n = 12
    edges = [(k, (k + 1) % n) for k in range(n)] + [(0, 6), (2, 9), (4, 11), (1, 7)]

    def graph():
        q = qm.qubits(n)
        done = set()
        for a, b in edges:
            for w in (a, b):
                if w not in done:
                    qm.h(q[w])
                    done.add(w)
            qm.cz(q[a], q[b])
        return qm.state(q)

    program = qdiff.trace(graph)
    width = get_backend("numba").fusion_width(n)
    fused, stats = fuse_gates(program, width, report=True)
    _, without = fuse_gates(program, FusionWidth(*width.__reduce__()[1][:5]), report=True)
    assert stats.cost < without.cost
    blocks = [e for e in fused.eqns if e.primitive.name == "fused_gate"]
    assert any(all(p[0] == "cz" for p in e.params["parts"]) for e in blocks)
    x = np.arange(1 << n)
    phase = sum(((x >> a) & (x >> b) & 1) for a, b in edges)
    want = (-1.0) ** phase / np.sqrt(1 << n)
    got = np.asarray(qm.run(program, backend="numba").values)
    assert np.abs(got - want).max() < 1e-12


def test_a_row_of_swaps_merges_into_one_block():
    # swaps on pairs of wires that the greedy planner leaves one pass each (their wires were
    # last touched by different blocks) merge as neighbours: one pass for the row
    n = 16
    gates = ([(w,) for w in range(16)] + [(w, w + 1) for w in range(7)]
             + [(w, w + 1) for w in range(8, 15)] + [(4, 11), (5, 10), (6, 9), (7, 8)])
    forms = [gate_form("h" if len(w) == 1 else "cx" if k < 30 else "swap")
             for k, w in enumerate(gates)]
    width = get_backend("numba").fusion_width(n)
    costs = [f.cost for f in forms]
    diagonal = [f.kind == "diagonal" for f in forms]
    plan = plan_blocks(gates, width, costs, diagonal)
    _check_commuting_plan(gates, diagonal, plan, width)
    swaps = [k for k in range(len(gates)) if forms[k].spec.name == "swap"]
    assert sum(any(k in block for k in swaps) for block in plan) == 1
