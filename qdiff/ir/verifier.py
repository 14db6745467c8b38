"""The verifier: scope, SSA, types and linearity of quantum values, with precise errors."""

from __future__ import annotations

from .core import Eqn, Literal, Program, Var
from .errors import TypeCheckError, VerificationError
from .types import QState


def verify(program: Program, path: str | None = None) -> None:
    """Raise `VerificationError` naming the first broken invariant of ``program``.

    Checks: every var is defined once and before use; each equation's outputs have the
    types its primitive's type rule gives; sub-programs are closed and verify too; a
    ``QState`` value is consumed at most once.
    """
    where = path or f"program {program.name!r}"
    defined: dict[Var, str] = {}
    consumed: dict[Var, str] = {}

    def define(var: Var, site: str) -> None:
        if not isinstance(var, Var):
            raise VerificationError(f"{where}: {site} must be a Var, got {var!r}")
        if var in defined:
            raise VerificationError(
                f"{where}: {site} redefines a var already defined by {defined[var]} "
                "(programs are SSA: each var is defined once)")
        defined[var] = site

    def use(atom: object, site: str) -> None:
        if isinstance(atom, Literal):
            return
        if not isinstance(atom, Var):
            raise VerificationError(f"{where}: {site} is {atom!r}, not a Var or Literal")
        if atom not in defined:
            raise VerificationError(
                f"{where}: {site} uses a {atom.type.short()} var before it is defined")
        if isinstance(atom.type, QState):
            if atom in consumed:
                raise VerificationError(
                    f"{where}: {site} uses a {atom.type.short()} value that {consumed[atom]} "
                    "already consumed; quantum values are linear (each state is used once)")
            consumed[atom] = site

    for index, var in enumerate(program.inputs):
        define(var, f"input {index}")
    for index, eqn in enumerate(program.eqns):
        site = f"eqn {index} ({eqn.primitive.name})"
        for k, atom in enumerate(eqn.inputs):
            use(atom, f"{site} input {k}")
        for label, sub in eqn.subprograms():  # inner errors are the more precise ones
            verify(sub, f"{where} > {site} > {label}")
        _check_eqn_types(eqn, where, site)
        for k, var in enumerate(eqn.outputs):
            define(var, f"{site} output {k}")
    for k, atom in enumerate(program.outputs):
        use(atom, f"output {k}")


def _verify_method(self: Program) -> Program:
    """Check scope, SSA, types and linearity; raise `VerificationError` or return self."""
    verify(self)
    return self


Program.verify = _verify_method  # type: ignore[attr-defined]


def _check_eqn_types(eqn: Eqn, where: str, site: str) -> None:
    in_types = [a.type for a in eqn.inputs]
    try:
        expected = tuple(eqn.primitive.type_rule(*in_types, **eqn.params))
    except TypeCheckError as exc:
        raise VerificationError(f"{where}: {site} is ill-typed: {exc}") from None
    actual = tuple(v.type for v in eqn.outputs)
    if expected != actual:
        raise VerificationError(
            f"{where}: {site} declares outputs ({', '.join(t.short() for t in actual)}) but "
            f"its type rule gives ({', '.join(t.short() for t in expected)})")
