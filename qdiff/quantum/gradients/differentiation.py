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
from ...autodiff.derivative_calls import CALLING_RULE, calls_derivatives
from ...autodiff.jets import derivative_along, primal, seeded
from ...autodiff.whole_program import WholeProgramRule, register_whole_program_rule
from ...compiler.claimed import compiled_version
from ...ir import pytree
from ...ir.core import Program
from ...ir.errors import QdiffError
from ...ir.interpreter import coerce_argument
from ...ir.primitives import get_primitive
from ..execution.options import RunOptions
from ..execution.run import run
from ..lang.primitives import QUANTUM_PRIMITIVES
from .adjoint import RecordedRun
from .forward_mode import JetRunner, missing_mass, report_jet_truncation, run_on_jets
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
    if calls_derivatives(program):  # derivatives of derivatives inside: forward mode
        return CALLING_RULE.gradient(program, args, argnums, method, options)
    compiled = compiled_version(program, ("grad", argnums))
    if compiled is not None and method in ("auto", "adjoint") and not options:
        return CompiledGradient(program, args, compiled)
    result = gradient(program, *args, argnums=argnums, method=method, **options)
    report_truncation(program.name, result, _run_options(options))
    return result


def _jacobian(program: Program, args: tuple, argnums: Any, method: str, options: dict) -> Any:
    if calls_derivatives(program):
        return CALLING_RULE.jacobian(program, args, argnums, method, options)
    return jacobian(program, *args, argnums=argnums, method=method, **options)


def _vjp(program: Program, primals: tuple, flags: list[bool], method: str,
         options: dict) -> tuple[Any, Callable[[Any], tuple]]:
    if calls_derivatives(program):
        return CALLING_RULE.vjp(program, primals, flags, method, options)
    # the adjoint method records one run and sweeps it back once per cotangent
    flat_primals, in_tree = pytree.flatten(tuple(primals))
    argnums = tuple(range(len(primals)))
    if method in ("auto", "adjoint") and not options:
        recorded = RecordedRun(program, flat_primals, checkpoints=True)
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


class TaylorEvaluator:
    """A quantum program run on jets (`forward_mode.run_on_jets`), run after run, keeping
    the largest mass a run pruned or cut off for one `report`.

    >>> import qdiff
    >>> from qdiff.autodiff.jets import Jet
    >>> from qdiff.quantum.lang.examples import rotation
    >>> evaluate = TaylorEvaluator(qdiff.trace(rotation, 0.3), "auto", {})
    >>> (value,) = evaluate([Jet({0: np.asarray(0.3), 1: np.asarray(1.0)})])
    >>> bool(np.isclose(value.part(1), -np.sin(0.3)))
    True
    """

    def __init__(self, program: Program, method: str, options: dict):
        if method != "auto":
            raise QdiffError(
                f"method={method!r}: derivatives of quantum programs beyond the first (and "
                "qdiff.jvp with method='auto') are computed by forward mode on the simulator, "
                "exactly; they take no method")
        self.program = program
        self.options = _run_options(options)
        unused = [name for name in ("remainder_tol", "exit_probability", "occurrences",
                                    "sampler", "estimator")
                  if getattr(self.options, name) is not None]
        if unused:
            raise QdiffError(
                f"{', '.join(name + '=' for name in unused)}: settings of first derivatives "
                "(certified adjoint gradients, sampled parameter shift, Qiskit runs); forward-"
                "mode derivatives (jvp, hessian, derivatives of derivatives) do not use them")
        self.missing = 0.0
        JetRunner(self.options)  # checks the mode now, before any run

    def __call__(self, leaves: list[Any]) -> list[Any]:
        outputs, runner = run_on_jets(self.program, leaves, self.options)
        self.missing = max(self.missing, missing_mass(runner))
        return outputs

    def report(self, what: str) -> None:
        """Warn (raise with ``strict=True``) when loops were cut off with more than ``tol``
        still going on: forward mode has no certified remainder."""
        report_jet_truncation(what, self.missing, self.options)


def _jvp(program: Program, flat_primals: list[Any], flat_tangents: list[Any],
         flags: list[bool], method: str, options: dict) -> tuple[Any, Any]:
    if calls_derivatives(program):
        return CALLING_RULE.jvp(program, flat_primals, flat_tangents, flags, method, options)
    if method == "auto":  # one forward-mode run with the tangents on one generator
        evaluator = TaylorEvaluator(program, method, options)
        leaves = [seeded(coerce_argument(program, i, x), 1, t) if flag else
                  coerce_argument(program, i, x)
                  for i, (x, t, flag) in enumerate(zip(flat_primals, flat_tangents, flags))]
        outputs = evaluator(leaves)
        evaluator.report(f"the jvp of {program.name}")
        values = [np.asarray(primal(o)) for o in outputs]
        tangents = [np.asarray(derivative_along(o, 1)) for o in outputs]
        return unflatten_outputs(program, values), unflatten_outputs(program, tangents)
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
    options=frozenset({"options", *(f.name for f in dataclasses.fields(RunOptions))}),
    taylor=TaylorEvaluator)
register_whole_program_rule([get_primitive(name) for name in QUANTUM_PRIMITIVES], QUANTUM_RULE)
