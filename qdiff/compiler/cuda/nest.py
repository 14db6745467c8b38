"""A fused group (`fusion.Group`) as one CUDA kernel.

The group's members become element expressions exactly as on the CPU (`groups._Nest`); the
kernel runs the nest's outer levels as threads (one per element of their product) and any
inner levels as loops inside each thread:

- stores: each thread writes its elements of the values read outside the group;
- a reduction of every element: a register per thread, folded over the block in shared
  memory (per-block partials on the device), then a one-block final pass;
- a reduction over trailing levels: a register opened inside the thread, which then runs
  those levels (the threads cover the levels before the first reduced one);
- any other partial reduction: ``cuda.atomic.add`` into the result for sums (and max/min of
  integers); for the rest (products, float max/min, complex) the nest runs in one thread.
"""

from __future__ import annotations

import math

from ...ir.core import Eqn, Var
from ..fusion import REDUCTIONS, Group
from ..groups import _Nest, fold, neutral
from ..lowering import Scope
from ..source import cast, scalar_literal
from .coalescing import fastest_level
from .kernels import KernelSource, blocks_for, device_array, has_atomic, threads_for, unflatten


class CudaNest(_Nest):
    """The loop nest of ``group`` written as a kernel and its launch."""

    row_contractions = False  # a thread computes its own element: no shared row

    def __init__(self, scope: Scope, group: Group):
        super().__init__(scope, group)
        self.thread_levels = len(self.shape)  # levels run as threads; the rest as loops
        self.thread_start: list[str] = []       # registers every thread opens
        self.full: list[tuple[str, str, object, Var]] = []  # (register, monoid, dtype, out)
        self.written: list[str] = []             # arrays the kernel writes
        self.allocations: dict[str, str] = {}     # result arrays made on the device

    def elementwise(self, eqn: Eqn) -> None:
        # a lambda's statements are kernel lines, not host statements (no transfers)
        with self.scope.src.capture():
            super().elementwise(eqn)

    def reduction(self, eqn: Eqn) -> None:
        operand, out = eqn.inputs[0], eqn.outputs[0]
        monoid = REDUCTIONS[eqn.primitive.name]
        dtype = out.type.np_dtype
        shape, axes = operand.type.shape, eqn.params["axes"]
        if len(axes) == len(shape):
            value = self.element(operand)
            register = self.scope.fresh("acc")
            self.thread_start.append(
                f"{register} = {scalar_literal(neutral(monoid, dtype), dtype)}")
            self.body.append(f"{register} = {cast(fold(monoid, register, value), dtype)}")
            self.full.append((register, monoid, dtype, out))
            return
        kept, first, in_register = self.partial_layout(shape, axes)
        if not in_register and has_atomic(monoid, dtype):
            target = self.scope.fresh("r")
            start = scalar_literal(neutral(monoid, dtype), dtype)
            self.allocations[target] = device_array(out.type.shape, dtype, start)
            # one axis takes a plain index: the CUDA compiler does not cast a 1-tuple to it
            index = kept[0] if len(kept) == 1 else f"({''.join(k + ', ' for k in kept)})"
            self.body.append(f"cuda.atomic.{monoid}({target}, {index}, {self.element(operand)})")
            self.scope.bind(out, target)
        else:
            super().reduction(eqn)
            self.thread_levels = min(self.thread_levels, first if in_register else 0)
            # the result array the CPU nest allocates on the host is made on the device
            target, _, result_shape, _, fill = self.results.pop()
            assert target == self.scope.read(out), target
            self.allocations[target] = device_array(result_shape, dtype, fill)
        self.written.append(self.scope.read(out))

    def _coalesce(self, body: list[str], start: int, end: int, thread: str) -> None:
        """Number the threads (``body[start:end]``, the lines binding the thread levels'
        indices) with the level whose accesses cost least varying fastest
        (`coalescing.fastest_level`): each thread computes the same element as before."""
        names, sizes = self.index[:self.thread_levels], self.shape[:self.thread_levels]
        fastest = fastest_level(body[end:], names)
        if fastest == len(names) - 1:
            return
        digits = [*(p for p in range(len(names)) if p != fastest), fastest]
        indent = body[start][:len(body[start]) - len(body[start].lstrip())]
        with self.scope.src.capture() as lines:
            unflatten(self.scope, thread, [names[p] for p in digits], [sizes[p] for p in digits])
        body[start:end] = [indent + line.strip() for line in lines]

    def write(self, stores: list[tuple[Var, str]]) -> None:
        scope, src = self.scope, self.scope.src
        assert isinstance(src, KernelSource)
        for line in self.before:
            scope.line(line)
        for target, call in self.allocations.items():
            src.allocate(target, call)
        for var, array in stores:
            src.allocate_empty(array, (self.group.size,), var.type.np_dtype)
            self.body.append(f"{array}[{self.flat}] = {self.elements[var]}")
            self.written.append(array)
        count = math.prod(self.shape[:self.thread_levels])
        threads = threads_for(count)
        blocks = blocks_for(count, threads)
        partials = [scope.fresh("p") for _ in self.full]
        with src.capture() as body:
            thread = scope.fresh("t")
            scope.line(f"{thread} = cuda.grid(1)")
            for line in self.thread_start:
                scope.line(line)
            with src.block(f"if {thread} < {count}"):
                start = len(body)
                unflatten(scope, thread, self.index[:self.thread_levels],
                          self.shape[:self.thread_levels])
                end = len(body)
                self._level(self.thread_levels)
            self._coalesce(body, start, end, thread)
            for (register, monoid, dtype, _), partial in zip(self.full, partials):
                result, lane = src.block_fold(register, monoid, dtype, threads)
                with src.block(f"if {lane} == 0"):
                    scope.line(f"{partial}[cuda.blockIdx.x] = {result}")
        name, params = src.kernel("nest", body)
        for (_, _, dtype, _), partial in zip(self.full, partials):
            src.allocate_empty(partial, (blocks,), dtype)
        src.launch(name, blocks, threads, params,
                   [w for w in (*self.written, *partials) if w in params])
        for (_, monoid, dtype, out), partial in zip(self.full, partials):
            scope.bind(out, src.final_fold(partial, blocks, monoid, dtype))
        self.bind_stores(stores)
