"""The block encoding moves a waiting diagonal past permutations (conjugated: it reads its
rows through the inverse permutation) and past gates off its wires, so that a layer of
``ry, rz`` and a ``cx`` ladder costs one diagonal sweep instead of one per wire: against the
dense matrices of the gates on random states, complex64 and complex128. The merged
diagonal is filled as one phase per row where its gates' phases are linear in their angles,
gate by gate otherwise."""

import numpy as np
import pytest

from qdiff.quantum.lang.gate_forms import gate_form
from qdiff.quantum.lang.gates import GateSpec, gate_spec
from qdiff.quantum.simulator import block_encoding, get_backend
from qdiff.quantum.simulator.block_encoding import OP_DIAG, OP_PERM, _phase_linear, encode_block
from qdiff.quantum.simulator.gate_ops import GateOp
from tests.quantum.simulator.test_paired_block_ops import dense_result
from tests.quantum.simulator.test_sparse_gates import random_state, tolerance

RNG = np.random.default_rng(47)


def hea_layers(wires, layers):
    ops = []
    for _ in range(layers):
        for w in wires:
            ops += [GateOp("ry", (w,), (float(RNG.uniform(-3, 3)),)),
                    GateOp("rz", (w,), (float(RNG.uniform(-3, 3)),))]
        ops += [GateOp("cx", (a, b)) for a, b in zip(wires[:-1], wires[1:])]
    return ops


def test_an_ansatz_layer_costs_one_diagonal_sweep_not_one_per_wire():
    kinds, *_ = encode_block(range(6), hea_layers(list(range(6)), 3))
    sweeps = kinds[kinds != OP_PERM].tolist()
    # per layer: the diagonal of the previous layer's rz gates (moved past its cx ladder),
    # then the ry gates as three pairs; the last layer's diagonal closes the block
    assert sweeps.count(OP_DIAG) == 3
    assert len(sweeps) == 3 + 3 * 3


# gates of every sparse kind: permutations with and without phases and controls, diagonals
# with controls, dense gates with controls, one-qubit runs
_GATES = {"cx": 0, "cy": 0, "swap": 0, "x": 0, "y": 0, "iswap": 0, "cz": 0, "rz": 1,
          "rzz": 1, "phase": 1, "cphase": 1, "crz": 1, "t": 0, "ry": 1, "rx": 1, "h": 0,
          "crx": 1, "u": 3, "rxx": 1}


# a permutation that is not its own inverse, with phases: |t> -> phase |t + 1 mod 4>
CYCLE = gate_spec("unitary", matrix=np.roll(np.eye(4), 1, axis=0) * np.exp(1j * np.arange(4)))


