"""CUDA kernels as text, written into the same `Source` as the host function.

A kernel body is written with the host's tools (``scope.line``, ``scope.inline``, the loop
nest's levels) while `KernelSource.capture` diverts the lines; its parameters are then the
names it reads but never assigns. Every other line is a host statement, and goes through
the host function's `Residency`, which adds the transfers it needs: kernels are launched on
device arrays, host statements read host arrays. Sizes are static, so thread counts, block
counts and the steps of block-level tree reductions are fixed in the text.
"""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..groups import fold, neutral
from ..lowering import shape_text
from ..source import Source, cast, dtype_name, scalar_literal
from .residency import CarryPlan, Residency, device_name
from .statements import parse_statement

# threads per block (a power of two: block reductions halve it)
BLOCK = 128
# monoid -> the dtype kinds for which ``cuda.atomic.<monoid>`` folds exactly as NumPy does
# (float max/min would differ on NaN; products and complex numbers have no atomics)
_ATOMIC_KINDS = {"add": "iuf", "max": "iu", "min": "iu"}


def has_atomic(monoid: str, dtype: str | np.dtype) -> bool:
    """Whether ``cuda.atomic.<monoid>`` folds ``dtype`` values as NumPy does (32- and 64-bit
    numbers only).

    >>> has_atomic("add", "float64"), has_atomic("max", "float64"), has_atomic("add", "int8")
    (True, False, False)
    """
    dtype = np.dtype(dtype)
    return dtype.kind in _ATOMIC_KINDS.get(monoid, "") and dtype.itemsize in (4, 8)
# names a kernel reads from the generated module, not from the host function
MODULE_NAMES = {"np", "numba", "cuda", "math", "libdevice", "rtc"} | set(dir(builtins))


def threads_for(count: int, limit: int = BLOCK) -> int:
    """Threads per block for ``count`` work items: a power of two, at most ``limit``.

    >>> threads_for(1), threads_for(5), threads_for(1000), threads_for(5000, 1024)
    (1, 8, 128, 1024)
    """
    return min(limit, 1 << max(0, count - 1).bit_length())


def blocks_for(count: int, threads: int) -> int:
    """Blocks covering ``count`` work items (at least one)."""
    return max(1, math.ceil(count / threads))


def unflatten(scope: Any, flat: str, names: Sequence[str], sizes: Sequence[int]) -> None:
    """Kernel lines binding ``names`` to the row-major digits of the index ``flat`` over
    ``sizes`` (a thread's element of a nest or of a result)."""
    stride = 1
    for position in reversed(range(len(names))):
        index = f"{flat} // {stride}" if stride > 1 else flat
        scope.line(f"{names[position]} = {index}" if position == 0 else
                   f"{names[position]} = ({index}) % {sizes[position]}")
        stride *= sizes[position]


def numba_type(dtype: str | np.dtype) -> str:
    """The Numba type naming ``dtype`` in kernel text (shared-memory arrays need it).

    >>> numba_type("float32"), numba_type("bool")
    ('numba.float32', 'numba.boolean')
    """
    name = np.dtype(dtype).name
    return "numba.boolean" if name == "bool" else f"numba.{name}"


def free_names(lines: Sequence[str]) -> list[str]:
    """Names the statements read and never assign (in order of first reading), leaving out
    the generated module's globals: a kernel's parameters.

    >>> free_names(["    t = cuda.grid(1)", "    if t < 4:", "        y[t] = np.sin(x[t]) * s"])
    ['y', 'x', 's']
    """
    tree = ast.parse("def _():\n" + "\n".join(lines))
    names = sorted((n for n in ast.walk(tree) if isinstance(n, ast.Name)),
                   key=lambda n: (n.lineno, n.col_offset))
    stored = {n.id for n in names if isinstance(n.ctx, ast.Store)}
    found: dict[str, None] = {}
    for n in names:
        if n.id not in stored and n.id not in MODULE_NAMES:
            found[n.id] = None
    return list(found)


def named(scope: Any, args: list[str]) -> list[str]:
    """``args`` with each expression (a row ``x[i]`` of a host loop, a literal) bound to a
    host name first: kernels take names as parameters."""
    result = []
    for arg in args:
        if not arg.isidentifier():
            name = scope.fresh()
            scope.line(f"{name} = {arg}")
            arg = name
        result.append(arg)
    return result


