"""PauliSum: parsing, label order, Qiskit conversion, algebra against dense matrices."""

import doctest

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from qiskit.quantum_info import SparsePauliOp

import qdiff.quantum.lang.observables as observables_module
from qdiff.quantum.lang.observables import PauliParseError, PauliSum, pauli_masks, pauli_product

_X = np.array([[0, 1], [1, 0]], dtype=complex)
_Y = np.array([[0, -1j], [1j, 0]], dtype=complex)
_Z = np.diag([1.0 + 0j, -1.0])
_SINGLE = {"I": np.eye(2, dtype=complex), "X": _X, "Y": _Y, "Z": _Z}


def _label_matrix(label: str) -> np.ndarray:
    """Independent reference: kron with wire 0 as the LAST (least significant) factor."""
    m = np.eye(1, dtype=complex)
    for letter in label:  # letter k acts on wire k -> prepend as the more significant factor
        m = np.kron(_SINGLE[letter], m)
    return m


def _pauli_sums(num_qubits: int) -> st.SearchStrategy[PauliSum]:
    label = st.text(alphabet="IXYZ", min_size=num_qubits, max_size=num_qubits)
    coef = st.complex_numbers(max_magnitude=3, allow_nan=False, allow_infinity=False)
    return st.lists(st.tuples(coef, label), min_size=0, max_size=5).map(
        lambda terms: PauliSum(terms, num_qubits))


def test_dense_labels_are_wire_ordered_left_to_right() -> None:
    h = PauliSum("0.5*ZZI + XIX - YYZ")
    assert h.num_qubits == 3
    assert h.terms == ((0.5, "ZZI"), (1, "XIX"), (-1, "YYZ"))
    # "ZI": Z on wire 0 = bit 0 of the basis index
    np.testing.assert_allclose(np.diagonal(PauliSum("ZI").to_matrix()).real, [1, -1, 1, -1])


def test_sparse_labels() -> None:
    h = PauliSum("0.5*Z0 Z2 + X1")
    assert h.num_qubits == 3
    assert h.terms == ((0.5, "ZIZ"), (1, "IXI"))
    assert PauliSum("Z0Z3").terms == ((1, "ZIIZ"),)
    assert PauliSum("X1", num_qubits=4).labels == ("IXII",)
    assert PauliSum("ZZI + X2").terms == ((1, "ZZI"), (1, "IIX"))  # mixed forms agree in size


def test_coefficients_and_identity_terms() -> None:
    h = PauliSum("(0.5+1j)*XY - 2e-3*ZZ + 1 - .5j*YX")
    assert h.terms == ((0.5 + 1j, "XY"), (-2e-3, "ZZ"), (1, "II"), (-0.5j, "YX"))
    assert PauliSum("3", num_qubits=2).terms == ((3, "II"),)
    assert PauliSum("2 XX").terms == ((2, "XX"),)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ZZ + XYZ", "different lengths"),
        ("ZQ", "expected"),
        ("zz", "expected a Pauli label"),
        ("0.5*", "expected a Pauli label"),
        ("ZZ XX", "expected '\\+' or '-'"),
        ("Z0 Z0", "appears twice"),
        ("", "empty"),
        ("3", "cannot infer"),
        ("(1+*2)*X", "invalid coefficient"),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    with pytest.raises(PauliParseError, match=message):
        PauliSum(text)


def test_constructor_errors() -> None:
    with pytest.raises(PauliParseError, match="uses wire 3"):
        PauliSum("X3", num_qubits=2)
    with pytest.raises(PauliParseError, match="num_qubits=3"):
        PauliSum("XX", num_qubits=3)
    with pytest.raises(PauliParseError, match="invalid letters"):
        PauliSum([(1.0, "XA")])
    with pytest.raises(TypeError, match="pairs"):
        PauliSum([1.0])
    with pytest.raises(TypeError, match="must be a number"):
        PauliSum([(None, "X")])


def test_from_list_accepts_qiskit_order_and_sparse_labels() -> None:
    assert PauliSum.from_list([("XZ", 2.0)]) == PauliSum("2*XZ")
    assert PauliSum.from_list([(1.0, "Z0 X2")]) == PauliSum("ZIX")


def test_qiskit_round_trip_reverses_labels() -> None:
    h = PauliSum("0.5*ZXI - 1j*IIY")
    q = h.to_qiskit()
    assert q.to_list() == [("IXZ", 0.5 + 0j), ("YII", -1j)]
    np.testing.assert_allclose(h.to_matrix(), q.to_matrix(), atol=1e-15)
    back = PauliSum.from_qiskit(SparsePauliOp.from_list([("XY", 2.0), ("ZI", -1.0)]))
    assert back == PauliSum("2*YX - IZ")
    assert PauliSum.from_qiskit(h.to_qiskit()) == h


