"""Subnormal floats flushed to zero inside compiled kernels (x86: the FTZ and DAZ bits of
MXCSR, set by a kernel on its own thread and restored before it returns).

Arithmetic on subnormal floats (below 1.2e-38 in float32) runs many times slower on x86.
Single-precision states reach them where amplitudes are rounding noise: a QFT that maps a
uniform superposition to a basis state leaves every other amplitude at 1e-15..1e-22, and
the products and cancellations of a block of gates on those go below 1e-38 (a block of the
QFT at n = 20 in complex64 took 2-2.5x as long as on a random state). An amplitude below
1e-38 of a normalized state is far below single precision's rounding (6e-8 of the norm),
and below 2.2e-308 in double precision: flushing it to zero changes nothing a result can
show. Elsewhere than on x86-64 the functions do nothing.

>>> import numba
>>> @numba.njit
... def halve(a):
...     saved = flush_subnormals()
...     for i in range(a.shape[0]):
...         a[i] *= np.float32(0.5)
...     restore_float_mode(saved)
>>> a = np.array([1.2e-38, 1.0], np.float32); halve(a)
>>> a.tolist() == [0.0, 0.5] or not X86   # 6e-39 would be subnormal: flushed
True
>>> a = np.array([1.2e-38], np.float32); a *= np.float32(0.5); bool(a[0] > 0)  # the mode restored
True
"""

from __future__ import annotations

import platform

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["flush_subnormals", "restore_float_mode", "FLUSH_BITS", "X86"]

X86 = platform.machine().lower() in ("x86_64", "amd64")
"""Whether the kernels run on x86-64, where MXCSR holds the flush modes."""

FLUSH_BITS = (1 << 15) | (1 << 6)
"""MXCSR's flush-to-zero (results) and denormals-are-zero (operands) bits."""


def _mxcsr_call(builder: ir.IRBuilder, name: str, pointer: ir.Value) -> None:
    i8p = ir.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(builder.module,
                                        ir.FunctionType(ir.VoidType(), [i8p]), name)
    builder.call(fn, [builder.bitcast(pointer, i8p)])


@intrinsic
def _read_mxcsr(typingctx):  # type: ignore[no-untyped-def]
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        _mxcsr_call(builder, "llvm.x86.sse.stmxcsr", slot)
        return builder.zext(builder.load(slot), ir.IntType(64))

    return types.int64(), codegen


@intrinsic
def _write_mxcsr(typingctx, value):  # type: ignore[no-untyped-def]
    def codegen(context, builder, signature, args):  # type: ignore[no-untyped-def]
        slot = cgutils.alloca_once(builder, ir.IntType(32))
        builder.store(builder.trunc(args[0], ir.IntType(32)), slot)
        _mxcsr_call(builder, "llvm.x86.sse.ldmxcsr", slot)
        return context.get_dummy_value()

    return types.none(types.int64), codegen


if X86:
    @njit(inline="always", cache=True)
    def flush_subnormals():  # type: ignore[no-untyped-def]
        """Subnormal operands and results taken as zero on this thread from here on; returns
        the float mode to give :func:`restore_float_mode` (compiled code only)."""
        saved = _read_mxcsr()
        _write_mxcsr(saved | FLUSH_BITS)
        return saved

    @njit(inline="always", cache=True)
    def restore_float_mode(saved):  # type: ignore[no-untyped-def]
        """The float mode :func:`flush_subnormals` returned, back on this thread."""
        _write_mxcsr(saved)
else:
    @njit(inline="always", cache=True)
    def flush_subnormals():  # type: ignore[no-untyped-def]
        """Nothing to set off x86-64 (see the module doc); returns 0."""
        return np.int64(0)

    @njit(inline="always", cache=True)
    def restore_float_mode(saved):  # type: ignore[no-untyped-def]
        """Nothing to restore off x86-64."""
        return None
