"""A fused group (`fusion.Group`) as one CUDA kernel.

The group's members become element expressions exactly as on the CPU (`groups._Nest`); the
kernel runs the nest's outer levels as threads (one per element of their product) and any
inner levels as loops inside each thread:

- stores: each thread writes its elements of the values read outside the group;
- a reduction of every element: a register per thread, folded over the block in shared
  memory (per-block partials on the device), then a one-block final pass;
- a reduction over trailing levels: a register opened inside the thread, which then runs
  those levels (the threads cover the levels before the first reduced one);
- a contraction Σ_j a[.., j] b[.., j] whose operand b the nest makes (GMM's
  Σ_j L[k, i, j] (x[n, j] - μ[k, j])) and which depends on outer levels only: its row
  b[.., :] is computed once per thread, before the loops over the inner levels, into a
  ``cuda.local.array`` (laid out lane by lane: its reads are coalesced), where the
  nest computed it again for each element of those levels, reading x[n, j] (a row per
  lane) at every step;
- a contraction operand read from memory with the innermost level's index on an axis
  before the summed one is read from a transposed copy, that axis last;
- any other partial reduction: ``cuda.atomic.add`` into the result for sums (and max/min of
  integers); for the rest (products, float max/min, complex) the nest runs in one thread.
  Where such an atomic sums over the outermost level and keeps only thread levels (GMM's
  and k-means' Σ_n over points into a small (K, d) result), a thread runs a chunk of the
  outermost level as a loop, summing in a register, and adds once at its end: the threads
  are chunks × the other thread levels, about `FILLING_THREADS` of them, and each address
  takes one atomic per chunk, not one per point.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ...classical.linalg import parse_spec
from ...ir.core import Eqn, Var
from ..fusion import REDUCTIONS, Group, merge_runs
from ..groups import _Nest, fold, neutral
from ..lowering import Scope
from ..source import cast, scalar_literal
from .coalescing import fastest_level
from .kernels import (
    KernelSource,
    blocks_for,
    device_array,
    has_atomic,
    numba_type,
    threads_for,
    unflatten,
)
from .moves import transposed
from .rows import LOCAL_LIMIT

_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")

# threads that fill a GPU (an H100 runs 132 SMs × 2048 at once): a nest whose atomic sums
# over its outermost level is cut into chunks of that level to launch about this many
FILLING_THREADS = 1 << 18


@dataclass
class _Atomic:
    """An atomic fold of a partial reduction, as the nest's body writes it."""

    line: str        # the body's statement
    register: str    # the register that takes its terms where a thread loops over a chunk
    target: str
    index: str
    value: str
    monoid: str
    dtype: object
    kept: set[int]   # the nest levels its result element's index reads


