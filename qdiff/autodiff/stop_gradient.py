"""`stop_gradient`: the identity whose derivative is zero (a value treated as a constant).

>>> import qdiff, qdiff.numpy as qnp
>>> float(qdiff.grad(lambda x: x * stop_gradient(x))(3.0))
3.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir.primitives import register_primitive
from ..ir.tracer import as_operand, bind
from ..ir.type_rules import tensor
from ..ir.types import Type
from .rules import def_zero_derivative


def _identity_rule(x: Type) -> tuple[Type, ...]:
    return (tensor(x, "operand"),)


stop_gradient_p = register_primitive("stop_gradient", _identity_rule)
stop_gradient_p.def_impl("numpy")(lambda x: np.asarray(x))
def_zero_derivative(stop_gradient_p)


def stop_gradient(x: Any) -> Any:
    """``x`` unchanged, but with zero derivative in every transformation."""
    return bind(stop_gradient_p, as_operand(x))
