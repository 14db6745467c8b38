"""``compiled_segment``: one equation that runs a compiled segment of a program.

A quantum program that does not compile whole keeps running on its runner (the branching
simulator), but `qdiff.jit` replaces each run of its classical equations by one
``compiled_segment`` equation (`split.py` cuts them out): the runner executes it like any
classical equation, on every branch, and it calls the segment's compiled function. Its
reverse rule is the segment's VJP program, compiled too (once per set of wanted input
cotangents), so the simulator's derivative machinery chain-rules through compiled code.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ..autodiff.reverse import vjp_program
from ..autodiff.tangents import is_differentiable
from ..ir.core import Eqn, Program
from ..ir.primitives import register_primitive
from ..ir.types import Type
from .kernel import Kernel
from .lowering import Options


class Segment:
    """A classical ``program`` and its compiled function; its VJP compiles on first use.

    >>> import qdiff, qdiff.numpy as qnp
    >>> segment = Segment(qdiff.trace(lambda x: qnp.sin(x) * 2.0, 0.0), Options())
    >>> [float(v) for v in segment.backward([1.0], [0.0], [True])]
    [2.0]
    """

    def __init__(self, program: Program, options: Options):
        self.program, self.options = program, options
        self.kernel = Kernel(program, options)
        self._backward: dict[tuple[bool, ...], Kernel] = {}

    def backward(self, cotangents: Sequence[Any], primals: Sequence[Any],
                 wanted: Sequence[bool]) -> list[Any]:
        """The cotangents of the ``wanted`` inputs (None for the others) from those of the
        outputs (None: zero), by the compiled VJP program."""
        flags = tuple(bool(w) and is_differentiable(v.type)
                      for w, v in zip(wanted, self.program.inputs))
        kernel = self._backward.get(flags)
        if kernel is None:
            kernel = self._backward[flags] = Kernel(
                vjp_program(self.program, flags, with_primal=False), self.options)
        seeds = [np.zeros(a.type.shape, a.type.np_dtype) if c is None else c
                 for c, a in zip(cotangents, self.program.outputs)
                 if is_differentiable(a.type)]
        found = iter(kernel([*primals, *seeds]))
        return [next(found) if flag else None for flag in flags]

    def __repr__(self) -> str:
        return f"<compiled {self.program.name}: {len(self.program.eqns)} equations>"


def _segment_types(*in_types: Type, segment: Segment) -> tuple[Type, ...]:
    return tuple(segment.program.out_types)


compiled_segment_p = register_primitive("compiled_segment", _segment_types,
                                        multiple_results=True)


@compiled_segment_p.def_impl("numpy")
def _run_segment(*values: Any, segment: Segment) -> list[Any]:
    return segment.kernel(values)


def _segment_vjp(cts_out: Sequence[Any], primals_in: Sequence[Any], primals_out: Sequence[Any],
                 active: Sequence[bool], segment: Segment) -> list[Any]:
    return segment.backward(cts_out, primals_in, active)


compiled_segment_p.vjp = _segment_vjp


def segments_inlined(eqns: Iterable[Eqn]) -> Iterator[Eqn]:
    """``eqns`` with each ``compiled_segment`` equation replaced by the equations it
    compiled: a segment's program reads and defines the enclosing program's own values
    (`split_program` cuts it out of it), so analyses of the program's structure (a loop's
    round counter, say) see through it.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.sin(x) * 2.0, 0.0)
    >>> call = Eqn(compiled_segment_p, p.inputs, p.outputs, {"segment": Segment(p, Options())})
    >>> [e.primitive.name for e in segments_inlined([call])]
    ['sin', 'mul']
    """
    for eqn in eqns:
        if eqn.primitive is compiled_segment_p:
            yield from segments_inlined(eqn.params["segment"].program.eqns)
        else:
            yield eqn
