"""Dense array primitives as kernels (CUDA target): ``einsum``, ``transpose``, ``rev``,
``argmax`` and ``argmin``. Their CPU rules run on the host, in the host function, which is
plain Python: an einsum lowered as direct loops would run there one interpreted iteration
per product (GMM's Σ_n t̄[n,k,i] c[n,k,j]), and every one of them would take its operands
back from the device and send its result over again.

Rewrite rules, one thread per element of the result:

- ``einsum``: out[o] = Σ_s a[o, s] · b[o, s], the thread of element ``o`` looping over the
  summed positions ``s``, in blocks of up to `SHARING_BLOCK` threads. When the result has
  few elements and the sum is long (fewer than `FEW_OUTPUTS` threads otherwise), the sum
  is cut into chunks, a thread per (chunk, element), each adding its partial sum with
  ``cuda.atomic.add`` into the zeroed result; dtypes without an add atomic (complex) keep
  one thread per element.
- ``transpose``: out[i] = x[perm⁻¹(i)], and ``rev``: out[i] = x[n - 1 - i] along the
  reversed axes (a reversed loop's reversed scan), a thread per element.
- ``argmax``/``argmin`` along an axis: a thread per (before, after) pair scans the axis,
  keeping the first extremum and the first NaN, as NumPy does (`runtime.arg_extremum`).
"""

from __future__ import annotations

import math

import numpy as np

from ...classical.indexing import gather_p
from ...classical.linalg import einsum_p, parse_spec
from ...classical.reductions import argmax_p, argmin_p
from ...classical.shape import reshape_p, rev_p, transpose_p
from ...ir.core import Eqn, Literal
from ...ir.errors import QdiffError
from ...ir.types import Tensor
from ..lowering import RULES, Scope
from ..source import cast, scalar_literal
from .kernels import (
    KernelSource,
    blocks_for,
    device_array,
    has_atomic,
    named,
    threads_for,
    unflatten,
)
from .moves import moved, transposed
from .residency import DEVICE
from .scope import cuda_rule

# below this many result elements a long sum is split into chunks across threads
FEW_OUTPUTS = 1 << 14
# summed positions per thread at least, when a sum is split
CHUNK = 64
# threads per block of an einsum (at most): a block's threads share its SM's L1 cache, and
# neighbouring result elements read the same operand rows at every summed step (GMM's
# Σ_n t̄[n,k,i] c[n,k,j]: the 64 j of an i read one row c[n, k, :]); blocks of 128 fetched
# that row from L2 once per two i, blocks of 1024 once per sixteen (einsum kernels hold
# few registers: a block of 1024 fits an SM)
SHARING_BLOCK = 1024
# ... while there are still this many blocks (two per SM of an H100): fewer, larger
# blocks would leave SMs idle
FILLING_BLOCKS = 264


def sharing_threads(count: int) -> int:
    """Threads per block of an einsum of ``count`` threads: `threads_for`'s, doubled up to
    `SHARING_BLOCK` while `FILLING_BLOCKS` blocks remain.

    >>> sharing_threads(100), sharing_threads(131072), sharing_threads(819200)
    (128, 256, 1024)
    """
    threads = threads_for(count)
    while threads < SHARING_BLOCK and count >= 2 * threads * FILLING_BLOCKS:
        threads *= 2
    return threads


def _source(scope: Scope) -> KernelSource:
    assert isinstance(scope.src, KernelSource)
    return scope.src


def _at(array: str, term: str, index: dict[str, str]) -> str:
    return f"{array}[{', '.join(index[c] for c in term)}]" if term else array


