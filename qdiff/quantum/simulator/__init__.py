"""Statevector simulation: back ends behind one interface, plus a small density-matrix simulator.

Modules, lowest first: ``memory`` (state sizes), ``indexing`` (index math, wire checks),
``gate_ops`` (gate applications, fused matrices), ``backend`` (the interface), ``registry``
(back ends by name), the back ends ``numpy_backend``, ``cupy_backend`` (CuPy imported on first
use) and ``numba_backend`` with its kernels (``numba_ranges``, ``numba_gate_kernels``,
``block_encoding``, ``numba_block_kernels``, ``adjoint_encoding``, ``numba_adjoint_kernels``,
``numba_adjoint``), and ``density_matrix``. Importing the package registers the back ends.

>>> from qdiff.quantum.simulator import get_backend
>>> be = get_backend("auto")
>>> psi = be.apply_gate(be.zero_state(1), 1, "h", [0])
>>> round(be.expval_pauli_sum(psi, 1, "X"), 12)
1.0
"""

from qdiff.quantum.simulator import (  # noqa: F401  (they register)
    cupy_backend,
    numba_backend,  # noqa: F401  (registers; numba is a core dependency)
    numpy_backend,
)
from qdiff.quantum.simulator.backend import SUPPORTED_DTYPES, StatevectorBackend
from qdiff.quantum.simulator.gate_ops import GateOp, fuse_single_qubit_layers, random_circuit
from qdiff.quantum.simulator.indexing import IndexLayout, index_layout, insert_zero_bits
from qdiff.quantum.simulator.memory import (
    StateTooLargeError,
    available_memory_bytes,
    check_statevector_memory,
    statevector_bytes,
)
from qdiff.quantum.simulator.registry import available_backends, get_backend, numba_available

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
