"""Checkpoint buffers of reversed loops on the CUDA target: a buffer whose rows take values
kernels made (the carry of a loop of kernels) is a device array, its rows written and read
there (`residency.CarryPlan`); any other stays a host array, as on the CPU."""

from __future__ import annotations

from ...ir.core import Eqn
from ...loops.memory import checkpoint_buffer_p
from ..lowering import Scope, zeros
from .kernels import device_array
from .scope import cuda_rule


@cuda_rule(checkpoint_buffer_p)
def _buffer(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    out = eqn.outputs[0].type
    name = scope.fresh("buf")
    if name in scope.src.residency.plan.buffers:
        scope.src.allocate(name, device_array(out.shape, out.np_dtype, "0"))
    else:
        scope.line(f"{name} = {zeros(out.shape, out.np_dtype)}")
    return [name]
