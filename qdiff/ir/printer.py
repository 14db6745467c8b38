"""The readable text form of programs. Loops stay loops: sub-programs print nested and indented.

Example::

    program f(a: f64[5], b: i64[]) -> f64[5] {
      c: f64[5] = loop 0 b a
        body(d: i64[], e: f64[5]) {
          f: f64[5] = sin e
          return f
        }
      return c
    }
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .core import Eqn, Literal, Program, Var
from .types import Tensor

_SMALL_LITERAL = 8  # arrays up to this many elements print their values


class _Namer:
    """Gives vars short names a, b, ..., z, ba, ... in order of appearance."""

    def __init__(self) -> None:
        self.names: dict[Var, str] = {}

    def __call__(self, var: Var) -> str:
        name = self.names.get(var)
        if name is None:
            name = _letters(len(self.names))
            self.names[var] = name
        return name


def _letters(index: int) -> str:
    text = ""
    while True:
        text = chr(ord("a") + index % 26) + text
        index //= 26
        if index == 0:
            return text


def format_program(program: Program) -> str:
    """The text form of ``program`` (what ``print(program)`` shows)."""
    lines: list[str] = []
    _format(program, _Namer(), lines, indent="", header=f"program {program.name}")
    return "\n".join(lines)


Program.__str__ = format_program  # type: ignore[method-assign]


def _format(program: Program, name: _Namer, lines: list[str], indent: str, header: str) -> None:
    params = ", ".join(f"{name(v)}: {v.type.short()}" for v in program.inputs)
    outs = [t.short() for t in program.out_types]
    result = outs[0] if len(outs) == 1 else f"({', '.join(outs)})"
    lines.append(f"{indent}{header}({params}) -> {result} {{")
    for eqn in program.eqns:
        _format_eqn(eqn, name, lines, indent + "  ")
    returned = ", ".join(_atom(a, name) for a in program.outputs)
    lines.append(f"{indent}  return {returned}")
    lines.append(f"{indent}}}")


def _format_eqn(eqn: Eqn, name: _Namer, lines: list[str], indent: str) -> None:
    outs = ", ".join(f"{name(v)}: {v.type.short()}" for v in eqn.outputs)
    shown = {k: v for k, v in eqn.params.items() if k not in eqn.primitive.subprogram_params}
    params = f"[{', '.join(f'{k}={_param(v)}' for k, v in shown.items())}]" if shown else ""
    args = " ".join(_atom(a, name) for a in eqn.inputs)
    lhs = f"{outs} = " if outs else ""
    lines.append(f"{indent}{lhs}{eqn.primitive.name}{params} {args}".rstrip())
    for label, sub in eqn.subprograms():
        _format(sub, name, lines, indent + "  ", header=label)


def _atom(atom: Any, name: _Namer) -> str:
    if isinstance(atom, Literal):
        return format_literal(atom)
    return name(atom)


def format_literal(literal: Literal) -> str:
    """A literal as the printer shows it: ``2.0``, ``3:i32``, ``[1.0, 2.0]:f64[2]``."""
    t: Tensor = literal.type
    default = t.dtype in ("float64", "int64", "bool", "complex128")
    if t.shape == ():
        text = repr(literal.value.item())
        return text if default else f"{text}:{t.short()[:-2]}"
    if t.size <= _SMALL_LITERAL:
        return f"{np.array2string(literal.value, separator=', ')}:{t.short()}".replace("\n", "")
    return f"<const {t.short()}>"


def _param(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"<array {value.dtype.name}{list(value.shape)}>"
    if isinstance(value, Program):
        return f"<program {value.name}>"
    return repr(value)
