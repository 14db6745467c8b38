"""Gate fusion: the block planner, the IR pass (fused vs unfused statevectors on random
circuits over the whole gate table, loop bodies, measurement barriers), the ``fused_gate``
primitive (types, JSON, printer), the back ends' ``apply_fused`` (Numba block kernel on every
gather layout, serial and threaded, complex64) and the runner's ``fuse`` option."""

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
import qdiff.quantum.simulator.numba_block_kernels as numba_module
from qdiff import quantum as qm
from qdiff.ir.core import Program
from qdiff.ir.errors import VerificationError
from qdiff.quantum.execution.options import RunOptions
from qdiff.quantum.execution.reference import fused_program
from qdiff.quantum.execution.runner import BranchRunner
from qdiff.quantum.lang.fusion import FusionStats, fuse_gates, plan_blocks
from qdiff.quantum.lang.gates import GATE_TABLE, gate_spec
from qdiff.quantum.simulator import GateOp, get_backend, random_circuit
from qdiff.quantum.simulator.gate_ops import fused_matrix
from qdiff.quantum.simulator.numba_backend import NumbaBackend, encode_block

ALL_GATES = sorted(GATE_TABLE)


# ------------------------------------------------------------------------------ the planner
def _check_plan(gate_wires, blocks, max_qubits):
    order = [i for block in blocks for i in block]
    assert sorted(order) == list(range(len(gate_wires)))  # every gate exactly once
    position = {g: k for k, g in enumerate(order)}
    for i in range(len(gate_wires)):
        for j in range(i + 1, len(gate_wires)):
            if set(gate_wires[i]) & set(gate_wires[j]):
                assert position[i] < position[j], (i, j, blocks)  # dependent gates keep order
    for block in blocks:
        wires = set().union(*(gate_wires[i] for i in block))
        assert len(wires) <= max_qubits or len(block) == 1


