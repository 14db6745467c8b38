"""Elementwise primitives in CUDA kernels: the scalar expressions that differ from the CPU
target's (`compiler.rules.elementwise.SCALAR`), one table entry per primitive.

numba-cuda lowers a NumPy ufunc called on scalars inside a kernel through a table of its own
(``numba.cuda.ufuncs.ufunc_db``), which lacks ``exp``, ``sqrt``, ``floor``, ``sign``,
``power``, ``remainder`` and others (`CUDA_UFUNCS` lists what it has): each of those is
written here with `math` functions (numba-cuda picks the float32 or float64 routine by the
argument's type), `libdevice` routines, operators, or the device functions of `device`
(NumPy's ``divmod`` for floats). Integer and complex operands keep the CPU form where it
lowers. Under the CUDA simulator `device.math` and `device.libdevice` are NumPy's ufuncs,
so the same text runs there with the same results.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from ...classical.elementwise import PRIMITIVES
from ...ir.core import Eqn
from ...ir.primitives import Primitive
from ..errors import NotCompilableError
from ..rules.elementwise import SCALAR

# the ufuncs numba-cuda 0.30.4 lowers on scalars in kernels (numba.cuda.ufuncs.ufunc_db)
CUDA_UFUNCS = frozenset({
    "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2", "arctanh", "bitwise_and",
    "bitwise_or", "bitwise_xor", "conjugate", "cos", "cosh", "deg2rad", "degrees", "divide",
    "equal", "fmax", "fmin", "greater", "greater_equal", "hypot", "invert", "isnan",
    "left_shift", "less", "less_equal", "log", "log10", "log2", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "not_equal", "rad2deg", "radians",
    "right_shift", "sin", "sinh", "tan", "tanh"})

Expression = Callable[[Eqn, list[str]], str]


def _kind(eqn: Eqn) -> str:
    """The result's dtype kind: integer operands of a float result convert on the call."""
    return np.dtype(eqn.outputs[0].type.dtype).kind


def _float_routine(name: str) -> Expression:
    """``libdevice.<name>`` (float64) or ``<name>f`` (float32) for floats."""
    def expression(eqn: Eqn, args: list[str]) -> str:
        single = np.dtype(eqn.outputs[0].type.dtype) == np.float32
        return f"libdevice.{name}{'f' if single else ''}({', '.join(args)})"
    return expression


def _math(name: str) -> Expression:
    return lambda eqn, args: f"math.{name}({args[0]})"


def _sign(eqn: Eqn, args: list[str]) -> str:
    # NumPy: 1, -1, 0 for ±0, and NaN stays NaN (x is returned where no comparison holds);
    # complex numbers are not ordered: z / |z| (a device function)
    x = args[0]
    if _kind(eqn) == "c":
        return f"rtc.complex_sign({x})"
    one, zero = ("1.0", "0.0") if _kind(eqn) == "f" else ("1", "0")
    return f"({one} if {x} > 0 else (-{one} if {x} < 0 else ({zero} if {x} == 0 else {x})))"


def _integer_division(operator: str, device_function: str) -> Expression:
    # integers: Python's floor rules are NumPy's, and NumPy gives 0 for a zero divisor
    def expression(eqn: Eqn, args: list[str]) -> str:
        a, b = args
        if _kind(eqn) == "f":
            return f"rtc.{device_function}({a}, {b})"
        return f"(0 if {b} == 0 else {a} {operator} {b})"
    return expression


def _power(eqn: Eqn, args: list[str]) -> str:
    if _kind(eqn) == "f":
        return _float_routine("pow")(eqn, args)
    return f"({args[0]} ** {args[1]})"


def _floats_only(expression: Expression) -> Expression:
    """``expression`` for float operands; None (the CPU form) for others."""
    return lambda eqn, args: expression(eqn, args) if _kind(eqn) == "f" else None


# primitive -> (eqn, operand expressions) -> expression, or None for the CPU target's form
_OWN: dict = {
    PRIMITIVES["exp"]: _floats_only(_math("exp")),
    PRIMITIVES["expm1"]: _floats_only(_math("expm1")),
    PRIMITIVES["log1p"]: _floats_only(_math("log1p")),
    PRIMITIVES["sqrt"]: _floats_only(_math("sqrt")),
    PRIMITIVES["floor"]: _floats_only(_float_routine("floor")),
    PRIMITIVES["ceil"]: _floats_only(_float_routine("ceil")),
    PRIMITIVES["round"]: _floats_only(_float_routine("rint")),  # half to even, as np.round
    PRIMITIVES["abs"]: lambda eqn, args: f"abs({args[0]})",
    PRIMITIVES["neg"]: lambda eqn, args: f"(-{args[0]})",
    PRIMITIVES["sign"]: _sign,
    PRIMITIVES["pow"]: _power,
    PRIMITIVES["floor_div"]: _integer_division("//", "floor_divide"),
    PRIMITIVES["rem"]: _integer_division("%", "remainder"),
}


def _lowered_ufuncs(text: str) -> set[str]:
    """The NumPy functions ``text`` calls, leaving out scalar-type constructors."""
    return {name for name in re.findall(r"\bnp\.(\w+)\(", text)
            if not isinstance(getattr(np, name, None), type)}


def _kernel_form(primitive: Primitive) -> Expression:
    own = _OWN.get(primitive)

    def expression(eqn: Eqn, args: list[str]) -> str:
        text = own(eqn, args) if own is not None else None
        if text is None:
            text = SCALAR[primitive](eqn, args)
            missing = _lowered_ufuncs(text) - CUDA_UFUNCS
            if missing:
                raise NotCompilableError(
                    f"{primitive.name} of {eqn.outputs[0].type.dtype} values cannot run in a "
                    f"CUDA kernel (numba-cuda lowers no np.{', np.'.join(sorted(missing))} "
                    "there); compile this program with backend='numba'")
        return text
    return expression


# what kernels compute for each elementwise primitive (CudaScope reads it in kernel code;
# the host function keeps the CPU forms, run by NumPy)
CUDA_SCALAR: dict = {primitive: _kernel_form(primitive) for primitive in SCALAR}
