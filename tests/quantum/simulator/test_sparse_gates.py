"""Gates applied in their sparse form (``lang.gate_forms``: diagonals as phase
multiplications, permutations as index moves with phases, controlled gates as sub-blocks on
their targets) against the dense matrix on random states: every gate of the table, the
Qiskit library gates that arrive as ``unitary`` matrices, each wire of every gate on several
register positions, complex64 and complex128, one gate at a time and inside fused blocks."""

from itertools import permutations

import numpy as np
import pytest

from qdiff.quantum.lang.gate_forms import gate_form
from qdiff.quantum.lang.gates import GATE_TABLE, GateFamily, gate_spec
from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.block_encoding import OP_DENSE1, OP_DIAG, OP_PERM, encode_block
from qdiff.quantum.simulator.gate_ops import GateOp

RNG = np.random.default_rng(18)


def _qiskit_unitaries():
    from qiskit.circuit import library as lib

    gates = [lib.CSwapGate(), lib.CCXGate(), lib.RCCXGate(), lib.RC3XGate(), lib.C3SXGate(),
             lib.CSdgGate(), lib.CUGate(0.3, -1.1, 0.4, 0.9), lib.DCXGate(), lib.ECRGate(),
             lib.XXMinusYYGate(0.7, -0.2), lib.CCZGate(), lib.C3XGate(), lib.CU3Gate(1, 2, 3)]
    return {g.name: gate_spec("unitary", matrix=np.asarray(g.to_matrix(), complex))
            for g in gates}


def _table_gates():
    specs = {name: entry for name, entry in GATE_TABLE.items()
             if not isinstance(entry, GateFamily)}
    for m in range(4):
        specs[f"mcx{m}"] = gate_spec("mcx", num_controls=m)
        specs[f"mcz{m}"] = gate_spec("mcz", num_controls=m)
    for word in ("ZIZ", "XYZ", "IZZI"):
        specs[f"pauli_rot_{word}"] = gate_spec("pauli_rot", pauli=word)
    return specs


GATES = {**_table_gates(), **_qiskit_unitaries()}


def embed(matrix, wires, n):
    """The 2^n matrix of ``matrix`` on ``wires`` (bit j of its index = wires[j]): the oracle,
    built entry by entry from the definition."""
    full = np.zeros((1 << n, 1 << n), complex)
    rest = ~sum(1 << w for w in wires) & ((1 << n) - 1)
    for i in range(1 << n):
        local_in = sum(((i >> w) & 1) << j for j, w in enumerate(wires))
        for local_out in range(matrix.shape[0]):
            out = (i & rest) | sum(((local_out >> j) & 1) << w for j, w in enumerate(wires))
            full[out, i] += matrix[local_out, local_in]
    return full


def random_state(n, dtype):
    psi = RNG.normal(size=1 << n) + 1j * RNG.normal(size=1 << n)
    return (psi / np.linalg.norm(psi)).astype(dtype)


def params_of(spec):
    return tuple(RNG.uniform(-2 * np.pi, 2 * np.pi, spec.num_params))


def tolerance(dtype):
    return 2e-6 if dtype == np.complex64 else 1e-12


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", sorted(GATES))
def test_sparse_gate_kernels_match_the_dense_matrix_on_every_wire_placement(name, dtype):
    spec = GATES[name]
    n = max(spec.num_qubits, 3)
    params = params_of(spec)
    matrix = spec.matrix(*params)
    for backend in ("numpy", "numba"):
        be = get_backend(backend)
        for wires in permutations(range(n), spec.num_qubits):
            psi = random_state(n, dtype)
            want = embed(matrix, wires, n) @ psi.astype(complex)
            got = be.apply_gate(psi.copy(), n, spec, wires, params)
            assert got.dtype == dtype
            np.testing.assert_allclose(got, want, atol=tolerance(dtype), rtol=0,
                                       err_msg=f"{name} on {wires} ({backend})")


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", sorted(GATES))
def test_sparse_gates_inside_fused_blocks_match_the_dense_matrix(name, dtype):
    # n = 10 with a 5-wire block: the Numba block kernel runs (32 groups of the other wires);
    # the gate's wires are rotated so that each of them (controls included) takes the lowest,
    # a middle and the highest position of the block; an h, an rz and an sx share the block
    spec = GATES[name]
    n = 10
    slots = (0, 3, 5, 9)
    params = params_of(spec)
    be = get_backend("numba")
    for shift in range(spec.num_qubits):
        wires = tuple(slots[(j + shift) % len(slots)] for j in range(spec.num_qubits))
        extra = [1, 7] if spec.num_qubits <= 3 else [1]
        block = tuple(sorted(set(wires) | set(extra)))
        ops = [GateOp("h", (extra[0],)), GateOp(spec, wires, params),
               GateOp("rz", (extra[-1],), (0.37,)), GateOp("sx", (wires[-1],))]
        psi = random_state(n, dtype)
        want = psi.astype(complex)
        for op in ops:
            want = embed(op.gate.matrix(*op.params) if not isinstance(op.gate, str)
                         else gate_spec(op.gate).matrix(*op.params), op.wires, n) @ want
        got = be.apply_fused(psi.copy(), n, block, ops)
        np.testing.assert_allclose(got, want, atol=5 * tolerance(dtype), rtol=0,
                                   err_msg=f"{name} on {wires} in block {block}")


