"""The combinators as kernels (CUDA target); each falls back to its CPU rule, a host loop
whose body's loop nests are kernels, where its lambda is not scalar code (`runs_in_kernel`).

- ``map``: one thread per row, the lambda inlined.
- ``reduce`` with a known monoid (+, *, max, min) on scalars: the two-level reduction of a
  loop nest (the neutral argument folded in on the host); ``scan`` with one: a blocked scan
  (`_blocked_scan`); with another lambda, one thread runs the fold in order (the lambda need
  not be associative to agree with the interpreter's order).
- ``hist``: one thread per value, ``cuda.atomic.add`` (and max/min of integers) into the
  destination; other operators run in one thread, in order.
- ``scatter``: one thread per value; repeated indices keep the last write, as on the CPU, by
  two kernels: ``cuda.atomic.max`` of the writer's position per index, then the writes of the
  positions that won.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...classical.reductions import reduce_max_p, reduce_min_p, reduce_prod_p, reduce_sum_p
from ...classical.soacs import hist_p, map_p, op_kind, reduce_p, scan_p, scatter_p
from ...ir.core import Eqn, Var
from ...ir.types import Tensor
from ..fusion import Group
from ..groups import fold, neutral
from ..lowering import RULES, Scope, shape_text
from ..source import cast, scalar_literal
from .kernels import KernelSource, blocks_for, has_atomic, named, numba_type, threads_for
from .rows import in_thread, lower_in_thread
from .scope import cuda_rule, runs_in_kernel

_REDUCTION = {"add": reduce_sum_p, "mul": reduce_prod_p, "max": reduce_max_p,
              "min": reduce_min_p}


def _kernel_source(scope: Scope) -> KernelSource:
    assert isinstance(scope.src, KernelSource)
    return scope.src


def _writable_on_device(scope: Scope, atom: object) -> str:
    """``atom``'s array for a kernel to write: itself where this equation may overwrite it,
    else a copy made on the device (`KernelSource.device_copy`)."""
    if scope.can_overwrite(atom):
        return scope.read(atom)
    (name,) = named(scope, [scope.read(atom)])
    return _kernel_source(scope).device_copy(name)


def _per_thread(scope: Scope, prefix: str, count: int, write_body: Callable[[str], None],
                written: list[str]) -> None:
    """A kernel running ``write_body(index)`` in one thread per index below ``count``, and
    its launch; ``written`` arrays come back."""
    src = _kernel_source(scope)
    threads = threads_for(count)
    with src.capture() as body:
        index = scope.fresh("t")
        scope.line(f"{index} = cuda.grid(1)")
        with src.block(f"if {index} < {count}"):
            write_body(index)
    name, params = src.kernel(prefix, body)
    src.launch(name, blocks_for(count, threads), threads, params, written)


@cuda_rule(map_p)
def _map(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    body, num_consts = eqn.params["body"], eqn.params["num_consts"]
    if not runs_in_kernel(body):
        return _map_of_rows(scope, eqn, args) or RULES[map_p](scope, eqn, args)
    n = eqn.inputs[num_consts].type.shape[0]
    outs = [_device_array(scope, var.type.shape or (1,), var.type.np_dtype)
            for var in eqn.outputs]

    def row(i: str) -> None:
        rows = [f"{x}[{i}]" for x in args[num_consts:]]
        results = scope.inline(body, [*args[:num_consts], *rows])
        for out, result in zip(outs, results):
            scope.line(f"{out}[{i}] = {result}")

    _per_thread(scope, "map", n, row, outs)
    return outs


def _map_of_rows(scope: Scope, eqn: Eqn, args: list[str]) -> list[str] | None:
    """A ``map`` whose lambda holds arrays, as one kernel with a thread per row (`rows`);
    None where the lambda cannot run in a thread, or its results are not scalars or
    vectors."""
    body, num_consts = eqn.params["body"], eqn.params["num_consts"]
    if any(var.type.ndim > 2 for var in eqn.outputs):
        return None
    src = _kernel_source(scope)
    n = eqn.inputs[num_consts].type.shape[0]
    outs = [scope.fresh("y") for _ in eqn.outputs]
    with src.capture() as lines:
        t = scope.fresh("t")
        scope.line(f"{t} = cuda.grid(1)")
        with src.block(f"if {t} < {n}"):
            rows = [f"{x}[{t}]" for x in args[num_consts:]]
            results = lower_in_thread(scope, body, [*args[:num_consts], *rows])
            for out, result, var in zip(outs, results or [], eqn.outputs):
                if var.type.ndim == 1:
                    scope.line(f"{out}[{t}] = {result}")
                    continue
                j = scope.fresh("j")
                with src.block(f"for {j} in range({var.type.shape[1]})"):
                    scope.line(f"{out}[{t}, {j}] = {result}[{j}]")
    kernel_lines = in_thread(lines) if results is not None else None
    if kernel_lines is None:
        return None
    for out, var in zip(outs, eqn.outputs):
        src.allocate_empty(out, var.type.shape, var.type.np_dtype)
    name, params = src.kernel("rows", kernel_lines)
    threads = threads_for(n)
    src.launch(name, blocks_for(n, threads), threads, params, outs)
    return outs


def _device_array(scope: Scope, shape: tuple, dtype: object, prefix: str = "y") -> str:
    """A new array made on the device (kernels write it; it comes back where the host
    reads it)."""
    name = scope.fresh(prefix)
    _kernel_source(scope).allocate_empty(name, shape, dtype)
    return name


def _scalar_rows(atoms: tuple) -> bool:
    return all(isinstance(a.type, Tensor) and a.type.ndim == 1 for a in atoms)


def _accumulate(scope: Scope, eqn: Eqn, args: list[str], stacked: bool) -> list[str]:
    op, num_consts = eqn.params["op"], eqn.params["num_consts"]
    k = (len(eqn.inputs) - num_consts) // 2
    xs = eqn.inputs[num_consts + k:]
    monoid = op_kind(op, num_consts)
    dtype = eqn.outputs[0].type.np_dtype
    parallel = monoid is not None and k == 1 and _scalar_rows(xs) and (
        dtype.kind in "iuf" or (dtype.kind == "c" and monoid in ("add", "mul")))
    if stacked and parallel:
        return [_blocked_scan(scope, monoid, args[num_consts], args[-1], xs[0].type)]
    if parallel:
        # the reduction of a loop nest, then the neutral argument folded in
        total = Var(eqn.outputs[0].type)
        reduction = Eqn(_REDUCTION[monoid], (xs[0],), (total,), {"axes": (0,)})
        scope.lower_group(Group.start(reduction, "reduction"))
        out = scope.fresh("acc")
        scope.line(f"{out} = {cast(fold(monoid, args[num_consts], scope.read(total)), dtype)}")
        return [out]
    if not (runs_in_kernel(op) and _scalar_rows(xs)):
        return RULES[eqn.primitive](scope, eqn, args)
    # one thread folds in order; results leave through one-element (or stacked) arrays
    n = xs[0].type.shape[0]
    cells = [_device_array(scope, var.type.shape or (1,), var.type.np_dtype)
             for var in eqn.outputs]

    def sequence(_: str) -> None:
        acc = [scope.fresh("acc") for _ in range(k)]
        for name, start in zip(acc, args[num_consts:num_consts + k]):
            scope.line(f"{name} = {start}")
        i = scope.fresh("i")
        with scope.src.block(f"for {i} in range({n})"):
            results = scope.inline(op, [*args[:num_consts], *acc,
                                        *(f"{x}[{i}]" for x in args[num_consts + k:])])
            for name, result, cell in zip(acc, results, cells):
                scope.line(f"{name} = {result}")
                if stacked:
                    scope.line(f"{cell}[{i}] = {name}")
        if not stacked:
            for cell, name in zip(cells, acc):
                scope.line(f"{cell}[0] = {name}")

    _per_thread(scope, "fold", 1, sequence, cells)
    if stacked:
        return cells
    outs = [scope.fresh("acc") for _ in cells]
    for out, cell in zip(outs, cells):
        scope.line(f"{out} = {cell}[0]")
    return outs


def _blocked_scan(scope: Scope, monoid: str, start: str, xs: str, xs_type: Tensor) -> str:
    """An inclusive scan of the 1-d ``xs`` with ``monoid``, starting from ``start``, in three
    kernels: each block scans its elements in shared memory (Hillis–Steele) and leaves its
    total; one thread turns the totals into each block's offset (``start`` folded in); every
    element takes its block's offset."""
    src = _kernel_source(scope)
    n, dtype = xs_type.shape[0], xs_type.np_dtype
    threads = threads_for(n)
    blocks = blocks_for(n, threads)
    ys, totals, offsets = (_device_array(scope, (count,), dtype, prefix) for prefix, count in
                           (("y", n), ("p", blocks), ("p", blocks)))
    identity = scalar_literal(neutral(monoid, dtype), dtype)
    with src.capture() as body:
        t, lane, shared, before = (scope.fresh(p) for p in ("t", "tx", "sh", "w"))
        scope.line(f"{t} = cuda.grid(1)")
        scope.line(f"{lane} = cuda.threadIdx.x")
        scope.line(f"{shared} = cuda.shared.array({threads}, {numba_type(dtype)})")
        scope.line(f"{shared}[{lane}] = {xs}[{t}] if {t} < {n} else {identity}")
        scope.line("cuda.syncthreads()")
        width = 1
        while width < threads:
            scope.line(f"{before} = {shared}[{lane} - {width}] if {lane} >= {width} else "
                       f"{identity}")
            scope.line("cuda.syncthreads()")
            combined = fold(monoid, before, f"{shared}[{lane}]")
            scope.line(f"{shared}[{lane}] = {cast(combined, dtype)}")
            scope.line("cuda.syncthreads()")
            width *= 2
        with src.block(f"if {t} < {n}"):
            scope.line(f"{ys}[{t}] = {shared}[{lane}]")
        with src.block(f"if {lane} == {threads - 1}"):
            scope.line(f"{totals}[cuda.blockIdx.x] = {shared}[{lane}]")
    name, params = src.kernel("scan", body)
    src.launch(name, blocks, threads, params, [ys, totals])
    with src.capture() as body:
        acc, b = scope.fresh("acc"), scope.fresh("b")
        scope.line(f"{acc} = {start}")
        with src.block(f"for {b} in range({blocks})"):
            scope.line(f"{offsets}[{b}] = {acc}")
            scope.line(f"{acc} = {cast(fold(monoid, acc, f'{totals}[{b}]'), dtype)}")
    name, params = src.kernel("offsets", body)
    src.launch(name, 1, 1, params, [offsets])

    def shift(t: str) -> None:
        scope.line(f"{ys}[{t}] = "
                   f"{cast(fold(monoid, f'{offsets}[cuda.blockIdx.x]', f'{ys}[{t}]'), dtype)}")

    _per_thread(scope, "shift", n, shift, [ys])
    return ys


