"""Pauli-sum observables.

A :class:`PauliSum` is an immutable linear combination ``sum_k c_k P_k`` of Pauli strings.

Label convention (read this once): character ``k`` of a dense label acts on wire ``k`` of the
register, LEFT TO RIGHT, so ``"ZXI"`` is ``Z`` on wire 0 and ``X`` on wire 1. This is the
reverse of Qiskit's label order (Qiskit writes qubit 0 rightmost); :meth:`PauliSum.from_qiskit`
and :meth:`PauliSum.to_qiskit` reverse the labels for you. Matrices follow Qiskit's little-endian
basis order: wire ``k`` is bit ``k`` of the basis-state index, so ``PauliSum.to_matrix()`` equals
``PauliSum.to_qiskit().to_matrix()``.

Accepted string forms::

    "0.5*ZZI + XIX - YYZ"        dense labels, one letter per wire
    "0.5*Z0 Z2 + X1"             sparse labels, letter + wire index (num_qubits = max wire + 1)
    "(0.5+1j)*XY - 2e-3*ZZ + 1"  complex and exponent coefficients, bare number = identity term
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # qiskit is only needed for the conversions, imported lazily there
    from qiskit.quantum_info import SparsePauliOp

__all__ = ["PauliSum", "PauliParseError", "pauli_product", "pauli_masks", "parity"]

_PAULI_LETTERS = frozenset("IXYZ")

# Single-qubit products a @ b = phase * c. Kept as a table (rather than derived from the bit
# representation) because it is the easiest thing in this module to check by eye.
_PRODUCT: dict[tuple[str, str], tuple[complex, str]] = {
    ("I", "I"): (1, "I"), ("I", "X"): (1, "X"), ("I", "Y"): (1, "Y"), ("I", "Z"): (1, "Z"),
    ("X", "I"): (1, "X"), ("X", "X"): (1, "I"), ("X", "Y"): (1j, "Z"), ("X", "Z"): (-1j, "Y"),
    ("Y", "I"): (1, "Y"), ("Y", "X"): (-1j, "Z"), ("Y", "Y"): (1, "I"), ("Y", "Z"): (1j, "X"),
    ("Z", "I"): (1, "Z"), ("Z", "X"): (1j, "Y"), ("Z", "Y"): (-1j, "X"), ("Z", "Z"): (1, "I"),
}


class PauliParseError(ValueError):
    """Raised for a malformed Pauli label or Pauli-sum string."""


def pauli_product(a: str, b: str) -> tuple[complex, str]:
    """Product of two equal-length Pauli labels: ``a @ b = phase * label``.

    >>> pauli_product("XZ", "YZ")
    (1j, 'ZI')
    """
    if len(a) != len(b):
        raise ValueError(f"cannot multiply Pauli labels of lengths {len(a)} and {len(b)}")
    phase: complex = 1
    out = []
    for p, q in zip(a, b, strict=True):
        ph, r = _PRODUCT[(p, q)]
        phase *= ph
        out.append(r)
    return phase, "".join(out)


def parity(v: Any) -> Any:
    """Parity (popcount mod 2) of non-negative 64-bit integers, scalar or array.

    Written with shifts and xors only, so the same function runs on NumPy and CuPy arrays and,
    compiled by Numba, on scalars inside kernels.

    >>> int(parity(0b1011)), parity(np.arange(4)).tolist()
    (1, [0, 1, 1, 0])
    """
    v = v ^ (v >> 32)
    v = v ^ (v >> 16)
    v = v ^ (v >> 8)
    v = v ^ (v >> 4)
    v = v ^ (v >> 2)
    v = v ^ (v >> 1)
    return v & 1


def pauli_masks(label: str, wires: Sequence[int]) -> tuple[int, int, int]:
    """Bit masks of a Pauli label placed on ``wires``: ``(x_mask, z_mask, num_y)``.

    ``P|i> = 1j**num_y * (-1)**popcount(i & z_mask) * |i ^ x_mask>``: X and Y flip their bit,
    Z and Y give a sign on it (Y = iXZ). Every kernel that applies or measures a Pauli string
    uses this one formula.

    >>> pauli_masks("XYZ", [0, 1, 2])
    (3, 6, 1)
    """
    if len(label) != len(wires):
        raise ValueError(f"label {label!r} has {len(label)} letters but {len(wires)} wires given")
    x_mask = z_mask = num_y = 0
    for letter, wire in zip(label, wires, strict=True):
        bit = 1 << int(wire)
        if letter == "X":
            x_mask |= bit
        elif letter == "Y":
            x_mask |= bit
            z_mask |= bit
            num_y += 1
        elif letter == "Z":
            z_mask |= bit
        elif letter != "I":
            raise PauliParseError(f"invalid Pauli letter {letter!r} in {label!r}")
    return x_mask, z_mask, num_y


# ---------------------------------------------------------------------------------------------
# string parsing
# ---------------------------------------------------------------------------------------------

_NUMBER = r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?j?"
_COEF_RE = re.compile(rf"\s*(\([^()]*\)|{_NUMBER})\s*(\*)?\s*")
_SPARSE_RE = re.compile(r"[IXYZ]\d+(?:\s*[IXYZ]\d+)*(?![\w])")
_DENSE_RE = re.compile(r"[IXYZ]+(?![\w])")
_SIGN_RE = re.compile(r"\s*([+-])\s*")


def _parse_coefficient(text: str) -> complex:
    try:
        return complex(text.replace(" ", ""))
    except ValueError as exc:
        raise PauliParseError(f"invalid coefficient {text!r}") from exc


def _parse_terms(text: str) -> list[tuple[complex, str | dict[int, str] | None]]:
    """Split a Pauli-sum string into (coefficient, label) where label is a dense str, a sparse
    {wire: letter} dict, or None for a bare number (identity term)."""
    terms: list[tuple[complex, str | dict[int, str] | None]] = []
    pos = 0
    first = True
    stripped = text.strip()
    if not stripped:
        raise PauliParseError("empty Pauli-sum string")
    while pos < len(text):
        if not text[pos:].strip():
            break
        sign = 1.0
        m = _SIGN_RE.match(text, pos)
        if m:
            sign = -1.0 if m.group(1) == "-" else 1.0
            pos = m.end()
        elif not first:
            raise PauliParseError(
                f"expected '+' or '-' at position {pos} of {text!r}: {text[pos:pos + 12]!r}"
            )
        first = False
        coef: complex = 1.0
        has_coef = has_star = False
        m = _COEF_RE.match(text, pos)
        if m:
            raw = m.group(1)
            coef = _parse_coefficient(raw[1:-1] if raw.startswith("(") else raw)
            has_coef, has_star = True, m.group(2) is not None
            pos = m.end()
        m_sparse = _SPARSE_RE.match(text, pos)
        m_dense = _DENSE_RE.match(text, pos)
        label: str | dict[int, str] | None
        if m_sparse:
            label = {}
            for tok in re.findall(r"[IXYZ]\d+", m_sparse.group(0)):
                wire = int(tok[1:])
                if wire in label:
                    raise PauliParseError(
                        f"wire {wire} appears twice in term {m_sparse.group(0)!r}"
                    )
                label[wire] = tok[0]
            pos = m_sparse.end()
        elif m_dense:
            label = m_dense.group(0)
            pos = m_dense.end()
        elif has_coef and not has_star:
            label = None  # a bare number: coefficient times identity
        else:
            snippet = text[pos:pos + 12]
            raise PauliParseError(
                f"expected a Pauli label (letters I, X, Y, Z, e.g. 'ZZI' or 'Z0 X2') at position "
                f"{pos} of {text!r}, found {snippet!r}"
            )
        terms.append((sign * coef, label))
    return terms


class PauliSum:
    """Immutable sum of Pauli strings ``sum_k c_k P_k`` on ``num_qubits`` wires.

    Character ``k`` of a label acts on wire ``k`` (left to right, the reverse of Qiskit's
    label order). Coefficients are stored as Python complex numbers.

    >>> H = PauliSum("0.5*ZZI + XIX - Y0 Y1 Z2")
    >>> H.num_qubits, len(H)
    (3, 3)
    >>> print(PauliSum([(2.0, "XY")]) @ PauliSum("YX"))
    2.0*ZZ
    """

    __slots__ = ("_terms", "_num_qubits")

    def __init__(
        self,
        terms: str | Iterable[tuple[Any, str]] | PauliSum,
        num_qubits: int | None = None,
    ) -> None:
        if isinstance(terms, PauliSum):
            if num_qubits is not None and num_qubits != terms.num_qubits:
                raise ValueError(
                    f"PauliSum has {terms.num_qubits} qubits, num_qubits={num_qubits} requested"
                )
            self._terms = terms._terms
            self._num_qubits = terms._num_qubits
            return
        if isinstance(terms, str):
            parsed = _parse_terms(terms)
        else:
            parsed = []
            for item in terms:
                if not (isinstance(item, tuple | list) and len(item) == 2):
                    raise TypeError(
                        f"expected (coefficient, label) pairs, got {item!r}; e.g. [(0.5, 'ZZ')]"
                    )
                coef, label = item
                if isinstance(coef, str) and not isinstance(label, str | bytes):
                    coef, label = label, coef  # accept Qiskit's (label, coef) order too
                if not isinstance(label, str):
                    raise TypeError(f"Pauli label must be a string, got {label!r}")
                if not isinstance(coef, numbers.Number):
                    raise TypeError(f"coefficient of {label!r} must be a number, got {coef!r}")
                if _SPARSE_RE.fullmatch(label.strip()):
                    sparse = _parse_terms(label)[0][1]
                    parsed.append((complex(coef), sparse))
                else:
                    parsed.append((complex(coef), label))
        self._num_qubits = _infer_num_qubits(parsed, num_qubits)
        n = self._num_qubits
        out: list[tuple[complex, str]] = []
        for coef, label in parsed:
            if label is None:
                out.append((complex(coef), "I" * n))
            elif isinstance(label, dict):
                letters = ["I"] * n
                for wire, letter in label.items():
                    letters[wire] = letter
                out.append((complex(coef), "".join(letters)))
            else:
                bad = set(label) - _PAULI_LETTERS
                if bad:
                    raise PauliParseError(
                        f"invalid letters {sorted(bad)} in Pauli label {label!r}; use I, X, Y, Z"
                    )
                out.append((complex(coef), label))
        self._terms: tuple[tuple[complex, str], ...] = tuple(out)

    # -- constructors ---------------------------------------------------------------------
    @classmethod
    def from_list(cls, terms: Iterable[tuple[Any, str]], num_qubits: int | None = None) -> PauliSum:
        """Build from ``[(coef, label), ...]``.

        >>> PauliSum.from_list([(0.5, "ZZ"), (1.0, "XI")]).num_qubits
        2
        """
        return cls(list(terms), num_qubits)

    @classmethod
    def identity(cls, num_qubits: int, coeff: complex = 1.0) -> PauliSum:
        """``coeff * I`` on ``num_qubits`` wires.

        >>> PauliSum.identity(2).terms
        (((1+0j), 'II'),)
        """
        return cls([(coeff, "I" * num_qubits)], num_qubits)

    @classmethod
    def from_qiskit(cls, op: SparsePauliOp) -> PauliSum:
        """Convert a Qiskit ``SparsePauliOp`` (labels reversed to qdiff's wire order).

        >>> from qiskit.quantum_info import SparsePauliOp
        >>> PauliSum.from_qiskit(SparsePauliOp(["XZ"], [2.0])).terms   # Z on qubit 0
        (((2+0j), 'ZX'),)
        """
        return cls([(complex(c), label[::-1]) for label, c in op.to_list()], op.num_qubits)

    def to_qiskit(self) -> SparsePauliOp:
        """Convert to a Qiskit ``SparsePauliOp`` (labels reversed to Qiskit's order).

        >>> PauliSum("2*ZX").to_qiskit().to_list()
        [('XZ', (2+0j))]
        """
        from qiskit.quantum_info import SparsePauliOp

        if not self._terms:
            return SparsePauliOp(["I" * self._num_qubits], [0.0])
        return SparsePauliOp([lab[::-1] for _, lab in self._terms],
                             np.array([c for c, _ in self._terms], dtype=complex))

    # -- read access ----------------------------------------------------------------------
    @property
    def num_qubits(self) -> int:
        """Number of wires the labels span."""
        return self._num_qubits

    @property
    def terms(self) -> tuple[tuple[complex, str], ...]:
        """The terms as ``((coef, label), ...)`` in insertion order."""
        return self._terms

    @property
    def labels(self) -> tuple[str, ...]:
        """The dense labels, in term order."""
        return tuple(lab for _, lab in self._terms)

    @property
    def coeffs(self) -> np.ndarray:
        """The coefficients as a complex128 array, in term order."""
        return np.array([c for c, _ in self._terms], dtype=np.complex128)

    def __len__(self) -> int:
        return len(self._terms)

    def __iter__(self) -> Iterator[tuple[complex, str]]:
        return iter(self._terms)

    def is_hermitian(self, atol: float = 1e-12) -> bool:
        """True when every combined coefficient is real (Pauli strings are Hermitian).

        >>> PauliSum("1j*XY - 1j*XY + Z0").is_hermitian(), PauliSum("1j*X").is_hermitian()
        (True, False)
        """
        return all(abs(c.imag) <= atol for c, _ in self.simplify()._terms)

    # -- algebra --------------------------------------------------------------------------
    def simplify(self, atol: float = 0.0) -> PauliSum:
        """Combine like terms and drop those with ``|coef| <= atol`` (exact zeros by default).

        >>> PauliSum("ZZ + 0.5*XI - ZZ + XI").simplify().terms
        (((1.5+0j), 'XI'),)
        """
        acc: dict[str, complex] = {}
        for c, lab in self._terms:
            acc[lab] = acc.get(lab, 0) + c
        return PauliSum._raw(
            tuple((c, lab) for lab, c in acc.items() if abs(c) > atol), self._num_qubits
        )

    @classmethod
    def _raw(cls, terms: tuple[tuple[complex, str], ...], num_qubits: int) -> PauliSum:
        obj = cls.__new__(cls)
        obj._terms = terms
        obj._num_qubits = num_qubits
        return obj

    def _coerce(self, other: Any) -> PauliSum | None:
        if isinstance(other, PauliSum):
            if other.num_qubits != self._num_qubits:
                raise ValueError(
                    f"size mismatch: PauliSum on {self._num_qubits} qubits combined with one on "
                    f"{other.num_qubits} qubits"
                )
            return other
        if isinstance(other, numbers.Number):
            return PauliSum.identity(self._num_qubits, complex(other))
        return None

    def __add__(self, other: Any) -> PauliSum:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return PauliSum._raw(self._terms + o._terms, self._num_qubits).simplify()

    __radd__ = __add__

    def __neg__(self) -> PauliSum:
        return PauliSum._raw(tuple((-c, lab) for c, lab in self._terms), self._num_qubits)

    def __sub__(self, other: Any) -> PauliSum:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return self + (-o)

    def __rsub__(self, other: Any) -> PauliSum:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        return o + (-self)

    def __mul__(self, scalar: Any) -> PauliSum:
        if not isinstance(scalar, numbers.Number):
            return NotImplemented
        s = complex(scalar)
        return PauliSum._raw(tuple((s * c, lab) for c, lab in self._terms), self._num_qubits)

    __rmul__ = __mul__

    def __truediv__(self, scalar: Any) -> PauliSum:
        if not isinstance(scalar, numbers.Number):
            return NotImplemented
        return self * (1.0 / complex(scalar))

    def __matmul__(self, other: Any) -> PauliSum:
        o = self._coerce(other)
        if o is None:
            return NotImplemented
        terms = []
        for ca, la in self._terms:
            for cb, lb in o._terms:
                ph, lab = pauli_product(la, lb)
                terms.append((ca * cb * ph, lab))
        return PauliSum._raw(tuple(terms), self._num_qubits).simplify()

    def adjoint(self) -> PauliSum:
        """Hermitian conjugate (conjugated coefficients; Pauli strings are Hermitian).

        >>> PauliSum("1j*X").adjoint() == PauliSum("-1j*X")
        True
        """
        return PauliSum._raw(tuple((c.conjugate(), lab) for c, lab in self._terms),
                             self._num_qubits)

    # -- comparison -----------------------------------------------------------------------
    def _canonical(self) -> dict[str, complex]:
        return {lab: c for c, lab in self.simplify()._terms}

    def __eq__(self, other: object) -> bool:
        """Exact equality of the combined terms (order of terms does not matter)."""
        if not isinstance(other, PauliSum):
            return NotImplemented
        return self._num_qubits == other._num_qubits and self._canonical() == other._canonical()

    def __hash__(self) -> int:
        return hash((self._num_qubits, frozenset(self._canonical().items())))

    def allclose(self, other: PauliSum, atol: float = 1e-12) -> bool:
        """Equality of the combined terms up to ``atol`` per coefficient.

        >>> PauliSum("0.1*Z + 0.2*Z").allclose(PauliSum("0.3*Z"))
        True
        """
        if self._num_qubits != other._num_qubits:
            return False
        a, b = self._canonical(), other._canonical()
        return all(abs(a.get(k, 0) - b.get(k, 0)) <= atol for k in set(a) | set(b))

    # -- dense matrix (tests, small registers) --------------------------------------------
    def to_matrix(self) -> np.ndarray:
        """Dense ``2^n x 2^n`` complex128 matrix, Qiskit's little-endian order (wire k = bit k).

        >>> PauliSum("Z0").to_matrix().real.diagonal().tolist()
        [1.0, -1.0]
        """
        n = self._num_qubits
        if n > 14:
            raise ValueError(f"to_matrix() is for small registers; {n} qubits would need "
                             f"{(4 ** n) * 16} bytes")
        dim = 1 << n
        idx = np.arange(dim, dtype=np.int64)
        mat = np.zeros((dim, dim), dtype=np.complex128)
        for x, z, f in zip(*self.masks(), strict=True):
            # column i holds P|i> = f * (-1)^parity(i & z) |i ^ x>
            np.add.at(mat, (idx ^ x, idx), f * (1 - 2 * parity(idx & z)))
        return mat

    def masks(
        self, wires: Sequence[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-term ``(x_masks, z_masks, factors)`` for the kernels, labels placed on ``wires``.

        ``factors[k] = coef_k * 1j**num_y_k`` so ``P_k|i> = factors[k]/coef_k * sign * |i^x>``
        folds the Y phases into the coefficient once, outside every kernel.

        >>> x, z, f = PauliSum("2*XY").masks([3, 5]); int(x[0]), int(z[0]), complex(f[0])
        (40, 32, 2j)
        """
        wires = list(range(self._num_qubits)) if wires is None else [int(w) for w in wires]
        if len(wires) != self._num_qubits:
            raise ValueError(
                f"observable acts on {self._num_qubits} qubits but {len(wires)} wires were given"
            )
        xs = np.empty(len(self._terms), dtype=np.int64)
        zs = np.empty(len(self._terms), dtype=np.int64)
        fs = np.empty(len(self._terms), dtype=np.complex128)
        for k, (coef, label) in enumerate(self._terms):
            x, z, ny = pauli_masks(label, wires)
            xs[k], zs[k], fs[k] = x, z, coef * (1j ** ny)
        return xs, zs, fs

    # -- printing -------------------------------------------------------------------------
    def __str__(self) -> str:
        if not self._terms:
            return f"0*{'I' * self._num_qubits}"
        parts = []
        for k, (c, lab) in enumerate(self._terms):
            if c.imag == 0:
                negative = math.copysign(1.0, c.real) < 0
                text = f"{abs(c.real)!r}*{lab}"
            else:
                negative, text = False, f"({c.real!r}{c.imag:+}j)*{lab}"
            if k == 0:
                parts.append(("-" if negative else "") + text)
            else:
                parts.append(f" {'-' if negative else '+'} {text}")
        return "".join(parts)

    def __repr__(self) -> str:
        return f"PauliSum({str(self)!r}, num_qubits={self._num_qubits})"


def _infer_num_qubits(
    parsed: Sequence[tuple[complex, str | dict[int, str] | None]], num_qubits: int | None
) -> int:
    dense_lengths = {len(lab) for _, lab in parsed if isinstance(lab, str)}
    if len(dense_lengths) > 1:
        raise PauliParseError(
            f"dense Pauli labels have different lengths {sorted(dense_lengths)}; every label "
            "needs one letter per wire"
        )
    max_wire = max((max(lab) for _, lab in parsed if isinstance(lab, dict)), default=-1)
    if dense_lengths:
        n = dense_lengths.pop()
        if num_qubits is not None and num_qubits != n:
            raise PauliParseError(f"labels have {n} letters but num_qubits={num_qubits}")
    elif num_qubits is not None:
        n = num_qubits
    elif max_wire >= 0:
        n = max_wire + 1
    else:
        raise PauliParseError("cannot infer the number of qubits: pass num_qubits=")
    if n < 0:
        raise ValueError(f"num_qubits must be >= 0, got {n}")
    if max_wire >= n:
        raise PauliParseError(f"sparse term uses wire {max_wire} but the sum has {n} qubits")
    return n
