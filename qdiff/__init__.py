"""qdiff: differentiable programming across classical array code and quantum programs,
on one loop-aware IR.

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: c * x, 1.0), 2.0)
>>> float(p(2.0))
8.0
"""

from . import (
    classical,  # noqa: F401  (registers the array primitives)
    quantum,  # noqa: F401  (registers the quantum primitives)
)
from .api import ProgramFunction, program
from .autodiff.forward import jvp_program
from .autodiff.reverse import vjp_program
from .autodiff.stop_gradient import stop_gradient
from .batching import vmap
from .classical.soacs import hist, map, reduce, scan, scatter
from .compiler import CompiledProgram, NotCompilableError, jit
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
from .transforms import (
    grad,
    grad_program,
    hessian,
    jacfwd,
    jacobian,
    jacobian_program,
    jacrev,
    jvp,
    value_and_grad,
    vjp,
)

__version__ = "0.1.0"

__all__ = [
    "Bit", "Cell", "CompiledProgram", "LoopLimitError", "NotCompilableError", "Program",
    "ProgramFunction", "QState", "QdiffError", "SerializationError", "Tensor",
    "TracerConversionError", "TypeCheckError", "VerificationError", "cond", "fori_loop",
    "grad", "grad_program", "hessian", "hist", "jacfwd", "jacobian", "jit",
    "jacobian_program", "jacrev", "jvp", "jvp_program", "map", "program", "reduce", "scan",
    "scatter", "stop_gradient", "switch", "trace", "value_and_grad", "vjp", "vjp_program",
    "vmap", "while_loop",
]