@cuda_rule(reduce_p)
def _reduce(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    return _accumulate(scope, eqn, args, stacked=False)


@cuda_rule(scan_p)
def _scan(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    return _accumulate(scope, eqn, args, stacked=True)


def _rows(scope: Scope, name: str, shape: tuple) -> str:
    """``name`` viewed on the device as (rows, elements per row)."""
    return _kernel_source(scope).device_view(
        name, shape_text((shape[0], math.prod(shape[1:]))))


@cuda_rule(hist_p)
def _hist(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    op, num_consts = eqn.params["op"], eqn.params["num_consts"]
    dest, _, indices, values = eqn.inputs[num_consts:]
    monoid = op_kind(op, num_consts)
    if monoid is None or not has_atomic(monoid, dest.type.np_dtype):
        if runs_in_kernel(op) and dest.type.ndim == 1:
            return _in_one_thread(scope, eqn, args)
        return RULES[hist_p](scope, eqn, args)
    target = _writable_on_device(scope, dest)
    size, width = dest.type.shape[0], math.prod(dest.type.shape[1:])
    cells, rows = _rows(scope, target, dest.type.shape), _rows(scope, args[-1], values.type.shape)

    def add(j: str) -> None:
        _row_cells(scope, args[-2], j, size, width, "",
                   lambda t, r: f"cuda.atomic.{monoid}({cells}, ({t}, {r}), {rows}[{j}, {r}])")

    _per_thread(scope, "hist", indices.type.shape[0], add, [cells])
    return [target]


def _row_cells(scope: Scope, indices: str, j: str, size: int, width: int, also: str,
               statement: Callable[[str, str], str]) -> None:
    """Kernel lines applying ``statement(t, r)`` to each cell r of destination row
    t = ``indices[j]``, where t is in range (and ``also``, formatted with t, holds)."""
    t, r = scope.fresh("t"), scope.fresh("r")
    scope.line(f"{t} = {indices}[{j}]")
    with scope.src.block(f"if 0 <= {t} < {size}{also.format(t=t)}"):
        with scope.src.block(f"for {r} in range({width})"):
            scope.line(statement(t, r))


def _in_one_thread(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    """``hist`` with another scalar operator: one thread applies it in order."""
    num_consts = eqn.params["num_consts"]
    target = _writable_on_device(scope, eqn.inputs[num_consts])
    size, m = eqn.inputs[num_consts].type.shape[0], eqn.inputs[-1].type.shape[0]
    indices, values = args[-2:]

    def loop(_: str) -> None:
        j, t = scope.fresh("j"), scope.fresh("t")
        with scope.src.block(f"for {j} in range({m})"):
            scope.line(f"{t} = {indices}[{j}]")
            with scope.src.block(f"if 0 <= {t} < {size}"):
                (result,) = scope.inline(eqn.params["op"], [*args[:num_consts], f"{target}[{t}]",
                                                            f"{values}[{j}]"])
                scope.line(f"{target}[{t}] = {result}")

    _per_thread(scope, "hist", 1, loop, [target])
    return [target]


@cuda_rule(scatter_p)
def _scatter(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    dest, indices, values = eqn.inputs
    target = _writable_on_device(scope, dest)
    size, m = dest.type.shape[0], indices.type.shape[0]
    width = math.prod(dest.type.shape[1:])
    winner = scope.fresh("w")
    _kernel_source(scope).allocate(winner, f"rtc.full(({size},), -1, np.int64)")

    def claim(j: str) -> None:
        t = scope.fresh("t")
        scope.line(f"{t} = {args[1]}[{j}]")
        with scope.src.block(f"if 0 <= {t} < {size}"):
            scope.line(f"cuda.atomic.max({winner}, {t}, {j})")

    _per_thread(scope, "claim", m, claim, [winner])
    cells, rows = _rows(scope, target, dest.type.shape), _rows(scope, args[2], values.type.shape)

    def write(j: str) -> None:
        _row_cells(scope, args[1], j, size, width, f" and {winner}[{{t}}] == {j}",
                   lambda t, r: f"{cells}[{t}, {r}] = {rows}[{j}, {r}]")

    _per_thread(scope, "scatter", m, write, [cells])
    return [target]
