"""Statevector simulation: back ends behind one interface, plus a small density-matrix simulator.

>>> from qdiff.quantum.simulator import get_backend
>>> be = get_backend("auto")
>>> psi = be.apply_gate(be.zero_state(1), 1, "h", [0])
>>> round(be.expval_pauli_sum(psi, 1, "X"), 12)
1.0
"""

from qdiff.quantum.simulator.backend import (
    SUPPORTED_DTYPES,
    GateOp,
    IndexLayout,
    StatevectorBackend,
    available_backends,
    fuse_single_qubit_layers,
    get_backend,
    index_layout,
    insert_zero_bits,
    numba_available,
    random_circuit,
)
from qdiff.quantum.simulator.memory import (
    StateTooLargeError,
    available_memory_bytes,
    check_statevector_memory,
    statevector_bytes,
)

__all__ = [
    "SUPPORTED_DTYPES",
    "GateOp",
    "IndexLayout",
    "StatevectorBackend",
    "StateTooLargeError",
    "available_backends",
    "available_memory_bytes",
    "check_statevector_memory",
    "fuse_single_qubit_layers",
    "get_backend",
    "index_layout",
    "insert_zero_bits",
    "numba_available",
    "random_circuit",
    "statevector_bytes",
]
