"""The gate table: one :class:`GateSpec` per gate, Qiskit's matrices and qubit order.

Conventions (identical to ``qiskit.circuit.library``):

* Basis order is little-endian: wire ``k`` is bit ``k`` of the basis-state index.
* For a gate applied to wires ``(w0, w1, ...)``, bit ``j`` of the gate matrix's row/column index
  is wire ``w_j``. So ``cx`` on ``(c, t)`` has its control on the FIRST wire, exactly like
  ``QuantumCircuit.cx(c, t)``, and ``gate_spec("cx").matrix()`` equals
  ``Operator(CXGate()).data``.
* Controlled gates list their controls first: ``mcx`` on ``(c0, ..., c_{m-1}, t)``.

Generators. Every one-parameter gate satisfies ``U(θ) = exp(-i θ G)`` EXACTLY, with no global
phase left over (``phase`` uses ``G = -|1><1|``, controlled rotations
``G = |1..1><1..1| ⊗ G_base``). ``GateSpec.generator`` is ``G`` as a
:class:`~qdiff.quantum.lang.observables.PauliSum` on the gate's local wires (character ``k`` = gate
wire ``k``), ``GateSpec.generator_matrix()`` is its matrix and ``GateSpec.spectrum`` its distinct
eigenvalues (ascending). ``dU/dθ = -i G U(θ)``; the frequencies of a parameter-shift rule are the
positive differences of the spectrum.

The three-parameter ``u`` gate has no single generator; ``GateSpec.occurrences`` says how each
parameter enters: ``u(θ, φ, λ) = exp(i(φ+λ)/2) · rz(φ) · ry(θ) · rz(λ)``, i.e. in application
order ``rz(λ)``, ``ry(θ)``, ``rz(φ)``, each a rotation with spectrum ``±1/2``.

>>> spec = gate_spec("crx")
>>> spec.num_qubits, spec.structure, spec.base.name, spec.spectrum
(2, 'controlled', 'rx', (-0.5, 0.0, 0.5))
>>> print(spec.generator)
0.25*IX - 0.25*ZX
"""

from __future__ import annotations

import cmath
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .observables import PauliSum, parity, pauli_masks

__all__ = [
    "GateSpec",
    "GateFamily",
    "RotationOccurrence",
    "Structure",
    "UnknownGateError",
    "NotUnitaryError",
    "GATE_TABLE",
    "ALIASES",
    "gate_spec",
    "known_gates",
    "check_unitary",
]

Structure = Literal["dense", "diagonal", "permutation", "controlled"]

_C = np.complex128


class UnknownGateError(KeyError):
    """Raised by :func:`gate_spec` for a name that is not in the table."""

    def __str__(self) -> str:  # KeyError would print the message with quotes around it
        return str(self.args[0])


class NotUnitaryError(ValueError):
    """Raised when a user matrix given as a ``unitary`` gate is not unitary."""


@dataclass(frozen=True)
class RotationOccurrence:
    """Where one parameter of a multi-parameter gate enters, as a one-parameter table gate.

    ``gate`` is applied with ``params[param_index]`` on the gate-local ``wires``.
    """

    param_index: int
    gate: str
    wires: tuple[int, ...] = (0,)


def _same_params(params: tuple[float, ...]) -> tuple[float, ...]:
    return params


def _negated_params(params: tuple[float, ...]) -> tuple[float, ...]:
    return tuple(-p for p in params)


