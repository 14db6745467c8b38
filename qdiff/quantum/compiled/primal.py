"""Which quantum programs compile as they are: measurement-free, one small register.

A program whose every equation has a lowering rule (the quantum ones in `rules.py`: no
``measure``, ``reset``, ``postselect``, ``sample``, which branch or draw), on one register
of complex128 amplitudes of at most `MAX_COMPILED_QUBITS` qubits, with gates of at most one
angle, computes in compiled code what the branching runner computes for it: one branch,
weight 1. Anything else keeps running on the simulator, and `compile_reason` says why.
"""

from __future__ import annotations

from ...compiler.lowering import RULES
from ...ir.core import Program
from ...ir.types import QState
from ..lang.primitives import QUANTUM_PRIMITIVES, gate_p, qalloc_p
from .gate_code import NotPlannable, plan_gate

MAX_COMPILED_QUBITS = 12
"""The widest register compiled code simulates (64 KiB of amplitudes: in cache, where a
kernel call per gate is cheaper than the runner's Python work per gate)."""


def compile_reason(program: Program) -> str | None:
    """Why ``program`` does not compile as it is, or None when it does.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def coin(t):
    ...     q = qm.qubits(1); qm.ry(t, q[0]); return qm.measure(q[0])
    >>> compile_reason(qdiff.trace(coin, 0.3))
    'measure (a mid-circuit measurement, reset, postselection or draw) runs on the simulator'
    """
    for index, atom in enumerate(program.outputs):
        if isinstance(atom.type, QState):
            return f"output {index} is a quantum state"
    for eqn in program.all_eqns():
        name = eqn.primitive.name
        if eqn.primitive not in RULES:
            if name in QUANTUM_PRIMITIVES:
                if name == "qextend":
                    return "it allocates several registers"
                return (f"{name} (a mid-circuit measurement, reset, postselection or draw) "
                        "runs on the simulator")
            return f"primitive {name!r} has no compiled form"
        if eqn.primitive is qalloc_p:
            n, dtype = eqn.params["num_qubits"], eqn.params["dtype"]
            if n > MAX_COMPILED_QUBITS:
                return (f"its register of {n} qubits is wider than the {MAX_COMPILED_QUBITS} "
                        "compiled code simulates")
            if dtype != "complex128":
                return f"its register holds {dtype} amplitudes (compiled code: complex128)"
        if eqn.primitive is gate_p:
            try:
                plan_gate(eqn.inputs[0].type.num_qubits, eqn.params["name"],
                          eqn.params["wires"], eqn.params.get("static"))
            except NotPlannable as error:
                return str(error)
    return None
