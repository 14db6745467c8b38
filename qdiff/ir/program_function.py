"""`@qdiff.program`: a Python function traced on first call, per argument signature.

It needs only the IR and lives in it, so every layer above can build on it; `qdiff.api`
re-exports it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from . import pytree
from .core import Program
from .tracer import Tracer, trace, value_type


class ProgramFunction:
    """A Python function and the programs traced from it, one per argument signature.

    Calling it traces (once per signature) and runs the program; ``.trace(*args)`` returns
    the Program itself for printing, saving or transforming.

    >>> import qdiff, qdiff.numpy as qnp
    >>> @qdiff.program
    ... def f(x):
    ...     return qnp.sum(x ** 2)
    >>> float(f(np.array([1.0, 2.0])))
    5.0
    >>> print(f.trace(np.zeros(2)).out_types[0].short())
    f64[]
    """

    def __init__(self, fn: Callable[..., Any], name: str | None = None):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.name = name or getattr(fn, "__name__", "program")
        self._cache: dict[Any, Program] = {}

    def trace(self, *example_args: Any) -> Program:
        """The program for arguments shaped like ``example_args``."""
        leaves, tree = pytree.flatten(tuple(example_args))
        key = (tree, tuple(value_type(leaf) for leaf in leaves))
        program = self._cache.get(key)
        if program is None:
            program = trace(self.fn, *example_args, name=self.name)
            self._cache[key] = program
        return program

    def __call__(self, *args: Any) -> Any:
        if any(isinstance(leaf, Tracer) for leaf in pytree.flatten(tuple(args))[0]):
            return self.fn(*args)  # inside another trace: inline the Python function
        return self.trace(*args)(*args)

    def __repr__(self) -> str:
        return f"<qdiff.program {self.name}>"


def program(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Decorator turning a Python function into a traced, callable qdiff program.

    >>> import qdiff, qdiff.numpy as qnp
    >>> square = qdiff.program(lambda x: x * x, name="square")
    >>> float(square(3.0))
    9.0
    """
    if fn is None:
        return lambda f: ProgramFunction(f, name)
    return ProgramFunction(fn, name)
