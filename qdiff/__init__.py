"""qdiff: differentiable programming across classical array code and quantum programs,
on one loop-aware IR.

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: c * x, 1.0), 2.0)
>>> float(p(2.0))
8.0
"""

from . import classical  # noqa: F401  (registers the array primitives)
from .api import ProgramFunction, program
from .classical.soacs import hist, map, reduce, scan, scatter
from .ir import (
    Bit,
    Cell,
    LoopLimitError,
    Program,
    QdiffError,
    QState,
    SerializationError,
    Tensor,
    TracerConversionError,
    TypeCheckError,
    VerificationError,
    trace,
)
from .ir.control_flow import cond, fori_loop, switch, while_loop

__version__ = "0.1.0"

__all__ = [
    "Bit", "Cell", "LoopLimitError", "Program", "ProgramFunction", "QState", "QdiffError",
    "SerializationError", "Tensor", "TracerConversionError", "TypeCheckError",
    "VerificationError", "cond", "fori_loop", "hist", "map", "program", "reduce", "scan",
    "scatter", "switch", "trace", "while_loop",
]
