"""Quantum programs compiled with the classical code around them (see docs/design.md,
"Compiling"): lowering rules of the quantum primitives, the differentiable form of a
hybrid program, and their registration with `qdiff.compiler`."""

from . import block_rules, rules  # noqa: F401  (fill the compiler's rule table)
from .claims import QUANTUM_COMPILER
from .primal import MAX_COMPILED_QUBITS, compile_reason

__all__ = ["MAX_COMPILED_QUBITS", "QUANTUM_COMPILER", "compile_reason"]
