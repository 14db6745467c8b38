"""Operand handling shared by the `qdiff.numpy` functions: dtype promotion and broadcasting.

NumPy's implicit rules become explicit equations here (`convert`, `broadcast_in_dim`), so
primitives stay simple: their operands share one dtype and one shape (rank-0 scalars
excepted). Python scalars are weakly typed, as in NumPy 2: ``x * 2`` keeps x's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.errors import TypeCheckError
from ..ir.primitives import get_primitive
from ..ir.tracer import Tracer, as_operand, bind, user_location

_PYTHON_SCALARS = (bool, int, float, complex)


def dtype_of(value: Any) -> Any:
    """What `np.result_type` needs: the dtype of arrays, Python scalars as weak values."""
    if isinstance(value, Tracer):
        return value.dtype
    if isinstance(value, _PYTHON_SCALARS):
        return value
    return np.asarray(value).dtype


def shape_of(value: Any) -> tuple[int, ...]:
    if isinstance(value, Tracer):
        return value.shape
    return np.shape(value)


def result_dtype(*values: Any) -> np.dtype:
    dtype = np.result_type(*(dtype_of(v) for v in values))
    if dtype == np.float16:
        return np.dtype(np.float32)
    return dtype


def broadcast_shapes(name: str, *values: Any) -> tuple[int, ...]:
    shapes = [shape_of(v) for v in values]
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        listed = " and ".join(str(tuple(s)) for s in shapes)
        raise TypeCheckError(
            f"{name}: cannot broadcast shapes {listed} (at {user_location()})") from None


def broadcast_to_shape(value: Any, shape: tuple[int, ...]) -> Any:
    """``value`` broadcast to ``shape`` with an explicit `broadcast_in_dim` (NumPy rules)."""
    current = shape_of(value)
    if tuple(current) == tuple(shape):
        return value
    offset = len(shape) - len(current)
    if offset < 0 or any(c not in (1, s) for c, s in zip(current, shape[offset:])):
        raise TypeCheckError(f"cannot broadcast shape {tuple(current)} to {tuple(shape)}")
    return bind(get_primitive("broadcast_in_dim"), value, shape=tuple(shape),
                broadcast_dimensions=tuple(range(offset, len(shape))))


def promote(name: str, *values: Any, dtype: Any = None,
            keep_scalars: bool = True) -> tuple[list[Any], tuple[int, ...]]:
    """Operands converted to one dtype and broadcast to one shape.

    Rank-0 operands are left unbroadcast when ``keep_scalars`` (the primitives accept them).
    """
    target = np.dtype(dtype) if dtype is not None else result_dtype(*values)
    shape = broadcast_shapes(name, *values)
    return [fit(as_operand(v, target), shape, keep_scalars) for v in values], shape


def fit(value: Any, shape: tuple[int, ...], keep_scalars: bool = True) -> Any:
    """``value`` broadcast to ``shape``, except a rank-0 value when ``keep_scalars``."""
    if keep_scalars and shape_of(value) == ():
        return value
    return broadcast_to_shape(value, shape)


def apply(name: str, *operands: Any, **params: Any) -> Any:
    """Bind the primitive called ``name``."""
    return bind(get_primitive(name), *operands, **params)


def float_dtype(*values: Any) -> np.dtype:
    """The dtype of a float-valued op (ints and bools promote to float64)."""
    dtype = result_dtype(*values)
    return dtype if dtype.kind in "fc" else np.dtype(np.float64)


def astype(x: Any, dtype: Any) -> Any:
    """``x`` converted to ``dtype``.

    >>> import qdiff.numpy as qnp
    >>> qnp.astype(np.array([1.7, -1.2]), "int64").tolist()
    [1, -1]
    """
    return as_operand(x, np.dtype(dtype))