def chunks_for(outputs: int, summed: int) -> int:
    """How many chunks an einsum's sum is cut into: 1 unless the result has fewer than
    `FEW_OUTPUTS` elements and each chunk keeps at least `CHUNK` summed positions.

    >>> chunks_for(20, 10000), chunks_for(10**6, 10000), chunks_for(20, 100)
    (156, 1, 1)
    """
    if outputs >= FEW_OUTPUTS:
        return 1
    return max(1, min(summed // CHUNK, math.ceil(FEW_OUTPUTS / max(outputs, 1))))


@cuda_rule(einsum_p)
def _einsum(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    args = named(scope, args)
    a_term, b_term, out_term = parse_spec(eqn.params["spec"])
    sizes = dict(zip(a_term, eqn.inputs[0].type.shape)) | dict(zip(b_term,
                                                                   eqn.inputs[1].type.shape))
    summed = "".join(dict.fromkeys(c for c in a_term + b_term if c not in out_term))
    out = eqn.outputs[0].type
    dtype = out.np_dtype
    outputs = math.prod(sizes[c] for c in out_term)
    length = math.prod(sizes[c] for c in summed)
    chunks = chunks_for(outputs, length) if has_atomic("add", dtype) else 1
    per_chunk = math.ceil(length / chunks)
    src = _source(scope)
    result = scope.fresh("y")
    zero = scalar_literal(0, dtype)
    # flat: a thread writes (or adds into) element ``e``; the result is a view of it
    src.allocate(result, device_array((outputs,), dtype, zero if chunks > 1 else None))
    index = {c: scope.fresh("q") for c in out_term + summed}
    count = outputs * chunks
    threads = sharing_threads(count)
    with src.capture() as body:
        t = scope.fresh("t")
        scope.line(f"{t} = cuda.grid(1)")
        with src.block(f"if {t} < {count}"):
            element, first = scope.fresh("e"), scope.fresh("s")
            scope.line(f"{element} = {t} % {outputs}")
            scope.line(f"{first} = ({t} // {outputs}) * {per_chunk}")
            if out_term:
                unflatten(scope, element, [index[c] for c in out_term],
                           [sizes[c] for c in out_term])
            acc, s = scope.fresh("acc"), scope.fresh("s")
            scope.line(f"{acc} = {zero}")
            with src.block(f"for {s} in range({first}, min({first} + {per_chunk}, {length}))"):
                if summed:
                    unflatten(scope, s, [index[c] for c in summed], [sizes[c] for c in summed])
                product = f"{_at(args[0], a_term, index)} * {_at(args[1], b_term, index)}"
                scope.line(f"{acc} = {cast(f'{acc} + {product}', dtype)}")
            scope.line(f"cuda.atomic.add({result}, {element}, {acc})" if chunks > 1 else
                       f"{result}[{element}] = {acc}")
    name, params = src.kernel("einsum", body)
    src.launch(name, blocks_for(count, threads), threads, params, [result])
    return [_shaped(scope, result, out)]


def _shaped(scope: Scope, flat: str, result: Tensor) -> str:
    """The flat device result ``flat`` as an array of ``result``'s shape (a scalar: kept on
    the device, the host taking it where it reads it)."""
    if result.shape:
        return _source(scope).device_view(flat, f"({''.join(f'{n}, ' for n in result.shape)})")
    return _as_scalar(scope, flat, result.np_dtype)


@cuda_rule(reshape_p)
def _reshape(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    # the one element of an array only on the device is a scalar kept there (a view of
    # one element): the host takes it only where it reads it. Either way takes one fresh
    # name: the names must be the same in each pass (`codegen.written_with_plans`)
    residency = _source(scope).residency
    operand = args[0]
    if eqn.params["shape"] != () or eqn.inputs[0] in scope.elements \
            or not operand.isidentifier() or residency.sides(operand) != {DEVICE}:
        return RULES[reshape_p](scope, eqn, args)
    return [_as_scalar(scope, _source(scope).device_view(operand, "(1,)"),
                       eqn.outputs[0].type.np_dtype)]


def _as_scalar(scope: Scope, flat: str, dtype: object) -> str:
    """The device array of one element ``flat`` as a scalar of ``dtype``, kept on the
    device."""
    residency = _source(scope).residency
    residency.ranks.pop(flat, None)
    residency.scalars[flat] = np.dtype(dtype)
    return flat


@cuda_rule(gather_p)
def _gather(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    x, indices = eqn.inputs[0].type, eqn.inputs[1]
    axis = eqn.params["axis"]
    before, size, after = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
    count = indices.type.size if indices.type.shape else 1
    src = _source(scope)
    operand, index = named(scope, args)
    # indices known when the code is written are checked then; others in the kernel, which
    # marks a bad one for the host to raise the interpreter's error after it
    known = isinstance(indices, Literal)
    if known and not np.all((-size <= indices.value) & (indices.value < size)):
        return RULES[gather_p](scope, eqn, args)
    bad = None
    if not known:
        bad = scope.fresh("bad")
        src.allocate(bad, device_array((1,), np.int64, "0"))
        _as_scalar(scope, bad, np.int64)
    x3 = src.device_view(operand, f"({before}, {size}, {after})")
    flat = src.device_view(index, f"({count},)") if indices.type.shape else index
    result = scope.fresh("y")
    total = before * count * after
    src.allocate_empty(result, (total,), eqn.outputs[0].type.np_dtype)
    threads = threads_for(total)
    with src.capture() as body:
        t, a, j, b, k = (scope.fresh(p) for p in ("t", "a", "j", "b", "k"))
        scope.line(f"{t} = cuda.grid(1)")
        with src.block(f"if {t} < {total}"):
            unflatten(scope, t, [a, j, b], [before, count, after])
            scope.line(f"{k} = {flat}[{j}]" if indices.type.shape else f"{k} = {flat}")
            with src.block(f"if {k} < 0"):
                scope.line(f"{k} += {size}")
            with src.block(f"if 0 <= {k} < {size}"):
                scope.line(f"{result}[{t}] = {x3}[{a}, {k}, {b}]")
            if bad is not None:
                with src.block("else"):
                    scope.line(f"{bad}[0] = 1")
    name, params = src.kernel("gather", body)
    src.launch(name, blocks_for(total, threads), threads, params,
               [result] + ([bad] if bad else []))
    if bad is not None:
        with src.block(f"if {bad}"):
            scope.line(src.error(QdiffError, f"gather: an index is out of bounds for axis "
                                             f"{axis} with size {size}"))
    return [_shaped(scope, result, eqn.outputs[0].type)]


@cuda_rule(transpose_p)
def _transpose(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    perm = tuple(eqn.params["perm"])
    if perm == tuple(range(len(perm))):
        return [args[0]]
    return [transposed(scope, args[0], eqn.inputs[0].type.shape,
                       eqn.outputs[0].type.np_dtype, perm)]


@cuda_rule(rev_p)
def _rev(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    shape, axes = eqn.inputs[0].type.shape, eqn.params["axes"]
    if not shape:
        return [args[0]]
    return [moved(scope, args[0], shape, eqn.outputs[0].type.np_dtype, "rev", lambda index: [
        f"{shape[axis] - 1} - {q}" if axis in axes else q for axis, q in enumerate(index)])]


@cuda_rule(argmax_p, argmin_p)
def _arg_extremum(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    args = named(scope, args)
    shape, axis = eqn.inputs[0].type.shape, eqn.params["axis"]
    before, size, after = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    better = ">" if eqn.primitive is argmax_p else "<"
    src = _source(scope)
    result = scope.fresh("y")
    src.allocate_empty(result, (before * after,), eqn.outputs[0].type.np_dtype)
    x = src.device_view(args[0], f"({before}, {size}, {after})")
    count = before * after
    threads = threads_for(count)
    with src.capture() as body:
        t, a, b, best, at, j, v = (scope.fresh(p) for p in ("t", "a", "b", "m", "k", "j", "v"))
        scope.line(f"{t} = cuda.grid(1)")
        with src.block(f"if {t} < {count}"):
            scope.line(f"{a} = {t} // {after}")
            scope.line(f"{b} = {t} % {after}")
            scope.line(f"{best} = {x}[{a}, 0, {b}]")
            scope.line(f"{at} = 0")
            with src.block(f"for {j} in range(1, {size})"):
                # a NaN is the extremum (the first one found), as in NumPy
                with src.block(f"if {best} != {best}"):
                    scope.line("break")
                scope.line(f"{v} = {x}[{a}, {j}, {b}]")
                with src.block(f"if {v} {better} {best} or {v} != {v}"):
                    scope.line(f"{best} = {v}")
                    scope.line(f"{at} = {j}")
            scope.line(f"{result}[{t}] = {at}")
    name, params = src.kernel("argext", body)
    src.launch(name, blocks_for(count, threads), threads, params, [result])
    return [_shaped(scope, result, eqn.outputs[0].type)]
