"""Activity analysis: which values of a program depend on the inputs being differentiated.

Only active values need tangents or cotangents; everything else is left to the primal code.

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x, k: qnp.sin(x) * 2.0 + k, 1.0, 2.0)
>>> len(active_vars(p, [True, False])) # x, sin x, 2 sin x, and the sum
4
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.core import Program, Var
from .tangents import is_differentiable


def active_vars(program: Program, active_inputs: Sequence[bool]) -> set[Var]:
    """The differentiable vars of ``program`` that depend on an active input."""
    active = {v for v, flag in zip(program.inputs, active_inputs)
              if flag and is_differentiable(v.type)}
    for eqn in program.eqns:
        if any(isinstance(a, Var) and a in active for a in eqn.inputs):
            active.update(v for v in eqn.outputs if is_differentiable(v.type))
    return active


def active_outputs(program: Program, active_inputs: Sequence[bool]) -> list[bool]:
    """For each output of ``program``, whether it depends on an active input."""
    active = active_vars(program, active_inputs)
    return [isinstance(a, Var) and a in active for a in program.outputs]
