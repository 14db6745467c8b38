"""Derivatives of whole programs that are not program transformations.

Most primitives are differentiated by rules that rewrite programs: a JVP and a VJP rule per
primitive, which `grad`, `jacobian` and friends compose into derivative Programs. Some
programs are differentiated as a whole instead. A quantum program's gradient runs the
adjoint method (or parameter shift) on the branching simulator: it is a computation, not a
Program. A package registers such a rule for the primitives it owns (`qdiff.quantum` does on
import); the differentiation API (`qdiff.transforms`) asks `rule_for(program)` and hands the
whole program to the rule when one of its primitives, at any depth, has one.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def f(t):
...     q = qm.qubits(1); qm.ry(t, q[0]); return qm.expval("Z", q)
>>> rule_for(qdiff.trace(f, 0.1)).name, rule_for(qdiff.trace(lambda x: x * 2.0, 1.0))
('quantum', None)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..ir.core import Program
from ..ir.primitives import Primitive


@dataclass(frozen=True)
class WholeProgramRule:
    """How one family of programs is differentiated, per API entry point.

    ``gradient(program, args, argnums, method, options)`` returns an object with ``value``
    and ``grad``; ``jacobian(program, args, argnums, method, options)`` the Jacobian;
    ``vjp(program, primals, flags, method, options)`` the pair ``(value, vjp_fn)``;
    ``jvp(program, flat_primals, flat_tangents, flags, method, options)`` the pair
    ``(value, tangent)``. ``name`` names the family in error messages, ``options`` the
    keyword options the rule takes (``method`` aside). ``taylor(program, method, options)``,
    when given, returns an evaluator of the program on jets (`qdiff.autodiff.jets`): called
    with flat input jets it returns flat output jets, and its ``report(what)`` says, once,
    what its runs left out; derivatives of derivatives (`qdiff.autodiff.nested_derivatives`)
    run on it.
    """

    name: str
    gradient: Callable[..., Any]
    jacobian: Callable[..., Any]
    vjp: Callable[..., Any]
    jvp: Callable[..., Any]
    options: frozenset[str] = frozenset()
    taylor: Callable[..., Any] | None = None


_RULES: dict[Primitive, WholeProgramRule] = {}
_FOUND: dict[int, tuple[Program, WholeProgramRule | None]] = {}


def register_whole_program_rule(primitives: Iterable[Primitive], rule: WholeProgramRule) -> None:
    """Differentiate every program that contains one of ``primitives`` with ``rule``."""
    for primitive in primitives:
        _RULES[primitive] = rule
    _FOUND.clear()


def known_options() -> dict[str, str]:
    """Every option some registered rule takes, with the name of the family that takes it."""
    return {option: rule.name for rule in _RULES.values() for option in rule.options}


def rule_for(program: Program) -> WholeProgramRule | None:
    """The rule of the first registered primitive in ``program`` or its sub-programs."""
    hit = _FOUND.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1]
    found = None
    for eqn in program.eqns:
        found = _RULES.get(eqn.primitive) or next(
            (r for _, sub in eqn.subprograms() if (r := rule_for(sub)) is not None), None)
        if found is not None:
            break
    if len(_FOUND) > 8192:
        _FOUND.clear()
    _FOUND[id(program)] = (program, found)
    return found


def rules_in(program: Program) -> list[WholeProgramRule]:
    """Every registered rule whose primitives ``program`` holds, at any depth, in order of
    first appearance.

    >>> import qdiff
    >>> rules_in(qdiff.trace(lambda x: x * 2.0, 1.0))
    []
    """
    found: list[WholeProgramRule] = []
    for eqn in program.all_eqns():
        rule = _RULES.get(eqn.primitive)
        if rule is not None and rule not in found:
            found.append(rule)
    return found
