"""Checkpoint buffers of reversed loops: zeroed arrays whose size is static, so the host
checks them against the memory available before the compiled code runs
(`jit.check_buffers`)."""

from __future__ import annotations

from ...ir.core import Eqn
from ...loops.memory import checkpoint_buffer_p
from ..lowering import Scope, rule, zeros


@rule(checkpoint_buffer_p)
def _buffer(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    out = eqn.outputs[0].type
    name = scope.fresh("buf")
    scope.line(f"{name} = {zeros(out.shape, out.np_dtype)}")
    return [name]