@dataclass(frozen=True, eq=False)
class GateSpec:
    """Everything the simulators and the differentiation engines need to know about a gate.

    Attributes:
        name: canonical table name (aliases such as ``p`` resolve to ``phase``).
        num_qubits: number of wires the gate acts on.
        num_params: number of real parameters.
        structure: ``"dense"``, ``"diagonal"``, ``"permutation"`` (one nonzero per column; the
            nonzero may be a phase, e.g. ``y``, ``iswap``) or ``"controlled"``.
        num_controls: for ``"controlled"``: how many leading wires are controls.
        base: for ``"controlled"``: the gate applied to the remaining wires when every control
            is 1; it takes the same parameters.
        inverse_name: name of the gate that implements ``U(params)^-1`` with
            ``inverse_params(params)``; ``None`` means "no table gate: use ``U^dagger`` as a
            ``unitary``". Use :meth:`inverse` rather than reading these two fields.
        generator: for one-parameter gates, ``G`` with ``U(θ) = exp(-iθG)`` exactly.
        spectrum: distinct eigenvalues of ``generator``, ascending.
        pauli_word: set when ``U(θ) = exp(-iθ P/2)`` for this Pauli word ``P`` (gate-local
            wire order); back ends may use it to apply the gate without a matrix.
        occurrences: for multi-parameter gates, how each parameter enters (see module doc).
        global_phase: for multi-parameter gates, ``α(params)`` with
            ``U = exp(iα) · product of occurrences``.
        static: the static arguments of a gate family (``num_controls``, ``pauli``, ``matrix``).
    """

    name: str
    num_qubits: int
    num_params: int
    structure: Structure
    _matrix: Callable[..., np.ndarray] = field(repr=False)
    doc: str = field(default="", repr=False)
    num_controls: int = 0
    base: GateSpec | None = field(default=None, repr=False)
    inverse_name: str | None = field(default=None, repr=False)
    inverse_params: Callable[[tuple[float, ...]], tuple[float, ...]] = field(
        default=_same_params, repr=False
    )
    generator: PauliSum | None = field(default=None, repr=False)
    spectrum: tuple[float, ...] | None = field(default=None, repr=False)
    pauli_word: str | None = field(default=None, repr=False)
    occurrences: tuple[RotationOccurrence, ...] = field(default=(), repr=False)
    global_phase: Callable[..., float] | None = field(default=None, repr=False)
    _diagonal: Callable[..., np.ndarray] | None = field(default=None, repr=False)
    _permutation: tuple[tuple[int, ...], tuple[complex, ...]] | None = field(
        default=None, repr=False
    )
    static: Mapping[str, Any] = field(default_factory=dict, repr=False)

    # -- matrices ---------------------------------------------------------------------------
    def _check_params(self, params: Sequence[float]) -> None:
        if len(params) != self.num_params:
            plural = "" if self.num_params == 1 else "s"
            raise TypeError(
                f"gate {self.name!r} takes {self.num_params} parameter{plural}, got {len(params)}"
            )

    def matrix(self, *params: float) -> np.ndarray:
        """The ``2^k x 2^k`` complex128 matrix (Qiskit's convention and bit order).

        >>> gate_spec("rz").matrix(math.pi).round(12).diagonal().tolist()
        [-1j, 1j]
        """
        self._check_params(params)
        return self._matrix(*params)

    def diagonal(self, *params: float) -> np.ndarray:
        """The diagonal of a ``"diagonal"`` gate, without building the matrix.

        >>> gate_spec("cz").base.diagonal().real.tolist()
        [1.0, -1.0]
        """
        if self._diagonal is None:
            raise TypeError(f"gate {self.name!r} is not diagonal (structure {self.structure!r})")
        self._check_params(params)
        return self._diagonal(*params)

    def permutation(self) -> tuple[tuple[int, ...], tuple[complex, ...]]:
        """``(perm, phases)`` of a ``"permutation"`` gate: ``U|r> = phases[r] |perm[r]>``.

        >>> gate_spec("iswap").permutation()
        ((0, 2, 1, 3), (1, 1j, 1j, 1))
        """
        if self._permutation is None:
            raise TypeError(f"gate {self.name!r} is not a permutation gate")
        return self._permutation

    def generator_matrix(self) -> np.ndarray:
        """``G`` as a dense matrix on the gate's wires (one-parameter gates only).

        >>> gate_spec("phase").generator_matrix().real.tolist()
        [[0.0, 0.0], [0.0, -1.0]]
        """
        if self.generator is None:
            raise TypeError(
                f"gate {self.name!r} has no single generator"
                + (" (see .occurrences)" if self.occurrences else " (it has no parameter)")
            )
        return self.generator.to_matrix()

    def inverse(self, *params: float) -> tuple[GateSpec, tuple[float, ...]]:
        """``(spec, params)`` of a gate equal to ``U(params)^-1``.

        >>> spec, p = gate_spec("u").inverse(0.1, 0.2, 0.3); spec.name, p
        ('u', (-0.1, -0.3, -0.2))
        >>> gate_spec("s").inverse()[0].name
        'sdg'
        """
        self._check_params(params)
        if self.inverse_name is None:
            return _unitary_spec(self.matrix(*params).conj().T), ()
        spec = self if self.inverse_name == self.name else gate_spec(self.inverse_name)
        return spec, tuple(float(p) for p in self.inverse_params(tuple(params)))

    def to_qiskit(self, *params: float) -> Any:
        """The equivalent ``qiskit.circuit.Gate`` (same matrix, same wire order).

        >>> gate_spec("cphase").to_qiskit(0.5).name
        'cp'
        """
        self._check_params(params)
        from qiskit.circuit import library as lib

        if self.name in _QISKIT_CLASSES:
            return getattr(lib, _QISKIT_CLASSES[self.name])(*params)
        if self.name == "mcx":
            return lib.XGate() if self.num_controls == 0 else lib.MCXGate(self.num_controls)
        if self.name == "mcz":
            if self.num_controls == 0:
                return lib.ZGate()
            return lib.ZGate().control(self.num_controls, annotated=False)
        if self.name == "pauli_rot":
            from qiskit.quantum_info import SparsePauliOp

            return lib.PauliEvolutionGate(SparsePauliOp(self.static["pauli"][::-1]),
                                          time=params[0] / 2)
        # user matrices, and any gate Qiskit has no class for: the same matrix as a UnitaryGate
        return lib.UnitaryGate(self.matrix(*params))

    @property
    def is_parametric(self) -> bool:
        """True when the gate has at least one real parameter.

        >>> gate_spec("rx").is_parametric, gate_spec("cx").is_parametric
        (True, False)
        """
        return self.num_params > 0

    def __repr__(self) -> str:
        extra = f", static={dict(self.static)}" if self.static and self.name != "unitary" else ""
        return (
            f"GateSpec({self.name!r}, num_qubits={self.num_qubits}, "
            f"num_params={self.num_params}, structure={self.structure!r}{extra})"
        )


