"""`qdiff.grad`, `jacobian`, `vjp` and `jvp` of quantum programs: the quantum whole-program rule.

A program with quantum operations is differentiated as a whole on the branching simulator
(the adjoint method by default, or any ``method`` of `qdiff.quantum.gradient`), not by
rewriting it into a derivative Program. This module registers that rule for every quantum
primitive with the differentiation API (`qdiff.autodiff.whole_program`); importing
`qdiff.quantum` does it.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> @qdiff.program
... def f(t):
...     q = qm.qubits(1); qm.ry(t, q[0]); return qm.expval("Z", q)
>>> bool(round(float(qdiff.grad(f)(0.3)), 12) == round(-np.sin(0.3), 12))
True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from ...autodiff.arguments import output_leaves, unflatten_outputs
from ...autodiff.whole_program import WholeProgramRule, register_whole_program_rule
from ...compiler.claimed import compiled_version
from ...ir import pytree
from ...ir.core import Program
from ...ir.primitives import get_primitive
from ..execution.options import RunOptions
from ..execution.run import run
from ..lang.primitives import QUANTUM_PRIMITIVES
from .adjoint import RecordedRun
from .gradient import gradient, jacobian, jacobian_rows, report_truncation


def _run_options(options: dict) -> RunOptions:
    """The API's keyword options (``options=`` and the settings) as one RunOptions."""
    settings = dict(options)
    return RunOptions.of(settings.pop("options", None), **settings)


class CompiledGradient:
    """The gradient from the derivative `qdiff.jit` compiled for the program in this
    process (``qdiff.grad(f, jit=True)``); the value, when asked for, from a call."""

    def __init__(self, program: Program, args: tuple, compiled: Any):
        self.program, self.args = program, args
        self.grad = compiled(*args)

    @property
    def value(self) -> Any:
        return self.program(*self.args)


def _gradient(program: Program, args: tuple, argnums: Any, method: str, options: dict) -> Any:
    compiled = compiled_version(program, ("grad", argnums))
    if compiled is not None and method in ("auto", "adjoint") and not options:
        return CompiledGradient(program, args, compiled)
    result = gradient(program, *args, argnums=argnums, method=method, **options)
    report_truncation(program.name, result, _run_options(options))
    return result


def _jacobian(program: Program, args: tuple, argnums: Any, method: str, options: dict) -> Any:
    return jacobian(program, *args, argnums=argnums, method=method, **options)


def _vjp(program: Program, primals: tuple, flags: list[bool], method: str,
         options: dict) -> tuple[Any, Callable[[Any], tuple]]:
    # the adjoint method records one run and sweeps it back once per cotangent
    flat_primals, in_tree = pytree.flatten(tuple(primals))
    argnums = tuple(range(len(primals)))
    if method in ("auto", "adjoint") and not options:
        recorded = RecordedRun(program, flat_primals)
        value = unflatten_outputs(program, recorded.values)

        def flat_vjp(cotangent: Any) -> list[Any]:
            return recorded.vjp(output_leaves(program, cotangent))
    else:
        value = run(program, *primals).values

        def flat_vjp(cotangent: Any) -> list[Any]:
            result = gradient(program, *primals, argnums=argnums, method=method,
                              cotangent=tuple(output_leaves(program, cotangent)), **options)
            return pytree.flatten(result.grad)[0]

    def quantum_vjp(cotangent: Any) -> tuple:
        flat = flat_vjp(cotangent)
        return tuple(pytree.unflatten(in_tree, [g if flag else None
                                                for g, flag in zip(flat, flags)]))

    return value, quantum_vjp


def _jvp(program: Program, flat_primals: list[Any], flat_tangents: list[Any],
         flags: list[bool], method: str, options: dict) -> tuple[Any, Any]:
    # J·t, one row of the Jacobian per output element (the reverse sweep per row)
    given = _run_options(options)
    value, rows = jacobian_rows(program, flat_primals, None,
                                given if method == "auto" else given.replace(method=method))
    tangents = [np.asarray(t, np.float64) if flag else None
                for t, flag in zip(flat_tangents, flags)]
    outs = []
    for k, out_type in enumerate(program.out_types):
        out = np.zeros(out_type.shape)
        for index in np.ndindex(out_type.shape):
            out[index] = sum(float(np.vdot(row, t)) for row, t in zip(rows[k][index], tangents)
                             if t is not None and row is not None)
        outs.append(out)
    return unflatten_outputs(program, value), unflatten_outputs(program, outs)


QUANTUM_RULE = WholeProgramRule(
    "quantum", gradient=_gradient, jacobian=_jacobian, vjp=_vjp, jvp=_jvp,
    options=frozenset({"options", *(f.name for f in dataclasses.fields(RunOptions))}))
register_whole_program_rule([get_primitive(name) for name in QUANTUM_PRIMITIVES], QUANTUM_RULE)