def random_ops(wires, count, rng):
    names = sorted(_GATES)
    ops = []
    for _ in range(count):
        name = names[int(rng.integers(len(names)))]
        width = gate_spec(name).num_qubits
        on = tuple(int(w) for w in rng.permutation(wires)[:width])
        ops.append(GateOp(name, on, tuple(float(p) for p in rng.uniform(-3, 3, _GATES[name]))))
    ops.append(GateOp(gate_spec("mcx", num_controls=2), (wires[0], wires[2], wires[1])))
    ops.insert(count // 2, GateOp(CYCLE, (wires[3], wires[1])))
    ops.insert(count // 3, GateOp(CYCLE, (wires[0], wires[4])))
    return ops


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_diagonals_moved_past_permutations_match_the_dense_matrices(dtype):
    n = 10
    be = get_backend("numba")
    for seed, wires in enumerate(((0, 1, 2, 3, 4), (1, 4, 5, 8, 9), (0, 2, 3, 7, 9),
                                  (2, 3, 4, 5, 6, 7))):
        rng = np.random.default_rng(seed)
        for ops in (hea_layers(list(wires), 2), random_ops(wires, 40, rng),
                    [g for g in random_ops(wires, 60, rng)
                     if g.gate in ("cx", "cy", "swap", "rz", "cz", "crz", "rzz", "ry", "y")]):
            psi = random_state(n, dtype)
            got = be.apply_fused(psi.copy(), n, wires, ops)
            np.testing.assert_allclose(got, dense_result(psi, n, ops), rtol=0,
                                       atol=10 * tolerance(dtype), err_msg=f"{wires}, {ops}")


def test_a_diagonal_waits_past_a_dense_gate_off_its_wires_only():
    # rz on wire 0, then crx controlled by wire 0 on wire 1 (commutes: one diagonal at the
    # end), then an rx on wire 0 (does not commute: the diagonal comes first)
    ops = [GateOp("ry", (0,), (0.3,)), GateOp("rz", (0,), (0.5,)),
           GateOp("crx", (0, 1), (0.7,)), GateOp("rz", (1,), (0.2,))]
    kinds, *_ = encode_block(range(3), ops)
    assert kinds.tolist().count(OP_DIAG) == 1 and kinds[-1] == OP_DIAG
    psi = random_state(9, np.complex128)
    got = get_backend("numba").apply_fused(psi.copy(), 9, (0, 1, 2), ops)
    np.testing.assert_allclose(got, dense_result(psi, 9, ops), atol=1e-12)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_an_ansatz_staircase_block_sweeps_once_per_wire_not_twice(dtype):
    # the order the planner cuts an ansatz into: ry(w), rz(w), cx(w - 1, w), ry(w - 1), ...;
    # each lone rz folds into its ry (one complex 2x2) instead of a diagonal sweep of its own
    wires = (2, 3, 4, 5, 6)
    ops = []
    for a, b in zip(wires[::-1], wires[-2::-1]):
        ops += [GateOp("ry", (a,), (0.3 * a,)), GateOp("rz", (a,), (0.2 - a,)),
                GateOp("cx", (b, a))]
    kinds, *_ = encode_block(wires, ops)
    assert OP_DIAG not in kinds.tolist() and len(kinds) == 2 * (len(wires) - 1)
    psi = random_state(9, dtype)
    got = get_backend("numba").apply_fused(psi.copy(), 9, wires, ops)
    np.testing.assert_allclose(got, dense_result(psi, 9, ops), rtol=0,
                               atol=5 * tolerance(dtype))


def test_merged_diagonals_filled_as_phases_equal_the_products_of_their_gates(monkeypatch):
    # a merged diagonal of phase gates (rz, phase, crz, cphase, rzz: each entry c e^{ikθ})
    # is filled as one exp of its angles' weighted sums; gate by gate gives the same pool
    rng = np.random.default_rng(5)
    blocks = []
    for wires in ((0, 1, 2, 3, 4), (1, 4, 5, 8, 9)):
        for ops in (hea_layers(list(wires), 2), random_ops(wires, 40, rng)):
            blocks.append((wires, ops))
    by_phases = [encode_block(wires, ops) for wires, ops in blocks]
    monkeypatch.setattr(block_encoding, "_SKELETONS", {})
    monkeypatch.setattr(block_encoding, "_phase_linear", lambda form: None)
    for (wires, ops), fast in zip(blocks, by_phases):
        slow = encode_block(wires, ops)
        assert OP_DIAG in fast[0].tolist()
        for a, b in zip(fast, slow):
            np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)


def _chirp(t):
    return np.array([1, np.exp(1j * t * t)])


# a diagonal gate whose phase is not linear in its angle
CHIRP = GateSpec("chirp", 1, 1, "diagonal", lambda t: np.diag(_chirp(t)), _diagonal=_chirp)


def test_a_diagonal_gate_whose_phase_is_not_linear_in_its_angle_is_filled_gate_by_gate():
    assert _phase_linear(gate_form(CHIRP)) is None
    assert _phase_linear(gate_form(gate_spec("crz"))) is not None
    ops = [GateOp("ry", (0,), (0.3,)), GateOp("rz", (0,), (0.5,)), GateOp(CHIRP, (1,), (1.7,)),
           GateOp("cx", (0, 1)), GateOp("crz", (1, 2), (0.4,)), GateOp(CHIRP, (2,), (-0.6,)),
           GateOp("ry", (1,), (0.2,))]
    psi = random_state(9, np.complex128)
    got = get_backend("numba").apply_fused(psi.copy(), 9, (0, 1, 2), ops)
    np.testing.assert_allclose(got, dense_result(psi, 9, ops), atol=1e-12)
