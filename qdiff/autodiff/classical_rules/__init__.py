"""The JVP and VJP rules of the classical array primitives (`qdiff.classical`), one module
per module of primitives; importing this package registers them all.

They sit above `qdiff.numpy` because most of them build their derivative programs with it.
"""

from . import (  # noqa: F401  (registers the rules)
    elementwise,
    indexed_derivatives,
    indexing,
    linalg,
    map_derivatives,
    monoid_derivatives,
    reductions,
    shape,
    solvers,
)
