"""The adjoint method's kernels against dense NumPy references, and the blocked reverse sweep
end to end on registers wide enough for the Numba block kernel.

- ``inner_pauli_sum`` (<bra|O|ket> without forming O|ket>) and ``add_pauli_sum``
  (out += c O state) on every back end;
- ``adjoint_block`` (the reverse sweep of a gate block on (ψ, λ) with the derivatives): the
  Numba block kernel in all three gather layouts, serial and threaded, complex128 and
  complex64, every parametric gate of the table, against a reference built from dense
  matrices;
- gradients of programs whose gate runs go through the blocks (and whose forward gates are
  deferred and applied in blocks), against finite differences and the NumPy back end.
"""

import numpy as np
import pytest
from quantum_programs_lib import hea_program

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.gradients.gradient import gradient
from qdiff.quantum.lang.gates import gate_spec
from qdiff.quantum.lang.observables import PauliSum
from qdiff.quantum.simulator import GateOp, get_backend

BACKENDS = ["numpy", "numba"]  # numba is a core dependency: its kernels are always tested

PARAMETRIC = ["rx", "ry", "rz", "phase", "crx", "cry", "crz", "cphase", "rxx", "ryy", "rzz",
              "rzx"]
FIXED = ["h", "x", "y", "z", "s", "t", "sx", "cx", "cz", "ch", "swap", "iswap"]


# ------------------------------------------------------------------------------ references
def apply_local(matrix, wires, n, vector):
    """``matrix`` (bit j of its index = wires[j]) applied to a 2^n ``vector``, densely."""
    k = len(wires)
    axes = [n - 1 - wires[k - 1 - j] for j in range(k)]  # tensor axis a is bit n - 1 - a
    out = np.tensordot(np.reshape(matrix, (2,) * (2 * k)), vector.reshape((2,) * n),
                       axes=(list(range(k, 2 * k)), axes))
    return np.moveaxis(out, list(range(k)), axes).reshape(-1)


def reference_block(psi, lam, n, ops, want):
    """The adjoint rules with dense matrices: g = 2 Im<λ|Gψ>, ψ <- U^†ψ, λ <- U^†λ."""
    psi, lam = psi.astype(complex), lam.astype(complex)
    grads = np.zeros(len(ops))
    for k in range(len(ops) - 1, -1, -1):
        spec, wires = gate_spec(ops[k].gate), ops[k].wires
        if want[k]:
            g = apply_local(spec.generator_matrix(), wires, n, psi)
            grads[k] = 2 * np.vdot(lam, g).imag
        u_dagger = spec.matrix(*ops[k].params).conj().T
        psi, lam = apply_local(u_dagger, wires, n, psi), apply_local(u_dagger, wires, n, lam)
    return grads, psi, lam


def random_state(rng, n, dtype=complex):
    v = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    return (v / np.linalg.norm(v)).astype(dtype)


def check_block(be, rng, n, wires, ops, want, dtype=complex, atol=1e-12, grad_atol=None,
                rows=None):
    """``be.adjoint_block`` on random (ψ, λ) of ``dtype`` against the dense reference: the
    derivatives (to ``grad_atol``, default ``atol``) and both states; returns (ψ, λ).
    ``rows``: λ is a stack of that many adjoints, each checked against its own reference."""
    psi = random_state(rng, n, dtype)
    lam = (random_state(rng, n, dtype) if rows is None
           else np.stack([random_state(rng, n, dtype) for _ in range(rows)]))
    refs = [reference_block(psi, row, n, ops, want) for row in np.atleast_2d(lam)]
    g = be.adjoint_block(psi, lam, n, wires, ops, want)
    assert np.shape(g) == ((len(ops),) if rows is None else (rows, len(ops)))
    for g_row, lam_row, (g_ref, psi_ref, lam_ref) in zip(np.atleast_2d(g), np.atleast_2d(lam),
                                                         refs):
        np.testing.assert_allclose(g_row, g_ref, atol=atol if grad_atol is None else grad_atol)
        np.testing.assert_allclose(lam_row, lam_ref, atol=atol)
        np.testing.assert_allclose(psi, psi_ref, atol=atol)
    return psi, lam


def random_ops(rng, wires, count, names):
    ops = []
    for _ in range(count):
        name = names[int(rng.integers(len(names)))]
        spec = gate_spec(name)
        ws = tuple(int(w) for w in rng.permutation(wires)[:spec.num_qubits])
        ops.append(GateOp(spec, ws, tuple(rng.uniform(-3, 3, spec.num_params))))
    return ops


