"""Batching: the `vmap` transformation, a program rewrite driven by a rule per primitive.

One module per family of primitives fills the ``batch`` entries of the registry
(elementwise, reductions, shape, indexing, linear algebra, array combinators, control
flow, checkpoint buffers); `interpreter` replays a program on batched values and `vmap` is
the user's entry point.
"""

from . import (  # noqa: F401  (each fills the batching rules of its primitives)
    buffers,
    control_flow,
    elementwise,
    indexing,
    linalg,
    reductions,
    shape,
    soacs,
)
from .interpreter import batch_program, def_batch
from .vmap import VmappedFunction, register_batched_gradient, register_batched_runner, vmap

__all__ = ["VmappedFunction", "batch_program", "def_batch", "register_batched_gradient",
           "register_batched_runner", "vmap"]
