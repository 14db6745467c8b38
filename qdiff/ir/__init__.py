"""The shared, loop-aware program representation: types, programs, the primitive registry,
structured control flow, the verifier, the printer, JSON, the tracer and the interpreter."""

from . import (  # noqa: F401  (each binds Program's methods: call, print, verify, JSON)
    interpreter,
    printer,
    serialization,
    verifier,
)
from .core import Atom, Eqn, Literal, Program, Var
from .errors import (
    LoopLimitError,
    QdiffError,
    SerializationError,
    TracerConversionError,
    TypeCheckError,
    VerificationError,
)
from .primitives import Primitive, all_primitives, get_primitive, register_primitive
from .tracer import Cell, Tracer, bind, trace
from .types import Bit, QState, Tensor, Type

__all__ = [
    "Atom", "Bit", "Cell", "Eqn", "Literal", "LoopLimitError", "Primitive", "Program",
    "QState", "QdiffError", "SerializationError", "Tensor", "Tracer", "TracerConversionError",
    "Type", "TypeCheckError", "Var", "VerificationError", "all_primitives", "bind",
    "get_primitive", "register_primitive", "trace",
]
