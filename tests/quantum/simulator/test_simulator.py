"""Statevector back ends against Qiskit: random circuits over the whole gate table, expectation
values, probabilities, projections, sampling, memory refusal and input errors."""

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qiskit import QuantumCircuit
from qiskit.circuit.library import UnitaryGate
from qiskit.quantum_info import SparsePauliOp, Statevector

import qdiff.gpu.array_module as array_module
import qdiff.quantum.simulator.backend as backend_module
import qdiff.quantum.simulator.block_encoding as block_encoding_module
import qdiff.quantum.simulator.gate_ops as gate_ops_module
import qdiff.quantum.simulator.indexing as indexing_module
import qdiff.quantum.simulator.memory as memory_module
import qdiff.quantum.simulator.numba_backend as numba_module
import qdiff.quantum.simulator.numba_block_kernels as numba_block_module
import qdiff.quantum.simulator.numba_gate_kernels as numba_gate_module
import qdiff.quantum.simulator.numba_ranges as numba_ranges_module
import qdiff.quantum.simulator.numpy_backend as numpy_module
import qdiff.quantum.simulator.registry as registry_module
from qdiff.gpu import cupy_available, get_array_module, import_cupy
from qdiff.quantum.lang.gates import UnknownGateError, gate_spec
from qdiff.quantum.lang.observables import PauliSum
from qdiff.quantum.simulator import (
    GateOp,
    StateTooLargeError,
    StatevectorBackend,
    available_backends,
    check_statevector_memory,
    fuse_single_qubit_layers,
    get_backend,
    random_circuit,
)
from qdiff.quantum.simulator.numba_backend import NumbaBackend

pytestmark = pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")

BACKENDS = ["numpy", "numba", "numba-parallel", "cupy"]
TOL = {np.complex128: 1e-10, np.complex64: 1e-5}


def _backend(name: str) -> StatevectorBackend:
    if name == "cupy" and not cupy_available():
        pytest.skip("CuPy with a CUDA device is not available")
    if name == "numba-parallel":
        # threshold 0: even tiny states go through the prange drivers
        return NumbaBackend(parallel_threshold=0)
    return get_backend(name)


@pytest.fixture(params=BACKENDS)
def be(request: pytest.FixtureRequest) -> StatevectorBackend:
    return _backend(request.param)


def _to_qiskit(ops: list[GateOp], n: int) -> QuantumCircuit:
    qc = QuantumCircuit(n)
    for op in ops:
        if isinstance(op.gate, np.ndarray):
            qc.append(UnitaryGate(op.gate), list(op.wires))
        else:
            qc.append(gate_spec(op.gate).to_qiskit(*op.params), list(op.wires))
    return qc


def _random_state(n: int, rng: np.random.Generator, normalized: bool = True) -> np.ndarray:
    v = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    return v / np.linalg.norm(v) if normalized else v


def _host(be: StatevectorBackend, x: object) -> np.ndarray:
    return be.to_numpy(x)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 10])
