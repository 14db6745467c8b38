"""One compiled function over some of a program's values: the unit `qdiff.jit` runs.

A `Kernel` generates a program's module (Numba by default), loads it from the cache, and
calls it on argument values, mapping errors raised in compiled code back to the
interpreter's exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir.core import Program
from .cache import load
from .codegen import Generated, generate
from .errors import CompiledCodeError
from .lowering import Options


class Kernel:
    """``program`` compiled by ``generator``; call it on a list of argument values.

    >>> import qdiff, qdiff.numpy as qnp
    >>> kernel = Kernel(qdiff.trace(lambda x: qnp.sin(x) * 2.0, 0.0), Options())
    >>> [float(v) for v in kernel([0.0])]
    [0.0]
    """

    def __init__(self, program: Program, options: Options,
                 generator: Callable[[Program, Options], Generated] = generate):
        generated = generator(program, options)
        self.program = program
        self.source = generated.source
        self.constants = generated.constants
        self.messages = generated.messages
        self.function = load(self.source).kernel
        self.scalar_outputs = [t.shape == () for t in program.out_types]
        self.out_dtypes = [t.np_dtype for t in program.out_types]

    def __call__(self, values: Sequence[Any]) -> list[Any]:
        """Run on argument values of the program's types (0-d arrays or scalars)."""
        arguments = [v[()] if isinstance(v, np.ndarray) and v.ndim == 0 else
                     np.ascontiguousarray(v) if isinstance(v, np.ndarray) else v
                     for v in values]
        try:
            results = self.function(*arguments, *self.constants)
        except CompiledCodeError as error:
            kind, message = self.messages[error.args[0]]
            raise kind(message) from None
        # Numba returns Python numbers for scalars: give them the program's dtype
        return [dtype.type(r) if scalar else r
                for r, scalar, dtype in zip(results, self.scalar_outputs, self.out_dtypes)]
