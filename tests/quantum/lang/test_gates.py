"""The gate table against Qiskit: matrices, generators, spectra, inverses, structure, errors."""

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qiskit.quantum_info import Operator

import qdiff.quantum.lang.gates as gates_module
from qdiff.quantum.lang.gates import (
    GATE_TABLE,
    GateFamily,
    GateSpec,
    NotUnitaryError,
    UnknownGateError,
    gate_spec,
    known_gates,
)

# Qiskit computes PauliEvolutionGate matrices with scipy.sparse and warns about its own format.
pytestmark = pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")

ANGLES = st.floats(min_value=-7.0, max_value=7.0, allow_nan=False, allow_infinity=False)


def _random_unitary(dim: int, rng: np.random.Generator) -> np.ndarray:
    z = rng.normal(size=(dim, dim)) + 1j * rng.normal(size=(dim, dim))
    q, r = np.linalg.qr(z)
    return q * (np.diagonal(r) / np.abs(np.diagonal(r)))


def _all_specs() -> list[GateSpec]:
    """Every fixed gate plus representative instances of each family."""
    rng = np.random.default_rng(7)
    specs = [e for e in GATE_TABLE.values() if isinstance(e, GateSpec)]
    specs += [gate_spec("mcx", num_controls=k) for k in range(4)]
    specs += [gate_spec("mcz", num_controls=k) for k in range(4)]
    specs += [gate_spec("pauli_rot", pauli=p) for p in ("X", "ZZ", "XYZ", "IZIY", "YIX")]
    specs += [gate_spec("unitary", matrix=_random_unitary(d, rng)) for d in (2, 4, 8)]
    return specs


ALL_SPECS = _all_specs()
PARAMETRIC = [s for s in ALL_SPECS if s.num_params == 1]


def _ids(specs: list[GateSpec]) -> list[str]:
    return [f"{s.name}{dict(s.static) if s.name != 'unitary' else s.num_qubits}" for s in specs]


def test_table_covers_requested_gates() -> None:
    wanted = {"h", "x", "y", "z", "s", "sdg", "t", "tdg", "sx", "sxdg", "rx", "ry", "rz", "phase",
              "u", "cx", "cy", "cz", "ch", "swap", "iswap", "crx", "cry", "crz", "cphase", "rxx",
              "ryy", "rzz", "rzx", "mcx", "mcz", "pauli_rot", "unitary"}
    assert wanted == set(known_gates())
    assert gate_spec("p") is gate_spec("phase")
    assert gate_spec("cp") is gate_spec("cphase")
    assert gate_spec("cnot") is gate_spec("cx")


@pytest.mark.parametrize("spec", ALL_SPECS, ids=_ids(ALL_SPECS))
@settings(max_examples=8, deadline=None)
@given(params=st.lists(ANGLES, min_size=3, max_size=3))
def test_matrix_equals_qiskit_operator(spec: GateSpec, params: list[float]) -> None:
    p = params[: spec.num_params]
    ours = spec.matrix(*p)
    assert ours.dtype == np.complex128
    assert ours.shape == (1 << spec.num_qubits,) * 2
    theirs = Operator(spec.to_qiskit(*p)).data
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_controlled_wire_order_matches_qiskit() -> None:
    # cx on (control, target): control = bit 0 of the gate index, as in QuantumCircuit.cx(c, t)
    m = gate_spec("cx").matrix()
    assert m[3, 1] == 1 and m[1, 3] == 1 and m[2, 2] == 1 and m[1, 1] == 0
    # rzx: Z on the first wire, X on the second
    expected = gate_spec("pauli_rot", pauli="ZX").matrix(0.7)
    np.testing.assert_allclose(gate_spec("rzx").matrix(0.7), expected, atol=1e-14)


@pytest.mark.parametrize("spec", PARAMETRIC, ids=_ids(PARAMETRIC))
@settings(max_examples=6, deadline=None)
@given(theta=ANGLES)
def test_generator_derivative_and_spectrum(spec: GateSpec, theta: float) -> None:
    g = spec.generator_matrix()
    np.testing.assert_allclose(g, g.conj().T, atol=1e-14)  # Hermitian
    h = 1e-6
    fd = (spec.matrix(theta + h) - spec.matrix(theta - h)) / (2 * h)
    np.testing.assert_allclose(fd, -1j * g @ spec.matrix(theta), atol=1e-8)
    # exactness of U = exp(-iθG), no leftover global phase
    w, v = np.linalg.eigh(g)
    np.testing.assert_allclose(spec.matrix(theta), (v * np.exp(-1j * theta * w)) @ v.conj().T,
                               atol=1e-12)
    distinct = sorted({round(float(x), 9) for x in w})
    assert spec.spectrum is not None
    np.testing.assert_allclose(spec.spectrum, distinct, atol=1e-9)
    assert list(spec.spectrum) == sorted(spec.spectrum)


def test_known_spectra() -> None:
    assert gate_spec("rx").spectrum == (-0.5, 0.5)
    assert gate_spec("phase").spectrum == (-1.0, 0.0)
    assert gate_spec("crz").spectrum == (-0.5, 0.0, 0.5)
    assert gate_spec("cphase").spectrum == (-1.0, 0.0)
    assert gate_spec("pauli_rot", pauli="XYZ").spectrum == (-0.5, 0.5)
    assert gate_spec("rzz").pauli_word == "ZZ"


