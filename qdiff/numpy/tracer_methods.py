"""The array API of traced values: `Tracer` operators, ``.at``, ``.T`` and ndarray methods.

The IR's `Tracer` knows nothing of arrays; as JAX attaches its array methods where the array
API is defined, this module binds each one to the `qdiff.numpy` function it stands for when
`qdiff.numpy` is imported.

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: (x * 2.0 - 1.0).sum(), np.ones(3))
>>> [e.primitive.name for e in p.eqns]
['mul', 'sub', 'reduce_sum']

NumPy's own functions dispatch to their `qdiff.numpy` namesakes on traced values (NEP 13 and
NEP 18), so ``np.sin(x)`` and ``np.sum(x, axis=0)`` trace as ``qnp.sin(x)`` and
``qnp.sum(x, axis=0)``:

>>> float(qdiff.trace(lambda x: np.sum(np.sin(x)), np.zeros(2))(np.zeros(2)))
0.0
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable
from typing import Any

from ..ir.errors import QdiffError
from ..ir.tracer import Tracer
from . import _core, creation, elementwise, indexing, linalg, reductions, shape
from ._core import astype
from .elementwise import (
    abs,
    add,
    divide,
    equal,
    floor_divide,
    greater,
    greater_equal,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    multiply,
    negative,
    not_equal,
    power,
    remainder,
    subtract,
)
from .indexing import IndexUpdateHelper, getitem
from .linalg import dot, matmul
from .reductions import argmax, argmin, max, mean, min, prod, sum
from .shape import reshape, squeeze, transpose

# Python operator name (without underscores) -> function; each also gets its reflected
# form (``__radd__`` for ``add``).
_BINARY_OPERATORS: dict[str, Callable[[Any, Any], Any]] = {
    "add": add, "sub": subtract, "mul": multiply, "truediv": divide,
    "floordiv": floor_divide, "mod": remainder, "pow": power, "matmul": matmul,
    "and": logical_and, "or": logical_or, "xor": logical_xor,
}
# Comparisons have no reflected form: Python swaps ``<`` and ``>`` itself.
_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "lt": less, "le": less_equal, "gt": greater, "ge": greater_equal, "eq": equal,
    "ne": not_equal,
}
_UNARY_OPERATORS: dict[str, Callable[[Any], Any]] = {
    "neg": negative, "abs": abs, "invert": logical_not,
}
# ndarray methods taking ``(axis=None, keepdims=False)``
_REDUCTIONS: dict[str, Callable[..., Any]] = {
    "sum": sum, "prod": prod, "mean": mean, "max": max, "min": min,
}


def _operator(fn: Callable[[Any, Any], Any]) -> Callable[[Tracer, Any], Any]:
    return lambda self, other: fn(self, other)


def _reflected(fn: Callable[[Any, Any], Any]) -> Callable[[Tracer, Any], Any]:
    return lambda self, other: fn(other, self)


def _reduction(fn: Callable[..., Any]) -> Callable[..., Any]:
    def method(self: Tracer, axis: Any = None, keepdims: bool = False) -> Any:
        return fn(self, axis, keepdims=keepdims)

    return method


def _arg_reduction(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda self, axis=None: fn(self, axis)


def _reshape(self: Tracer, *shape: Any) -> Any:
    return reshape(self, shape[0] if len(shape) == 1 else shape)


def _flat(self: Tracer) -> Any:
    return reshape(self, (-1,))


def _public_functions(*modules: types.ModuleType) -> dict[str, Callable[..., Any]]:
    """Name -> function of what ``modules`` define (aliases included), as `qdiff.numpy`
    exports them."""
    found = {}
    for module in modules:
        for name, value in vars(module).items():
            if (not name.startswith("_") and callable(value) and not isinstance(value, type)
                    and getattr(value, "__module__", "").startswith(__package__)):
                found[name] = value
    return found


# NumPy's name -> the `qdiff.numpy` function that NumPy functions and ufuncs dispatch to
NUMPY_DISPATCH: dict[str, Callable[..., Any]] = {
    **_public_functions(_core, creation, elementwise, indexing, linalg, reductions, shape),
    "conjugate": elementwise.conj,
    "shape": lambda x: x.shape,
    "ndim": lambda x: x.ndim,
    "size": lambda x: x.size,
}


def _unsupported(name: str, reason: str) -> QdiffError:
    if name in NUMPY_DISPATCH:
        return QdiffError(f"numpy.{name} {reason} on a traced value; use qdiff.numpy.{name}")
    return QdiffError(
        f"numpy.{name} {reason or 'has no qdiff.numpy counterpart'}, so it cannot run on a "
        "traced value; write it with qdiff.numpy functions")


def _dispatch(name: str, args: tuple, kwargs: dict) -> Any:
    """``qdiff.numpy.<name>(*args, **kwargs)``, dropping keywords NumPy fills with defaults
    (``out=None``) and naming the keywords qdiff cannot honour."""
    fn = NUMPY_DISPATCH.get(name)
    if fn is None:
        raise _unsupported(name, "")
    kwargs = {k: v for k, v in kwargs.items() if not (k == "out" and v is None)}
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as exc:
        raise _unsupported(name, f"cannot take these arguments ({exc})") from None
    return fn(*args, **kwargs)


def _array_ufunc(self: Tracer, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    if method != "__call__":
        raise _unsupported(f"{ufunc.__name__}.{method}",
                           "is a ufunc method, which qdiff.numpy does not have")
    return _dispatch(ufunc.__name__, inputs, kwargs)


def _array_function(self: Tracer, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    return _dispatch(func.__name__, args, kwargs)


def bind_tracer_methods() -> None:
    """Give `Tracer` its NumPy-style operators, properties and methods."""
    for name, fn in _BINARY_OPERATORS.items():
        setattr(Tracer, f"__{name}__", _operator(fn))
        setattr(Tracer, f"__r{name}__", _reflected(fn))
    for name, fn in _COMPARISONS.items():
        setattr(Tracer, f"__{name}__", _operator(fn))
    for name, fn in _UNARY_OPERATORS.items():
        setattr(Tracer, f"__{name}__", fn)
    for name, fn in _REDUCTIONS.items():
        setattr(Tracer, name, _reduction(fn))
    Tracer.argmax = _arg_reduction(argmax)
    Tracer.argmin = _arg_reduction(argmin)
    Tracer.__getitem__ = getitem
    Tracer.at = property(IndexUpdateHelper)
    Tracer.T = property(transpose)
    Tracer.reshape = _reshape
    Tracer.transpose = lambda self, *axes: transpose(self, axes or None)
    Tracer.squeeze = lambda self, axis=None: squeeze(self, axis)
    Tracer.ravel = Tracer.flatten = _flat
    Tracer.astype = astype
    Tracer.dot = dot
    Tracer.__array_ufunc__ = _array_ufunc
    Tracer.__array_function__ = _array_function


bind_tracer_methods()