@dataclass(frozen=True)
class GateFamily:
    """A table entry whose size depends on static arguments (``mcx``, ``pauli_rot``, ...).

    ``make(**static)`` returns the concrete :class:`GateSpec`; :func:`gate_spec` calls it.
    """

    name: str
    static_args: tuple[str, ...]
    make: Callable[..., GateSpec] = field(repr=False)
    doc: str = field(default="", repr=False)


# ---------------------------------------------------------------------------------------------
# helpers that build matrices, generators and specs
# ---------------------------------------------------------------------------------------------

def _const(m: Any) -> Callable[[], np.ndarray]:
    arr = np.array(m, dtype=_C)
    arr.setflags(write=False)
    return lambda: arr.copy()


def _matrix_from_diagonal(diag_fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    return lambda *p: np.diag(diag_fn(*p))


def _matrix_from_permutation(perm: Sequence[int], phases: Sequence[complex]) -> np.ndarray:
    m = np.zeros((len(perm), len(perm)), dtype=_C)
    m[list(perm), list(range(len(perm)))] = phases
    return m


def _controlled_matrix(base: np.ndarray, num_controls: int) -> np.ndarray:
    # Controls are the low bits of the gate index, so the block where every control is 1 is
    # the set of indices cmask | (r << num_controls).
    dim = base.shape[0] << num_controls
    m = np.eye(dim, dtype=_C)
    idx = ((1 << num_controls) - 1) | (np.arange(base.shape[0]) << num_controls)
    m[np.ix_(idx, idx)] = base
    return m


@functools.lru_cache(maxsize=256)
def _pauli_matrix(label: str) -> np.ndarray:
    m = PauliSum([(1.0, label)]).to_matrix()
    m.setflags(write=False)
    return m


def _pauli_rotation_matrix(label: str) -> Callable[[float], np.ndarray]:
    def matrix(theta: float) -> np.ndarray:
        p = _pauli_matrix(label)
        return math.cos(theta / 2) * np.eye(p.shape[0], dtype=_C) - 1j * math.sin(theta / 2) * p

    return matrix


def _z_parity_signs(label: str) -> np.ndarray:
    # (-1)^parity(r & z) for every basis index r of a Z/I-only label: the diagonal of P.
    _, z, _ = pauli_masks(label, range(len(label)))
    r = np.arange(1 << len(label), dtype=np.int64)
    return 1.0 - 2.0 * parity(r & z)


def _pauli_rotation_diagonal(label: str) -> Callable[[float], np.ndarray]:
    signs = _z_parity_signs(label)

    def diag(theta: float) -> np.ndarray:
        return np.exp(-0.5j * theta * signs)

    return diag


def _pauli_spectrum(label: str) -> tuple[float, ...]:
    return (0.5,) if set(label) <= {"I"} else (-0.5, 0.5)


def _rotation_spec(name: str, label: str, structure: Structure, doc: str) -> GateSpec:
    diag = _pauli_rotation_diagonal(label) if structure == "diagonal" else None
    return GateSpec(
        name=name,
        num_qubits=len(label),
        num_params=1,
        structure=structure,
        _matrix=_matrix_from_diagonal(diag) if diag else _pauli_rotation_matrix(label),
        doc=doc,
        inverse_name=name,
        inverse_params=_negated_params,
        generator=PauliSum([(0.5, label)]),
        spectrum=_pauli_spectrum(label),
        pauli_word=label,
        _diagonal=diag,
    )


def _fixed(name: str, matrix: Any, doc: str, inverse: str | None = None, **kw: Any) -> GateSpec:
    return GateSpec(name=name, num_qubits=int(np.log2(len(matrix))), num_params=0,
                    structure="dense", _matrix=_const(matrix), doc=doc,
                    inverse_name=inverse or name, **kw)


def _fixed_diagonal(name: str, diag: Sequence[complex], doc: str, inverse: str) -> GateSpec:
    d = _const(diag)
    return GateSpec(name=name, num_qubits=int(np.log2(len(diag))), num_params=0,
                    structure="diagonal", _matrix=_matrix_from_diagonal(d), doc=doc,
                    inverse_name=inverse, _diagonal=d)


def _fixed_permutation(
    name: str, perm: tuple[int, ...], phases: tuple[complex, ...], doc: str,
    inverse: str | None,
) -> GateSpec:
    return GateSpec(name=name, num_qubits=int(np.log2(len(perm))), num_params=0,
                    structure="permutation",
                    _matrix=_const(_matrix_from_permutation(perm, phases)), doc=doc,
                    inverse_name=inverse, _permutation=(perm, phases))


def _controlled_generator(base_gen: PauliSum, num_controls: int) -> PauliSum:
    # G = |1..1><1..1| ⊗ G_base with |1><1| = (I - Z)/2 on each control wire.
    n = num_controls + base_gen.num_qubits
    gen = PauliSum.identity(n)
    for c in range(num_controls):
        z = "".join("Z" if w == c else "I" for w in range(n))
        gen = gen @ PauliSum([(0.5, "I" * n), (-0.5, z)])
    padded = PauliSum([(coef, "I" * num_controls + lab) for coef, lab in base_gen.terms])
    return gen @ padded


def _controlled(name: str, base: GateSpec, num_controls: int, doc: str,
                static: Mapping[str, Any] | None = None) -> GateSpec:
    generator = spectrum = None
    if base.generator is not None:
        generator = _controlled_generator(base.generator, num_controls)
        spectrum = tuple(sorted(set(base.spectrum or ()) | {0.0}))
    inverse_name = name if base.inverse_name == base.name else None
    return GateSpec(
        name=name,
        num_qubits=num_controls + base.num_qubits,
        num_params=base.num_params,
        structure="controlled",
        _matrix=lambda *p: _controlled_matrix(base.matrix(*p), num_controls),
        doc=doc,
        num_controls=num_controls,
        base=base,
        inverse_name=inverse_name,
        inverse_params=base.inverse_params,
        generator=generator,
        spectrum=spectrum,
        static=dict(static or {}),
    )


def check_unitary(matrix: Any, atol: float = 1e-8) -> np.ndarray:
    """Validate a user matrix for the ``unitary`` gate; return it as complex128.

    >>> check_unitary([[0, 1], [1, 0]]).shape
    (2, 2)
    >>> check_unitary([[1, 1], [0, 1]])  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    NotUnitaryError: unitary gate: matrix is not unitary (max |U^dagger U - I| = 1 > 1e-08)
    """
    m = np.asarray(matrix, dtype=_C)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"unitary gate: expected a square matrix, got shape {m.shape}")
    dim = m.shape[0]
    if dim < 2 or dim & (dim - 1):
        raise ValueError(
            f"unitary gate: matrix side must be a power of two >= 2 (2^k for k qubits), got {dim}"
        )
    if not np.all(np.isfinite(m)):
        raise ValueError("unitary gate: matrix has non-finite entries")
    err = float(np.max(np.abs(m.conj().T @ m - np.eye(dim))))
    if err > atol:
        raise NotUnitaryError(
            f"unitary gate: matrix is not unitary (max |U^dagger U - I| = {err:.3g} > {atol:g})"
        )
    return m


