"""Programs in complex64 (``qm.qubits(n, dtype=np.complex64)``): single-precision arithmetic
all the way through (gates, measurement branches, loops), results within ~1e-5 of complex128,
``qm.state`` typed and returned as complex64, and the dtype rules for several registers."""

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.simulator import random_circuit

N = 4
OPS = random_circuit(N, 60, rng=2024)


def apply_ops(q, angles):
    k = 0
    for op in OPS:
        spec = None if isinstance(op.gate, str) else op.gate
        name = op.gate if spec is None else spec.name
        params = [angles[k + j] for j in range(len(op.params))]
        k += len(op.params)
        qm.apply(name, params, [q[w] for w in op.wires], **({} if spec is None else spec.static))


ANGLES = np.array([p for op in OPS for p in op.params])


def make_circuit(dtype):
    def circuit(angles):
        q = qm.qubits(N, dtype=dtype)
        apply_ops(q, angles)
        return qm.state(q), qm.expval("0.3*XZYI - ZZII + IIYX", q), qm.probs([q[3], q[1]])
    return circuit


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_random_circuit_in_complex64_matches_complex128(backend):
    assert len(ANGLES) > 20  # the circuit has many parametric gates
    single = qdiff.trace(make_circuit(np.complex64), ANGLES)
    double = qdiff.trace(make_circuit(np.complex128), ANGLES)
    assert "c64[16]" in str(single) and "dtype='complex64'" in str(single)
    s32, e32, p32 = qm.run(single, ANGLES, backend=backend).values
    s64, e64, p64 = qm.run(double, ANGLES, backend=backend).values
    assert s32.dtype == np.complex64 and s64.dtype == np.complex128
    np.testing.assert_allclose(s32, s64, atol=1e-5)
    assert e32 == pytest.approx(e64, abs=1e-5)
    np.testing.assert_allclose(p32, p64, atol=1e-5)
    # gate by gate the arithmetic really is single precision: not the complex128 result
    # rounded at the end
    g32 = qm.run(single, ANGLES, backend=backend, fuse=False).values[0]
    assert np.max(np.abs(g32 - s64.astype(np.complex64))) > 0
    # calling the program directly goes through the same runner
    direct = single(ANGLES)[0]
    assert direct.dtype == np.complex64


def test_measurements_loops_and_branches_stay_complex64():
    def program(dtype):
        def f(t):
            q = qm.qubits(2, dtype=dtype)
            r = qm.qubits(1)  # a later register takes the program's dtype
            qm.h(q[0]); qm.ry(t, q[1]); qm.cx(q[1], r[0])
            bit = qm.measure(q[0], reset=True)
            qdiff.cond(bit, lambda: qm.rx(t, r[0]), lambda: None)
            qdiff.fori_loop(0, 3, lambda i: (qm.crz(t, q[1], r[0]), qm.reset(q[1]),
                                             qm.ry(t * 0.5, q[1])))
            return qm.state(r), qm.probs([q[1], r[0]])
        return f

    t = 0.77
    s32, p32 = qm.run(program(np.complex64), t).values
    s64, p64 = qm.run(program(np.complex128), t).values
    assert s32.dtype == np.complex64
    np.testing.assert_allclose(s32, s64, atol=1e-5)
    np.testing.assert_allclose(p32, p64, atol=1e-5)
    sampled = qm.run(program(np.complex64), t, mode="sample", shots=20, seed=2)
    assert all(traj[0].dtype == np.complex64 for traj in sampled.trajectories)


def test_register_dtypes_must_agree():
    def mixed():
        qm.qubits(1, dtype=np.complex64)
        qm.qubits(1, dtype=np.complex128)

    with pytest.raises(qdiff.QdiffError, match="qubits are complex64"):
        qdiff.trace(mixed)
    with pytest.raises(qdiff.TypeCheckError, match="complex128 or complex64"):
        qdiff.trace(lambda: qm.qubits(1, dtype=np.float32))


def layered_ansatz(dtype, n, layers):
    def circuit(angles):
        q = qm.qubits(n, dtype=dtype)
        for layer in range(layers):
            for w in range(n):
                qm.ry(angles[layer, w, 0], q[w])
                qm.rz(angles[layer, w, 1], q[w])
            for w in range(n - 1):
                qm.cx(q[w], q[w + 1])
        return qm.state(q)
    return circuit


def test_fused_blocks_in_complex64_compute_in_single_precision_within_its_bound():
    # n = 10 runs every block in the block kernel, whose buffers and matrix entries take the
    # state's precision. Each of the ~60 sweeps an amplitude sees per 20 layers rounds it by
    # about eps32 = 6e-8 relative, so the state-norm-relative error stays well under
    # 60 * eps32 * (a few) ~ 1e-5 (measured: about 1e-6)
    n, layers = 10, 20
    angles = np.random.default_rng(7).uniform(-np.pi, np.pi, (layers, n, 2))
    single = qm.run(qdiff.trace(layered_ansatz(np.complex64, n, layers), angles), angles,
                    backend="numba").values
    double = qm.run(qdiff.trace(layered_ansatz(np.complex128, n, layers), angles), angles,
                    backend="numba").values
    assert single.dtype == np.complex64
    error = np.linalg.norm(single - double) / np.linalg.norm(double)
    assert error < 1e-5
    # single precision in the blocks' sweeps, not only at their stores: the double result
    # rounded once is 2.5e-8 off; rounding once per block (buffers in double) gave 1.4e-7,
    # rounding every sweep gives 6.8e-7
    rounded = np.linalg.norm(double.astype(np.complex64) - double) / np.linalg.norm(double)
    assert error > 10 * rounded
