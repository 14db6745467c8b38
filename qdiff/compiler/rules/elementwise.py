"""Elementwise primitives as scalar expressions: one table entry per primitive.

Each row is the NumPy ufunc the interpreter calls (Numba implements ufuncs on scalars with
NumPy's semantics: NaN in max/min, the sign of remainders, IEEE results where Python would
raise); the few without a ufunc form are written out. Array operands never reach these
rules: the coarsening pass puts array equations into loop nests, which apply the same
expressions to each element.
"""

from __future__ import annotations

from collections.abc import Callable

from ...classical.elementwise import BINARY, PRIMITIVES, UNARY, convert_p, select_p
from ...ir.core import Eqn, Literal
from ..lowering import Scope, rule
from ..source import cast, dtype_name

# ufuncs whose Numba scalar form is another function or an expression
_WRITTEN_OUT: dict[str, Callable[..., str]] = {
    "round": lambda x: f"np.rint({x})",       # np.round(x) with 0 decimals: half to even
    "real": lambda x: f"({x}).real",
    "imag": lambda x: f"({x}).imag",
}


def _ufunc_expression(name: str) -> Callable[..., str]:
    if name in _WRITTEN_OUT:
        return _WRITTEN_OUT[name]
    ufunc = {**UNARY, **BINARY}[name][0].__name__
    return lambda *args: f"np.{ufunc}({', '.join(args)})"


# operators where Python's and NumPy's semantics agree (the source reads better)
_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "eq": "==", "ne": "!=", "lt": "<",
              "le": "<=", "gt": ">", "ge": ">="}
for _name, _symbol in _OPERATORS.items():
    _WRITTEN_OUT[_name] = (lambda s: lambda a, b: f"({a} {s} {b})")(_symbol)

# primitive -> (eqn, operand expressions) -> expression of the result
SCALAR: dict = {
    PRIMITIVES[name]: (lambda fn: lambda eqn, args: fn(*args))(_ufunc_expression(name))
    for name in (*UNARY, *BINARY)
}
SCALAR[select_p] = lambda eqn, args: f"({args[1]} if {args[0]} else {args[2]})"
SCALAR[convert_p] = lambda eqn, args: f"{dtype_name(eqn.params['dtype'])}({args[0]})"


def scalar_expression(eqn: Eqn, args: list[str], target: dict | None = None) -> str:
    """The expression computing one element of ``eqn``'s result from its operands'
    elements, in the result's dtype; ``target`` holds a target's own forms of some
    primitives (an entry may answer None: the form here)."""
    exponent = eqn.inputs[-1]
    if eqn.primitive.name == "pow" and isinstance(exponent, Literal) \
            and exponent.value.dtype.kind == "f" and exponent.value.shape == () \
            and float(exponent.value) == 2.0:
        # x * x is pow(x, 2) correctly rounded, at the cost of one multiply
        return f"({args[0]} * {args[0]})"
    written = (target or {}).get(eqn.primitive)
    text = written(eqn, args) if written is not None else None
    if text is None:
        text = SCALAR[eqn.primitive](eqn, args)
    return cast(text, eqn.outputs[0].type.dtype)


@rule(*SCALAR)
def _scalar(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    out = scope.fresh()
    scope.line(f"{out} = {scalar_expression(eqn, args, scope.scalar_forms)}")
    return [out]
