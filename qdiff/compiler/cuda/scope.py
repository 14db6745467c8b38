"""Lowering for the CUDA target: the CPU target's `Scope` with loop nests written as
kernels and a few rules of its own (`CUDA_RULES`, filled by `soacs`). Every other equation
keeps its CPU rule and runs on the host, in the host function (scalar code, control flow,
shape operations, dense linear algebra); loops and branches stay host loops around the
kernels their bodies launch.

Scalars that kernels make (the result of a full reduction) stay on the device, an array of
one element each, unless the host reads them: an elementwise operation on scalars that
reads one of those runs there too, as a one-thread kernel, so that a reduction feeding
scalar code feeding kernels (a log-sum-exp, a running total) copies nothing back.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable, Sequence
from typing import Any

from ...autodiff.stop_gradient import stop_gradient_p
from ...ir.control_flow import cond_p, loop_p
from ...ir.core import Eqn, Program, Var
from ...ir.primitives import Primitive
from ...ir.types import Tensor
from ..fusion import Group
from ..groups import lower_group
from ..lowering import Options, Rule, Scope
from ..rules.elementwise import SCALAR, scalar_expression
from ..source import Source
from .elementwise import CUDA_SCALAR
from .nest import CudaNest

CUDA_RULES: dict[Primitive, Rule] = {}
# what a kernel body may hold: scalar expressions, and counted loops and branches of them
# (while loops may raise past max_iter, which a kernel cannot)
_IN_KERNEL = {*SCALAR, loop_p, cond_p, stop_gradient_p}


def cuda_rule(*primitives: Primitive) -> Callable[[Rule], Rule]:
    """Register the CUDA target's lowering of ``primitives``."""
    def register(fn: Rule) -> Rule:
        for primitive in primitives:
            CUDA_RULES[primitive] = fn
        return fn
    return register


def _scalar(atom: object) -> bool:
    return isinstance(atom.type, Tensor) and atom.type.shape == ()


def runs_in_kernel(program: Program) -> bool:
    """Whether ``program`` is scalar code a kernel can run per thread: scalar values only,
    elementwise operations, counted loops and branches.

    >>> import numpy as np, qdiff, qdiff.numpy as qnp
    >>> runs_in_kernel(qdiff.trace(lambda a, b: qnp.sin(a) * b, 1.0, 2.0))
    True
    >>> runs_in_kernel(qdiff.trace(lambda a: qnp.sum(a), np.zeros(3)))
    False
    """
    return all(map(_scalar, (*program.inputs, *program.outputs))) and all(
        eqn.primitive in _IN_KERNEL
        and all(map(_scalar, (*eqn.inputs, *eqn.outputs)))
        and all(runs_in_kernel(sub) for _, sub in eqn.subprograms())
        for eqn in program.eqns)


class CudaScope(Scope):
    """A `Scope` whose loop nests are kernels (`CudaNest`)."""

    # the host arrays are the kernels' device arrays: where each lives is decided apart
    hoists_allocations = False

    def __init__(self, source: Source, options: Options, program: Program,
                 inputs: Sequence[str], owned_inputs: Sequence[Var] = ()):
        super().__init__(source, options, program, inputs, owned_inputs)
        for var, name in list(self.env.items()):
            self._note_scalar(var, name)

    def bind(self, var: Var, expression: str) -> None:
        super().bind(var, expression)
        self._note_scalar(var, expression)

    def _note_scalar(self, var: Any, name: str) -> None:
        """Tell the host function's residency that host name ``name`` holds scalar ``var``."""
        if isinstance(var, Var) and _scalar(var) and name.isidentifier() \
                and not keyword.iskeyword(name) and not self.src.capturing:
            self.src.residency.scalars.setdefault(name, var.type.np_dtype)

    def lower_eqn(self, eqn: Eqn) -> None:
        if self.src.capturing or eqn.primitive not in SCALAR \
                or not all(map(_scalar, (*eqn.inputs, *eqn.outputs))):
            super().lower_eqn(eqn)
            return
        # the kernel's name is taken either way: which way a pass goes depends on what it
        # knows, and the names must be the same in each pass (`codegen.written_with_plans`)
        name = self.fresh("scalar")
        if not self._reads_device_scalars(eqn):
            super().lower_eqn(eqn)
            return
        # an operation on scalars, one of them kept on the device: a one-thread kernel
        src, out = self.src, self.fresh()
        src.allocate_scalar(out, eqn.outputs[0].type.np_dtype)
        with src.capture() as body:
            expression = scalar_expression(eqn, [self.read(a) for a in eqn.inputs],
                                           self.scalar_forms)
            self.line(f"{out}[0] = {expression}")
        name, params = src.kernel("scalar", body, name)
        src.launch(name, 1, 1, params, [out])
        self.bind(eqn.outputs[0], out)

    def _reads_device_scalars(self, eqn: Eqn) -> bool:
        """Whether scalar operation ``eqn`` reads a scalar kernels take from the device (its
        host names plain names)."""
        names = [self.read(a) for a in eqn.inputs if isinstance(a, Var)]
        return all(n.isidentifier() for n in names) and any(
            self.src.residency.scalar_on_device(n) for n in names)

    @property
    def scalar_forms(self) -> dict:  # type: ignore[override]
        """Kernel code takes the CUDA forms; the host function (plain Python) NumPy's."""
        return CUDA_SCALAR if self.src.kernel_depth else {}

    def lower_group(self, group: Group) -> None:
        # every element expression of a nest goes into its kernel (sub-scopes share src)
        self.src.kernel_depth += 1
        try:
            lower_group(self, group, CudaNest)
        finally:
            self.src.kernel_depth -= 1

    def rule_for(self, primitive: Primitive) -> Rule | None:
        return CUDA_RULES.get(primitive) or super().rule_for(primitive)
