"""Counted loops that apply gates, unrolled: a circuit for the differentiable form.

The adjoint sweep of a compiled block walks a straight line of gates. A ``loop`` equation
with constant bounds whose body applies gates (``qdiff.fori_loop(0, L, layer)``, the layers
of an ansatz) is that straight line written compactly: this pass replays the program and
writes such loops out iteration by iteration (the loop index becomes a constant of each
copy), up to `MAX_UNROLLED_EQUATIONS` equations. Loops with traced bounds, ``while`` loops
and branches that apply gates are kept (their gradient runs on the simulator).

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def layered(t):
...     q = qm.qubits(1)
...     qdiff.fori_loop(0, 3, lambda i: qm.ry(t * (i + 1), q[0]))
...     return qm.expval("Z", q)
>>> [e.primitive.name for e in unroll_quantum_loops(qdiff.trace(layered, 0.1)).eqns]
['qalloc', 'mul', 'gate', 'mul', 'gate', 'mul', 'gate', 'expval']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ir.control_flow import loop_p
from ...ir.core import Eqn, Literal, Program
from ...ir.tracer import bind, trace
from ..execution.runner import needs_runner

MAX_UNROLLED_EQUATIONS = 100_000
"""The most equations unrolling may write out for one loop."""


def _unrollable(eqn: Eqn) -> bool:
    if eqn.primitive is not loop_p or not needs_runner(eqn.params["body"]):
        return False
    start, stop = eqn.inputs[:2]
    if not (isinstance(start, Literal) and isinstance(stop, Literal)):
        return False
    trips = max(0, int(stop.value) - int(start.value))
    return trips * sum(1 for _ in eqn.params["body"].all_eqns()) <= MAX_UNROLLED_EQUATIONS


def unroll_quantum_loops(program: Program) -> Program:
    """``program`` with its counted loops that apply gates written out (see the module
    docstring); ``program`` itself when it has none."""
    if not any(_unrollable(e) for e in program.eqns):
        return program
    traced = trace(lambda *args: _replay(program, list(args)), *program.in_types,
                   name=program.name)
    return Program(traced.inputs, traced.eqns, traced.outputs, name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)


def _replay(program: Program, values: list[Any]) -> list[Any]:
    env = dict(zip(program.inputs, values))

    def read(atom: Any) -> Any:
        return atom.value if isinstance(atom, Literal) else env[atom]

    for eqn in program.eqns:
        operands = [read(a) for a in eqn.inputs]
        if _unrollable(eqn):
            start, stop, *rest = operands
            k = eqn.params["num_consts"]
            consts, carry = rest[:k], rest[k:]
            dtype = np.asarray(start).dtype
            for i in range(int(start), int(stop)):
                carry = _replay(eqn.params["body"], [np.asarray(i, dtype), *consts, *carry])
            outs = carry
        else:
            result = bind(eqn.primitive, *operands, **eqn.params)
            outs = list(result) if eqn.primitive.multiple_results else [result]
        env.update(zip(eqn.outputs, outs))
    return [read(a) for a in program.outputs]