def numba_backend(parallel):
    from qdiff.quantum.simulator.numba_backend import NumbaBackend

    return NumbaBackend(parallel_threshold=1 if parallel else 1 << 62)


# ------------------------------------------------------------------------------ Pauli sums
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_inner_and_add_pauli_sum_match_dense_matrices(backend, dtype):
    be = get_backend(backend)
    rng = np.random.default_rng(3)
    n = 6
    bra, ket = random_state(rng, n, dtype), random_state(rng, n, dtype)
    obs = PauliSum("0.5*XYZ + ZZI - 0.3*IIZ + 2*XXI + YIY - 1.5*III")
    wires = [4, 1, 3]
    o_ket = apply_local(obs.to_matrix(), wires, n, ket.astype(complex))
    tol = 1e-12 if dtype == np.complex128 else 1e-5
    expected = np.vdot(bra.astype(complex), o_ket)
    assert abs(be.inner_pauli_sum(bra, ket, n, obs, wires) - expected) < tol
    out = bra.copy()
    assert be.add_pauli_sum(out, ket, n, obs, wires, scale=-0.7) is out
    np.testing.assert_allclose(out, bra + (-0.7) * o_ket, atol=tol)
    # the whole register, a string observable
    full = PauliSum("ZIXYZY")
    assert abs(be.inner_pauli_sum(bra, ket, n, "ZIXYZY")
               - np.vdot(bra.astype(complex), full.to_matrix() @ ket.astype(complex))) < tol


@pytest.mark.parametrize("parallel", [False, True])
def test_numba_pauli_kernels_on_many_terms(parallel):
    # more than 2^10 amplitudes: the accumulate kernel's sign tables and chunks
    be = numba_backend(parallel)
    rng = np.random.default_rng(5)
    n = 12
    bra, ket = random_state(rng, n), random_state(rng, n)
    labels = ["".join(rng.choice(list("IXYZ"), size=n)) for _ in range(25)]
    obs = PauliSum([(float(c), lab) for c, lab in zip(rng.normal(size=25), labels)])
    reference = get_backend("numpy")
    assert abs(be.inner_pauli_sum(bra, ket, n, obs)
               - reference.inner_pauli_sum(bra, ket, n, obs)) < 1e-12
    out, expected = bra.copy(), bra.copy()
    be.add_pauli_sum(out, ket, n, obs, scale=0.3)
    reference.add_pauli_sum(expected, ket, n, obs, scale=0.3)
    np.testing.assert_allclose(out, expected, atol=1e-13)
    np.testing.assert_allclose(out - bra, 0.3 * reference.apply_pauli_sum(ket, n, obs),
                               atol=1e-13)


# ----------------------------------------------------------------------------- gate blocks
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("rows", [None, 3])
def test_adjoint_block_matches_the_dense_reference(backend, rows):
    be = get_backend(backend)
    rng = np.random.default_rng(11)
    n = 5
    for _ in range(3):
        wires = sorted(int(w) for w in rng.choice(n, 4, replace=False))
        ops = random_ops(rng, wires, 25, PARAMETRIC + FIXED)
        want = [gate_spec(op.gate).num_params == 1 and rng.random() < 0.8 for op in ops]
        check_block(be, rng, n, wires, ops, want, rows=rows)


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("wires", [(0, 1, 2, 3), (3, 5, 6, 8), (6, 7, 8, 9), (0, 4, 9),
                                   (1, 2, 3, 4, 5, 6)])