def test_plan_blocks_examples():
    # one-qubit gates before and after a two-qubit gate merge into it
    assert plan_blocks([(0,), (1,), (0, 1), (0,), (1,)], 2) == [[0, 1, 2, 3, 4]]
    # a CNOT ladder with max 2: one block per CNOT; with max 3 pairs of them
    ladder = [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert plan_blocks(ladder, 2) == [[0], [1], [2], [3]]
    assert plan_blocks(ladder, 3) == [[0, 1], [2, 3]]
    # a gate wider than the limit stays alone, and nothing merges across it on its wires
    assert plan_blocks([(0,), (0, 1, 2), (0,)], 2) == [[0], [1], [2]]
    # runs of one-qubit gates on one wire become one block even with max 1
    assert plan_blocks([(0,), (0,), (1,), (0,)], 1) == [[0, 1, 3], [2]]


@pytest.mark.parametrize("max_qubits", [1, 2, 3, 5])
def test_plan_blocks_keeps_dependencies_on_random_sequences(max_qubits):
    rng = np.random.default_rng(max_qubits)
    for _ in range(60):
        n = int(rng.integers(1, 9))
        gate_wires = [tuple(int(w) for w in rng.permutation(n)[:int(rng.integers(1, min(n, 4)
                                                                               + 1))])
                      for _ in range(int(rng.integers(1, 40)))]
        _check_plan(gate_wires, plan_blocks(gate_wires, max_qubits), max_qubits)


# ----------------------------------------------------------------- random programs, fused
def _apply_op(op, angles, q):
    wires = [q[w] for w in op.wires]
    if isinstance(op.gate, str):
        qm.apply(op.gate, angles, wires)
    elif op.gate.name == "unitary":
        qm.unitary(op.gate.static["matrix"], wires)
    else:
        qm.apply(op.gate.name, angles, wires, **dict(op.gate.static))


def _random_program(n, ops, loop_ops=(), loop_trips=0):
    """Gates of ``ops``, then a fori_loop over ``loop_ops``; angles are traced inputs."""
    def circuit(angles):
        q = qm.qubits(n)
        k = 0
        for op in ops:
            _apply_op(op, [angles[k + j] for j in range(len(op.params))], q)
            k += len(op.params)
        if loop_ops:
            start = k

            def body(i):
                j = start
                for op in loop_ops:
                    _apply_op(op, [angles[j + m] * (1.0 + 0.1 * i) for m in
                                   range(len(op.params))], q)
                    j += len(op.params)

            qdiff.fori_loop(0, loop_trips, body)
        return qm.state(q)

    params = [p for op in (*ops, *loop_ops) for p in op.params]
    angles = np.array(params + [0.0])
    return qdiff.trace(circuit, angles), angles


def _state(program, angles, backend="numpy", fuse=False):
    return np.asarray(qm.run(program, angles, backend=backend, fuse=fuse).values)


@pytest.mark.parametrize("seed", range(6))
def test_fused_random_circuits_match_unfused(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    ops = random_circuit(n, 40, rng, gates=ALL_GATES)
    loop_ops = random_circuit(n, 12, rng, gates=ALL_GATES)
    program, angles = _random_program(n, ops, loop_ops, loop_trips=3)
    names = {op.gate if isinstance(op.gate, str) else op.gate.name for op in ops + loop_ops}
    reference = _state(program, angles)
    assert np.isclose(np.linalg.norm(reference), 1.0)
    for width in (1, 2, 3, n):
        fused, stats = fuse_gates(program, width, report=True)
        fused.verify()
        assert stats.fused > 0 and stats.passes_saved > 0
        assert stats.widest <= max(width, 1)
        for backend in ("numpy", "numba"):
            got = _state(fused, angles, backend)
            assert np.abs(got - reference).max() < 1e-12, (seed, width, backend, names)
    # fusion inside the runner, at a forced width (small registers are not fused by default)
    for backend in ("numpy", "numba"):
        got = _state(program, angles, backend, fuse=min(n, 4))
        assert np.abs(got - reference).max() < 1e-12


def test_every_gate_of_the_table_fuses_correctly():
    rng = np.random.default_rng(7)
    n = 6
    for name in ALL_GATES:
        ops = [op for op in random_circuit(n, 400, rng, gates=[name, "h", "ry", "cx"])][:30]
        assert any((op.gate if isinstance(op.gate, str) else op.gate.name) == name
                   for op in ops)
        program, angles = _random_program(n, ops)
        reference = _state(program, angles)
        for width in (2, 4):
            for backend in ("numpy", "numba"):
                got = _state(fuse_gates(program, width), angles, backend)
                assert np.abs(got - reference).max() < 1e-12, (name, width, backend)


def test_loop_bodies_fuse_inside_never_across():
    def circuit(theta):
        q = qm.qubits(3)
        qm.h(q[0])
        qm.ry(theta, q[1])

        def body(i):
            qm.rx(theta, q[0])
            qm.cx(q[0], q[1])
            qm.rz(theta * i, q[1])

        qdiff.fori_loop(0, 4, body)
        qm.h(q[0])
        return qm.state(q)

    program = qdiff.trace(circuit, 0.4)
    fused, stats = fuse_gates(program, 2, report=True)
    names = [e.primitive.name for e in fused.eqns]
    # h and ry before the loop are one block, the loop stays, the last h stays a gate
    assert names.count("fused_gate") == 1 and "loop" in names and names[-2] == "gate"
    body = next(e for e in fused.eqns if e.primitive.name == "loop").params["body"]
    assert [e.primitive.name for e in body.eqns if "gate" in e.primitive.name] == ["fused_gate"]
    assert (stats.gates, stats.passes) == (6, 3)
    reference = _state(program, 0.4)
    assert np.abs(_state(fused, 0.4) - reference).max() < 1e-12
    result = qm.run(program, 0.4, fuse=2)
    assert (result.gate_passes, result.passes_saved) == (2 + 4, 1 + 4 * 2)
    # by default the Numba back end takes a 3-qubit register as one block: the same passes
    assert qm.run(program, 0.4, fuse=True).passes_saved == 1 + 4 * 2
    assert qm.run(program, 0.4, fuse=False).gate_passes == 3 + 4 * 3


def test_measurement_reset_postselect_and_cond_are_barriers():
    def circuit(theta):
        q = qm.qubits(2)
        qm.h(q[0])
        bit = qm.measure(q[0])
        qm.h(q[0])  # fused with the first h across the measurement this would be identity
        qm.ry(theta, q[1])
        qm.reset(q[1])
        qm.ry(theta, q[1])
        qdiff.cond(bit, lambda: qm.x(q[1]), lambda: qm.rx(theta, q[0]))
        qm.ry(theta, q[1])
        qm.postselect(q[0], 1)
        qm.rx(theta, q[0])
        return qm.probs(q), qm.expval("ZZ", q)

    program = qdiff.trace(circuit, 0.9)
    fused, stats = fuse_gates(program, 2, report=True)
    names = [e.primitive.name for e in fused.eqns]
    m, r, c, p = (names.index(k) for k in ("measure", "reset", "cond", "postselect"))
    assert names[:m] == ["qalloc", "gate"]  # h alone before the measurement
    assert "fused_gate" in names[m:r] and names[r:c].count("gate") == 1
    assert names[c + 1:p] == ["gate"] and names[p + 1] == "gate"
    assert stats.gates == 8 and stats.passes == 7  # h, [h ry], ry, (x | rx), ry, rx
    for backend in ("numpy", "numba"):
        a = qm.run(program, 0.9, backend=backend, fuse=False)
        b = qm.run(program, 0.9, backend=backend, fuse=2)
        for x, y in zip(a.values, b.values):
            assert np.abs(np.asarray(x) - np.asarray(y)).max() < 1e-12
        assert a.postselection_probability == pytest.approx(b.postselection_probability,
                                                            abs=1e-12)
    # measuring between two Hadamards gives 1/2, not the fused identity's 0
    def hmh():
        q = qm.qubits(1)
        qm.h(q[0])
        qm.measure(q[0])
        qm.h(q[0])
        return qm.probs(q)

    assert qm.run(qdiff.trace(hmh), fuse=2).values.tolist() == pytest.approx([0.5, 0.5])


def test_classical_code_between_gates_and_sample_mode():
    def circuit(theta):
        q = qm.qubits(2)
        qm.ry(theta, q[0])
        phi = qnp.sin(theta) * 2.0  # classical equations between gates stay put
        qm.rz(phi, q[0])
        qm.cx(q[0], q[1])
        qm.ry(phi + theta, q[1])
        return qm.measure(q[1])

    program = qdiff.trace(circuit, 0.7)
    fused = fuse_gates(program, 2)
    assert [e.primitive.name for e in fused.eqns].count("fused_gate") == 1
    exact = qm.run(program, 0.7, fuse=False).values
    assert qm.run(fused, 0.7, fuse=False).values == pytest.approx(exact, abs=1e-12)
    a = qm.run(program, 0.7, mode="sample", shots=300, seed=3, fuse=False)
    b = qm.run(program, 0.7, mode="sample", shots=300, seed=3, fuse=2)
    assert a.values == b.values and b.passes_saved == 300 * 3


# ------------------------------------------------------------------------ the primitive
def _fused_example():
    def circuit(theta):
        q = qm.qubits(3)
        qm.ry(theta, q[0])
        qm.unitary(np.array([[0, 1j], [1j, 0]]), [q[2]])
        qm.apply("pauli_rot", [theta], [q[0], q[2]], pauli="XY")
        qm.mcx([q[0], q[2]], q[1])
        return qm.state(q)

    program = qdiff.trace(circuit, 0.3)
    return program, fuse_gates(program, 3)


def test_fused_program_json_printer_and_reference_interpreter():
    program, fused = _fused_example()
    assert "fused_gate[wires=" in str(fused)
    again = Program.from_json(fused.to_json())
    assert again == fused
    reference = _state(program, 0.3)
    assert np.abs(_state(again, 0.3) - reference).max() < 1e-12
    eqn = next(e for e in fused.eqns if e.primitive.name == "fused_gate")
    state = get_backend("numpy").zero_state(3)
    out = eqn.primitive.impl("numpy")(state, np.float64(0.3), np.float64(0.3), **eqn.params)
    assert out is not state  # the reference implementation does not touch its input
    assert state[0] == 1


def test_fused_gate_type_rule_rejects_bad_parts():
    _, fused = _fused_example()
    index = next(i for i, e in enumerate(fused.eqns) if e.primitive.name == "fused_gate")
    eqn = fused.eqns[index]
    parts = eqn.params["parts"]
    bad = [
        {**eqn.params, "parts": parts[1:]},  # angle count no longer matches
        {**eqn.params, "parts": ((parts[0][0], (0, 0), None, 1),) + parts[1:]},
        {**eqn.params, "parts": (("ry", (7,), None, 1),) + parts[1:]},
        {**eqn.params, "parts": (("nope", (0,), None, 1),) + parts[1:]},
        {**eqn.params, "parts": (("ry", (0,), None, 2),) + parts[1:]},
        {**eqn.params, "wires": (0, 1, 5)},
    ]
    for params in bad:
        broken = Program(fused.inputs, fused.eqns[:index] + (type(eqn)(
            eqn.primitive, eqn.inputs, eqn.outputs, params),) + fused.eqns[index + 1:],
            fused.outputs)
        with pytest.raises(VerificationError, match="fused_gate|gate"):
            broken.verify()


def test_fused_matrix_is_the_product_of_the_gates():
    rng = np.random.default_rng(11)
    ops = [GateOp(op.gate, op.wires, op.params) for op in random_circuit(3, 12, rng)]
    full = np.eye(8, dtype=complex)
    be = get_backend("numpy")
    for k in range(8):
        full[:, k] = be.apply_circuit(be.basis_state(3, k), 3, ops)
    assert np.abs(fused_matrix([0, 1, 2], ops) - full).max() < 1e-12
    with pytest.raises(ValueError, match="outside"):
        fused_matrix([0, 1], [GateOp("cx", (1, 2))])


# ---------------------------------------------------------------- back ends' apply_fused
def _random_block(rng, n, wires, count):
    ops = []
    for op in random_circuit(len(wires), count, rng):
        ops.append(GateOp(op.gate, tuple(wires[w] for w in op.wires), op.params))
    return ops


@pytest.mark.parametrize("wires", [
    (9, 10, 11),       # groups contiguous in memory
    (3, 5, 8),         # runs of 8 contiguous groups
    (0, 1, 6, 7),      # transposed gather, the block holds wires 0, 1
    (1, 4),            # transposed gather, runs of 2 groups
    (2, 0, 11, 5, 7),  # unsorted wires
])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_numba_block_kernel_on_every_gather_layout(wires, dtype):
    rng = np.random.default_rng(len(wires))
    n = 12
    ops = _random_block(rng, n, list(wires), 30)
    for w in wires:  # a hardware-efficient layer: paired real runs, merged diagonals
        ops += [GateOp("ry", (w,), (0.3 * w,)), GateOp("rz", (w,), (0.2 * w + 0.1,))]
    ops += [GateOp("cx", (a, b)) for a, b in zip(wires[:-1], wires[1:])]
    psi = rng.normal(size=2 ** n) + 1j * rng.normal(size=2 ** n)
    psi = (psi / np.linalg.norm(psi)).astype(dtype)
    reference = get_backend("numpy").apply_circuit(psi.astype(np.complex128), n, ops)
    tol = 1e-12 if dtype == np.complex128 else 2e-6
    for be in (NumbaBackend(), NumbaBackend(parallel_threshold=0)):
        got = be.apply_fused(psi.copy(), n, wires, ops)
        assert got.dtype == dtype
        assert np.abs(got - reference).max() < tol
    # the threaded driver itself, whatever the thread count here
    layout_positions = np.array(sorted(wires), np.int64)
    from qdiff.quantum.simulator.indexing import index_layout

    layout = index_layout(n, tuple(sorted(wires)))
    state = psi.copy()
    numba_module._blk_par(state, 8, 3, (2 ** n >> len(wires)) // 8, layout_positions,
                          layout.offsets, *encode_block(wires, ops))
    assert np.abs(state - reference).max() < tol


def test_encode_block_folds_one_qubit_runs_and_classifies_them():
    ops = [GateOp("rz", (3,), (0.4,)), GateOp("phase", (3,), (0.2,)),  # diagonal run
           GateOp("x", (5,)), GateOp("rz", (5,), (0.3,)),               # x, then a diagonal
           GateOp("x", (4,)), GateOp("x", (4,)),                        # identity
           GateOp("ry", (6,), (0.1,)),                                  # real
           GateOp("cz", (3, 5)), GateOp("crx", (6, 4), (0.5,)), GateOp("swap", (3, 6))]
    kinds, cmasks, ntg, tgts, moffs, pool, *_ = encode_block([3, 4, 5, 6], ops)
    K = numba_module
    # x x (identity) and x alone cost no arithmetic; ry is real; rz, phase and cz merge into
    # one diagonal on wires 3 and 5, which waits past crx (off its wires) and past the swap
    # (conjugated by it: then on wires 3, 5 and 6, local bits 0, 2 and 3)
    assert kinds.tolist() == [K.OP_DIAG, K.OP_PERM, K.OP_REAL1, K.OP_DENSE1, K.OP_PERM,
                              K.OP_DIAG]
    assert cmasks.tolist() == [0, 0, 0, 0b1000, 0, 0]
    assert ntg.tolist()[-1] == 3 and tgts[-1].tolist() == [0b0001, 0b0100, 0b1000]
    rz3, ph3, rz5 = (gate_spec(g).diagonal(t) for g, t in (("rz", 0.4), ("phase", 0.2),
                                                            ("rz", 0.3)))
    # after the swap, what was wire 3 is wire 6: entry (a3, a5, a6) is the diagonal's (a6, a5)
    expected = np.array([rz3[a] * ph3[a] * rz5[b] * (-1 if a and b else 1)
                         for a in (0, 1) for b in (0, 1) for _ in (0, 1)])
    assert np.abs(pool[moffs[-1]:moffs[-1] + 8] - expected).max() < 1e-15
    assert ntg.tolist()[4] == 2 and tgts[4, :2].tolist() == [0b0001, 0b1000]
    with pytest.raises(ValueError, match="outside"):
        encode_block([3, 4], [GateOp("cx", (3, 5))])
    # real runs on two wires share one sweep; a third waits alone
    layer = [GateOp("ry", (w,), (0.1 + w,)) for w in (0, 1, 2)] + [GateOp("cz", (0, 2))]
    kinds, cmasks, ntg, tgts, moffs, pool, *_ = encode_block([0, 1, 2], layer)
    assert kinds.tolist() == [K.OP_REAL2, K.OP_REAL1, K.OP_DIAG]
    assert tgts[0].tolist() == [0b001, 0b010]
    assert np.allclose(pool[:8].real.reshape(2, 2, 2),
                       [gate_spec("ry").matrix(0.1).real, gate_spec("ry").matrix(1.1).real])


def test_apply_fused_on_every_back_end_and_small_registers():
    rng = np.random.default_rng(5)
    for n in (2, 4, 7):
        wires = [int(w) for w in rng.permutation(n)[:min(n, 3)]]
        ops = _random_block(rng, n, wires, 15)
        reference = get_backend("numpy").apply_circuit(get_backend("numpy").zero_state(n), n,
                                                       ops)
        for name in ("numpy", "numba"):
            be = get_backend(name)
            got = be.apply_fused(be.zero_state(n), n, wires, ops)
            assert np.abs(got - reference).max() < 1e-12, (n, name)
    be = get_backend("numpy")
    wide = _random_block(rng, 9, list(range(8)), 20)  # wider than dense_fusion_limit
    reference = be.apply_circuit(be.zero_state(9), 9, wide)
    assert np.abs(be.apply_fused(be.zero_state(9), 9, range(8), wide) - reference).max() < 1e-12
    with pytest.raises(ValueError, match="outside"):
        be.apply_fused(be.zero_state(9), 9, range(8), [GateOp("x", (8,))])


# ---------------------------------------------------------------------- the runner option
def _ladder(n, layers):
    def circuit(theta):
        q = qm.qubits(n)
        for layer in range(layers):
            for w in range(n):
                qm.ry(theta * (layer + w), q[w])
            for w in range(n - 1):
                qm.cx(q[w], q[w + 1])
        return qm.expval("Z" * n, q)

    wires = [(w,) for w in range(n)] + [(w, w + 1) for w in range(n - 1)]
    return qdiff.trace(circuit, 0.3), wires * layers


def test_runner_fuse_option_and_cache():
    program, wires = _ladder(12, 3)
    plain = qm.run(program, 0.3, fuse=False)
    assert plain.gate_passes == len(wires) == 69 and plain.passes_saved == 0
    for backend in ("numpy", "numba"):
        fused = qm.run(program, 0.3, backend=backend)  # fusion is the default
        assert fused.values == pytest.approx(plain.values, abs=1e-12)
        blocks = plan_blocks(wires, get_backend(backend).fusion_width(12))
        assert fused.gate_passes == len(blocks) and fused.passes_saved == 69 - len(blocks)
        assert fused.passes_saved >= 30
    first, stats = fused_program(program, "numba")
    assert fused_program(program, "numba")[0] is first
    assert fused_program(first, "numba")[0] is first  # already fused: left as it is
    assert isinstance(stats, FusionStats) and stats.passes == 69 - stats.passes_saved
    assert BranchRunner(RunOptions(fuse=False)).fuse is False and BranchRunner().fuse is True
    assert BranchRunner(RunOptions(fuse=3)).fusion_width == 3
    assert BranchRunner().fusion_width is None
    forced = qm.run(program, 0.3, fuse=3)
    assert forced.gate_passes == len(plan_blocks(wires, 3))


def test_fusion_width_follows_the_register():
    be = NumbaBackend()
    assert be.fusion_width(4) == 4 and get_backend("numpy").fusion_width(8) == 0
    assert be.fusion_width(numba_module.FUSION_MIN_QUBITS) == 4
    assert be.fusion_width(30) == numba_module.MAX_BLOCK_WIRES
    # a small register is one block on the Numba back end: a run of gates is one pass
    program, wires = _ladder(4, 2)
    result = qm.run(program, 0.3)
    assert result.gate_passes == 1 and result.passes_saved == len(wires) - 1
    unfused = qm.run(program, 0.3, fuse=False)
    assert unfused.gate_passes == len(wires) and unfused.passes_saved == 0
    assert float(result.values) == pytest.approx(float(unfused.values), abs=1e-12)
    assert qm.run(program, 0.3, backend="numpy").passes_saved == 0  # NumPy: not below 11
    assert fuse_gates(program, 0) == program
    ops = [GateOp("ry", (w,), (0.1 * w,)) for w in range(10)] + [
        GateOp("cx", (w, w + 1)) for w in range(9)]
    blocks = plan_blocks([op.wires for op in ops], be.fusion_width(10))
    assert max(len(set().union(*(ops[i].wires for i in b))) for b in blocks) <= 5
