"""Compiling programs that a runner claims (quantum programs), filled in from above.

A program with quantum operations runs on its own runner (the branching simulator), and its
derivatives on a whole-program rule. Some such programs have a compiled form all the same:
a measurement-free circuit on a small register is classical code over a small complex
array. The package that owns those programs registers a `ClaimedCompiler` here
(`qdiff.quantum.compiled` does on import), so that `qdiff.jit` compiles them without the
compiler importing the quantum layers:

- ``primal(program)``: a Program every equation of which has a lowering rule and that
  computes what ``program`` computes, or a string saying why there is none;
- ``differentiable(program)``: a Program that the classical transformations (``grad``,
  ``vjp``, ...) can differentiate and the compiler can compile, computing the same values,
  or the reason why there is none.

What `qdiff.jit` compiled for such a program is remembered per program (`remember_compiled`),
so that the program's runner takes the compiled path on plain calls too (`compiled_version`):
``f(x)`` after ``qdiff.jit(f)(x)``, ``qdiff.grad(f)(x)`` after ``qdiff.grad(f, jit=True)(x)``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from ..ir.core import Program

Prepared = Program | str


@dataclass(frozen=True)
class ClaimedCompiler:
    """How one family of claimed programs compiles (see the module docstring)."""

    name: str
    primal: Callable[[Program], Prepared]
    differentiable: Callable[[Program], Prepared]


_COMPILERS: list[ClaimedCompiler] = []


def register_claimed_compiler(compiler: ClaimedCompiler) -> None:
    """Let `qdiff.jit` compile the programs ``compiler`` prepares."""
    _COMPILERS.append(compiler)


def _prepare(program: Program, how: str) -> Prepared:
    reasons = []
    for compiler in _COMPILERS:
        prepared = getattr(compiler, how)(program)
        if isinstance(prepared, Program):
            return prepared
        reasons.append(prepared)
    return "; ".join(reasons) or "no compiler is registered for it"


def primal_form(program: Program) -> Prepared:
    """A compilable Program computing ``program``'s values, or why there is none.

    >>> import qdiff
    >>> primal_form(qdiff.trace(lambda x: x + 1.0, 0.0)) is not None
    True
    """
    return _prepare(program, "primal")


def differentiable_form(program: Program) -> Prepared:
    """A Program the classical transformations differentiate and the compiler compiles,
    computing ``program``'s values, or why there is none.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def turn(t):
    ...     q = qm.qubits(1); qm.ry(t, q[0]); return qm.expval("Z", q)
    >>> [e.primitive.name for e in differentiable_form(qdiff.trace(turn, 0.1)).eqns]
    ['quantum_block']
    """
    return _prepare(program, "differentiable")


# by id, with the program kept alive (a Program compares by structure: slow as a key)
_REMEMBERED: dict[int, tuple[Program, dict[Hashable, Any]]] = {}


def remember_compiled(program: Program, key: Hashable, compiled: Any) -> None:
    """Remember ``compiled`` as what ``key`` ("primal", or a derivative such as
    ``("grad", argnums)``) of the claimed ``program`` compiled to.

    >>> import qdiff
    >>> p = qdiff.trace(lambda x: x * 2.0, 1.0)
    >>> remember_compiled(p, ("grad", 0), "compiled"); compiled_version(p, ("grad", 0))
    'compiled'
    """
    entry = _REMEMBERED.get(id(program))
    if entry is None or entry[0] is not program:
        if len(_REMEMBERED) > 4096:
            _REMEMBERED.clear()
        entry = _REMEMBERED[id(program)] = (program, {})
    try:
        entry[1][key] = compiled
    except TypeError:  # an unhashable key (argnums given as a list): not remembered
        pass


def compiled_version(program: Program, key: Hashable = "primal") -> Any | None:
    """What ``key`` of ``program`` compiled to in this process (`remember_compiled`), or
    None.

    >>> import qdiff
    >>> compiled_version(qdiff.trace(lambda x: x + 1.0, 1.0)) is None
    True
    """
    entry = _REMEMBERED.get(id(program))
    if entry is None or entry[0] is not program:
        return None
    try:
        return entry[1].get(key)
    except TypeError:
        return None
