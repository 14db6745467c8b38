"""Observables given in Qiskit's terms, as qdiff `PauliSum`s, checked.

Accepted: a Pauli label string in Qiskit's order (``"XI"`` is X on qubit 1), a ``Pauli``,
a ``SparsePauliOp``, a ``SparseObservable``, an ``Operator`` (expanded in Paulis), a qdiff
`PauliSum` (qdiff's order: character k on qubit k), or a list or tuple of them. Each must
be Hermitian and act on the circuit's qubits.

>>> [op.terms for op in as_pauli_sums("XI", 2)]  # X on qubit 1
[(((1+0j), 'IX'),)]
"""

from __future__ import annotations

from typing import Any

from ...ir.errors import QdiffError
from ..lang.observables import PauliSum


def as_pauli_sums(observables: Any, num_qubits: int) -> list[PauliSum]:
    """One `PauliSum` per observable (``observables`` one, or a list or tuple of them)."""
    items = observables if isinstance(observables, (list, tuple)) else [observables]
    if not items:
        raise QdiffError("from_qiskit: the list of observables is empty")
    result = []
    for k, item in enumerate(items):
        op = _as_pauli_sum(item, k)
        if op.num_qubits != num_qubits:
            raise QdiffError(f"observable {k} acts on {op.num_qubits} qubits; the circuit "
                             f"has {num_qubits}")
        for coefficient, label in op.terms:
            if abs(coefficient.imag) > 1e-12:
                raise QdiffError(f"observable {k} is not Hermitian: the coefficient of "
                                 f"{label[::-1]} (Qiskit's order) is {coefficient}")
        result.append(op)
    return result


def _as_pauli_sum(item: Any, k: int) -> PauliSum:
    if isinstance(item, PauliSum):
        return item
    return PauliSum.from_qiskit(as_sparse_pauli_op(item, f"observable {k}"))


def as_sparse_pauli_op(item: Any, what: str) -> Any:
    """``item`` (a label, ``Pauli``, ``SparsePauliOp``, ``SparseObservable`` or
    ``Operator``) as a ``SparsePauliOp`` with numeric coefficients, or a clear error."""
    from qiskit.quantum_info import Operator, Pauli, SparsePauliOp

    try:
        if isinstance(item, (str, Pauli)):
            op = SparsePauliOp(item)
        elif isinstance(item, SparsePauliOp):
            op = item
        elif type(item).__name__ == "SparseObservable":
            op = SparsePauliOp.from_sparse_observable(item)
        elif isinstance(item, Operator):
            op = SparsePauliOp.from_operator(item)
        else:
            raise QdiffError(f"{what} is a {type(item).__name__}; give a Pauli label "
                             "(Qiskit's order), Pauli, SparsePauliOp, SparseObservable, "
                             "Operator or qdiff PauliSum")
    except QdiffError:
        raise
    except Exception as error:  # noqa: BLE001 (Qiskit raises various errors on bad labels)
        raise QdiffError(f"{what} ({item!r}) is not a Pauli operator: {error}") from None
    if getattr(op, "parameters", None):
        raise QdiffError(f"{what} has parameterized coefficients; bind them first")
    return op
