"""The program representation: `Var`, `Literal`, `Eqn` and `Program`.

A `Program` is a typed, first-order SSA function: input vars, a list of equations, output
atoms. An equation applies one registered primitive to atoms (vars or literals) with static
params; structured control flow is a primitive whose params hold sub-programs, so loops stay
loops through every transformation.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .primitives import Primitive
from .types import Tensor, Type, type_of_value

_var_ids = itertools.count()


class Var:
    """A value defined once, by a program input or by an equation's output.

    Vars compare by identity; the printer and JSON give them names by position.

    >>> Var(Tensor((3,), "float64")).type.short()
    'f64[3]'
    """

    __slots__ = ("type", "uid")

    def __init__(self, type: Type):
        if not isinstance(type, Type):
            raise TypeError(f"Var needs an IR type, got {type!r}")
        self.type = type
        self.uid = next(_var_ids)

    def __repr__(self) -> str:
        return f"Var#{self.uid}:{self.type.short()}"


class Literal:
    """A constant operand: a NumPy scalar or array embedded in the program.

    >>> Literal(2.0).type
    Tensor((), 'float64')
    """

    __slots__ = ("value", "type")

    def __init__(self, value: Any, type: Tensor | None = None):
        self.type = type if type is not None else type_of_value(value)
        array = np.asarray(value, dtype=self.type.np_dtype)
        if array.shape != self.type.shape:
            raise ValueError(f"literal of shape {array.shape} does not fit {self.type.short()}")
        array.flags.writeable = False
        self.value = array

    def __repr__(self) -> str:
        return f"Literal({self.value!r})"


Atom = Var | Literal


@dataclass(eq=False)
class Eqn:
    """``outputs = primitive[params](*inputs)``.

    Params are static data (ints, floats, strings, tuples, arrays, sub-programs).
    """

    primitive: Primitive
    inputs: tuple[Atom, ...]
    outputs: tuple[Var, ...]
    params: Mapping[str, Any] = field(default_factory=dict)

    def subprograms(self) -> Iterator[tuple[str, Program]]:
        """The (param name, sub-program) pairs of a control-flow equation."""
        for name in self.primitive.subprogram_params:
            value = self.params.get(name)
            if value is None:  # an optional sub-program left out (a loop's inverse)
                continue
            if isinstance(value, Program):
                yield name, value
            else:  # a tuple of programs, e.g. the branches of `cond`
                for index, program in enumerate(value):
                    yield f"{name}[{index}]", program

    def map_subprograms(self, f: Callable[[Program], Program]) -> Eqn:
        """This equation with every sub-program ``p`` replaced by ``f(p)`` (itself when it
        has none): how a pass reaches into loop bodies and branches."""
        if not self.primitive.subprogram_params:
            return self
        params = dict(self.params)
        for name in self.primitive.subprogram_params:
            value = params.get(name)
            if value is None:
                continue
            params[name] = f(value) if isinstance(value, Program) else tuple(map(f, value))
        return Eqn(self.primitive, self.inputs, self.outputs, params)


def producers(eqns: Iterable[Eqn]) -> dict[Var, Eqn]:
    """Each var an equation defines, mapped to that equation.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.sin(x) * 2.0, 0.5)
    >>> producers(p.eqns)[p.outputs[0]].primitive.name
    'mul'
    """
    return {var: eqn for eqn in eqns for var in eqn.outputs}


@dataclass(eq=False)
class Program:
    """A closed SSA function over IR values; callable like the Python function it came from.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.sin(x) * 2.0, 0.5)
    >>> float(p(0.5)) == float(np.sin(0.5) * 2.0)
    True
    """

    inputs: tuple[Var, ...]
    eqns: tuple[Eqn, ...]
    outputs: tuple[Atom, ...]
    name: str = "program"
    in_tree: tuple | None = None
    out_tree: tuple | None = None

    def __post_init__(self) -> None:
        self.inputs = tuple(self.inputs)
        self.eqns = tuple(self.eqns)
        self.outputs = tuple(self.outputs)

    @property
    def in_types(self) -> tuple[Type, ...]:
        return tuple(v.type for v in self.inputs)

    @property
    def out_types(self) -> tuple[Type, ...]:
        return tuple(a.type for a in self.outputs)

    def all_eqns(self) -> Iterator[Eqn]:
        """Every equation, those of sub-programs (loop bodies, branches) included.

        >>> import qdiff
        >>> p = qdiff.trace(lambda x: qdiff.fori_loop(0, 2, lambda i, c: c * x, 1.0), 2.0)
        >>> [e.primitive.name for e in p.all_eqns()]
        ['loop', 'mul']
        """
        for eqn in self.eqns:
            yield eqn
            for _, sub in eqn.subprograms():
                yield from sub.all_eqns()

    def with_eqns(self, eqns: Sequence[Eqn]) -> Program:
        """This program (inputs, outputs, name, argument trees) with other equations: what a
        pass that rewrites equations in place returns."""
        return Program(self.inputs, tuple(eqns), self.outputs, name=self.name,
                       in_tree=self.in_tree, out_tree=self.out_tree)

    def __repr__(self) -> str:
        ins = ", ".join(t.short() for t in self.in_types)
        outs = ", ".join(t.short() for t in self.out_types)
        return f"<Program {self.name}({ins}) -> ({outs}), {len(self.eqns)} eqns>"

    # Vars compare by identity, so programs hash by identity; `==` is structural (bound by
    # `serialization`).
    __hash__ = object.__hash__

    # Calling, printing, verifying and JSON live in the modules built on this one
    # (interpreter, printer, verifier, serialization): each binds its methods to Program
    # when it is imported, and importing `qdiff.ir` imports them all.