def _unitary_spec(matrix: Any) -> GateSpec:
    m = check_unitary(matrix)
    m.setflags(write=False)
    return GateSpec(
        name="unitary",
        num_qubits=int(m.shape[0]).bit_length() - 1,
        num_params=0,
        structure="dense",
        _matrix=lambda: m.copy(),
        doc="user-supplied unitary matrix; bit j of its index is the gate's j-th wire",
        inverse_name=None,
        static={"matrix": m},
    )


@functools.lru_cache(maxsize=64)
def _mcx_spec(num_controls: int) -> GateSpec:
    return _controlled("mcx", GATE_TABLE["x"], num_controls,
                       "multi-controlled X: controls first, target last",
                       {"num_controls": num_controls})


@functools.lru_cache(maxsize=64)
def _mcz_spec(num_controls: int) -> GateSpec:
    return _controlled("mcz", GATE_TABLE["z"], num_controls,
                       "multi-controlled Z (symmetric in its wires)",
                       {"num_controls": num_controls})


@functools.lru_cache(maxsize=256)
def _pauli_rot_spec(pauli: str) -> GateSpec:
    spec = _rotation_spec("pauli_rot", pauli, "diagonal" if set(pauli) <= {"I", "Z"} else "dense",
                          "exp(-iθP/2) for a Pauli word P; letter k acts on the gate's wire k")
    return _replace(spec, static={"pauli": pauli})


