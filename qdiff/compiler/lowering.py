"""Lowering: IR programs to the statements of one generated function.

A `Scope` lowers one program (the top level, or a loop body, branch or lambda inlined into
it): it names each var, asks the coarsening pass (`fusion.plan`) how to group the array
equations into loop nests, and writes each equation through its rule in `RULES` (one table
entry per primitive, filled by the modules of `qdiff.compiler.rules`). Sub-programs are
inlined, so a loop in the IR is a loop in the generated code and a scalar loop compiles to
scalar machine code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..ir.core import Eqn, Literal, Program, Var
from ..ir.primitives import Primitive
from ..ir.types import Tensor
from .analysis import Liveness, liveness, readers
from .duplicates import merge_repeated_outputs
from .errors import NotCompilableError
from .fusion import Group, plan
from .linear_sums import push_sums_into_contractions
from .rematerialize import rematerialize
from .schedule import hoist
from .source import Source, dtype_name, scalar_literal
from .weighted_gram import weighted_grams

# A rule writes the statements of one equation and returns the expressions of its outputs.
Rule = Callable[["Scope", Eqn, list[str]], list[str]]
RULES: dict[Primitive, Rule] = {}
# The lowering of a fused group of array equations into one loop nest (`groups.py` fills it).
LOOP_NEST: list[Callable[[Scope, Group], None]] = []


def rule(*primitives: Primitive) -> Callable[[Rule], Rule]:
    """Register the lowering of ``primitives``."""
    def register(fn: Rule) -> Rule:
        for primitive in primitives:
            RULES[primitive] = fn
        return fn
    return register


@dataclass(frozen=True)
class Options:
    """How code is generated: ``parallel`` turns the outer loop of each loop nest into a
    ``prange`` (Numba's ``parallel=True``)."""

    parallel: bool = False

    @property
    def outer_range(self) -> str:
        return "prange" if self.parallel else "range"


def unsupported(program: Program) -> list[str]:
    """The names of the primitives in ``program`` (sub-programs included) with no rule."""
    return sorted({e.primitive.name for e in program.all_eqns() if e.primitive not in RULES})


def compiles(eqn: Eqn) -> bool:
    """Whether ``eqn`` (its sub-programs included) has a rule for every primitive.

    >>> import qdiff, qdiff.numpy as qnp
    >>> compiles(qdiff.trace(lambda x: qnp.sin(x), 0.5).eqns[0])
    True
    """
    return not unsupported(Program((), (eqn,), ()))


class Scope:
    """The lowering of one program into ``source``."""

    # a target's own scalar forms of some elementwise primitives (see `scalar_expression`)
    scalar_forms: dict = {}
    # whether arrays an iteration allocates and drops are allocated once before the loop
    # (`allocate`); a target whose allocations are not host arrays says no
    hoists_allocations = True

    def __init__(self, source: Source, options: Options, program: Program,
                 inputs: Sequence[str], owned_inputs: Sequence[Var] = ()):
        program = hoist(rematerialize(
            weighted_grams(push_sums_into_contractions(merge_repeated_outputs(program))),
            self.writes_point_products()))
        self.src, self.options, self.program = source, options, program
        self.env: dict[Var, str] = dict(zip(program.inputs, inputs))
        self.live: Liveness = liveness(program, owned_inputs)
        self.index = -1  # the equation being lowered
        self.readers: dict[Var, list[Eqn | None]] = readers(program)  # None: an output
        # one-element arrays held as their element, when no reader needs the array
        self.elements: dict[Var, str] = {}
        # one-row views (of a leading-axis block): the array and the row's index
        self.rows: dict[Var, tuple[str, str]] = {}
        # names one equation's rule leaves for a later equation's rule in this scope (a
        # quantum block's last state, which its vjp's backward sweep starts from)
        self.kept: dict[tuple, str] = {}
        # the array each value is stored in, where the generated code put it in the array of
        # another (an in-place update, a carry taking its initial array): value -> storage
        self.stored_in: dict[Var, Var] = {}
        # the names bound to array values (a bound expression that starts with one of them
        # is that array or a view of it)
        self.array_names: dict[str, Var] = {}
        for var, name in self.env.items():
            self.name_array(name, var)
        # allocations `lower` may move out of the loops around this scope: (the value the
        # array holds, None for scratch; the line written; the allocation; its refill)
        self.allocations: list[tuple[Var | None, str, str, str | None]] = []
        # the equations written so far (coarsening writes some later than program order)
        self.written: set[Eqn] = set()
        self.lowering: set[Eqn] = set()  # the equations being written now
        self._by_root: dict[Var, list[Var]] | None = None  # see `_sharing`

    # ------------------------------------------------------------------ values
    def read(self, atom: Any) -> str:
        if isinstance(atom, Literal):
            return literal(self.src, atom)
        return self.env[atom]

    def bind(self, var: Var, expression: str) -> None:
        if _is_array(var):
            match = _LEADING_NAME.match(expression)
            holder = self.array_names.get(match.group(0)) if match else None
            if holder is not None and holder is not var:
                self.stored_in[var] = self.storage_of(holder)
            self.name_array(expression, var)
        self.env[var] = expression

    def name_array(self, name: str, var: Any) -> None:
        """Note that the generated name ``name`` holds ``var``'s array (or shares it)."""
        if isinstance(var, Var) and _is_array(var):
            self.array_names.setdefault(name, var)

    def storage_of(self, var: Var) -> Var:
        """The value whose array holds ``var``: its view root, or the array an in-place
        update or a loop carry stored it in."""
        if var in self.stored_in:
            return self.stored_in[var]
        root = self.live.root_of(var)
        return self.stored_in.get(root, root)

    def allocate(self, name: str, var: Var | None, shape: Sequence[int], dtype: Any,
                 fill: str | None = None) -> None:
        """Write ``name = np.empty(shape, dtype)`` (filled with the scalar ``fill`` when
        given), the array holding ``var`` (None: scratch that no value keeps). Inside a
        sequential loop, an array that this scope's outputs do not hold is allocated once,
        before the outermost loop, and only refilled per iteration (`lower`)."""
        if fill is None:
            allocation = empty(shape, dtype)
        elif fill == scalar_literal(0, dtype):
            allocation = zeros(shape, dtype)
        else:
            allocation = f"np.full({shape_text(shape)}, {fill}, {dtype_name(dtype)})"
        self.line(f"{name} = {allocation}")
        if var is not None:
            self.name_array(name, var)
        if self.hoists_allocations and self.src.can_hoist():
            refill = None if fill is None else f"{name}.fill({fill})"
            self.allocations.append((var, self.src.lines[-1], f"{name} = {allocation}",
                                     refill))

    def free_array(self, like: Var, busy: set[Var]) -> str | None:
        """The name of an array of ``like``'s type that this scope owns and that holds no
        value read after the equation being lowered (a carry or an adjoint whose last reader
        came earlier), so a result may be stored in it instead of a new array; ``busy``:
        values whose arrays are still read (the nest's operands). Every reader of a value it
        holds must be written already: the coarsening pass may write an equation after a
        later one, so program order does not say. None when there is none.
        """
        holders: dict[Var, list[Var]] = {}
        for var in self.env:
            if _is_array(var):
                holders.setdefault(self.storage_of(var), []).append(var)
        busy = {self.storage_of(v) for v in busy}
        kept = set(self.kept.values())
        for storage, values in holders.items():
            name = self.env.get(storage)
            if storage.type != like.type or storage in busy \
                    or storage not in self.live.owned_roots or name in kept \
                    or self.array_names.get(name) is not storage:
                continue
            if all(reader in self.written for v in values for reader in self.readers.get(v, ())):
                return name
        return None

    def hoist_allocations(self) -> None:
        """Allocate once, before the loops around this scope, the arrays it allocates and
        hands on to no later iteration and no enclosing program: none of its outputs is
        stored in them."""
        kept = {self.storage_of(a) for a in self.program.outputs
                if isinstance(a, Var) and _is_array(a)}
        for var, line, allocation, refill in self.allocations:
            if var is None or self.storage_of(var) not in kept:
                self.src.hoist(line, allocation, refill)
        self.allocations = []

    def line(self, text: str) -> None:
        self.src.line(text)

    def fresh(self, prefix: str = "v") -> str:
        return self.src.fresh(prefix)

    def can_overwrite(self, atom: Any) -> bool:
        """Whether the equation being lowered may update ``atom``'s array in place: no
        later equation reads it, and every reader of it (of any view of it) is written
        already or is being written now. Program order alone does not say: the coarsening
        pass may write an equation after a later one, whose nest would then read the array
        after it was overwritten."""
        return isinstance(atom, Var) and self.live.overwritable(atom, self.index) and all(
            reader is None or reader in self.written or reader in self.lowering
            for var in self._sharing(atom) for reader in self.readers.get(var, ()))

    def _sharing(self, atom: Var) -> list[Var]:
        """The values read in this scope that share ``atom``'s array (its views)."""
        if self._by_root is None:
            self._by_root = {}
            for var in self.readers:
                self._by_root.setdefault(self.live.root_of(var), []).append(var)
        return self._by_root.get(self.live.root_of(atom), [atom])

    def writable(self, atom: Any) -> str:
        """``atom``'s array, or a copy of it when it may not be overwritten here."""
        expression = self.read(atom)
        if self.can_overwrite(atom):
            return expression
        copy = self.fresh("w")
        self.line(f"{copy} = {expression}.copy()")
        return copy

    def only_read_by(self, var: Var, accepts: Callable[[Eqn, Var], bool]) -> bool:
        """Whether every reader of ``var`` is an equation that ``accepts(eqn, var)``."""
        readers = self.readers.get(var, [])
        return bool(readers) and all(e is not None and accepts(e, var) for e in readers)

    # ------------------------------------------------------------------ programs
    def lower(self) -> list[str]:
        """Write the program's statements; return the expressions of its outputs."""
        positions = {id(e): k for k, e in enumerate(self.program.eqns)}
        for item in plan(self.program.eqns, self.writes_point_products()):
            if isinstance(item, Eqn):
                self.index = positions[id(item)]
                self.lowering = {item}
                self.lower_eqn(item)
                self.written.add(item)
            else:
                self.index = max(positions[id(e)] for e in item.members)
                self.lowering = set(item.members)
                self.lower_group(item)
                self.written.update(item.members)
        self.hoist_allocations()
        return [self.read(a) for a in self.program.outputs]

    def writes_point_products(self) -> bool:
        """Whether point products (`fusion.point_product`) join loop nests: where the nests
        are the CPU target's (`groups.lower_group`, which computes them tile by tile as
        BLAS products); a target writing its own nests keeps them as einsums."""
        return type(self).lower_group is Scope.lower_group

    def lower_group(self, group: Group) -> None:
        """Write one fused group's loop nest (a target may write it otherwise)."""
        LOOP_NEST[0](self, group)

    def rule_for(self, primitive: Primitive) -> Rule | None:
        """How this scope lowers ``primitive`` (a target may override some rules)."""
        return RULES.get(primitive)

    def lower_eqn(self, eqn: Eqn) -> None:
        lower = self.rule_for(eqn.primitive)
        if lower is None:
            raise NotCompilableError(f"primitive {eqn.primitive.name!r} has no compiled form")
        outputs = lower(self, eqn, [self.read(a) for a in eqn.inputs])
        for var, expression in zip(eqn.outputs, outputs):
            self.bind(var, expression)

    def inline(self, program: Program, inputs: Sequence[str],
               owned_inputs: Sequence[Var] = ()) -> list[str]:
        """Lower a sub-program here (its own names and liveness) on ``inputs``."""
        return type(self)(self.src, self.options, program, inputs, owned_inputs).lower()

    def owned_outputs(self, program: Program, outputs: list[str],
                      owned_inputs: Sequence[Var] = ()) -> list[str]:
        """``program``'s outputs made safe to hand over as loop carries: an array output that
        is not owned by the program (a const, a literal, a view of an input) or that repeats
        another output is copied."""
        live = liveness(program, owned_inputs)
        seen: set[Var] = set()
        result = []
        for atom, expression in zip(program.outputs, outputs):
            if isinstance(atom.type, Tensor) and atom.type.shape:
                root = live.root_of(atom) if isinstance(atom, Var) else None
                if root is None or root in seen or root not in live.owned_roots:
                    copy = self.fresh("c")
                    self.line(f"{copy} = {expression}.copy()")
                    expression = copy
                if root is not None:
                    seen.add(root)
            result.append(expression)
        return result


_LEADING_NAME = re.compile(r"[A-Za-z_]\w*")


def _is_array(atom: Any) -> bool:
    return isinstance(atom.type, Tensor) and bool(atom.type.shape)


def literal(source: Source, atom: Literal) -> str:
    """A literal as source text: scalars inline, arrays as constant arguments."""
    value = atom.value
    if value.shape == ():
        return scalar_literal(value[()], value.dtype)
    return source.constant(value)


def zeros(shape: tuple[int, ...], dtype: Any) -> str:
    return f"np.zeros({shape_text(shape)}, {dtype_name(dtype)})"


def empty(shape: tuple[int, ...], dtype: Any) -> str:
    return f"np.empty({shape_text(shape)}, {dtype_name(dtype)})"


def shape_text(shape: Sequence[int]) -> str:
    """A shape tuple as source text (one-element tuples keep their comma)."""
    return "(" + "".join(f"{int(d)}, " for d in shape).rstrip(" ") + ")" if shape else "()"

