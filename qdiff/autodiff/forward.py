"""Forward mode: the JVP transformation of a program, an interpreter over the ``jvp`` rules.

``jvp_program(p)`` takes ``(*primals, *tangents)`` and returns
``(*primal outputs, *output tangents)``. A rule receives the primal operands and their
tangents (``None`` for a symbolic zero) and returns the primal outputs and their tangents;
an equation whose operands all have zero tangents is copied unchanged.

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: qnp.sin(x) * x, 1.0)
>>> value, tangent = jvp_program(p)(1.0, 1.0)
>>> bool(np.isclose(tangent, np.cos(1.0) + np.sin(1.0)))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.core import Literal, Program, Var
from ..ir.errors import QdiffError
from ..ir.passes import simplify
from ..ir.tracer import bind, trace
from .tangents import instantiate, is_differentiable


def jvp_program(program: Program, active: Sequence[bool] | None = None,
                tangent_outputs: Sequence[bool] | None = None) -> Program:
    """The forward-mode derivative of ``program``.

    Inputs: the primal inputs, then one tangent per active input (default: every float or
    complex input). Outputs: the primal outputs, then one tangent per float or complex
    output (zeros where the output does not depend on an active input), or only for the
    outputs flagged in ``tangent_outputs``.
    """
    wanted = [is_differentiable(a.type) for a in program.outputs]
    if tangent_outputs is not None:
        wanted = [w and bool(flag) for w, flag in zip(wanted, tangent_outputs)]
    in_types = program.in_types
    flags = _active_flags(program, active)
    tangent_types = [t for t, flag in zip(in_types, flags) if flag]
    n = len(in_types)

    def forward(*args: Any) -> tuple:
        primals = list(args[:n])
        supplied = iter(args[n:])
        tangents = [next(supplied) if flag else None for flag in flags]
        outs, out_tangents = jvp_eval(program, primals, tangents)
        kept = [instantiate(t, a.type) for a, t, w in zip(program.outputs, out_tangents, wanted)
                if w]
        return (*outs, *kept)

    return simplify(trace(forward, *in_types, *tangent_types, name=f"jvp_{program.name}"))


def jvp_eval(program: Program, primals: Sequence[Any],
             tangents: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    """Replay ``program`` into the current trace with tangents; returns (outputs, tangents)."""
    env: dict[Var, Any] = dict(zip(program.inputs, primals))
    tangent_env: dict[Var, Any] = {
        v: t for v, t in zip(program.inputs, tangents)
        if t is not None and is_differentiable(v.type)}

    def read(atom: Any) -> Any:
        return atom.value if isinstance(atom, Literal) else env[atom]

    for eqn in program.eqns:
        values = [read(a) for a in eqn.inputs]
        in_tangents = [tangent_env.get(a) if isinstance(a, Var) else None for a in eqn.inputs]
        if all(t is None for t in in_tangents):
            result = bind(eqn.primitive, *values, **eqn.params)
            outs = result if eqn.primitive.multiple_results else [result]
            env.update(zip(eqn.outputs, outs))
            continue
        rule = eqn.primitive.jvp
        if rule is None:
            raise QdiffError(f"primitive {eqn.primitive.name!r} has no forward-mode (JVP) rule")
        outs, out_tangents = rule(values, in_tangents, **eqn.params)
        env.update(zip(eqn.outputs, outs))
        for var, t in zip(eqn.outputs, out_tangents):
            if t is not None and is_differentiable(var.type):
                tangent_env[var] = t
    return ([read(a) for a in program.outputs],
            [tangent_env.get(a) if isinstance(a, Var) else None for a in program.outputs])


def _active_flags(program: Program, active: Sequence[bool] | None) -> list[bool]:
    if active is None:
        return [is_differentiable(t) for t in program.in_types]
    if len(active) != len(program.inputs):
        raise QdiffError(
            f"{len(active)} activity flags for the {len(program.inputs)} inputs of "
            f"program {program.name!r}")
    return [bool(flag) and is_differentiable(t) for flag, t in zip(active, program.in_types)]
