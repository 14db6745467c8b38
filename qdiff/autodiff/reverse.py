"""Tapeless reverse mode: the VJP transformation of a program, over the ``vjp`` rules.

``vjp_program(p)`` takes ``(*primals, *output cotangents)`` and returns
``(*primal outputs, *input cotangents)``. The forward sweep is the program itself; the
reverse sweep walks its equations backwards. There is no tape: every intermediate value of
a straight-line program is still in scope, and a rule that needs the values inside a
sub-program (a map's lambda, a loop body) re-executes it (Futhark's redundant execution).

A rule is called as ``vjp(cts_out, primals_in, primals_out, active, **params)`` with one
cotangent per output (``None``: zero) and one flag per operand saying whether its cotangent
is wanted; it returns one cotangent per operand (``None`` where zero or unwanted).

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: qnp.sum(x * x), np.ones(2))
>>> value, ct = vjp_program(p)(np.array([1.0, 2.0]), 1.0)
>>> ct.tolist()
[2.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..ir.core import Literal, Program, Var
from ..ir.errors import QdiffError
from ..ir.passes import fuse_maps, simplify
from ..ir.tracer import bind, trace
from .activity import active_vars
from .forward import _active_flags
from .tangents import add_tangents, cast_like, instantiate, is_differentiable


def vjp_program(program: Program, active: Sequence[bool] | None = None,
                with_primal: bool = True, known: Sequence[Var] = ()) -> Program:
    """The reverse-mode derivative of ``program``.

    Inputs: the primal inputs, then the values of the ``known`` intermediate vars (computed
    before, so the forward sweep does not compute them again), then one cotangent per float
    or complex output. Outputs: the primal outputs (unless ``with_primal=False``), then one
    cotangent per active input (default: every float or complex input).
    """
    flags = _active_flags(program, active)
    n, m = len(program.inputs), len(known)
    ct_types = [a.type for a in program.outputs if is_differentiable(a.type)]

    def backward(*args: Any) -> tuple:
        primals, supplied = list(args[:n]), iter(args[n + m:])
        cts = [next(supplied) if is_differentiable(a.type) else None for a in program.outputs]
        outs, in_cts = vjp_eval(program, primals, cts, flags,
                                dict(zip(known, args[n:n + m])))
        kept = [instantiate(c, v.type) for v, c, flag in zip(program.inputs, in_cts, flags)
                if flag]
        return (*outs, *kept) if with_primal else tuple(kept)

    # a forward map whose results only its adjoint map reads (the value is not returned)
    # runs inside that adjoint: the values it kept are then never stored
    return fuse_maps(simplify(trace(backward, *program.in_types, *(v.type for v in known),
                                    *ct_types, name=f"vjp_{program.name}")))


def vjp_eval(program: Program, primals: Sequence[Any], cts: Sequence[Any],
             active: Sequence[bool], known: dict[Var, Any] | None = None
             ) -> tuple[list[Any], list[Any]]:
    """Replay ``program`` (forward sweep) then its reverse sweep into the current trace;
    equations whose outputs are all ``known`` take those values instead of running.

    Returns the primal outputs and one cotangent per input (``None`` where zero).
    """
    env: dict[Var, Any] = {**dict(zip(program.inputs, primals)), **(known or {})}
    live = active_vars(program, active)
    backwards: dict[int, Any] = {}  # equation index -> the reverse sweep its binding kept

    def read(atom: Any) -> Any:
        return atom.value if isinstance(atom, Literal) else env[atom]

    for index, eqn in enumerate(program.eqns):  # forward sweep
        if eqn.outputs and all(v in env for v in eqn.outputs):
            continue
        values = [read(a) for a in eqn.inputs]
        keeping = eqn.primitive.vjp_keeping
        wanted = [isinstance(a, Var) and a in live for a in eqn.inputs]
        kept = keeping(values, wanted, **eqn.params) if keeping and any(wanted) else None
        if kept is not None:
            result, backwards[index] = kept
        else:
            result = bind(eqn.primitive, *values, **eqn.params)
        env.update(zip(eqn.outputs, result if eqn.primitive.multiple_results else [result]))

    ct_env: dict[Var, Any] = {}
    for atom, ct in zip(program.outputs, cts):
        if ct is not None and isinstance(atom, Var) and atom in live:
            ct_env[atom] = add_tangents(ct_env.get(atom), ct)

    for index in reversed(range(len(program.eqns))):  # reverse sweep
        eqn = program.eqns[index]
        if not any(v in ct_env for v in eqn.outputs):
            continue
        wanted = [isinstance(a, Var) and a in live for a in eqn.inputs]
        cts_out = [ct_env.pop(v, None) for v in eqn.outputs]
        if not any(wanted):
            continue
        rule = eqn.primitive.vjp
        if index in backwards:
            cts_in = backwards[index](cts_out)
        elif rule is None:
            raise QdiffError(f"primitive {eqn.primitive.name!r} has no reverse-mode (VJP) rule")
        else:
            cts_in = rule(cts_out, [read(a) for a in eqn.inputs],
                          [env[v] for v in eqn.outputs], wanted, **eqn.params)
        for atom, ct, flag in zip(eqn.inputs, cts_in, wanted):
            if flag and ct is not None:
                ct_env[atom] = add_tangents(ct_env.get(atom), cast_like(ct, atom.type))
    return [read(a) for a in program.outputs], [ct_env.get(v) for v in program.inputs]
