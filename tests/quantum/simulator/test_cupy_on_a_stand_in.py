"""The CuPy back end without a GPU: run on ``counting_cupy``'s NumPy stand-in for CuPy, whose
kernels are the NumPy transcriptions of the CUDA kernels (``cupy_kernels``). Every kernel
path agrees with the NumPy back end, and what a value or an adjoint gradient asks of a GPU
(host-to-device copies, waits for the device, kernel launches) stays bounded per gate and
per parameter, counted rather than timed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qdiff import quantum as qm
from qdiff.quantum.gradients.adjoint import _owner
from qdiff.quantum.lang.gates import gate_spec
from qdiff.quantum.simulator import GateOp, get_backend
from qdiff.quantum.simulator.cupy_backend import CupyBackend
from qdiff.quantum.simulator.cupy_kernels import KERNELS, THREADS, raw_source
from qdiff.quantum.simulator.gate_ops import random_circuit
from tests.quantum import quantum_programs_lib as lib
from tests.quantum.simulator.counting_cupy import CountingCupy

TOL = {np.complex128: 1e-12, np.complex64: 2e-5}
REF = get_backend("numpy")


def _state(n: int, seed: int, dtype: type = np.complex128) -> np.ndarray:
    rng = np.random.default_rng(seed)
    psi = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    return (psi / np.linalg.norm(psi)).astype(dtype)


def _stand_in() -> tuple[CupyBackend, CountingCupy]:
    cp = CountingCupy()
    return CupyBackend(xp=cp), cp


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("n", [1, 4, 9])
def test_gate_kernels_on_the_stand_in_equal_numpy(n, dtype):
    be, _ = _stand_in()
    ops = random_circuit(n, 80, rng=n)
    got = be.to_numpy(be.apply_circuit(be.asarray(_state(n, n, dtype)), n, ops))
    want = REF.apply_circuit(_state(n, n, dtype), n, ops)
    np.testing.assert_allclose(got, want, atol=TOL[dtype])


NARROW = ["rx", "ry", "rz", "h", "s", "t", "u", "phase", "cx", "cz", "crx", "cry", "rxx",
          "ryy", "rzz", "swap", "iswap", "ch"]  # gates on at most 2 wires


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("gates", ["narrow", "any"])
@pytest.mark.parametrize("width", [1, 2, 3, 5, 6, 7])
def test_fused_blocks_on_the_stand_in_equal_numpy(width, gates, dtype):
    # narrow gates up to 6 wires: the gate-block kernel; wider gates: a dense matrix, by the
    # shared-memory dense kernel up to 6 wires, by the array-module code beyond
    n = 9
    rng = np.random.default_rng(width)
    wires = [int(w) for w in rng.permutation(n)[:width]]
    names = [g for g in NARROW if gate_spec(g).num_qubits <= width] if gates == "narrow" else None
    ops = [GateOp(op.gate, tuple(wires[w] for w in op.wires), op.params)
           for op in random_circuit(width, 30, rng=width, gates=names)]
    be, _ = _stand_in()
    got = be.to_numpy(be.apply_fused(be.asarray(_state(n, 1, dtype)), n, wires, ops))
    want = REF.apply_fused(_state(n, 1, dtype), n, wires, ops)
    np.testing.assert_allclose(got, want, atol=TOL[dtype])


def test_fused_block_with_a_raw_matrix_on_the_stand_in_equals_numpy():
    # a fused block may hold a gate given as its matrix (a merged 1-qubit run)
    n, u = 4, np.linalg.qr(np.random.default_rng(3).normal(size=(2, 2)) + 0j)[0]
    ops = [GateOp("ry", (1,), (0.4,)), GateOp(u, (2,)), GateOp("cx", (1, 2))]
    be, _ = _stand_in()
    got = be.to_numpy(be.apply_fused(be.asarray(_state(n, 4)), n, [1, 2], ops))
    np.testing.assert_allclose(got, REF.apply_fused(_state(n, 4), n, [1, 2], ops), atol=1e-12)


def test_controlled_dense_gate_on_the_stand_in_equals_numpy():
    # a 2-target dense block under a control: the dense kernel's group bases carry cmask
    n, u = 5, np.linalg.qr(np.random.default_rng(0).normal(size=(4, 4)))[0]
    be, _ = _stand_in()
    spec = gate_spec("unitary", matrix=np.kron(np.diag([1, 0]), np.eye(4))
                     + np.kron(np.diag([0, 1]), u))
    got = be.to_numpy(be.apply_gate(be.asarray(_state(n, 2)), n, spec, [3, 0, 4]))
    want = REF.apply_gate(_state(n, 2), n, spec, [3, 0, 4])
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_pauli_sum_kernels_on_the_stand_in_equal_numpy(dtype):
    n = 6
    obs = qm.PauliSum([(0.5, "XYZIIX"), (-1.25, "ZIIZII"), (2.0, "IIYYII"), (0.75, "IIIIII")])
    be, _ = _stand_in()
    bra, ket = _state(n, 3, dtype), _state(n, 4, dtype)
    tol = 10 * TOL[dtype]
    assert be.inner_pauli_sum(be.asarray(bra), be.asarray(ket), n, obs) == pytest.approx(
        REF.inner_pauli_sum(bra, ket, n, obs), abs=tol)
    got = be.expval_pauli_sum_batch(be.asarray(ket), n, [obs, "ZIIIII"])
    np.testing.assert_allclose(got, REF.expval_pauli_sum_batch(ket, n, [obs, "ZIIIII"]),
                               atol=tol)
    out = be.add_pauli_sum(be.asarray(bra), be.asarray(ket), n, obs, scale=0.5 - 2j)
    want = REF.add_pauli_sum(bra.copy(), ket, n, obs, scale=0.5 - 2j)
    np.testing.assert_allclose(be.to_numpy(out), want, atol=tol)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("rows", [1, 2])
def test_adjoint_block_on_the_stand_in_equals_numpy(rows, dtype):
    # one adjoint: 1-wire gates take the pair kernel (wanted or not); a stack: the reduction
    n = 5
    ops = [GateOp(g, w, p) for g, w, p in [
        ("ry", (0,), (0.3,)), ("cx", (0, 1), ()), ("rz", (1,), (-1.1,)), ("crx", (2, 0), (0.7,)),
        ("rxx", (1, 2), (0.4,)), ("h", (2,), ()), ("rx", (2,), (2.1,)), ("phase", (0,), (0.9,)),
        ("u", (1,), (0.1, 0.2, 0.3)), ("ry", (1,), (-0.6,))]]
    want_flags = [True, False, True, True, True, False, True, True, False, False]
    psi = _state(n, 5, dtype)
    lam = np.stack([_state(n, 6 + r, dtype) for r in range(rows)])
    be, _ = _stand_in()
    dpsi, dlam, lam_one = be.asarray(psi), be.asarray(lam), be.asarray(lam[0])
    got_one = be.to_numpy(be.adjoint_block(be.asarray(psi), lam_one, n, [0, 1, 2], ops,
                                           want_flags))
    got = be.to_numpy(be.adjoint_block(dpsi, dlam, n, [0, 1, 2], ops, want_flags))
    want = REF.adjoint_block(psi, lam, n, [0, 1, 2], ops, want_flags)  # undoes psi, lam
    tol = 10 * TOL[dtype]
    np.testing.assert_allclose(got, want, atol=tol)
    np.testing.assert_allclose(be.to_numpy(dpsi), psi, atol=tol)
    np.testing.assert_allclose(be.to_numpy(dlam), lam, atol=tol)
    np.testing.assert_allclose(got_one, want[0], atol=tol)


@pytest.mark.parametrize("gates", [["rx", "ry", "rz", "cx", "crx", "rxx", "ryy", "h", "phase",
                                    "cz", "swap", "u"], ["ry", "mcx", "rzz"]])
def test_long_adjoint_blocks_on_the_stand_in_equal_numpy(gates):
    # more gates than one launch of the block kernel takes (ADJOINT_GATES), and a block
    # with a 3-wire gate (the gate-by-gate path)
    n, wires = 6, [1, 2, 4, 5]
    ops = [GateOp(op.gate, tuple(wires[w] for w in op.wires), op.params)
           for op in random_circuit(4, 150, rng=7, gates=gates)]
    flags = [gate_spec(op.gate).generator is not None for op in ops]
    psi, lam = _state(n, 8), _state(n, 9)
    be, _ = _stand_in()
    dpsi, dlam = be.asarray(psi), be.asarray(lam)
    got = be.to_numpy(be.adjoint_block(dpsi, dlam, n, wires, ops, flags))
    want = REF.adjoint_block(psi, lam, n, wires, ops, flags)
    np.testing.assert_allclose(got, want, atol=1e-11)
    np.testing.assert_allclose(be.to_numpy(dpsi), psi, atol=1e-11)
    np.testing.assert_allclose(be.to_numpy(dlam), lam, atol=1e-11)


@pytest.mark.parametrize("name", ["ansatz", "postselection", "branch on a measurement",
                                  "loop on a measurement"])
def test_programs_on_the_stand_in_equal_numpy(name):
    programs = {
        "ansatz": (lib.hea_program(5, 2, qm.PauliSum([(1.0, "ZIIII"), (0.5, "XXIII")])),
                   lib.hea_angles(5, 2, seed=5)),
        "postselection": (lib.entangled_postselected, np.array([0.4, 1.1])),
        "branch on a measurement": (lib.registers_and_a_branch, np.array([0.3, 0.9])),
        "loop on a measurement": (lib.until_one, 1.2),
    }
    program, x = programs[name]
    be, _ = _stand_in()
    for run in (lambda b: qm.run(program, x, backend=b).values,
                lambda b: qm.gradient(program, x, backend=b).grad):
        np.testing.assert_allclose(np.asarray(run(be), float), np.asarray(run(REF), float),
                                   rtol=1e-10, atol=1e-12)


def _counts(n: int, layers: int) -> dict[str, dict[str, int]]:
    be, cp = _stand_in()
    obs = qm.PauliSum([(1.0, "I" * k + "Z" + "I" * (n - k - 1)) for k in range(n)])
    program, x = lib.hea_program(n, layers, obs), lib.hea_angles(n, layers, seed=1)
    out = {}
    for what, run in (("value", lambda: qm.run(program, x, backend=be)),
                      ("gradient", lambda: qm.gradient(program, x, backend=be))):
        run()  # warm: plans and device tables
        cp.reset()
        run()
        out[what] = cp.reset()
    return out


def test_gpu_work_per_gate_and_per_parameter_stays_bounded():
    # n = 12 fuses 2-wire blocks (the dense kernel); two more layers add 2n parameters and
    # 3n - 1 gates a layer: what they add is the cost per gate, free of per-call constants
    n = 12
    short, long = _counts(n, 1), _counts(n, 3)
    gates, params = 2 * (3 * n - 1), 2 * 2 * n
    value = {k: long["value"][k] - short["value"][k] for k in long["value"]}
    grad = {k: long["gradient"][k] - short["gradient"][k] for k in long["gradient"]}
    assert value["d2h"] == 0 and grad["d2h"] == 0  # no wait for the device inside a circuit
    assert long["value"]["d2h"] <= 1 and long["gradient"]["d2h"] <= 2
    assert value["h2d"] <= 0.5 * gates  # a fused block's matrix, nothing per gate
    assert grad["h2d"] <= 0.5 * gates
    assert value["launches"] <= 0.5 * gates  # a fused block: one launch
    # the reverse sweep: a block of gates is one launch, derivatives included
    assert grad["launches"] <= params


def test_stand_in_refuses_a_raw_kernel_scalar_of_the_wrong_c_type():
    # CuPy passes a Python int to a raw kernel as a 64-bit integer: an `int` parameter must
    # get np.int32, or the kernel reads garbage on the GPU
    cp = CountingCupy()
    kernel = cp.RawKernel(raw_source(KERNELS["qdiff_pauli_inner"], "double"),
                          "qdiff_pauli_inner_double")
    state = cp.asarray(_state(2, 0))
    table = cp.asarray(np.zeros(1, np.int64))
    out = cp.zeros(2)
    ones = cp.asarray(np.array([1.0, 0.0]))  # f = 1: <ψ|ψ>
    args = [state, state, np.int64(4), np.int32(1), table, table, ones, out, np.int32(0)]
    kernel((1,), (THREADS,), tuple(args))
    assert float(out[0]) == pytest.approx(1.0)
    args[3] = 1
    with pytest.raises(TypeError, match="argument 3 \\(int\\) must be int32"):
        kernel((1,), (THREADS,), tuple(args))
    with pytest.raises(TypeError, match="host"):
        cp.asarray(np.ones(2)) + np.ones(2)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no CUDA compiler (nvcc) here")
def test_raw_kernels_compile_for_the_h100(tmp_path):
    # NVRTC compiles them on the GPU at run time; nvcc, where installed, catches what would
    # not compile (and register spills) without one
    sources = [f"namespace k{i} {{\n{raw_source(k, real)}\n}}"
               for i, (k, real) in enumerate((k, real) for k in KERNELS.values()
                                             if k.kind == "raw" for real in ("double", "float"))]
    (tmp_path / "kernels.cu").write_text("\n".join(sources))
    done = subprocess.run(["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-warn-spills",
                           "-o", str(tmp_path / "kernels.cubin"), str(tmp_path / "kernels.cu")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr


def test_counting_benchmark_runs_and_checks_against_numpy():
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "cupy_counts.py"),
                           "--sizes", "4", "--layers", "1", "2"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [row[2] for row in rows] == ["value", "gradient"] * 2
    assert all(row[4] in ("1", "2") for row in rows)  # waits for the device: 1 or 2 a call


def test_gradient_forward_pass_finds_the_buffer_of_a_device_array_view():
    # CuPy's arrays are not NumPy arrays: the adjoint runner took each gate's view of a
    # device state for its own buffer, so the forward pass of a gradient ran gate by gate
    class DeviceArrayLike:  # what the runner reads of a cupy.ndarray: its base
        def __init__(self, base=None):
            self.base = base

    buffer = DeviceArrayLike()
    view = DeviceArrayLike(DeviceArrayLike(buffer))
    assert _owner(view) is buffer and _owner(buffer) is buffer
    host = np.zeros(4)
    assert _owner(host[1:][::2]) is host
