"""Errors of compiled code.

Numba raises exceptions with constant arguments only, so compiled code raises
`CompiledCodeError(code)` and the host turns the code back into the error the interpreter
raises there, with its message (`Source.error` records them per generated function).
"""

from __future__ import annotations

from ..ir.errors import QdiffError


class NotCompilableError(QdiffError):
    """A program holds an equation the compiler has no rule for."""


class CompiledCodeError(Exception):
    """Raised inside compiled code; its one argument indexes the function's messages."""
