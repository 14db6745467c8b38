"""The compiler's rules, one module per family of primitives; importing this package
fills `qdiff.compiler.lowering.RULES` and the loop-nest lowering."""

from .. import groups  # noqa: F401
from . import buffers, control_flow, elementwise, linalg, soacs, solvers, structure  # noqa: F401
