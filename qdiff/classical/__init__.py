"""Classical array primitives (elementwise, reductions, shape, indexing, einsum, SOACs,
dense solvers).

Importing this package registers them with their type rules and NumPy implementations;
their derivative rules are registered by `qdiff.autodiff` (`autodiff.classical_rules`).
"""

from . import (  # noqa: F401  (registers the primitives)
    elementwise,
    indexing,
    linalg,
    reductions,
    shape,
    soacs,
    solvers,
)