def test_random_circuits_match_qiskit(be: StatevectorBackend, dtype: type, n: int) -> None:
    rng = np.random.default_rng(100 + n)
    ops = random_circuit(n, 40, rng)
    init = _random_state(n, rng)
    psi = be.asarray(init.astype(dtype))
    out = be.apply_circuit(psi, n, ops)
    assert out is psi and out.dtype == dtype
    expected = Statevector(init).evolve(_to_qiskit(ops, n)).data
    np.testing.assert_allclose(_host(be, out), expected, atol=TOL[dtype])


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 7), seed=st.integers(0, 2**32 - 1))
def test_random_circuits_hypothesis_numba(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ops = random_circuit(n, 15, rng)
    psi = get_backend("numba").apply_circuit(get_backend("numba").zero_state(n), n, ops)
    np.testing.assert_allclose(psi, Statevector(_to_qiskit(ops, n)).data, atol=1e-10)


@pytest.mark.parametrize("name", ["numba", "numba-parallel"])
def test_numba_multi_chunk_and_contiguous_runs(name: str) -> None:
    """n = 14 gives several parallel chunks; gates on wires >= 3 take the SIMD run loops."""
    n = 14
    be, ref = _backend(name), get_backend("numpy")
    rng = np.random.default_rng(1)
    high = [op for op in random_circuit(n, 400, rng) if min(op.wires) >= 3][:25]
    low = random_circuit(n, 25, rng)
    init = _random_state(n, rng)
    for ops in (high, low):
        a = be.apply_circuit(init.copy(), n, ops)
        b = ref.apply_circuit(init.copy(), n, ops)
        np.testing.assert_allclose(a, b, atol=1e-10)


def _placed(pauli: PauliSum, wires: tuple[int, ...], n: int) -> SparsePauliOp:
    """The observable on the full register, in Qiskit's label order."""
    terms = []
    for coef, label in pauli.terms:
        letters = ["I"] * n
        for letter, w in zip(label, wires, strict=True):
            letters[w] = letter
        terms.append(("".join(letters)[::-1], coef))
    return SparsePauliOp.from_list(terms or [("I" * n, 0.0)])


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("seed", range(4))
def test_expval_matches_qiskit(be: StatevectorBackend, dtype: type, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    k = int(rng.integers(1, n + 1))
    wires = tuple(int(w) for w in rng.permutation(n)[:k])
    labels = ["".join(rng.choice(list("IXYZ"), size=k)) for _ in range(6)]
    obs = PauliSum([(float(c), lab) for c, lab in zip(rng.normal(size=6), labels, strict=True)])
    init = _random_state(n, rng)
    psi = be.asarray(init.astype(dtype))
    expected = Statevector(init).expectation_value(_placed(obs, wires, n)).real
    value = be.expval_pauli_sum(psi, n, obs, wires)
    assert isinstance(value, float)
    assert value == pytest.approx(expected, abs=TOL[dtype] * 10)
    batch = be.expval_pauli_sum_batch(psi, n, [obs, obs * 2, PauliSum(labels[0])], wires)
    assert batch.shape == (3,)
    np.testing.assert_allclose(batch[:2], [value, 2 * value], atol=TOL[dtype] * 10)


def test_expval_of_unnormalized_branch_scales_with_weight(be: StatevectorBackend) -> None:
    rng = np.random.default_rng(9)
    v = _random_state(4, rng, normalized=False)
    obs = PauliSum("0.3*XYZI - ZIIZ + 0.5*IIII")
    direct = np.vdot(v, obs.to_matrix() @ v).real
    assert be.expval_pauli_sum(be.asarray(v), 4, obs) == pytest.approx(direct, rel=1e-12)
    assert be.expval_pauli_sum(be.asarray(v), 4, PauliSum([], 4)) == 0.0


def test_pauli_string_rotation_and_sum_application(be: StatevectorBackend) -> None:
    rng = np.random.default_rng(4)
    n = 5
    init = _random_state(n, rng)
    wires = (4, 1, 2)
    full = _placed(PauliSum("XYZ"), wires, n).to_matrix()
    out = be.apply_pauli_string(be.asarray(init.copy()), n, "XYZ", wires, coeff=0.5j)
    np.testing.assert_allclose(_host(be, out), 0.5j * full @ init, atol=1e-12)
    out = be.apply_pauli_rotation(be.asarray(init.copy()), n, 0.8, "XYZ", wires)
    expected = Statevector(init).evolve(_to_qiskit(
        [GateOp(gate_spec("pauli_rot", pauli="XYZ"), wires, (0.8,))], n)).data
    np.testing.assert_allclose(_host(be, out), expected, atol=1e-12)
    out = be.apply_pauli_rotation(be.asarray(init.copy()), n, 0.8, "ZIZ", wires)  # diagonal
    zfull = _placed(PauliSum("ZIZ"), wires, n).to_matrix()
    np.testing.assert_allclose(_host(be, out), (np.cos(0.4) * np.eye(32) - 1j * np.sin(0.4)
                                                * zfull) @ init, atol=1e-12)
    obs = PauliSum("0.5*XYZ - 2*ZZI + IIX")
    src = be.asarray(init.copy())
    out = be.apply_pauli_sum(src, n, obs, wires)
    np.testing.assert_allclose(_host(be, out), _placed(obs, wires, n).to_matrix() @ init,
                               atol=1e-12)
    np.testing.assert_allclose(_host(be, src), init)  # input untouched


@pytest.mark.parametrize("wires", [None, (0,), (3,), (2, 0), (1, 3, 4), (4, 3, 2, 1, 0)])
def test_probs_match_qiskit_qargs_order(be: StatevectorBackend,
                                        wires: tuple[int, ...] | None) -> None:
    rng = np.random.default_rng(2)
    init = _random_state(5, rng)
    p = _host(be, be.probs(be.asarray(init), 5, wires))
    assert p.dtype == np.float64
    np.testing.assert_allclose(p, Statevector(init).probabilities(wires), atol=1e-12)


def test_project_is_unnormalized_and_reset_branch(be: StatevectorBackend) -> None:
    rng = np.random.default_rng(3)
    init = _random_state(4, rng)
    p1 = Statevector(init).probabilities([2])[1]
    psi = be.project(be.asarray(init.copy()), 4, 2, 1)
    host = _host(be, psi)
    assert be.norm_squared(psi) == pytest.approx(p1, abs=1e-12)
    bit = (np.arange(16) >> 2) & 1
    np.testing.assert_allclose(host[bit == 0], 0)
    np.testing.assert_allclose(host[bit == 1], init[bit == 1])
    r = _host(be, be.reset_branch(be.asarray(init.copy()), 4, 2, 1))
    np.testing.assert_allclose(r[bit == 0], init[bit == 1])
    np.testing.assert_allclose(r[bit == 1], 0)
    r0 = _host(be, be.reset_branch(be.asarray(init.copy()), 4, 2, 0))
    np.testing.assert_allclose(r0, np.where(bit == 0, init, 0))
    with pytest.raises(ValueError, match="outcome must be 0 or 1"):
        be.project(psi, 4, 2, 2)


def test_inner_and_norm(be: StatevectorBackend) -> None:
    rng = np.random.default_rng(8)
    a, b = _random_state(3, rng, False), _random_state(3, rng, False)
    assert be.inner(be.asarray(a), be.asarray(b)) == pytest.approx(np.vdot(a, b))
    assert be.norm_squared(be.asarray(a)) == pytest.approx(np.vdot(a, a).real)


def test_sample() -> None:
    be = get_backend("numpy")
    probs = np.array([0.1, 0.0, 0.6, 0.3])
    draws = be.sample(probs, 20000, rng=np.random.default_rng(0))
    assert draws.dtype == np.int64 and draws.shape == (20000,)
    freq = np.bincount(draws, minlength=4) / 20000
    sigma = np.sqrt(probs * (1 - probs) / 20000)
    assert np.all(np.abs(freq - probs) <= 5 * sigma + 1e-12)
    assert freq[1] == 0
    np.testing.assert_array_equal(be.sample(probs, 50, rng=5), be.sample(probs, 50, rng=5))
    # an unnormalized branch samples the conditional distribution
    np.testing.assert_array_equal(be.sample(probs * 0.25, 50, rng=5), be.sample(probs, 50, rng=5))
    assert be.sample(probs, 0, rng=1).shape == (0,)
    with pytest.raises(ValueError, match="sum to zero"):
        be.sample(np.zeros(4), 3)
    with pytest.raises(ValueError, match="non-negative"):
        be.sample(np.array([0.5, -0.5]), 3)


def test_complex64_end_to_end() -> None:
    for name in ("numpy", "numba"):
        be = get_backend(name)
        psi = be.zero_state(6, np.complex64)
        ops = random_circuit(6, 30, rng=11)
        be.apply_circuit(psi, 6, ops)
        assert psi.dtype == np.complex64
        assert be.probs(psi, 6, [1, 0]).dtype == np.float64
        ref = Statevector(_to_qiskit(ops, 6))
        assert be.expval_pauli_sum(psi, 6, "XYZIZX") == pytest.approx(
            ref.expectation_value(SparsePauliOp("XZIZYX")).real, abs=1e-5)


def test_fuse_single_qubit_layers_preserves_the_circuit() -> None:
    n = 6
    ops = random_circuit(n, 60, rng=21, gates=["rx", "ry", "rz", "h", "t", "u", "sx", "cx",
                                               "cz", "rzz", "iswap", "mcx"])
    fused = fuse_single_qubit_layers(ops)
    assert len(fused) < len(ops)
    assert sum(len(op.wires) > 1 for op in fused) == sum(len(op.wires) > 1 for op in ops)
    be = get_backend("numba")
    a = be.apply_circuit(be.zero_state(n), n, ops)
    b = be.apply_circuit(be.zero_state(n), n, fused)
    np.testing.assert_allclose(a, b, atol=1e-12)
    only_diag = fuse_single_qubit_layers([GateOp("rz", (0,), (0.3,)), GateOp("t", (0,))])
    (op,) = only_diag
    np.testing.assert_allclose(op.gate, np.diag(np.diagonal(op.gate)))


def test_memory_refusal_message() -> None:
    with pytest.raises(StateTooLargeError) as info:
        check_statevector_memory(30, np.complex64, available=1000)
    text = str(info.value)
    assert "30-qubit complex64 statevector needs 8589934592 bytes (8.0 GiB)" in text
    assert "only 1000 bytes" in text and "available" in text
    with pytest.raises(StateTooLargeError, match="needs 1125899906842624 bytes"):
        get_backend("numba").zero_state(46)
    with pytest.raises(StateTooLargeError, match="at most 62"):
        check_statevector_memory(63)
    with pytest.raises(StateTooLargeError, match="3 copies of a 10-qubit"):
        check_statevector_memory(10, copies=3, available=100)


def test_input_errors(be: StatevectorBackend) -> None:
    psi = be.zero_state(3)
    with pytest.raises(ValueError, match=r"shape \(2, 2\) cannot act on 2 wire\(s\)"):
        be.apply_gate(psi, 3, np.eye(2), [0, 1])
    with pytest.raises(ValueError, match="repeated wires"):
        be.apply_gate(psi, 3, "cx", [1, 1])
    with pytest.raises(ValueError, match="wire 3 is out of range for a 3-qubit register"):
        be.apply_gate(psi, 3, "h", [3])
    with pytest.raises(ValueError, match="wire -1 is out of range"):
        be.apply_gate(psi, 3, "h", [-1])
    with pytest.raises(UnknownGateError, match="unknown gate 'hadamard'"):
        be.apply_gate(psi, 3, "hadamard", [0])
    with pytest.raises(ValueError, match=r"acts on 2 wire\(s\), got 1"):
        be.apply_gate(psi, 3, "cx", [0])
    with pytest.raises(TypeError, match="takes 1 parameter, got 0"):
        be.apply_gate(psi, 3, "crx", [0, 1])
    with pytest.raises(TypeError, match="must be integers"):
        be.apply_gate(psi, 3, "h", [0.5])
    with pytest.raises(ValueError, match="8 amplitudes = 3 qubits, but num_qubits=4"):
        be.apply_gate(psi, 4, "h", [0])
    with pytest.raises(ValueError, match="Hermitian"):
        be.expval_pauli_sum(psi, 3, "1j*XYZ")
    with pytest.raises(ValueError, match="pass wires="):
        be.expval_pauli_sum(psi, 3, "ZZ")
    with pytest.raises(TypeError, match="complex128 or complex64"):
        be.zero_state(2, np.float64)


def test_state_shape_errors() -> None:
    be = get_backend("numba")
    with pytest.raises(ValueError, match="not a power of two"):
        be.apply_gate(np.zeros(6, complex), None, "h", [0])
    with pytest.raises(TypeError, match="complex128 or complex64"):
        be.apply_gate(np.zeros(4), 2, "h", [0])
    with pytest.raises(ValueError, match="C-contiguous"):
        be.apply_gate(np.zeros(8, complex)[::2], 2, "h", [0])
    with pytest.raises(ValueError, match="1-D"):
        be.apply_gate(np.zeros((2, 2), complex), 2, "h", [0])


def test_family_gates_through_apply_gate() -> None:
    be = get_backend("numba")
    psi = be.basis_state(3, 0b011)
    be.apply_gate(psi, 3, "mcx", [0, 1, 2])  # num_controls inferred from the wires
    assert abs(psi[0b111]) == pytest.approx(1)
    be.apply_gate(psi, 3, "pauli_rot", [0, 2], [np.pi], pauli="XX")
    assert abs(psi[0b010]) == pytest.approx(1)
    m = gate_spec("iswap").matrix()
    be.apply_gate(psi, 3, "unitary", [1, 2], matrix=m)
    assert abs(psi[0b100]) == pytest.approx(1)


def test_backend_selection() -> None:
    assert get_backend("auto") is get_backend("numba")
    assert get_backend("NumPy") is get_backend("numpy")
    assert get_backend(get_backend("numpy")) is get_backend("numpy")
    assert {"numpy", "numba"} <= set(available_backends())
    if not cupy_available():
        assert get_backend("auto-gpu") is get_backend("numba")
        with pytest.raises(RuntimeError, match="needs CuPy and a CUDA device"):
            get_backend("cupy")
    with pytest.raises(ValueError, match="unknown back end 'tpu'"):
        get_backend("tpu")


def test_array_module_without_gpu() -> None:
    assert get_array_module(False) is np
    assert array_module.array_module_of(np.zeros(1)) is np
    if not cupy_available():
        assert get_array_module(True) is np
        with pytest.raises(RuntimeError, match="CuPy"):
            import_cupy()


@pytest.mark.skipif(not cupy_available(), reason="CuPy with a CUDA device is not available")
@pytest.mark.parametrize("use_kernels", [True, False])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_cupy_matches_numpy(use_kernels: bool, dtype: type) -> None:
    from qdiff.quantum.simulator.cupy_backend import CupyBackend

    gpu, ref = CupyBackend(use_kernels=use_kernels), get_backend("numpy")
    for n in (1, 4, 9, 14):
        ops = random_circuit(n, 60, rng=n)
        init = _random_state(n, np.random.default_rng(n)).astype(dtype)
        a = gpu.to_numpy(gpu.apply_circuit(gpu.asarray(init.copy()), n, ops))
        b = ref.apply_circuit(init.copy(), n, ops)
        np.testing.assert_allclose(a, b, atol=TOL[dtype])


@pytest.mark.parametrize(
    "module", [backend_module, numpy_module, numba_module, memory_module, array_module,
               indexing_module, gate_ops_module, registry_module, numba_ranges_module,
               numba_gate_module, numba_block_module, block_encoding_module])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
