"""`qdiff.numpy`: a NumPy-like namespace that works on concrete arrays and on traced values.

Inside `@qdiff.program` (or `qdiff.trace`) these functions record IR equations; on concrete
arrays they compute right away with the reference implementations.

>>> import qdiff.numpy as qnp
>>> float(qnp.sum(qnp.sin(np.zeros(3)) + 1.0))
3.0
"""

import numpy as _np

from . import tracer_methods  # noqa: F401  (gives traced values their operators and methods)
from ._core import astype
from .arrange import cross, repeat, roll, take_along_axis, tile
from .creation import (
    arange,
    array,
    asarray,
    eye,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from .cumulative import cumprod, cumsum, diff
from .diagonals import diag, diagonal, trace, tril, tril_indices, triu, triu_indices
from .elementwise import (
    abs,
    absolute,
    add,
    arccos,
    arcsin,
    arctan,
    arctan2,
    ceil,
    clip,
    conj,
    cos,
    cosh,
    divide,
    equal,
    exp,
    expm1,
    floor,
    floor_divide,
    greater,
    greater_equal,
    imag,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    log,
    log1p,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    maximum,
    minimum,
    mod,
    multiply,
    negative,
    not_equal,
    power,
    real,
    reciprocal,
    remainder,
    result_type,
    round,
    sigmoid,
    sign,
    sin,
    sinh,
    sqrt,
    square,
    subtract,
    tan,
    tanh,
    true_divide,
    where,
)
from .indexing import IndexUpdateHelper, getitem, take
from .linalg import dot, einsum, inner, matmul, outer, vdot
from .reductions import (
    amax,
    amin,
    argmax,
    argmin,
    logaddexp,
    logsumexp,
    max,
    mean,
    min,
    prod,
    sum,
)
from .shape import (
    broadcast_to,
    concatenate,
    expand_dims,
    hstack,
    moveaxis,
    ravel,
    reshape,
    squeeze,
    stack,
    swapaxes,
    transpose,
    vstack,
)

pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None
float32, float64 = _np.float32, _np.float64
int32, int64 = _np.int32, _np.int64
complex64, complex128 = _np.complex64, _np.complex128
bool_ = _np.bool_

__all__ = [name for name in dir() if not name.startswith("_")]
