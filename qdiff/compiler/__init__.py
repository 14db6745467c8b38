"""Compiling IR programs (primal and derivative programs alike) to Numba.

See `jit`, and docs/design.md ("Compiling").
"""

from .errors import NotCompilableError
from .jit import CompiledProgram, JittedFunction, jit

__all__ = ["CompiledProgram", "JittedFunction", "NotCompilableError", "jit"]