def _check_num_controls(num_controls: Any) -> int:
    if isinstance(num_controls, bool) or not isinstance(num_controls, int | np.integer):
        raise TypeError(f"num_controls must be an int, got {num_controls!r}")
    if num_controls < 0:
        raise ValueError(f"num_controls must be >= 0, got {num_controls}")
    return int(num_controls)


def _make_mcx(num_controls: int) -> GateSpec:
    return _mcx_spec(_check_num_controls(num_controls))


def _make_mcz(num_controls: int) -> GateSpec:
    return _mcz_spec(_check_num_controls(num_controls))


def _make_pauli_rot(pauli: str) -> GateSpec:
    if not isinstance(pauli, str) or not pauli or set(pauli) - set("IXYZ"):
        raise ValueError(
            f"pauli_rot needs a non-empty Pauli word of letters I, X, Y, Z, got {pauli!r}"
        )
    return _pauli_rot_spec(pauli)


# ---------------------------------------------------------------------------------------------
# the table
# ---------------------------------------------------------------------------------------------

# Table name -> class in qiskit.circuit.library with the same matrix and parameter order.
_QISKIT_CLASSES = {
    "h": "HGate", "x": "XGate", "y": "YGate", "z": "ZGate", "s": "SGate", "sdg": "SdgGate",
    "t": "TGate", "tdg": "TdgGate", "sx": "SXGate", "sxdg": "SXdgGate", "rx": "RXGate",
    "ry": "RYGate", "rz": "RZGate", "phase": "PhaseGate", "u": "UGate", "cx": "CXGate",
    "cy": "CYGate", "cz": "CZGate", "ch": "CHGate", "crx": "CRXGate", "cry": "CRYGate",
    "crz": "CRZGate", "cphase": "CPhaseGate", "swap": "SwapGate", "iswap": "iSwapGate",
    "rxx": "RXXGate", "ryy": "RYYGate", "rzz": "RZZGate", "rzx": "RZXGate",
}

_S2 = 1 / math.sqrt(2)
_T = cmath.exp(1j * math.pi / 4)