def test_gate_forms_rebuild_the_matrix():
    # the form's data, placed on its controls and targets, is the gate's matrix
    for name, spec in GATES.items():
        params = params_of(spec)
        form = gate_form(spec)
        data = form.data(*params)
        k = spec.num_qubits
        if form.kind == "diagonal":
            rebuilt = np.diag(data)
        else:
            sub = data if form.kind == "dense" else np.zeros((len(data),) * 2, complex)
            if form.kind == "permutation":
                sub[list(form.perm), range(len(data))] = data
            rebuilt = np.eye(1 << k, dtype=complex)
            cmask = sum(1 << c for c in form.controls)
            idx = [cmask | sum(((t >> j) & 1) << w for j, w in enumerate(form.targets))
                   for t in range(1 << len(form.targets))]
            rebuilt[np.ix_(idx, idx)] = sub
        np.testing.assert_allclose(rebuilt, spec.matrix(*params), atol=1e-15, err_msg=name)


def test_imported_toffoli_swap_and_controlled_gates_are_not_dense_blocks():
    # The symptom: Qiskit's cswap, ccx, rcccx, c3sx arrive as `unitary` matrices and the
    # block kernel multiplied each as a dense 2^k x 2^k block (16 multiply-adds per amplitude
    # for a 4-wire one); they are permutations and a controlled 2x2.
    q = _qiskit_unitaries()
    forms = {name: gate_form(q[name]) for name in ("cswap", "ccx", "rcccx", "c3sx", "csdg")}
    assert {k: (f.kind, f.controls, f.targets) for k, f in forms.items()} == {
        "cswap": ("permutation", (0,), (1, 2)), "ccx": ("permutation", (0, 1), (2,)),
        "rcccx": ("permutation", (0, 1), (2, 3)), "c3sx": ("dense", (0, 1, 2), (3,)),
        "csdg": ("diagonal", (), (0, 1))}
    kinds, cmasks, *_ = encode_block(range(5), [
        GateOp(q["cswap"], (0, 1, 2)), GateOp(q["c3sx"], (4, 2, 3, 0)),
        GateOp(q["csdg"], (1, 3))])
    assert kinds.tolist() == [OP_PERM, OP_DENSE1, OP_DIAG]
    assert cmasks.tolist() == [0b1, 0b11100, 0]


def test_gate_forms_of_parametric_gates_hold_at_every_angle():
    # crx stays a controlled 2x2 and rzz a diagonal whatever the angle; rxx stays dense
    assert (gate_form("crx").kind, gate_form("crx").controls) == ("dense", (0,))
    assert gate_form("rzz").kind == "diagonal" and gate_form("rxx").kind == "dense"
    for theta in (0.0, np.pi, 2.5):
        np.testing.assert_allclose(
            np.diag(gate_form("rzz").data(theta)), gate_spec("rzz").matrix(theta))


def test_adjoint_blocks_invert_imported_gates_in_their_sparse_forms():
    # the reverse sweep applies U^dagger: of a 4-wire rcccx as a permutation (it fell back to
    # gate by gate as a 4-target dense block), of c3sx as a controlled 2x2, against the dense
    # reference, with the derivatives of the parametric gates around them (iswap's phases
    # are complex, dcx's permutation is not its own inverse)
    from test_adjoint_kernels import check_block

    from qdiff.quantum.simulator.adjoint_encoding import _inverse_structure

    q = _qiskit_unitaries()
    assert _inverse_structure(q["rcccx"], (), (0, 2, 3, 5))[0] == "perm"
    assert _inverse_structure(q["c3sx"], (), (0, 2, 3, 5))[:3] == ("dense", (0, 2, 3), (5,))
    rng = np.random.default_rng(5)
    n, wires = 10, (0, 2, 3, 5, 7)  # 32 groups of the other wires: the block kernel runs
    ops = [GateOp("ry", (0,), (0.4,)), GateOp(q["rcccx"], (5, 0, 7, 2)),
           GateOp("crx", (2, 3), (1.1,)), GateOp(q["c3sx"], (7, 3, 0, 5)),
           GateOp(q["csdg"], (3, 7)), GateOp("rzz", (0, 5), (-0.8,)),
           GateOp(q["cswap"], (2, 5, 0)), GateOp(q["ecr"], (3, 2)), GateOp("rx", (7,), (2.0,)),
           GateOp("iswap", (0, 7)), GateOp(q["dcx"], (5, 3)), GateOp("ry", (5,), (0.3,))]
    want = [op.params != () for op in ops]
    for backend in ("numba", "numpy"):
        check_block(get_backend(backend), rng, n, wires, ops, want)


def _phased_permutation(dim, seed):
    # a random permutation matrix with phases: cycles of every length, some rows fixed with
    # phase 1 (left alone by the kernel), some fixed with a phase
    rng = np.random.default_rng(seed)
    perm = rng.permutation(dim)
    phases = np.exp(1j * rng.uniform(-np.pi, np.pi, dim))
    phases[rng.random(dim) < 0.3] = 1
    matrix = np.zeros((dim, dim), complex)
    matrix[perm, np.arange(dim)] = phases
    return matrix


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("seed", range(6))
def test_permutation_cycles_of_every_length_match_the_dense_matrix(seed, dtype):
    # the permutation kernel moves each cycle of rows along (2-cycles as swaps, fixed rows as
    # scalings, untouched rows skipped), over slices on runs of contiguous groups (lowest
    # wire >= 3) and one group at a time below
    n = 7
    be = get_backend("numba")
    for k in (2, 3):
        matrix = _phased_permutation(1 << k, seed * 10 + k)
        for wires in [(3, 5, 6)[:k], (6, 4, 3)[:k], (0, 4, 2)[:k], (5, 1, 6)[:k]]:
            psi = random_state(n, dtype)
            want = embed(matrix, wires, n) @ psi.astype(complex)
            got = be.apply_gate(psi.copy(), n, "unitary", wires, matrix=matrix)
            np.testing.assert_allclose(got, want, atol=tolerance(dtype), rtol=0,
                                       err_msg=f"{matrix} on {wires}")