@settings(max_examples=40, deadline=None)
@given(h=_pauli_sums(3))
def test_to_matrix_matches_kron_reference_and_qiskit(h: PauliSum) -> None:
    ref = sum((c * _label_matrix(lab) for c, lab in h.terms), np.zeros((8, 8), dtype=complex))
    np.testing.assert_allclose(h.to_matrix(), ref, atol=1e-12)
    np.testing.assert_allclose(h.to_qiskit().to_matrix(), ref, atol=1e-12)


@settings(max_examples=40, deadline=None)
@given(a=_pauli_sums(2), b=_pauli_sums(2), s=st.complex_numbers(max_magnitude=4,
                                                                   allow_nan=False))
def test_algebra_matches_matrices(a: PauliSum, b: PauliSum, s: complex) -> None:
    ma, mb = a.to_matrix(), b.to_matrix()
    np.testing.assert_allclose((a + b).to_matrix(), ma + mb, atol=1e-12)
    np.testing.assert_allclose((a - b).to_matrix(), ma - mb, atol=1e-12)
    np.testing.assert_allclose((s * a).to_matrix(), s * ma, atol=1e-12)
    np.testing.assert_allclose((a * s).to_matrix(), s * ma, atol=1e-12)
    np.testing.assert_allclose((a @ b).to_matrix(), ma @ mb, atol=1e-11)
    np.testing.assert_allclose(a.adjoint().to_matrix(), ma.conj().T, atol=1e-12)
    np.testing.assert_allclose((a + 2).to_matrix(), ma + 2 * np.eye(4), atol=1e-12)
    np.testing.assert_allclose((1 - a).to_matrix(), np.eye(4) - ma, atol=1e-12)
    # Pauli strings are a basis, so Hermitian <=> every combined coefficient is real.
    if a.is_hermitian(atol=1e-9):
        np.testing.assert_allclose(ma, ma.conj().T, atol=1e-8)
    else:
        assert not np.allclose(ma, ma.conj().T, atol=1e-10, rtol=0)


@settings(max_examples=40, deadline=None)
@given(a=st.text(alphabet="IXYZ", min_size=3, max_size=3),
       b=st.text(alphabet="IXYZ", min_size=3, max_size=3))
def test_pauli_product_table(a: str, b: str) -> None:
    phase, lab = pauli_product(a, b)
    np.testing.assert_allclose(phase * _label_matrix(lab), _label_matrix(a) @ _label_matrix(b),
                               atol=1e-14)


def test_masks_encode_the_action_on_basis_states() -> None:
    x, z, ny = pauli_masks("XYZI", [3, 1, 0, 2])
    assert (x, z, ny) == (0b1010, 0b0011, 1)
    xs, zs, fs = PauliSum("2*XY").masks([3, 5])
    assert xs.tolist() == [40] and zs.tolist() == [32] and fs.tolist() == [2j]
    with pytest.raises(ValueError, match="2 wires were given"):
        PauliSum("XYZ").masks([0, 1])


def test_simplify_equality_hash_and_strings() -> None:
    a = PauliSum("ZZ + 0.5*XI - ZZ + XI")
    assert a.simplify().terms == ((1.5, "XI"),)
    assert a == PauliSum("1.5*XI") and hash(a) == hash(PauliSum("1.5*XI"))
    assert PauliSum("XX + ZZ") == PauliSum("ZZ + XX")
    assert PauliSum("0.1*Z + 0.2*Z").allclose(PauliSum("0.3*Z"))
    assert not PauliSum("Z").allclose(PauliSum("ZZ"))
    for text in ("0.5*ZZI + XIX - YYZ", "(0.5-2j)*XY - 1e-12*ZZ", "-2.0*X"):
        h = PauliSum(text)
        assert PauliSum(str(h), h.num_qubits) == h
    assert str(PauliSum([], 2)) == "0*II"
    assert PauliSum("1j*XY - 1j*XY + Z0 Z1").is_hermitian()
    assert not PauliSum("1j*X").is_hermitian()
    assert PauliSum("Z") != PauliSum("ZI")


def test_size_mismatch_errors() -> None:
    with pytest.raises(ValueError, match="size mismatch"):
        PauliSum("ZZ") + PauliSum("Z")
    with pytest.raises(ValueError, match="size mismatch"):
        PauliSum("ZZ") @ PauliSum("ZZZ")
    with pytest.raises(ValueError, match="lengths"):
        pauli_product("XX", "X")


def test_docstring_examples() -> None:
    result = doctest.testmod(observables_module)
    assert result.attempted > 0 and result.failed == 0
