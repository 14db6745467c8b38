"""Reductions over static axes: sum, prod, max, min, and argmax/argmin along one axis.

These are the common closed forms; `reduce` in `soacs.py` takes any associative operator.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.primitives import Primitive, register_primitive
from ..ir.type_rules import normalize_axes, tensor
from ..ir.types import Tensor, Type


def _reduce_rule(name: str) -> Callable[..., tuple[Type, ...]]:
    def rule(x: Type, *, axes: tuple[int, ...]) -> tuple[Type, ...]:
        t = tensor(x, "operand")
        if t.dtype == "bool":
            raise TypeCheckError(f"{name} of a bool array: convert it to a number first")
        kept = normalize_axes(axes, t.ndim, name)
        if axes != kept:
            raise TypeCheckError(f"{name}: axes must be sorted and non-negative, got {axes}")
        if name in ("reduce_max", "reduce_min") and any(t.shape[a] == 0 for a in kept):
            raise TypeCheckError(f"{name} over an empty axis has no identity")
        return (t.with_shape(tuple(d for i, d in enumerate(t.shape) if i not in kept)),)

    return rule


def _register(name: str, fn: Callable) -> Primitive:
    primitive = register_primitive(name, _reduce_rule(name))

    @primitive.def_impl("numpy")
    def impl(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
        return np.asarray(fn(x, axis=tuple(axes)), dtype=x.dtype)

    return primitive


reduce_sum_p = _register("reduce_sum", np.sum)
reduce_prod_p = _register("reduce_prod", np.prod)
reduce_max_p = _register("reduce_max", np.max)
reduce_min_p = _register("reduce_min", np.min)


def _arg_rule(name: str) -> Callable[..., tuple[Type, ...]]:
    def rule(x: Type, *, axis: int) -> tuple[Type, ...]:
        t = tensor(x, "operand")
        if not 0 <= axis < t.ndim:
            raise TypeCheckError(f"{name}: axis {axis} is out of range for {t.short()}")
        if t.shape[axis] == 0:
            raise TypeCheckError(f"{name} of an empty axis")
        if t.np_dtype.kind == "c":
            raise TypeCheckError(f"{name} of complex values is not ordered")
        return (Tensor(t.shape[:axis] + t.shape[axis + 1:], "int64"),)

    return rule


# Ties go to the first index attaining the extremum, as in NumPy.
argmax_p = register_primitive("argmax", _arg_rule("argmax"))
argmin_p = register_primitive("argmin", _arg_rule("argmin"))
argmax_p.def_impl("numpy")(lambda x, *, axis: np.asarray(np.argmax(x, axis=axis), np.int64))
argmin_p.def_impl("numpy")(lambda x, *, axis: np.asarray(np.argmin(x, axis=axis), np.int64))
