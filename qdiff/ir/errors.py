"""Errors raised by the IR layer; each names the operation and values involved."""

from __future__ import annotations


class QdiffError(Exception):
    """Base class of every error qdiff raises on purpose."""


class TypeCheckError(QdiffError, TypeError):
    """Operands of a primitive do not fit its type rule (shape, dtype, arity)."""


class VerificationError(QdiffError):
    """A program breaks an IR invariant (scope, SSA, linearity, types)."""


class TracerConversionError(QdiffError, TypeError):
    """A traced value was used where Python needs a concrete value."""


class SerializationError(QdiffError, ValueError):
    """A saved program cannot be read back."""


class LoopLimitError(QdiffError, RuntimeError):
    """A bounded while loop ran out of iterations while its predicate still held."""