def _rx(t: float) -> np.ndarray:
    c, s = math.cos(t / 2), math.sin(t / 2)
    return np.array([[c, -1j * s], [-1j * s, c]], dtype=_C)


def _ry(t: float) -> np.ndarray:
    c, s = math.cos(t / 2), math.sin(t / 2)
    return np.array([[c, -s], [s, c]], dtype=_C)


def _rz_diag(t: float) -> np.ndarray:
    return np.array([cmath.exp(-0.5j * t), cmath.exp(0.5j * t)], dtype=_C)


def _phase_diag(t: float) -> np.ndarray:
    return np.array([1.0, cmath.exp(1j * t)], dtype=_C)


def _u(theta: float, phi: float, lam: float) -> np.ndarray:
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return np.array(
        [[c, -cmath.exp(1j * lam) * s], [cmath.exp(1j * phi) * s, cmath.exp(1j * (phi + lam)) * c]],
        dtype=_C,
    )


def _build_table() -> dict[str, GateSpec | GateFamily]:
    t: dict[str, GateSpec | GateFamily] = {}

    def add(spec: GateSpec | GateFamily) -> None:
        t[spec.name] = spec

    add(_fixed("h", [[_S2, _S2], [_S2, -_S2]], "Hadamard"))
    add(_fixed_permutation("x", (1, 0), (1, 1), "Pauli X", "x"))
    add(_fixed_permutation("y", (1, 0), (1j, -1j), "Pauli Y", "y"))
    add(_fixed_diagonal("z", [1, -1], "Pauli Z", "z"))
    add(_fixed_diagonal("s", [1, 1j], "S = sqrt(Z)", "sdg"))
    add(_fixed_diagonal("sdg", [1, -1j], "S^dagger", "s"))
    add(_fixed_diagonal("t", [1, _T], "T = sqrt(S)", "tdg"))
    add(_fixed_diagonal("tdg", [1, _T.conjugate()], "T^dagger", "t"))
    add(_fixed("sx", [[0.5 + 0.5j, 0.5 - 0.5j], [0.5 - 0.5j, 0.5 + 0.5j]], "sqrt(X)", "sxdg"))
    add(_fixed("sxdg", [[0.5 - 0.5j, 0.5 + 0.5j], [0.5 + 0.5j, 0.5 - 0.5j]], "sqrt(X)^dagger",
               "sx"))

    rx = _rotation_spec("rx", "X", "dense", "exp(-iθX/2)")
    ry = _rotation_spec("ry", "Y", "dense", "exp(-iθY/2)")
    rz = _rotation_spec("rz", "Z", "diagonal", "exp(-iθZ/2) = diag(e^{-iθ/2}, e^{iθ/2})")
    # Same numbers as the generic Pauli-rotation builders, with cheaper scalar code because
    # these three are the gates every ansatz applies thousands of times.
    rx = _replace(rx, _matrix=_rx)
    ry = _replace(ry, _matrix=_ry)
    rz = _replace(rz, _matrix=_matrix_from_diagonal(_rz_diag), _diagonal=_rz_diag)
    for spec in (rx, ry, rz):
        add(spec)
    add(GateSpec(
        name="phase", num_qubits=1, num_params=1, structure="diagonal",
        _matrix=_matrix_from_diagonal(_phase_diag), doc="diag(1, e^{iθ}) (Qiskit's PhaseGate)",
        inverse_name="phase", inverse_params=_negated_params,
        generator=PauliSum([(-0.5, "I"), (0.5, "Z")]), spectrum=(-1.0, 0.0),
        _diagonal=_phase_diag,
    ))
    add(GateSpec(
        name="u", num_qubits=1, num_params=3, structure="dense", _matrix=_u,
        doc="Qiskit's U(θ, φ, λ) = e^{i(φ+λ)/2} rz(φ) ry(θ) rz(λ)",
        inverse_name="u", inverse_params=lambda p: (-p[0], -p[2], -p[1]),
        occurrences=(RotationOccurrence(2, "rz"), RotationOccurrence(0, "ry"),
                     RotationOccurrence(1, "rz")),
        global_phase=lambda theta, phi, lam: (phi + lam) / 2,
    ))

    for name, base in (("cx", "x"), ("cy", "y"), ("cz", "z"), ("ch", "h"), ("crx", "rx"),
                       ("cry", "ry"), ("crz", "rz"), ("cphase", "phase")):
        base_spec = t[base]
        assert isinstance(base_spec, GateSpec)
        add(_controlled(name, base_spec, 1, f"controlled {base}: control = first wire"))

    add(_fixed_permutation("swap", (0, 2, 1, 3), (1, 1, 1, 1), "swap two wires", "swap"))
    add(_fixed_permutation("iswap", (0, 2, 1, 3), (1, 1j, 1j, 1),
                           "iSWAP: |01> -> i|10>, |10> -> i|01>", None))
    add(_rotation_spec("rxx", "XX", "dense", "exp(-iθ XX/2)"))
    add(_rotation_spec("ryy", "YY", "dense", "exp(-iθ YY/2)"))
    add(_rotation_spec("rzz", "ZZ", "diagonal", "exp(-iθ ZZ/2)"))
    add(_rotation_spec("rzx", "ZX", "dense",
                       "exp(-iθ Z⊗X/2): Z on the first wire, X on the second (Qiskit's RZXGate)"))

    add(GateFamily("mcx", ("num_controls",), _make_mcx,
                   "multi-controlled X: gate_spec('mcx', num_controls=m), wires (c0..c_{m-1}, t)"))
    add(GateFamily("mcz", ("num_controls",), _make_mcz,
                   "multi-controlled Z: gate_spec('mcz', num_controls=m) on m+1 wires"))
    add(GateFamily("pauli_rot", ("pauli",), _make_pauli_rot,
                   "exp(-iθP/2): gate_spec('pauli_rot', pauli='XZY'), letter k on gate wire k"))
    add(GateFamily("unitary", ("matrix",), _unitary_spec,
                   "user matrix, checked unitary: gate_spec('unitary', matrix=M)"))
    return t


