"""`qdiff.quantum`: quantum code in qdiff programs, its simulation, and observables.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> @qdiff.program
... def rotated(theta):
...     q = qm.qubits(1)
...     qm.rx(theta, q[0])
...     return qm.expval("Z", q)
>>> round(float(rotated(0.3)), 12) == round(float(np.cos(0.3)), 12)
True
"""

from ..ir.interpreter import register_runner
from . import compiled  # noqa: F401  (registers compiled forms of quantum programs)
from .execution import batched, batched_branches  # noqa: F401  (register the batched runs of vmap)
from .execution.batched_backend import batched_backend
from .execution.options import RunOptions
from .execution.run import TruncationError, TruncationWarning, call_quantum_program, run
from .execution.runner import NonTerminatingLoopError, QuantumResult, needs_runner
from .gradients import (
    array_batched_adjoint,  # noqa: F401  (registers vmap's batched gradients on NumPy/CuPy)
    batched_adjoint,  # noqa: F401  (registers vmap's batched gradients)
    batched_branch_adjoint,  # noqa: F401  (registers them for programs that measure)
    differentiation,  # noqa: F401  (registers the quantum derivative rule)
)
from .gradients.gradient import QuantumGradient, gradient, jacobian
from .lang import primitives
from .lang.frontend import (
    GATES,
    Register,
    Wire,
    apply,
    expval,
    mcx,
    mcz,
    measure,
    pauli_rot,
    postselect,
    probs,
    qubits,
    reset,
    sample,
    state,
    unitary,
)
from .lang.gates import gate_spec, known_gates
from .lang.observables import PauliSum
from .qiskit import execution as _qiskit_execution  # noqa: F401  (registers mode='qiskit')
from .qiskit.exporter import to_qiskit
from .qiskit.importer import from_qiskit

globals().update(GATES)
register_runner(needs_runner, call_quantum_program)

__all__ = [
    "GATES", "NonTerminatingLoopError", "PauliSum", "QuantumGradient", "QuantumResult",
    "RunOptions", "TruncationError", "TruncationWarning", "batched_backend",
    "Register", "Wire", "apply", "expval", "from_qiskit", "gate_spec", "gradient", "jacobian",
    "known_gates",
    "mcx", "mcz", "measure", "pauli_rot", "postselect", "probs", "qubits", "reset", "run",
    "sample", "state", "to_qiskit", "unitary", *GATES,
]