@settings(max_examples=20, deadline=None)
@given(theta=ANGLES, phi=ANGLES, lam=ANGLES)
def test_u_occurrences_and_global_phase(theta: float, phi: float, lam: float) -> None:
    spec = gate_spec("u")
    assert spec.generator is None and len(spec.occurrences) == 3
    params = (theta, phi, lam)
    total = np.eye(2, dtype=complex)
    for occ in spec.occurrences:  # application order: first applied first
        total = gate_spec(occ.gate).matrix(params[occ.param_index]) @ total
    assert spec.global_phase is not None
    np.testing.assert_allclose(spec.matrix(*params),
                               np.exp(1j * spec.global_phase(*params)) * total, atol=1e-12)
    with pytest.raises(TypeError, match="no single generator"):
        spec.generator_matrix()


@pytest.mark.parametrize("spec", ALL_SPECS, ids=_ids(ALL_SPECS))
def test_inverse(spec: GateSpec) -> None:
    p = tuple(np.random.default_rng(3).uniform(-3, 3, spec.num_params))
    inv_spec, inv_params = spec.inverse(*p)
    np.testing.assert_allclose(inv_spec.matrix(*inv_params) @ spec.matrix(*p),
                               np.eye(1 << spec.num_qubits), atol=1e-12)


@pytest.mark.parametrize("spec", ALL_SPECS, ids=_ids(ALL_SPECS))
def test_structure_is_consistent(spec: GateSpec) -> None:
    p = tuple(np.random.default_rng(5).uniform(-3, 3, spec.num_params))
    m = spec.matrix(*p)
    np.testing.assert_allclose(m.conj().T @ m, np.eye(m.shape[0]), atol=1e-12)
    if spec.structure == "diagonal":
        np.testing.assert_allclose(m, np.diag(spec.diagonal(*p)), atol=1e-14)
    elif spec.structure == "permutation":
        perm, phases = spec.permutation()
        built = np.zeros_like(m)
        built[list(perm), list(range(len(perm)))] = phases
        np.testing.assert_allclose(m, built, atol=1e-14)
    elif spec.structure == "controlled":
        assert spec.base is not None
        nc = spec.num_controls
        block = ((1 << nc) - 1) | (np.arange(1 << spec.base.num_qubits) << nc)
        np.testing.assert_allclose(m[np.ix_(block, block)], spec.base.matrix(*p), atol=1e-14)
        rest = np.setdiff1d(np.arange(m.shape[0]), block)
        np.testing.assert_allclose(m[np.ix_(rest, rest)], np.eye(rest.size), atol=1e-14)
    else:
        assert spec.structure == "dense"
    if spec.structure != "diagonal":
        with pytest.raises(TypeError, match="not diagonal"):
            spec.diagonal(*p)


def test_unknown_gate_names_the_known_ones() -> None:
    with pytest.raises(UnknownGateError) as info:
        gate_spec("cnott")
    text = str(info.value)
    assert "unknown gate 'cnott'" in text and "cx" in text and "pauli_rot" in text


def test_family_arguments() -> None:
    assert isinstance(GATE_TABLE["mcx"], GateFamily)
    with pytest.raises(TypeError, match="num_controls"):
        gate_spec("mcx")
    with pytest.raises(TypeError, match="unexpected"):
        gate_spec("mcz", num_controls=1, bogus=2)
    with pytest.raises(ValueError, match=">= 0"):
        gate_spec("mcx", num_controls=-1)
    with pytest.raises(ValueError, match="Pauli word"):
        gate_spec("pauli_rot", pauli="XQ")
    with pytest.raises(TypeError, match="no static arguments"):
        gate_spec("rx", pauli="X")
    assert gate_spec("mcx", num_controls=2) is gate_spec("mcx", num_controls=2)


def test_param_count_is_checked() -> None:
    with pytest.raises(TypeError, match="takes 1 parameter, got 2"):
        gate_spec("rx").matrix(0.1, 0.2)
    with pytest.raises(TypeError, match="takes 3 parameters, got 1"):
        gate_spec("u").matrix(0.1)


def test_unitary_validation() -> None:
    with pytest.raises(NotUnitaryError, match="not unitary"):
        gate_spec("unitary", matrix=[[1, 1], [0, 1]])
    with pytest.raises(ValueError, match="square matrix"):
        gate_spec("unitary", matrix=np.eye(2, 4))
    with pytest.raises(ValueError, match="power of two"):
        gate_spec("unitary", matrix=np.eye(3))
    with pytest.raises(ValueError, match="non-finite"):
        gate_spec("unitary", matrix=[[np.nan, 0], [0, 1]])
    spec = gate_spec("unitary", matrix=np.eye(4))
    assert spec.num_qubits == 2 and spec.structure == "dense"
    m = spec.matrix()
    m[0, 0] = 5  # callers get copies; the gate's matrix cannot be corrupted
    assert spec.matrix()[0, 0] == 1


@pytest.mark.parametrize("module", [gates_module])
def test_docstring_examples(module: object) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
