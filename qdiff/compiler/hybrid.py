"""Compiling around the quantum part of a program that does not compile whole.

A quantum program with mid-circuit measurements (or a register too wide for compiled code)
runs on its runner, the branching simulator: exact branching semantics, remainders
reported as the simulator reports them. Its classical equations need not run in the
interpreter all the same: `hybrid_form` cuts them into segments (`split.py`), compiles
each (`segment_call.Segment`) and puts one ``compiled_segment`` equation in its place. The
runner runs that program; the simulator's derivative rules run it too, and chain-rule
through the segments' compiled VJPs. The bodies of the loops and branches the simulator
runs are cut the same way, since it runs them once per round and branch. `HybridForm.plan`
says what runs where (a body's lines indented under its loop).
"""

from __future__ import annotations

import functools

from ..ir.core import Eqn, Program
from ..ir.interpreter import runner_for
from .errors import NotCompilableError
from .lowering import Options, compiles, unsupported
from .segment_call import Segment, compiled_segment_p
from .split import split_program


def _single(eqn: Eqn) -> Program:
    return Program((), (eqn,), ())


def _is_classical(eqn: Eqn) -> bool:
    return runner_for(_single(eqn)) is None


class HybridForm:
    """``program`` (one its runner claims) with its top-level classical equations compiled
    in segments; ``program`` here is the rewritten one, which the same runner runs.

    ``fallback="error"`` refuses classical primitives without a compiled form
    (`NotCompilableError` naming them); ``"interpret"`` leaves them to the runner, listed in
    ``interpreted``.
    """

    def __init__(self, program: Program, options: Options, fallback: str = "error"):
        self.original = program
        self.interpreted = sorted({name for e in program.eqns if _is_classical(e)
                                   for name in unsupported(_single(e))})
        if self.interpreted and fallback == "error":
            raise NotCompilableError(
                f"cannot compile program {program.name!r}: primitive(s) "
                f"{', '.join(self.interpreted)} have no compiled form; pass "
                "fallback='interpret' to run them in the interpreter")
        parts = split_program(program, lambda e: _is_classical(e) and compiles(e))
        self.segments: list[Segment] = []
        eqns: list[Eqn] = []
        self.plan: list[str] = []
        for part in parts:
            if isinstance(part, Program):
                segment = Segment(part, options)
                self.segments.append(segment)
                eqns.append(Eqn(compiled_segment_p, part.inputs, part.outputs,
                                {"segment": segment}))
                self.plan.append(f"compiled: {part.name} ({len(part.eqns)} classical "
                                 "equations, Numba)")
            else:
                where = ("interpreted" if _is_classical(part) else "simulator")
                self.plan.append(f"{where}: {part.primitive.name}")
                if where == "simulator":
                    part = part.map_subprograms(functools.partial(
                        self._compiled_around, owner=part.primitive.name, options=options))
                eqns.append(part)
        self.program = Program(program.inputs, tuple(eqns), program.outputs, name=program.name,
                               in_tree=program.in_tree, out_tree=program.out_tree)

    def _compiled_around(self, body: Program, owner: str, options: Options) -> Program:
        """A loop body or branch the simulator runs, with its classical equations compiled
        in segments too (the simulator runs it once per round and branch, so they would
        otherwise be interpreted each time); those without a compiled form stay as they
        were, interpreted, as they were before (the error for them is the top level's)."""
        nested = HybridForm(body, options, fallback="interpret")
        self.segments.extend(nested.segments)
        self.plan.extend(f"  {owner} {body.name}: {line}" for line in nested.plan)
        return nested.program

    @property
    def source(self) -> str:
        """The plan as comments, then the generated source of every segment."""
        lines = "".join(f"# {line}\n" for line in self.plan)
        return lines + "\n".join(s.kernel.source for s in self.segments)


def hybrid_form(program: Program, options: Options | None = None,
                fallback: str = "error") -> HybridForm:
    """`HybridForm` of ``program``.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import repeat_until_one
    >>> form = hybrid_form(qdiff.trace(lambda t: repeat_until_one(t * 0.5) * 2.0, 0.7))
    >>> [line.split(":")[0] for line in form.plan if not line.startswith(" ")]
    ['compiled', 'simulator', 'simulator', 'compiled']
    >>> [line.split(" (")[0] for line in form.plan if line.startswith("  while body")]
    ['  while body: simulator: gate', '  while body: compiled: body_part1']
    """
    return HybridForm(program, options or Options(), fallback)
