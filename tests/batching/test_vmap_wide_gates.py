"""`qdiff.vmap` over every gate of the gate table, wide and multi-angle ones included
(``u``, ``mcx``, ``mcz``, ``pauli_rot`` on 3-4 wires, ``unitary`` permutations, phases,
diagonals and controlled one-wire gates on 3-4 wires): values and per-member gradients
of the batched simulation equal a loop of unbatched calls to 1e-12, on the lane kernels
and on the NumPy array-module path, with the gate on several wire positions (the lowest
and highest wire among them), and no member-by-member fallback."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from qiskit.circuit.library import C3SXGate, CCZGate, CSwapGate, MCPhaseGate, RCCXGate, RXGate
from qiskit.quantum_info import Operator

import qdiff
from qdiff import quantum as qm
from qdiff.batching.vmap import VmappedFunction
from qdiff.quantum.execution import batched_branches
from qdiff.quantum.execution.batched import MAX_LOWERED_WIRES, batched_circuit, lowered_gates
from qdiff.quantum.gradients.batched_adjoint import checkpoint_segments
from qdiff.quantum.lang.gates import GATE_TABLE, GateSpec, gate_spec

N = 4
B = 3
TOL = {"rtol": 1e-12, "atol": 1e-12}
rng = np.random.default_rng(17)


def _random_unitary(k: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed).normal(size=(2, 1 << k, 1 << k))
    return np.linalg.qr(g[0] + 1j * g[1])[0]


# (label, table name, static arguments): every table gate, and the families at several sizes
FAMILIES = [
    *[(f"mcx{c}", "mcx", {"num_controls": c}) for c in range(4)],
    *[(f"mcz{c}", "mcz", {"num_controls": c}) for c in range(4)],
    *[(f"pauli_rot_{w}", "pauli_rot", {"pauli": w})
      for w in ("Y", "XZ", "XYZ", "ZZZ", "ZIXY", "IYII", "IIII")],
    ("unitary1", "unitary", {"matrix": _random_unitary(1, 1)}),
    ("unitary2", "unitary", {"matrix": _random_unitary(2, 2)}),
    ("cswap", "unitary", {"matrix": CSwapGate().to_matrix()}),
    ("ccz", "unitary", {"matrix": CCZGate().to_matrix()}),
    ("rccx", "unitary", {"matrix": RCCXGate().to_matrix()}),
    ("mcphase", "unitary", {"matrix": Operator(MCPhaseGate(0.7, 2)).data}),
    ("mcrx", "unitary", {"matrix": Operator(RXGate(0.4).control(2, annotated=False)).data}),
    ("c3sx", "unitary", {"matrix": C3SXGate().to_matrix()}),
]
CASES = [(name, name, {}) for name, entry in GATE_TABLE.items()
         if isinstance(entry, GateSpec)] + FAMILIES


def test_the_cases_cover_the_gate_table():
    assert {name for _, name, _ in CASES} == set(GATE_TABLE)


def _placements(k: int) -> list[tuple[int, ...]]:
    """Ascending from the lowest wire, descending from the highest, and a mixed order."""
    up = tuple(range(k))
    down = tuple(range(N - 1, N - 1 - k, -1))
    mixed = tuple(sorted(range(N), key=lambda w: (w * 3) % N)[:k])
    return list(dict.fromkeys([up, down, mixed]))


def _program(name: str, static: dict, wires: tuple[int, ...]):
    spec = gate_spec(name, **static)

    def circuit(t):
        q = qm.qubits(N)
        for w in range(N):
            qm.ry(t[w], q[w])
            qm.rz(0.3 * t[w], q[w])
        qm.apply(name, [t[N + j] for j in range(spec.num_params)], [q[w] for w in wires],
                 **static)
        for w in range(N):
            qm.rx(0.7 * t[w], q[w])
        return qm.expval("XIYZ + 0.5*ZXIY - 0.3*IZZX", q)

    return qdiff.trace(circuit, np.zeros(N + spec.num_params)), spec


PARAMS = [pytest.param(name, static, wires, id=f"{label}-{''.join(map(str, wires))}")
          for label, name, static in CASES
          for wires in _placements(gate_spec(name, **static).num_qubits)]


@pytest.fixture
def no_fallback(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the batch ran member by member")

    monkeypatch.setattr(VmappedFunction, "_member_by_member", refuse)


def _check(program, num_angles, backend):
    """vmap's value and value_and_grad on ``backend`` against the loop, on random inputs
    of ``N`` layer angles and ``num_angles`` gate angles."""
    t = rng.uniform(-np.pi, np.pi, (B, N + num_angles))
    values = np.array([program(row) for row in t])
    pairs = [qdiff.value_and_grad(program)(row) for row in t]
    with qm.batched_backend(backend):
        got = qdiff.vmap(program)(t)
        value, grad = qdiff.vmap(qdiff.value_and_grad(program))(t)
    np.testing.assert_allclose(got, values, **TOL)
    np.testing.assert_allclose(value, [v for v, _ in pairs], **TOL)
    np.testing.assert_allclose(grad, np.stack([g for _, g in pairs]), **TOL)


@pytest.mark.parametrize("backend", ["auto", "numpy"])
@pytest.mark.parametrize("name, static, wires", PARAMS)
def test_every_gate_batches_and_equals_the_loop(name, static, wires, backend, no_fallback):
    program, spec = _program(name, static, wires)
    assert batched_circuit(program) is not None
    _check(program, spec.num_params, backend)


def test_a_dense_fixed_gate_on_three_wires_runs_member_by_member_and_equals_the_loop(
        monkeypatch):
    matrix = _random_unitary(3, 5)
    assert lowered_gates(gate_spec("unitary", matrix=matrix), (0, 1, 2), []) is None
    program, spec = _program("unitary", {"matrix": matrix}, (3, 0, 2))
    assert batched_circuit(program) is None
    calls = []
    one_by_one = VmappedFunction._member_by_member

    def spy(self, *args):
        calls.append(args)
        return one_by_one(self, *args)

    monkeypatch.setattr(VmappedFunction, "_member_by_member", spy)
    _check(program, spec.num_params, "auto")
    assert len(calls) == 2     # the spy sees a fallback (value, then value_and_grad)


def _measured(name: str, static: dict, wires: tuple[int, ...]):
    spec = gate_spec(name, **static)

    def circuit(t):
        q = qm.qubits(N)
        for w in range(N):
            qm.ry(t[w], q[w])
        m = qm.measure(q[1])
        angles = [t[N + j] for j in range(spec.num_params)]

        def one():
            qm.apply(name, angles, [q[w] for w in wires], **static)

        def zero():
            qm.apply(name, [0.5 * a for a in angles], [q[w] for w in wires[::-1]], **static)

        qdiff.cond(m, one, zero)
        for w in range(N):
            qm.rx(0.7 * t[w], q[w])
        return qm.expval("XIYZ + 0.5*ZXIY", q)

    return qdiff.trace(circuit, np.zeros(N + spec.num_params)), spec


WIDE = [c for c in CASES if c[0] in ("u", "mcx2", "mcz3", "pauli_rot_ZIXY", "rccx", "c3sx",
                                     "cswap", "mcphase")]


@pytest.mark.parametrize("label, name, static", WIDE, ids=[c[0] for c in WIDE])
def test_wide_gates_batch_on_the_branching_path(label, name, static, no_fallback):
    k = gate_spec(name, **static).num_qubits
    program, spec = _measured(name, static, tuple(range(N - k, N))[::-1])
    assert batched_circuit(program) is None and batched_branches.branches_claim(program,
                                                                                 [True])
    _check(program, spec.num_params, "auto")


def test_vmap_of_a_measured_program_with_a_unitary_gate_does_not_fail_as_unhashable():
    # the batched branches keyed their gate cache by the static arguments: a matrix
    def circuit(t):
        q = qm.qubits(2)
        qm.ry(t, q[0])
        m = qm.measure(q[0])
        qm.unitary(np.array([[0, 1], [1, 0]]), [q[1]])
        return qm.expval("Z", [q[1]]) + m

    program = qdiff.trace(circuit, 0.1)
    theta = np.array([0.1, 0.5, 2.0])
    np.testing.assert_allclose(qdiff.vmap(program)(theta), [program(t) for t in theta],
                               **TOL)


def test_the_torus_walk_case_study_batches_under_vmap_grad(no_fallback):
    # its coin is an mcz on six wires and its flag an mcx on five, inside loops on
    # measurements: once member by member, now one batched branching run and one sweep
    sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))
    import quantum_walk

    program = qdiff.trace(quantum_walk.objective, np.zeros(2))
    assert batched_branches.branches_claim(program, [True])
    t = np.array([[3.0, 2.8], [2.6, 3.3]])
    value, grad = qdiff.vmap(qdiff.value_and_grad(program))(t)
    pairs = [qdiff.value_and_grad(program)(row) for row in t]
    np.testing.assert_allclose(value, [v for v, _ in pairs], **TOL)
    np.testing.assert_allclose(grad, np.stack([g for _, g in pairs]), **TOL)


def test_wide_gates_on_the_checkpointed_sweep(no_fallback):
    # runs of at most two one-wire gates: the sweep that keeps the states at segment
    # boundaries (`checkpoint_segments`), across tables of wide gates
    def circuit(t):
        q = qm.qubits(N)
        for w in range(N):
            qm.ry(t[w], q[w])
        qm.mcx([q[3], q[0]], q[2])
        qm.pauli_rot(t[4], "XYZZ", q)
        qm.unitary(CSwapGate().to_matrix(), [q[1], q[3], q[0]])
        for w in range(N):
            qm.rx(t[w] * 0.5, q[w])
        return qm.expval("XIYZ + 0.5*ZXIY", q)

    program = qdiff.trace(circuit, np.zeros(N + 1))
    assert checkpoint_segments(batched_circuit(program), B) is not None
    _check(program, 1, "auto")


def test_a_gate_on_more_wires_than_are_lowered_runs_member_by_member():
    # its matrix is not built whole: the batch runs member by member, as before
    wide = MAX_LOWERED_WIRES + 1

    def circuit(t):
        q = qm.qubits(wide)
        for w in range(wide):
            qm.ry(t, q[w])
        qm.mcx(list(q)[:-1], q[wide - 1])
        return qm.expval("Z", [q[wide - 1]])

    program = qdiff.trace(circuit, 0.1)
    assert batched_circuit(program) is None
    theta = np.array([2.5, 3.0])
    np.testing.assert_allclose(qdiff.vmap(program)(theta), [program(t) for t in theta], **TOL)
