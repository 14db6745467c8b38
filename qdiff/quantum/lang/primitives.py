"""Quantum primitives of the IR: allocation, gates, measurement, reset, postselection, readout.

States are linear: every op consumes a ``QState`` and returns the next; readouts (``expval``,
``probs``, ``statevector``) return the state too, so several observables can be read from one
state. Gate angles are ordinary traced scalars. Measurement, reset and postselection split
the program into branches; the branching runner (`execution/runner.py`) gives them meaning;
the gates and readouts have plain implementations on the reference interpreter, registered
by `qdiff.quantum.execution.reference`.

Layouts:
- ``qalloc[num_qubits, dtype]() -> qstate[n]``; ``qextend[num_qubits](s) -> qstate[n+k]``
- ``gate[name, wires, static](s, *angles) -> s'``
- ``measure[wire, reset](s) -> (s', bit)``; ``reset[wire](s) -> s'``;
  ``postselect[wire, value](s) -> s'``
- ``expval[terms, wires](s) -> (s, f64[])`` with ``terms = ((coefficient, label), ...)``;
  ``probs[wires](s) -> (s, f64[2^k])``; ``statevector[dtype](s) -> (s, c128|c64[2^n])``
  (``dtype`` is the register's, complex128 when absent)
- ``sample[wires, shots](s) -> (s, i64[shots, k])``: ``shots`` draws of the wires' values,
  column j is ``wires[j]``; the state is not disturbed
- ``bit_to_int(b) -> i64[]``
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.errors import TypeCheckError
from ...ir.primitives import register_primitive
from ...ir.type_rules import tensor
from ...ir.types import Bit, QState, Tensor, Type
from .gates import gate_spec
from .observables import PauliParseError, PauliSum

QUANTUM_PRIMITIVES: list[str] = []


def _register(name: str, rule: Any, **options: Any) -> Any:
    QUANTUM_PRIMITIVES.append(name)
    return register_primitive(name, rule, **options)


def _state(t: Type, what: str = "state") -> QState:
    if not isinstance(t, QState):
        raise TypeCheckError(f"{what} must be a quantum state, got {t.short()}")
    return t


def _wires(wires: tuple[int, ...], num_qubits: int, what: str) -> None:
    if len(set(wires)) != len(wires):
        raise TypeCheckError(f"{what}: repeated wire in {wires}")
    for w in wires:
        if not 0 <= w < num_qubits:
            raise TypeCheckError(f"{what}: wire {w} is out of range for {num_qubits} qubits")


# -------------------------------------------------------------------------------- allocation
def _qalloc_rule(*, num_qubits: int, dtype: str) -> tuple[Type, ...]:
    if np.dtype(dtype) not in (np.complex128, np.complex64):
        raise TypeCheckError(f"states are complex128 or complex64, not {dtype}")
    return (QState(num_qubits),)


qalloc_p = _register("qalloc", _qalloc_rule, effectful=True)


def _qextend_rule(state: Type, *, num_qubits: int) -> tuple[Type, ...]:
    return (QState(_state(state).num_qubits + num_qubits),)


qextend_p = _register("qextend", _qextend_rule, effectful=True)


@qextend_p.def_impl("numpy")
def _qextend_impl(state: np.ndarray, *, num_qubits: int) -> np.ndarray:
    # new wires are the high bits: |0..0>|old>, index = new * 2^old + old, so the old
    # amplitudes are the first 2^old; a fresh buffer that owns its memory (gates run in place)
    extended = np.zeros(2 ** num_qubits * state.size, state.dtype)
    extended[:state.size] = state
    return extended


# ------------------------------------------------------------------------------------- gates
def checked_gate_spec(name: str, static: dict | None, num_angles: int, wires: Sequence[int],
                      what: str) -> Any:
    """The GateSpec of a gate applied with ``num_angles`` angles to ``wires``, or a
    `TypeCheckError` naming ``what`` (shared by ``gate`` and the parts of ``fused_gate``)."""
    try:
        spec = gate_spec(name, **(static or {}))
    except (KeyError, TypeError, ValueError) as exc:
        raise TypeCheckError(f"{what}: {exc}") from None
    if num_angles != spec.num_params:
        raise TypeCheckError(f"{what}: gate {name!r} takes {spec.num_params} angle(s), "
                             f"got {num_angles}")
    if len(wires) != spec.num_qubits:
        raise TypeCheckError(f"{what}: gate {name!r} acts on {spec.num_qubits} wire(s), "
                             f"got {tuple(wires)}")
    return spec


def check_angles(angles: Sequence[Type], what: str) -> None:
    """Every angle operand is a real scalar."""
    for k, angle in enumerate(angles):
        t = tensor(angle, f"angle {k} of {what}")
        if t.shape != () or t.np_dtype.kind != "f":
            raise TypeCheckError(f"angle {k} of {what} must be a real scalar, got {t.short()}")


def _gate_rule(state: Type, *angles: Type, name: str, wires: tuple[int, ...],
               static: dict | None = None) -> tuple[Type, ...]:
    s = _state(state)
    checked_gate_spec(name, static, len(angles), wires, "gate")
    check_angles(angles, f"gate {name!r}")
    _wires(wires, s.num_qubits, f"gate {name!r}")
    return (s,)


gate_p = _register("gate", _gate_rule)


# ------------------------------------------------------------------- measurement and friends
def _measure_rule(state: Type, *, wire: int, reset: bool) -> tuple[Type, ...]:
    s = _state(state)
    _wires((wire,), s.num_qubits, "measure")
    return (s, Bit())


measure_p = _register("measure", _measure_rule, multiple_results=True, effectful=True)


def _reset_rule(state: Type, *, wire: int) -> tuple[Type, ...]:
    s = _state(state)
    _wires((wire,), s.num_qubits, "reset")
    return (s,)


reset_p = _register("reset", _reset_rule, effectful=True)


def _postselect_rule(state: Type, *, wire: int, value: int) -> tuple[Type, ...]:
    s = _state(state)
    _wires((wire,), s.num_qubits, "postselect")
    if value not in (0, 1):
        raise TypeCheckError(f"postselect value must be 0 or 1, got {value!r}")
    return (s,)


postselect_p = _register("postselect", _postselect_rule, effectful=True)


# ------------------------------------------------------------------------------------ readout
def as_pauli_sum(observable: Any, num_wires: int) -> PauliSum:
    """``observable`` as a PauliSum: a Pauli string (``"0.5*ZZ + XI"``), a PauliSum, a list
    of (coefficient, label) pairs, or a Qiskit ``SparsePauliOp`` or ``Pauli`` (converted to
    qdiff's wire order); a sum whose terms cancel acts on the ``num_wires`` given."""
    if isinstance(observable, PauliSum):
        return observable
    if type(observable).__name__ in ("SparsePauliOp", "Pauli") and hasattr(observable,
                                                                          "num_qubits"):
        from qiskit.quantum_info import SparsePauliOp  # qiskit loads only for its objects

        return PauliSum.from_qiskit(SparsePauliOp(observable))
    if not isinstance(observable, (str, list, tuple)):
        raise TypeCheckError(
            f"expval: an observable is a Pauli string such as '0.5*ZZ + XI', a PauliSum, a "
            f"list of (coefficient, label) pairs or a Qiskit SparsePauliOp/Pauli; got "
            f"{observable!r}")
    try:
        return PauliSum(observable)
    except PauliParseError as error:
        if "cannot infer" not in str(error):
            raise
        return PauliSum(observable, num_wires)  # e.g. "ZZ - ZZ": no term says its width


def observable_terms(observable: Any, num_wires: int) -> tuple[tuple[float, str], ...]:
    """A Hermitian observable as the ``terms`` param: ((real coefficient, label), ...).

    >>> observable_terms("0.5*ZZ + XI", 2)
    ((0.5, 'ZZ'), (1.0, 'XI'))
    >>> from qiskit.quantum_info import SparsePauliOp
    >>> observable_terms(SparsePauliOp("XZ"), 2)          # Qiskit's order: Z on qubit 0
    ((1.0, 'ZX'),)
    """
    paulis = as_pauli_sum(observable, num_wires)
    if paulis.num_qubits != num_wires:
        raise TypeCheckError(
            f"observable acts on {paulis.num_qubits} qubit(s) but {num_wires} wire(s) are given")
    if not paulis.is_hermitian():
        raise TypeCheckError(
            "an expectation value needs a Hermitian observable (real coefficients)")
    # terms that cancel leave the zero observable, written on the wires so its width stays known
    terms = paulis.simplify().terms or ((0.0, "I" * num_wires),)
    return tuple((float(np.real(c)), label) for c, label in terms)


def _expval_rule(state: Type, *, terms: tuple, wires: tuple[int, ...]) -> tuple[Type, ...]:
    s = _state(state)
    _wires(wires, s.num_qubits, "expval")
    for _, label in terms:
        if len(label) != len(wires):
            raise TypeCheckError(f"expval: label {label!r} does not fit wires {wires}")
    return (s, Tensor((), "float64"))


expval_p = _register("expval", _expval_rule, multiple_results=True)


@functools.lru_cache(maxsize=4096)
def pauli_sum_of(terms: tuple) -> PauliSum:
    """The PauliSum of an ``expval`` equation's ``terms`` param (immutable: made once per
    observable, not on every readout)."""
    return PauliSum.from_list([(c, label) for c, label in terms])


def _probs_rule(state: Type, *, wires: tuple[int, ...]) -> tuple[Type, ...]:
    s = _state(state)
    _wires(wires, s.num_qubits, "probs")
    return (s, Tensor((2 ** len(wires),), "float64"))


probs_p = _register("probs", _probs_rule, multiple_results=True)


def _statevector_rule(state: Type, *, dtype: str = "complex128") -> tuple[Type, ...]:
    s = _state(state)
    if np.dtype(dtype) not in (np.complex128, np.complex64):
        raise TypeCheckError(f"states are complex128 or complex64, not {dtype}")
    return (s, Tensor((2 ** s.num_qubits,), dtype))


statevector_p = _register("statevector", _statevector_rule, multiple_results=True)


def _sample_rule(state: Type, *, wires: tuple[int, ...], shots: int) -> tuple[Type, ...]:
    s = _state(state)
    _wires(wires, s.num_qubits, "sample")
    if not wires:
        raise TypeCheckError("sample: no wires given")
    if isinstance(shots, bool) or not isinstance(shots, (int, np.integer)) or shots < 1:
        raise TypeCheckError(f"sample: shots must be a positive int, got {shots!r}")
    return (s, Tensor((int(shots), len(wires)), "int64"))


sample_p = _register("sample", _sample_rule, multiple_results=True, effectful=True)


def _bit_to_int_rule(bit: Type) -> tuple[Type, ...]:
    if not isinstance(bit, Bit):
        raise TypeCheckError(f"expected a measured bit, got {bit.short()}")
    return (Tensor((), "int64"),)


bit_to_int_p = _register("bit_to_int", _bit_to_int_rule)
bit_to_int_p.def_impl("numpy")(lambda bit: np.asarray(int(bit), np.int64))
