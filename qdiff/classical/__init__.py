"""Classical array primitives (elementwise, reductions, shape, indexing, einsum, SOACs).

Importing this package registers them; their derivative rules live beside them.
"""

from . import (  # noqa: F401  # noqa: F401
    elementwise,
    indexed_derivatives,
    indexing,
    linalg,
    map_derivatives,
    monoid_derivatives,
    reductions,
    shape,
    soacs,
)