def _replace(spec: GateSpec, **changes: Any) -> GateSpec:
    return GateSpec(**{**{f: getattr(spec, f) for f in spec.__dataclass_fields__}, **changes})


GATE_TABLE: Mapping[str, GateSpec | GateFamily] = _build_table()
"""Every gate, by canonical name. Families (``mcx``, ``mcz``, ``pauli_rot``, ``unitary``) need
static arguments, passed through :func:`gate_spec`."""

ALIASES: Mapping[str, str] = {"p": "phase", "cp": "cphase", "cnot": "cx"}
"""Alternative names accepted by :func:`gate_spec`."""


def known_gates() -> list[str]:
    """Sorted canonical gate names.

    >>> "cx" in known_gates() and "mcx" in known_gates()
    True
    """
    return sorted(GATE_TABLE)


def gate_spec(name: str | GateSpec, **static: Any) -> GateSpec:
    """Look up a gate by name (or alias); families take their static arguments as keywords.

    >>> gate_spec("p").name, gate_spec("mcx", num_controls=2).num_qubits
    ('phase', 3)
    >>> gate_spec("pauli_rot", pauli="XYZ").num_qubits
    3
    >>> gate_spec("foo")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    UnknownGateError: unknown gate 'foo'; known gates: ch, cphase, crx, ... (aliases: cnot, cp, p)
    """
    if isinstance(name, GateSpec):
        if static:
            raise TypeError("static arguments cannot be combined with a GateSpec")
        return name
    key = ALIASES.get(name, name)
    entry = GATE_TABLE.get(key)
    if entry is None:
        known = ", ".join(known_gates())
        aliases = ", ".join(sorted(ALIASES))
        raise UnknownGateError(f"unknown gate {name!r}; known gates: {known} (aliases: {aliases})")
    if isinstance(entry, GateFamily):
        missing = [a for a in entry.static_args if a not in static]
        extra = sorted(set(static) - set(entry.static_args))
        if missing or extra:
            want = ", ".join(f"{a}=..." for a in entry.static_args)
            raise TypeError(f"gate {key!r} needs exactly the static arguments {want}; "
                            f"missing {missing}, unexpected {extra}")
        return entry.make(**static)
    if static:
        raise TypeError(f"gate {key!r} takes no static arguments, got {sorted(static)}")
    return entry
