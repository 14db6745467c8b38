"""The quantum programs `qdiff.jit` compiles, registered with the compiler
(`qdiff.compiler.claimed`): measurement-free programs on a small register as they are, and
for derivatives their differentiable form (`block.py`)."""

from __future__ import annotations

from ...compiler.claimed import ClaimedCompiler, Prepared, register_claimed_compiler
from ...ir.core import Program
from ...ir.passes.unpack_scalars import unpack_scalars
from .block import differentiable_form
from .primal import compile_reason


def primal_form(program: Program) -> Prepared:
    """``program`` when it compiles (the angles it reads from an array unpacked in one
    equation), else why not.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def wide(t):
    ...     q = qm.qubits(14); qm.ry(t, q[0]); return qm.expval("Z", [q[0]])
    >>> primal_form(qdiff.trace(wide, 0.1))
    'its register of 14 qubits is wider than the 12 compiled code simulates'
    """
    reason = compile_reason(program)
    return unpack_scalars(program) if reason is None else reason


QUANTUM_COMPILER = ClaimedCompiler("quantum", primal_form, differentiable_form)
register_claimed_compiler(QUANTUM_COMPILER)
