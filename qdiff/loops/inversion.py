"""Proving a loop body invertible, and deriving its inverse (reverse computing).

A body ``(i, *consts, *carry) -> carry`` is invertible when every carry is either passed
through or rebuilt by a chain of reversible updates of its own previous value (NiLang's
``+=``-style statements):

- ``x' = x + g``, ``g + x``, ``x - g``, ``g - x``, undone by the opposite operation, where
  ``g`` may read the loop index, loop invariants and the *other* carries, never ``x``;
- ``x' = x * a``, ``a * x``, ``x / a`` for floating ``x`` and a loop-invariant ``a`` (a
  literal must be nonzero; a traced ``a`` is assumed nonzero), undone by dividing or
  multiplying by ``a``.

The updates of all carries must fit one sequential order in which each reads the versions
of the other carries current at that point: the leapfrog step ``x' = x + dt·v;
v' = v - dt·f(x')`` does (x first), ``x' = x + y; y' = y + x`` does not (each reads the
other's old value after it was overwritten). The inverse undoes the updates in the opposite
order; anything else is refused with an error naming the carry and the update.

>>> import qdiff, qdiff.numpy as qnp
>>> leap = lambda i, c: (c[0] + 0.1 * c[1], c[1] - 0.1 * qnp.sin(c[0] + 0.1 * c[1]))
>>> p = qdiff.trace(lambda x: qdiff.fori_loop(0, 3, leap, (x, x)), 1.0)
>>> inverse = invert_loop_body(p.eqns[0].params["body"], 0)
>>> [float(v) for v in inverse(2, *p.eqns[0].params["body"](2, 0.5, 0.25))]
[0.5, 0.25]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..classical import elementwise  # noqa: F401  (registers add, sub, mul, div)
from ..ir.control_flow import LOOP_INVERTERS
from ..ir.core import Eqn, Literal, Program, Var, producers
from ..ir.errors import TypeCheckError
from ..ir.passes import simplify
from ..ir.primitives import get_primitive
from ..ir.tracer import bind, trace, user_location

# primitive -> operand positions that may hold the updated carry's previous value
_UPDATES = {"add": (0, 1), "sub": (0, 1), "mul": (0, 1), "div": (0,)}
_SCALINGS = ("mul", "div")


class NotInvertibleError(TypeCheckError):
    """``invertible=True`` on a loop body the inversion pass cannot prove invertible."""


@dataclass
class _Update:
    eqn: Eqn
    position: int          # operand holding the previous version of the carry
    carry: int
    version: int           # this update makes version ``version + 1`` of its carry

    @property
    def previous(self) -> Var:
        return self.eqn.inputs[self.position]

    @property
    def other(self) -> Any:
        return self.eqn.inputs[1 - self.position]


def invert_loop_body(body: Program, num_consts: int, leading: int = 1) -> Program:
    """The inverse ``(i, *consts, *carry_out) -> carry_in`` of a loop body, or a
    `NotInvertibleError` naming the update it cannot prove invertible (see the module).
    ``leading`` counts the inputs before the consts (0 for a while body: no index).

    >>> import qdiff
    >>> p = qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: c * 2.0 + i, x), 1.0)
    >>> float(invert_loop_body(p.eqns[0].params["body"], 0)(2, 9.0)[0])  # (9 - 2) / 2
    3.5
    """
    # common subexpressions first: a body that recomputes ``x + dt*v`` where it reads the
    # updated x reads the update's result, not the old x, once the two are one value
    proof = _Proof(simplify(body), num_consts, leading)
    order = proof.order()
    return _emit_inverse(proof, order)


class _Proof:
    """The update chains of each carry and the order constraints between them."""

    def __init__(self, body: Program, num_consts: int, leading: int):
        self.body, self.num_consts, self.leading = body, num_consts, leading
        self.carry_in = list(body.inputs[leading + num_consts:])
        self.producer = producers(body.eqns)
        self.chains = [self._chain(out, j) for j, out in enumerate(body.outputs)]
        # every version of every carry: var -> (carry, version)
        self.version_of: dict[Var, tuple[int, int]] = {}
        for j, chain in enumerate(self.chains):
            self.version_of[self.carry_in[j]] = (j, 0)
            for u in chain:
                made = u.eqn.outputs[0]
                if made in self.version_of:
                    raise self._refuse(f"carries {self.version_of[made][0]} and {j} both "
                                       f"become {self.describe(made)}")
                self.version_of[made] = (j, u.version + 1)
        for chain in self.chains:
            for u in chain:
                self._check_update(u)

    # -------------------------------------------------------------------------- chains
    def _chain(self, out: Any, j: int) -> list[_Update]:
        found = self._walk(out, j)
        if found is None:
            raise self._refuse(
                f"carry {j} becomes {self.describe(out)}, which is not its previous value "
                "updated by x ± g, g - x, x * a or x / a")
        for version, update in enumerate(found):
            update.version = version
        return found

    def _walk(self, atom: Any, j: int) -> list[_Update] | None:
        if atom is self.carry_in[j]:
            return []
        eqn = self.producer.get(atom) if isinstance(atom, Var) else None
        if eqn is None or eqn.primitive.name not in _UPDATES:
            return None
        routes = [(pos, self._walk(eqn.inputs[pos], j)) for pos in _UPDATES[eqn.primitive.name]]
        routes = [(pos, r) for pos, r in routes if r is not None]
        if len(routes) != 1:  # no route back to the carry, or both operands reach it
            return None
        pos, earlier = routes[0]
        if eqn.outputs[0].type != eqn.inputs[pos].type:
            return None
        return [*earlier, _Update(eqn, pos, j, 0)]

    # ------------------------------------------------------------------------- updates
    def reads(self, atom: Any) -> set[Var]:
        """Versions of carries that ``atom`` depends on (stopping at each version)."""
        found: set[Var] = set()
        stack, seen = [atom], set()
        while stack:
            a = stack.pop()
            if not isinstance(a, Var) or a in seen:
                continue
            seen.add(a)
            if a in self.version_of:
                found.add(a)
            elif a in self.producer:
                stack.extend(self.producer[a].inputs)
        return found

    def _check_update(self, u: _Update) -> None:
        name = u.eqn.primitive.name
        read = self.reads(u.other)
        what = f"carry {u.carry}'s update {self.describe(u.eqn.outputs[0])}"
        if any(self.version_of[v][0] == u.carry for v in read):
            raise self._refuse(f"{what} reads carry {u.carry} itself in "
                               f"{self.describe(u.other)}, so the opposite update cannot undo it")
        if name in _SCALINGS and np.dtype(u.previous.type.dtype).kind not in "fc":
            raise self._refuse(f"{what} scales an integer carry, which division cannot undo")
        if name in _SCALINGS:
            if read:
                raise self._refuse(f"{what} scales by {self.describe(u.other)}, which depends "
                                   "on carries; only loop-invariant factors are undone")
            if isinstance(u.other, Literal) and np.any(u.other.value == 0):
                raise self._refuse(f"{what} multiplies by zero")

    def order(self) -> list[_Update]:
        """The updates in one sequential order that respects every read (Kahn's algorithm)."""
        updates = [u for chain in self.chains for u in chain]
        after: dict[int, set[int]] = {id(u): set() for u in updates}
        for chain in self.chains:
            for a, b in zip(chain, chain[1:]):
                after[id(b)].add(id(a))
        for u in updates:
            for v in self.reads(u.other):
                k, version = self.version_of[v]
                if version > 0:  # made by an earlier update: u runs after it
                    after[id(u)].add(id(self.chains[k][version - 1]))
                if version < len(self.chains[k]):  # overwritten later: u runs before that
                    after[id(self.chains[k][version])].add(id(u))
        done: list[_Update] = []
        waiting = list(updates)
        while waiting:
            ready = [u for u in waiting if after[id(u)] <= {id(d) for d in done}]
            if not ready:
                stuck = ", ".join(self.describe(u.eqn.outputs[0]) for u in waiting)
                raise self._refuse(f"the updates {stuck} each read a value another one "
                                   "overwrites, so no order of them can be undone")
            done.append(ready[0])
            waiting.remove(ready[0])
        return done

    # ----------------------------------------------------------------------- messages
    def describe(self, atom: Any, depth: int = 3) -> str:
        """``atom`` as an expression over carry[j], const[k] and i."""
        if isinstance(atom, Literal):
            return repr(atom.value.item()) if atom.value.size == 1 else "<literal>"
        inputs, lead = self.body.inputs, self.leading
        if atom in inputs[:lead]:
            return "i"
        if atom in inputs[lead:lead + self.num_consts]:
            return f"const[{inputs.index(atom) - lead}]"
        if atom in self.carry_in:
            return f"carry[{self.carry_in.index(atom)}]"
        eqn = self.producer[atom]
        if depth == 0:
            return f"{eqn.primitive.name}(…)"
        args = ", ".join(self.describe(a, depth - 1) for a in eqn.inputs)
        return f"{eqn.primitive.name}({args})"

    def _refuse(self, reason: str) -> NotInvertibleError:
        loop = "fori_loop" if self.leading else "while_loop"
        return NotInvertibleError(f"{loop}(invertible=True): cannot prove the body "
                                  f"invertible: {reason} (at {user_location()})")


_UNDO: dict[tuple[str, int], Callable[[Any, Any], tuple[str, Any, Any]]] = {
    ("add", 0): lambda new, g: ("sub", new, g), ("add", 1): lambda new, g: ("sub", new, g),
    ("sub", 0): lambda new, g: ("add", new, g), ("sub", 1): lambda new, g: ("sub", g, new),
    ("mul", 0): lambda new, a: ("div", new, a), ("mul", 1): lambda new, a: ("div", new, a),
    ("div", 0): lambda new, a: ("mul", new, a),
}


def _emit_inverse(proof: _Proof, order: list[_Update]) -> Program:
    body, nc, lead = proof.body, proof.num_consts, proof.leading

    def inverse(*args: Any) -> tuple:
        values: dict[Var, Any] = dict(zip(body.inputs[:lead + nc], args))
        args = args[lead:]
        for j, out in enumerate(body.outputs):
            values[out if proof.chains[j] else proof.carry_in[j]] = args[nc + j]

        def value(atom: Any) -> Any:
            if isinstance(atom, Literal):
                return atom.value
            if atom not in values:  # recompute a value the update reads (no carry version)
                eqn = proof.producer[atom]
                outs = bind(eqn.primitive, *map(value, eqn.inputs), **eqn.params)
                outs = outs if eqn.primitive.multiple_results else [outs]
                values.update(zip(eqn.outputs, outs))
            return values[atom]

        for u in reversed(order):
            name, *operands = _UNDO[(u.eqn.primitive.name, u.position)](
                value(u.eqn.outputs[0]), value(u.other))
            values[u.previous] = bind(get_primitive(name), *operands)
        return tuple(values[x] for x in proof.carry_in)

    return trace(inverse, *body.in_types, name="inverse")


LOOP_INVERTERS.append(invert_loop_body)
