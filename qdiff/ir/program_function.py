"""`@qdiff.program`: a Python function traced on first call, per argument signature.

It needs only the IR and lives in it, so every layer above can build on it; `qdiff.api`
re-exports it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from . import pytree
from .core import Program
from .errors import QdiffError
from .tracer import Tracer, trace, value_type


def holds_tracer(args: tuple) -> bool:
    """Whether any leaf of ``args`` is traced (the call happens inside another trace)."""
    return any(isinstance(leaf, Tracer) for leaf in pytree.flatten(tuple(args))[0])


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

    def signature_source(self) -> Callable[..., Any] | None:
        """The Python function whose signature binds keyword arguments (None: none does)."""
        return self.fn

    def bind_arguments(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """``args`` and ``kwargs`` as positional arguments of the function, defaults filled
        in, so that a call by keyword traces the same program as a call by position.

        >>> import qdiff
        >>> scaled = qdiff.program(lambda x, scale=2.0: x * scale)
        >>> scaled.bind_arguments((1.0,), {"scale": 3.0}), float(scaled(1.0, scale=3.0))
        ((1.0, 3.0), 3.0)
        """
        if not kwargs:
            return args
        source = self.signature_source()
        try:
            signature = inspect.signature(source)
        except (ValueError, TypeError):
            raise QdiffError(f"{self.name} takes positional arguments only, got keyword(s) "
                             f"{', '.join(kwargs)}") from None
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise QdiffError(f"{self.name}: {error}") from None
        bound.apply_defaults()
        if bound.kwargs:
            raise QdiffError(f"{self.name}: keyword-only arguments ({', '.join(bound.kwargs)}) "
                             "are not supported; make them positional")
        return bound.args

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = self.bind_arguments(args, kwargs)
        if holds_tracer(args):
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
