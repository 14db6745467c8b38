"""One classical equation on jets: its forward mode, nested once per generator.

`qdiff.autodiff.jets` carries derivatives of any order on concrete values. A classical
equation (any primitive with a JVP rule, loops and branches included) maps jets to jets by
its JVP program nested ``order`` times: level k adds generator k, taking the tangents of
every float input of level k - 1, so the nested program's inputs are the jet parts in mask
order (mask 0: every input; masks 1 … 2^order - 1: the float inputs) and its outputs
likewise. The nested programs are built once per equation and order.

>>> import qdiff, qdiff.numpy as qnp
>>> from qdiff.autodiff.jets import Jet
>>> eqn = qdiff.trace(lambda x: qnp.sin(x), 0.0).eqns[0]
>>> x = Jet({0: np.asarray(0.5), 1: np.asarray(1.0), 2: np.asarray(1.0)})
>>> (y,) = equation_on_jets(eqn, [x])
>>> bool(np.allclose([y.part(m) for m in range(4)],       # sin, cos, cos, -sin at 0.5
...                  [np.sin(0.5), np.cos(0.5), np.cos(0.5), -np.sin(0.5)]))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.core import Eqn, Program, Var
from ..ir.interpreter import evaluate
from .forward import jvp_program
from .jets import Jet, order_of
from .tangents import is_differentiable

_NESTED: dict[tuple[int, int], tuple[Eqn, Program, tuple[Var, ...]]] = {}


def equation_on_jets(eqn: Eqn, values: Sequence[Any]) -> list[Any]:
    """The outputs of ``eqn`` on ``values`` (jets or plain values), as jets where they have
    derivative parts (see the module docstring for an example).

    >>> import qdiff
    >>> eqn = qdiff.trace(lambda x: x * x, 0.0).eqns[0]
    >>> [float(v) for v in equation_on_jets(eqn, [np.asarray(3.0)] * 2)]  # x * x
    [9.0]
    """
    outs: Any
    if not any(isinstance(v, Jet) for v in values):
        outs = eqn.primitive.impl("numpy")(*values, **eqn.params)
        return list(outs) if eqn.primitive.multiple_results else [outs]
    order = order_of(m for v in values if isinstance(v, Jet) for m in v.parts)
    program, inputs = _nested(eqn, order)
    by_var = {}
    for atom, value in zip(eqn.inputs, values):
        if isinstance(atom, Var):
            by_var[atom] = value
    args = []
    for mask in range(1 << order):
        for var in inputs:
            if mask == 0 or is_differentiable(var.type):
                args.append(_part(by_var[var], mask, var))
    flat = evaluate(program, *args)
    outputs = eqn.outputs
    primals = flat[:len(outputs)]
    rest = iter(flat[len(outputs):])
    parts: list[dict[int, Any]] = [{0: np.asarray(v)} for v in primals]
    for mask in range(1, 1 << order):
        for k, var in enumerate(outputs):
            if is_differentiable(var.type):
                value = np.asarray(next(rest))
                if np.any(value):
                    parts[k][mask] = value
    return [Jet(p) if len(p) > 1 else p[0] for p in parts]


def _part(value: Any, mask: int, var: Var) -> np.ndarray:
    dtype = var.type.np_dtype
    if isinstance(value, Jet):
        found = value.parts.get(mask)
        if found is not None:
            return np.asarray(found, dtype) if dtype.kind == "c" else \
                np.asarray(np.real(found), dtype)
        return np.zeros(var.type.shape, dtype)
    return np.asarray(value, dtype) if mask == 0 else np.zeros(var.type.shape, dtype)


def _nested(eqn: Eqn, order: int) -> tuple[Program, tuple[Var, ...]]:
    key = (id(eqn), order)
    hit = _NESTED.get(key)
    if hit is not None and hit[0] is eqn:
        return hit[1], hit[2]
    inputs = tuple(dict.fromkeys(a for a in eqn.inputs if isinstance(a, Var)))
    program = Program(inputs, (eqn,), eqn.outputs, name=f"{eqn.primitive.name}_on_jets")
    for _ in range(order):
        program = jvp_program(program)
    if len(_NESTED) > 4096:
        _NESTED.clear()
    _NESTED[key] = (eqn, program, inputs)
    return program, inputs