@pytest.mark.parametrize("rows", [None, 1, 4])
def test_numba_block_kernel_in_every_layout(parallel, wires, rows):
    # wires with 0 (a transposed gather), low wires (runs of groups), high ones (contiguous);
    # one λ, or a stack of them undone against the one ψ (every step kind reads each λ
    # against the ψ it has not yet undone)
    be = numba_backend(parallel)
    rng = np.random.default_rng(sum(wires) + parallel)
    n = 10
    ops = random_ops(rng, wires, 40, PARAMETRIC + FIXED)
    ops += [GateOp("ry", (w,), (0.3 + w,)) for w in wires]  # runs of rotations: paired steps
    ops += [GateOp("rz", (w,), (0.1 * w,)) for w in wires]  # a diagonal run
    want = [gate_spec(op.gate).num_params == 1 for op in ops]
    for _ in range(2):  # the second time the block's structure comes from the cache
        check_block(be, rng, n, wires, ops, want, rows=rows)
        ops = [GateOp(op.gate, op.wires, tuple(rng.uniform(-3, 3, len(op.params))))
               for op in ops]


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("rows", [None, 3])
@pytest.mark.parametrize("pair", ["ry", "rx"])
def test_diagonal_run_shares_the_pass_of_the_rotation_pair_before_it(parallel, rows, pair):
    # a diagonal run (rz, crz, rzz, phase, cz: derivatives wanted or not) whose forward gates
    # follow a pair of rotations: the sweep undoes the run in the pass of an ry pair (its row
    # sums read in that pass), and in a pass of its own before an rx pair
    from qdiff.quantum.simulator.adjoint_encoding import A_DIAGRUN, A_ROT2, encode_adjoint_block

    be = numba_backend(parallel)
    rng = np.random.default_rng(5 + parallel)
    n, wires = 10, (2, 5, 6, 9)
    ops = [GateOp("h", (w,)) for w in wires]
    ops += [GateOp(pair, (5,), (0.7,)), GateOp(pair, (9,), (-1.1,)),
            GateOp("rz", (5,), (0.4,)), GateOp("crz", (2, 9), (1.3,)), GateOp("cz", (5, 6)),
            GateOp("rzz", (6, 9), (-0.8,)), GateOp("phase", (2,), (2.1,))]
    for want in ([op.params != () for op in ops],
                 [op.params != () and op.gate not in ("rz", "rzz") for op in ops],
                 [op.params != () and op.gate == pair for op in ops]):
        kinds = encode_adjoint_block(wires, ops, want)[1].tolist()
        assert kinds[:2] == [A_DIAGRUN, A_ROT2]
        check_block(be, rng, n, wires, ops, want, rows=rows)
    check_block(be, rng, n, wires, ops, want, np.complex64, atol=2e-6, grad_atol=2e-5)


def test_numba_block_kernel_in_single_precision_and_without_lambda():
    be = get_backend("numba")
    rng = np.random.default_rng(2)
    n, wires = 9, (1, 3, 4)
    ops = random_ops(rng, wires, 30, PARAMETRIC + FIXED)
    want = [gate_spec(op.gate).num_params == 1 for op in ops]
    psi, lam = check_block(be, rng, n, wires, ops, want, np.complex64, atol=2e-6, grad_atol=2e-5)
    assert psi.dtype == lam.dtype == np.complex64
    check_block(be, rng, n, wires, ops, want, np.complex64, atol=2e-6, grad_atol=2e-5, rows=2)
    alone = random_state(rng, n)
    _, expected, _ = reference_block(alone, alone, n, ops, [False] * len(ops))
    assert not be.adjoint_block(alone, None, n, wires, ops, want).any()  # nothing to read
    np.testing.assert_allclose(alone, expected, atol=1e-12)


def test_numba_block_kernel_falls_back_for_wide_and_family_gates():
    be = get_backend("numba")
    rng = np.random.default_rng(4)
    n, wires = 9, (0, 2, 3, 5)
    ops = [GateOp(gate_spec("pauli_rot", pauli="XYZX"), wires, (0.7,)),  # 4 dense targets
           GateOp(gate_spec("mcx", num_controls=2), (0, 2, 5)),
           GateOp(gate_spec("pauli_rot", pauli="ZZ"), (2, 3), (0.4,)),
           GateOp("cry", (5, 0), (1.3,))]
    check_block(be, rng, n, wires, ops, [True, False, True, True])
    check_block(be, rng, n, wires, ops, [True, False, True, True], rows=2)


