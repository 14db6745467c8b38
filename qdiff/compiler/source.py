"""The text of a generated function: lines at an indentation, fresh local names, and the
constant arrays it receives as arguments.

Generated code is plain Python that Numba compiles in nopython mode: rank-0 values are
scalars, every array is C-contiguous (so ``reshape`` is a free view), and literals carry
their dtype so that Numba never widens a float32 expression to float64.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

# dtypes whose Python literal already has the right Numba type (no constructor needed)
_NATIVE = {"float64", "int64", "bool", "complex128"}


def dtype_name(dtype: str | np.dtype) -> str:
    """The NumPy constructor naming ``dtype`` in generated code.

    >>> dtype_name("float32"), dtype_name("bool")
    ('np.float32', 'np.bool_')
    """
    name = np.dtype(dtype).name
    return "np.bool_" if name == "bool" else f"np.{name}"


def scalar_literal(value: object, dtype: str | np.dtype) -> str:
    """Source text of one scalar of ``dtype``, exact (``repr`` of a float round-trips).

    >>> scalar_literal(0.5, "float64"), scalar_literal(float("-inf"), "float32")
    ('0.5', 'np.float32(-np.inf)')
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        text = repr(bool(value))
    elif dtype.kind in "iu":
        text = repr(int(value))
    elif dtype.kind == "f":
        text = _float_text(float(value))
    else:
        z = complex(value)
        text = f"complex({_float_text(z.real)}, {_float_text(z.imag)})"
    return text if dtype.name in _NATIVE else f"{dtype_name(dtype)}({text})"


def _float_text(x: float) -> str:
    if math.isnan(x):
        return "np.nan"
    if math.isinf(x):
        return "np.inf" if x > 0 else "-np.inf"
    return repr(x)


def cast(expression: str, dtype: str | np.dtype) -> str:
    """``expression`` converted to ``dtype`` where Numba's arithmetic would widen it (Numba
    computes small integers and mixed operands in 64 bits)."""
    name = np.dtype(dtype).name
    return expression if name in _NATIVE else f"{dtype_name(name)}({expression})"


class Source:
    """Lines of one generated function, with fresh names and its constant arguments."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self.constants: list[np.ndarray] = []
        self._constant_names: dict[int, str] = {}
        self._keys: list[np.ndarray] = []
        self._frozen: dict[str, str] = {}
        self._counter = 0
        # (exception class, message) per error code that the function may raise
        self.messages: list[tuple[type[Exception], str]] = []
        # module-level lines the function needs (imports of compiled helpers other layers own)
        self.imports: dict[str, None] = {}
        # allocations moved before the outermost sequential loop being written (None: no
        # loop is open) and how many parallel loops are open (nothing leaves those)
        self._hoisted: list[str] | None = None
        self._parallel = 0

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """``header:`` and the lines written inside the ``with`` indented under it."""
        self.line(header + ":")
        self.depth += 1
        start = len(self.lines)
        try:
            yield
        finally:
            if len(self.lines) == start:
                self.line("pass")
            self.depth -= 1

    @contextmanager
    def loop(self, header: str, parallel: bool = False) -> Iterator[None]:
        """A loop's ``block``: arrays its iterations allocate and never hand on (`hoist`)
        are allocated once, before the outermost sequential loop open around them.

        >>> src = Source()
        >>> with src.loop("for i in range(9)"):
        ...     src.line("t = np.empty((4,), np.float64)")
        ...     src.hoist(src.lines[-1], "t = np.empty((4,), np.float64)")
        ...     src.line("t[0] = i")
        >>> print("\\n".join(src.lines))
            t = np.empty((4,), np.float64)
            for i in range(9):
                t[0] = i
        """
        outermost = self._hoisted is None and not parallel and not self._parallel
        if outermost:
            self._hoisted = []
        start, depth = len(self.lines), self.depth
        self._parallel += parallel
        try:
            with self.block(header):
                yield
        finally:
            self._parallel -= parallel
            if outermost:
                hoisted, self._hoisted = self._hoisted, None
                self.lines[start:start] = ["    " * depth + text for text in hoisted]

    def can_hoist(self) -> bool:
        """Whether a line written now is inside a sequential loop it could leave."""
        return self._hoisted is not None and not self._parallel

    def hoist(self, line: str, allocation: str, refill: str | None = None) -> None:
        """Move the allocation written as ``line`` (this very string) before the outermost
        loop: ``allocation`` goes there, and ``refill`` (a statement restoring the initial
        contents, or None) takes its place. A line no longer written (moved into a loop
        nest's body) stays."""
        for k in range(len(self.lines) - 1, -1, -1):
            if self.lines[k] is line:
                break
        else:
            return
        if refill is None:
            del self.lines[k]
        else:
            self.lines[k] = line[:len(line) - len(line.lstrip())] + refill
        assert self._hoisted is not None
        self._hoisted.append(allocation)

    def fresh(self, prefix: str = "v") -> str:
        self._counter += 1
        # the function's inputs are a0, a1, ... and its constants k0, k1, ...: a fresh name
        # never takes their form (it would shadow one)
        if prefix in ("a", "k"):
            prefix += prefix
        return f"{prefix}{self._counter}"

    def error(self, kind: type[Exception], message: str) -> str:
        """A statement raising ``kind(message)`` from compiled code (Numba raises only
        constant arguments: the host maps the code back to the message)."""
        self.messages.append((kind, message))
        return f"raise CompiledCodeError({len(self.messages) - 1})"

    def require(self, line: str) -> None:
        """Put ``line`` (an import of compiled helpers a rule calls) at the module's top."""
        self.imports[line] = None

    def frozen(self, array: np.ndarray) -> str:
        """The module-level name of a small read-only ``array`` written out in the module
        text (Numba freezes it into the machine code): static data such as index tables,
        which then cost the call nothing, unlike an argument."""
        array = np.ascontiguousarray(array)
        text = (f"np.array({array.ravel().tolist()!r}, np.{array.dtype.name})"
                f".reshape({array.shape!r})")
        name = self._frozen.get(text)
        if name is None:
            name = self._frozen[text] = f"_frozen{len(self._frozen)}"
            self.require(f"{name} = {text}")
        return name

    def constant(self, array: np.ndarray) -> str:
        """The argument name under which the compiled function receives ``array`` (arrays
        are arguments, not globals: Numba would freeze globals into the machine code)."""
        key = id(array)
        name = self._constant_names.get(key)
        if name is None:
            self._keys.append(array)  # alive while named: its id is the key
            name = f"const{len(self.constants)}"
            # a writable copy: Numba types read-only arrays apart, and loop carries that
            # start as a constant must unify with the arrays the loop body makes
            self.constants.append(np.array(array, copy=True, order="C"))
            self._constant_names[key] = name
        return name
