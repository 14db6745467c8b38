"""Classical array primitives (elementwise, reductions, shape, indexing, einsum, SOACs).

Importing this package registers them; their derivative rules live beside them.
"""

from . import elementwise, indexing, linalg, reductions, shape, soacs  # noqa: F401
