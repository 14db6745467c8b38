"""Lowering for the CUDA target: the CPU target's `Scope` with loop nests written as
kernels and a few rules of its own (`CUDA_RULES`, filled by `soacs`). Every other equation
keeps its CPU rule and runs on the host, in the host function (scalar code, control flow,
shape operations, dense linear algebra); loops and branches stay host loops around the
kernels their bodies launch.
"""

from __future__ import annotations

from collections.abc import Callable

from ...autodiff.stop_gradient import stop_gradient_p
from ...ir.control_flow import cond_p, loop_p
from ...ir.core import Program
from ...ir.primitives import Primitive
from ...ir.types import Tensor
from ..fusion import Group
from ..groups import lower_group
from ..lowering import Rule, Scope
from ..rules.elementwise import SCALAR
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