def device_array(shape: Sequence[int], dtype: object, fill: str | None = None) -> str:
    """The runtime call making a new device array of ``shape`` and ``dtype``, every element
    ``fill`` (a scalar's source text) or uninitialized (None).

    >>> device_array((2, 3), np.float64, "0.0")
    'rtc.full((2, 3,), 0.0, np.float64)'
    """
    if fill is None:
        return f"rtc.empty({shape_text(shape)}, {dtype_name(dtype)})"
    return f"rtc.full({shape_text(shape)}, {fill}, {dtype_name(dtype)})"


class KernelSource(Source):
    """The host function's lines, with the kernels written alongside it."""

    def __init__(self, plan: CarryPlan | None = None) -> None:
        super().__init__()
        self.kernels: list[str] = []
        self._kernel_at: dict[str, int] = {}  # kernel name -> its place in `kernels`
        self._folds: dict[tuple[str, str, int], str] = {}
        self.kernel_depth = 0  # > 0 while kernel code is written (bodies, nests; they nest)
        self.residency = Residency(self.lines, plan)
        self._captured = 0     # > 0 while lines go to a kernel body

    @contextmanager
    def capture(self) -> Iterator[list[str]]:
        """Divert the lines written inside the ``with`` to a kernel body (the list yielded)."""
        saved, depth = self.lines, self.depth
        self.lines, self.depth = [], 1
        self.kernel_depth += 1
        self._captured += 1
        try:
            yield self.lines
        finally:
            self.lines, self.depth = saved, depth
            self.kernel_depth -= 1
            self._captured -= 1

    def line(self, text: str) -> None:
        """A kernel line as it is; a host statement with the transfers it needs first."""
        if self._captured:
            super().line(text)
            return
        for line in self.residency.statement(text):
            super().line(line)

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """A block; on the host, it ends in the residency state it began with."""
        if self._captured:
            with super().block(header):
                yield
            return
        self.line(header + ":")
        opened = self.lines[-1]
        self.depth += 1
        self.residency.enter(header, parse_statement(header + ":").assigns)
        try:
            yield
        finally:
            for line in self.residency.leave():
                super().line(line)
            if self.lines[-1] is opened:  # transfers go before the header, never after
                super().line("pass")
            self.depth -= 1

    def allocate(self, name: str, call: str) -> None:
        """Host statement making ``name`` a new device array, ``call`` (``rtc.empty(...)``
        or ``rtc.full(...)``): it starts on the device and stays there."""
        super().line(f"{device_name(name)} = {call}")
        self.residency.allocated(name, self.residency.rank_of(ast.parse(call).body[0].value))

    def allocate_empty(self, name: str, shape: Sequence[int], dtype: object) -> None:
        """`allocate` ``name`` as a new uninitialized device array of ``shape`` and ``dtype``."""
        self.allocate(name, device_array(shape, dtype))

    def device_view(self, base: str, shape: str) -> str:
        """A device view of ``base`` (put on the device first), reshaped to ``shape``:
        kernels writing it write ``base``."""
        moves, (device,) = self.residency.on_device([base])
        for move in moves:
            super().line(move)
        view = self.fresh("m")
        super().line(f"{device_name(view)} = rtc.view({device}, {shape})")
        self.residency.view(view, base, len(ast.parse(shape).body[0].value.elts))
        return view

    def device_copy(self, base: str) -> str:
        """A new device array holding ``base``'s values, for a kernel to write: copied on the
        device, ``base`` going over first (once, before the loops that leave it be), not
        copied on the host and sent over at each step."""
        moves, (device,) = self.residency.on_device([base])
        for move in moves:
            super().line(move)
        copy = self.fresh("w")
        super().line(f"{device_name(copy)} = rtc.copy({device})")
        self.residency.allocated(copy, self.residency.ranks.get(base))
        return copy

    def constant(self, array: np.ndarray) -> str:
        name = super().constant(array)
        self.residency.ranks[name] = np.ndim(array)
        self.residency.constants.add(name)
        return name

    def kernel(self, prefix: str, body: list[str], name: str | None = None
               ) -> tuple[str, list[str]]:
        """Add a kernel with ``body``, named ``name`` (a fresh name with ``prefix`` where
        None); return its name and its parameters (host names)."""
        name = name or self.fresh(prefix)
        params = free_names(body)
        # cache=True: a new process loads the kernel's machine code (the module is a file)
        header = f"@cuda.jit(cache=True)\ndef {name}({', '.join(params)}):\n"
        self._kernel_at[name] = len(self.kernels)
        self.kernels.append(header + "\n".join(body))
        return name, params

    @property
    def names_taken(self) -> int:
        """How many fresh names the text has taken so far."""
        return self._counter

    @property
    def capturing(self) -> bool:
        """Whether lines go to a kernel body now (not to the host function)."""
        return self._captured > 0

    def allocate_scalar(self, name: str, dtype: object) -> None:
        """`allocate` ``name``, a scalar, as its device variable: a new uninitialized array of
        one element, which kernels write and read."""
        super().line(f"{device_name(name)} = {device_array((1,), dtype)}")
        self.residency.allocated(name)
        self.residency.scalars[name] = np.dtype(dtype)

    def _read_elements(self, name: str, params: Sequence[str]) -> None:
        """Kernel ``name`` takes each scalar of ``params`` as its device variable (an array of
        one element): its body reads the element first (each kernel has one launch)."""
        at = self._kernel_at[name]
        decorator, _, body = self.kernels[at].split("\n", 2)
        renamed = {p: device_name(p) for p in params}
        signature = ", ".join(renamed.get(n, n) for n in free_names(body.splitlines()))
        reads = "".join(f"    {p} = {renamed[p]}[0]\n" for p in params)
        self.kernels[at] = f"{decorator}\ndef {name}({signature}):\n{reads}{body}"

    def launch(self, name: str, blocks: int, threads: int, params: list[str],
               written: Sequence[str]) -> None:
        """The host statement launching kernel ``name`` on the device arrays of ``params``
        (uploading those only on the host); it writes the arrays ``written``."""
        moves, device = self.residency.on_device(params)
        for move in moves:
            super().line(move)
        boxed = [p for p, d in zip(params, device) if p in self.residency.scalars
                 and p not in written and d == device_name(p)]
        if boxed:
            self._read_elements(name, boxed)
        super().line(f"rtc.launch({name}, {blocks}, {threads}, "
                     f"({''.join(d + ', ' for d in device)}))")
        for array in written:
            self.residency.written(array)

    def block_fold(self, register: str, monoid: str, dtype: np.dtype, threads: int
                   ) -> tuple[str, str]:
        """Statements folding ``register`` over the threads of a block (every thread runs
        them); return the expression of the block's result, valid in its thread 0, and the
        name of the thread's lane."""
        shared, lane = self.fresh("sh"), self.fresh("tx")
        self.line(f"{shared} = cuda.shared.array({threads}, {numba_type(dtype)})")
        self.line(f"{lane} = cuda.threadIdx.x")
        self.line(f"{shared}[{lane}] = {register}")
        self.line("cuda.syncthreads()")
        width = threads // 2
        while width:
            with self.block(f"if {lane} < {width}"):
                combined = fold(monoid, f"{shared}[{lane}]", f"{shared}[{lane} + {width}]")
                self.line(f"{shared}[{lane}] = {cast(combined, dtype)}")
            self.line("cuda.syncthreads()")
            width //= 2
        return f"{shared}[0]", lane

    def final_fold(self, partials: str, count: int, monoid: str, dtype: np.dtype) -> str:
        """Host statements folding the ``count`` per-block ``partials`` on the device (one
        block, the second level of a reduction); return the name of the result, a scalar
        on the device (the host takes it only where it reads it). One block's partial is
        the result itself."""
        if count == 1:
            self.residency.ranks.pop(partials, None)
            self.residency.scalars[partials] = np.dtype(dtype)
            return partials
        threads = threads_for(count)
        key = (monoid, np.dtype(dtype).name, threads)
        name = self._folds.get(key)
        if name is None:
            with self.capture() as body:
                acc, j = self.fresh("acc"), self.fresh("j")
                self.line(f"{acc} = {scalar_literal(neutral(monoid, np.dtype(dtype)), dtype)}")
                self.line(f"{j} = cuda.threadIdx.x")
                with self.block(f"while {j} < partials.shape[0]"):
                    self.line(f"{acc} = {cast(fold(monoid, acc, f'partials[{j}]'), dtype)}")
                    self.line(f"{j} += {threads}")
                result, lane = self.block_fold(acc, monoid, np.dtype(dtype), threads)
                with self.block(f"if {lane} == 0"):
                    self.line(f"out[0] = {result}")
            name, _ = self.kernel("fold", body)
            self._folds[key] = name
        out = self.fresh("acc")
        super().line(f"{device_name(out)} = rtc.fold({name}, {threads}, "
                     f"{device_name(partials)})")
        self.residency.allocated(out)
        self.residency.scalars[out] = np.dtype(dtype)
        return out