def test_block_encoding_merges_diagonal_runs_and_pairs_rotations():
    from qdiff.quantum.simulator.adjoint_encoding import (
        A_DIAGRUN,
        A_PERM,
        A_ROT1,
        A_ROT2,
        encode_adjoint_block,
    )

    ops = [GateOp("ry", (0,), (0.1,)), GateOp("ry", (1,), (0.2,)), GateOp("ry", (2,), (0.3,)),
           GateOp("rz", (0,), (0.4,)), GateOp("cz", (0, 1)), GateOp("rz", (2,), (0.5,)),
           GateOp("cx", (1, 2))]
    encoded = encode_adjoint_block((0, 1, 2), ops, [True, True, True, True, False, True, False])
    kinds = encoded[1].tolist()
    # last gate first: cx, one diagonal run (rz, cz, rz), ry(2) with ry(1), then ry(0)
    assert kinds == [A_PERM, A_DIAGRUN, A_ROT2, A_ROT1]
    assert encoded[0] == len(ops)
    # a wide Pauli rotation has no block encoding (None): the sweep applies it on its own ...
    assert encode_adjoint_block((0, 1, 2, 3), [GateOp(gate_spec("pauli_rot", pauli="XXXX"),
                                                      (0, 1, 2, 3), (0.2,))], [True]) is None

    # ... and its derivative through that path is right (against finite differences)
    def wide(t):
        q = qm.qubits(10)
        for k in range(10):
            qm.ry(0.3 * k + t, q[k])
        qm.pauli_rot(2 * t, "XXYX", q[2:6])
        qm.rz(t, q[3])
        return qm.expval("ZZ", q[3:5])

    adjoint = gradient(wide, 0.4)
    assert adjoint.grad == pytest.approx(gradient(wide, 0.4, method="finite-diff").grad, abs=1e-7)


# ------------------------------------------------------------------------ gradients, blocked
@pytest.mark.parametrize("backend", BACKENDS)
def test_hardware_efficient_gradient_matches_finite_differences(backend):
    n, layers = 9, 2
    heisenberg = " + ".join(f"{p}{i}{p}{i + 1}" for i in range(n - 1) for p in "XYZ")
    program = hea_program(n, layers, PauliSum(heisenberg))
    w = np.random.default_rng(0).uniform(-np.pi, np.pi, (layers, 2, n))
    adjoint = gradient(program, w, backend=backend)
    fd = gradient(program, w, backend=backend, method="finite-diff")
    np.testing.assert_allclose(adjoint.grad, fd.grad, atol=1e-7)
    assert adjoint.value == pytest.approx(fd.value, abs=1e-12)


def test_blocked_sweep_through_loops_with_shared_angles():
    # gate runs that cross loop iterations, angles computed by classical code from shared
    # parameters and the loop index (their records sit between the gates of a run)
    n = 9

    def f(w):
        q = qm.qubits(n)

        def layer(i):
            for k in range(n):
                qm.ry(w[k % 3] * (i + 1) + w[3], q[k])
            qm.u(w[0], w[1] * i, w[2] - i, q[4])
            for k in range(n - 1):
                qm.cz(q[k], q[k + 1])
            qm.crx(w[4] ** 2, q[2], q[7])

        qdiff.fori_loop(0, 3, layer)
        return qm.expval("0.5*ZIIIIIIIX + IIYYIIIII", q) ** 2

    w = np.array([0.3, -0.7, 0.5, 0.2, 0.9])
    fd = gradient(f, w, method="finite-diff", backend="numpy")
    for backend in BACKENDS:
        result = gradient(f, w, backend=backend)
        np.testing.assert_allclose(result.grad, fd.grad, atol=1e-7)


def test_blocked_sweep_with_every_gate_measurements_and_u():
    # 8 qubits: blocks of 3 wires on the Numba back end; a mid-circuit measurement splits the
    # runs, u goes through its rotations and global phase, cx/mcx are row permutations
    n = 8
    rng = np.random.default_rng(7)
    plan = [(name, tuple(int(w) for w in rng.permutation(n)[:gate_spec(name).num_qubits]))
            for name in rng.choice(PARAMETRIC + FIXED + ["u"], 60)]

    def f(w):
        q = qm.qubits(n)
        for k, (name, wires) in enumerate(plan):
            ws = [q[i] for i in wires]
            spec = gate_spec(name)
            angles = [w[(k + j) % 5] * (1 + 0.1 * j) for j in range(spec.num_params)]
            qm.GATES[name](*angles, *ws)
            if k == 30:
                bit = qm.measure(q[3])
                qdiff.cond(bit == 1, lambda: qm.ry(w[0], q[5]), lambda: qm.rx(w[1], q[6]))
        qm.mcx([q[0], q[1]], q[7])
        return qm.expval("0.5*ZZIIIIXI + YIIIZIII - 0.2*IIIXXIIZ", q)

    w = rng.normal(size=5)
    results = [gradient(f, w, backend=b) for b in BACKENDS]
    fd = gradient(f, w, method="finite-diff", backend="numpy")
    for result in results:
        np.testing.assert_allclose(result.grad, fd.grad, atol=1e-7)
        assert result.value == pytest.approx(fd.value, abs=1e-12)
        assert result.num_branches == 2