@dataclass
class _LocalRow:
    """A contraction operand's row kept in a thread's local array (`CudaNest._local_row`)."""

    name: str
    letter: str        # the summed index letter it runs along
    start: int         # the first nest level it does not depend on
    declaration: str
    fill: list[str]    # the loop filling it
    # its reads: (the text, and the statements and expression making it in place instead)
    reads: list[tuple[str, list[str], str]] = field(default_factory=list)


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
        self.atomics: list[_Atomic] = []
        self.summed: set[str] = set()  # index letters the contraction being written sums
        # rows of contraction operands computed once per thread, by (operand, the level of
        # the summed letter)
        self.local_rows: dict[tuple[Var, int], _LocalRow] = {}
        # contraction operands with the innermost level's axis moved last: (array, axes) -> copy
        self.copies: dict[tuple[str, tuple[int, ...]], str] = {}

    def elementwise(self, eqn: Eqn) -> None:
        # a lambda's statements are kernel lines, not host statements (no transfers)
        with self.scope.src.capture():
            super().elementwise(eqn)

    def contraction(self, eqn: Eqn) -> None:
        a_term, b_term, out_term = parse_spec(eqn.params["spec"])
        self.summed = set(a_term + b_term) - set(out_term)
        try:
            super().contraction(eqn)
        finally:
            self.summed = set()

    def operand_at(self, atom: Var, array: str | None, term: str, position: dict[str, str],
                   lines: list[str], indent: str) -> str:
        if array is None:
            row = self._local_row(atom, term, position)
            if row is not None:
                # the element made in place too, for a nest whose threads turn out to run every
                # level (`write`: a row would serve one element, filled and read again)
                in_place: list[str] = []
                value = super().operand_at(atom, None, term, position, in_place, "")
                row.reads.append((f"{row.name}[{position[row.letter]}]", in_place, value))
                return row.reads[-1][0]
        else:
            array, term = self._innermost_last(atom, array, term, position)
        return super().operand_at(atom, array, term, position, lines, indent)

    def _local_row(self, atom: Var, term: str, position: dict[str, str]) -> _LocalRow | None:
        """The row of a contraction operand the nest makes, computed once per thread (a
        ``cuda.local.array`` filled before the levels it does not depend on), or None where
        it depends on the innermost level, sums over more than one letter, or is longer than
        a thread's local arrays may be (`rows.LOCAL_LIMIT`)."""
        runs = merge_runs(self.shape, atom.type.shape)
        summed = [(axis, c) for axis, c in enumerate(term) if c in self.summed]
        if runs is None or len(summed) != 1:
            return None
        axis, letter = summed[0]
        a, b = runs[axis]
        size = atom.type.shape[axis]
        depends = [level for other, (lo, hi) in enumerate(runs) if other != axis
                   for level in range(lo, hi)]
        start = max(depends, default=-1) + 1  # the first level it does not depend on
        if b != a + 1 or start >= len(self.shape) or size > LOCAL_LIMIT:
            return None
        row = self.local_rows.get((atom, a))
        if row is None:
            name, j = self.scope.fresh("row"), self.scope.fresh("j")
            fill = [f"for {j} in range({size}):"]
            value = super().operand_at(atom, None, term, {**position, letter: j}, fill, "    ")
            fill.append(f"    {name}[{j}] = {value}")
            later = set(self.index[start:]) - {self.index[a]}
            if any(later & set(_NAME.findall(line)) for line in fill):
                return None  # it reads an inner level after all (a broadcast operand)
            row = self.local_rows[(atom, a)] = _LocalRow(
                name, letter, start,
                f"{name} = cuda.local.array({size}, {numba_type(atom.type.np_dtype)})", fill)
        return row

    def _place_local_rows(self) -> None:
        """Fill each local row before the first level a thread loops over that it does not
        depend on; where there is none (the threads run those levels), make its elements in
        place instead, as the nest did."""
        for row in reversed(self.local_rows.values()):
            level = max(row.start, self.thread_levels)
            if level < len(self.shape):
                self.thread_start.append(row.declaration)
                self.level_open.setdefault(level, [])[0:0] = row.fill
                continue
            for read, lines, value in row.reads:
                at = next(k for k, line in enumerate(self.body) if read in line)
                indent = self.body[at][:len(self.body[at]) - len(self.body[at].lstrip())]
                self.body[at] = self.body[at].replace(read, value)
                self.body[at:at] = [indent + line for line in lines]

    def _innermost_last(self, atom: Var, array: str, term: str, position: dict[str, str]
                        ) -> tuple[str, str]:
        """A contraction operand read with the nest's innermost index (the threads' fastest
        by default) on an axis before a summed one (GMM's L[k, i, j], summed over j, i
        from lane to lane: 32 rows a warp, at every step): read from a copy with that axis
        last instead (a transpose kernel, once per nest; lanes then read consecutive
        elements), unless the operand is as large as the nest."""
        innermost = [c for c in term if position.get(c) == self.index[-1]]
        if len(innermost) != 1 or term[-1] not in self.summed \
                or math.prod(atom.type.shape) >= math.prod(self.shape):
            return array, term
        letter = innermost[0]
        order = [*(axis for axis, c in enumerate(term) if c != letter), term.index(letter)]
        key = (array, tuple(order))
        copy = self.copies.get(key)
        if copy is None:
            copy = self.copies[key] = transposed(self.scope, array, atom.type.shape,
                                                 atom.type.np_dtype, order)
        return copy, "".join(term[axis] for axis in order)

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
            value = self.element(operand)
            runs = merge_runs(self.shape, shape)
            atomic = _Atomic(f"cuda.atomic.{monoid}({target}, {index}, {value})",
                             self.scope.fresh("acc"), target, index, value, monoid, dtype,
                             {j for axis in range(len(shape)) if axis not in axes
                              for j in range(*runs[axis])})
            self.atomics.append(atomic)
            self.body.append(atomic.line)
            self.scope.bind(out, target)
        else:
            super().reduction(eqn)
            self.thread_levels = min(self.thread_levels, first if in_register else 0)
            # the result array the CPU nest allocates on the host is made on the device
            target, _, result_shape, _, fill = self.results.pop()
            assert target == self.scope.read(out), target
            self.allocations[target] = device_array(result_shape, dtype, fill)
        self.written.append(self.scope.read(out))

    def _chunked(self) -> list[_Atomic]:
        """The atomics a thread sums in a register over a chunk of the outermost level: those
        reducing over it whose result index reads thread levels only (none where chunks of
        one point would do: a small nest)."""
        levels = self.thread_levels
        summed = [a for a in self.atomics if 0 not in a.kept and a.kept <= set(range(levels))]
        if levels < 2 or not summed or self._chunk_length() < 2:
            return []
        return summed

    def _chunk_length(self) -> int:
        """Points of the outermost level per thread: enough chunks to launch about
        `FILLING_THREADS` threads (at most one per point)."""
        rest = math.prod(self.shape[1:self.thread_levels])
        chunks = min(self.shape[0], max(1, -(-FILLING_THREADS // max(rest, 1))))
        return -(-self.shape[0] // max(chunks, 1))

    def _coalesce(self, body: list[str], start: int, end: int, thread: str,
                  names: list[str], sizes: list[int], fixed: int) -> None:
        """Number the threads (``body[start:end]``, the lines binding the thread levels'
        indices, the first ``fixed`` of ``names`` staying slowest) with the level whose
        accesses cost least varying fastest (`coalescing.fastest_level`): each thread
        computes the same elements as before."""
        fastest = fixed + fastest_level(body[end:], names[fixed:])
        if fastest == len(names) - 1:
            return
        digits = [*(p for p in range(len(names)) if p != fastest), fastest]
        indent = body[start][:len(body[start]) - len(body[start].lstrip())]
        with self.scope.src.capture() as lines:
            unflatten(self.scope, thread, [names[p] for p in digits], [sizes[p] for p in digits])
        body[start:end] = [indent + line.strip() for line in lines]

    def _loop_over_chunk(self, chunk: str, length: int, chunked: list[_Atomic]) -> None:
        """Kernel lines running the nest's elements of chunk ``chunk`` of the outermost
        level, the ``chunked`` atomics summing in registers, each added once at the end."""
        scope = self.scope
        for atomic in chunked:
            scope.line(f"{atomic.register} = "
                       f"{scalar_literal(neutral(atomic.monoid, atomic.dtype), atomic.dtype)}")
        first = f"{chunk} * {length}"
        with scope.src.block(f"for {self.index[0]} in range({first}, "
                             f"min({first} + {length}, {self.shape[0]}))"):
            self._level(self.thread_levels)
        for atomic in chunked:
            scope.line(f"cuda.atomic.{atomic.monoid}({atomic.target}, {atomic.index}, "
                       f"{atomic.register})")

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
        self._place_local_rows()
        names, sizes = self.index[:self.thread_levels], list(self.shape[:self.thread_levels])
        chunked = self._chunked()
        if chunked:  # the first thread level numbers chunks of the outermost level
            length = self._chunk_length()
            names[0], sizes[0] = scope.fresh("c"), -(-self.shape[0] // length)
            for atomic in chunked:
                self.body[self.body.index(atomic.line)] = f"{atomic.register} = " + cast(
                    fold(atomic.monoid, atomic.register, atomic.value), atomic.dtype)
        count = math.prod(sizes)
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
                unflatten(scope, thread, names, sizes)
                end = len(body)
                if chunked:
                    self._loop_over_chunk(names[0], length, chunked)
                else:
                    self._level(self.thread_levels)
            self._coalesce(body, start, end, thread, names, sizes, 1 if chunked else 0)
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
