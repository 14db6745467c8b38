"""The differentiable form of a hybrid program: its circuit as one opaque equation.

A measurement-free program is classical code, a circuit, and classical code again: the
angles are computed from the inputs, the gates run, the readouts feed a loss. Written with
its quantum equations gathered into one ``quantum_block`` equation (inputs: the angles it
reads; outputs: its readouts), the program is classical to every transformation: the
block's derivative rule is the adjoint method, ``quantum_block_vjp`` (the angles' cotangents
from the readouts'), so ``qdiff.grad`` and friends build the whole derivative Program with
the classical reverse mode, loops included, and `qdiff.jit` compiles it in one function.
The block's circuit is a param, not a sub-program, so the program is not handed to the
quantum runner; on the interpreter the block runs the circuit on the simulator and its
derivative is `RecordedRun`'s reverse sweep.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def energy(t):
...     q = qm.qubits(1); qm.ry(2.0 * t, q[0]); return 1.0 - qm.expval("Z", q)
>>> form = differentiable_form(qdiff.trace(energy, 0.3))
>>> [e.primitive.name for e in form.eqns]
['mul', 'quantum_block', 'sub']
>>> bool(abs(float(qdiff.grad(form)(0.3)) - 2 * np.sin(0.6)) < 1e-12)
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.core import Eqn, Program, Var
from ...ir.errors import TypeCheckError
from ...ir.passes.unpack_scalars import unpack_scalars
from ...ir.primitives import register_primitive
from ...ir.tracer import bind
from ...ir.types import QState, Tensor, Type
from ..execution.run import run_leaves
from ..gradients.adjoint import RecordedRun
from ..lang.primitives import QUANTUM_PRIMITIVES, statevector_p
from .primal import compile_reason
from .unroll import unroll_quantum_loops


@dataclass(frozen=True, eq=False)
class Circuit:
    """The quantum equations of a block: ``program`` maps the angles to the readouts, and
    ``final`` is the same with the last state as its one output (the adjoint sweep starts
    from it)."""

    program: Program
    final: Program

    def __repr__(self) -> str:
        gates = sum(e.primitive.name == "gate" for e in self.program.eqns)
        return f"<circuit {self.program.name}: {gates} gates>"


def _block_rule(*angles: Type, circuit: Circuit) -> tuple[Type, ...]:
    if len(angles) != len(circuit.program.inputs):
        raise TypeCheckError(f"quantum_block takes {len(circuit.program.inputs)} angles, got "
                             f"{len(angles)}")
    return tuple(circuit.program.out_types)


def _block_vjp_rule(*operands: Type, circuit: Circuit) -> tuple[Type, ...]:
    return tuple(Tensor((), "float64") for _ in circuit.program.inputs)


quantum_block_p = register_primitive("quantum_block", _block_rule, multiple_results=True)
quantum_block_vjp_p = register_primitive("quantum_block_vjp", _block_vjp_rule,
                                         multiple_results=True)


@quantum_block_p.def_impl("numpy")
def _block_impl(*angles: Any, circuit: Circuit) -> list[Any]:
    values = run_leaves(circuit.program, list(angles)).values
    return [values] if len(circuit.program.outputs) == 1 else list(values)


@quantum_block_vjp_p.def_impl("numpy")
def _block_vjp_impl(*operands: Any, circuit: Circuit) -> list[Any]:
    k = len(circuit.program.inputs)
    run = RecordedRun(circuit.program, list(operands[:k]))
    return [np.asarray(g, np.float64) for g in run.vjp(list(operands[k:]))]


def _block_vjp(cts: list[Any], values: list[Any], outs: list[Any], active: list[bool],
               *, circuit: Circuit) -> list[Any]:
    seeds = [np.zeros(t.shape) if ct is None else ct
             for ct, t in zip(cts, circuit.program.out_types)]
    grads = bind(quantum_block_vjp_p, *values, *seeds, circuit=circuit)
    return [g if flag else None for g, flag in zip(grads, active)]


quantum_block_p.vjp = _block_vjp


def _is_quantum(eqn: Eqn) -> bool:
    return eqn.primitive.name in QUANTUM_PRIMITIVES


def differentiable_form(program: Program) -> Program | str:
    """``program`` with its quantum equations as one ``quantum_block``, or why it has no
    such form (it does not compile, its gates sit in loops or branches, a readout feeds a
    gate, or it returns a state)."""
    reason = compile_reason(program)
    if reason is not None:
        return reason
    # counted loops of gates written out, one equation for the angles read from an array
    program = unpack_scalars(unroll_quantum_loops(program))
    quantum: list[Eqn] = []
    before: list[Eqn] = []
    after: list[Eqn] = []
    readouts: list[Var] = []
    downstream: set[Var] = set()  # values computed from readouts
    for eqn in program.eqns:
        reads = {a for a in eqn.inputs if isinstance(a, Var)}
        if _is_quantum(eqn):
            if reads & downstream:
                return f"a readout feeds the {eqn.primitive.name} equation after it"
            if eqn.primitive is statevector_p:
                return "it returns the state vector (compiled derivatives take real readouts)"
            quantum.append(eqn)
            readouts += [v for v in eqn.outputs if not isinstance(v.type, QState)]
            downstream.update(v for v in eqn.outputs if not isinstance(v.type, QState))
        elif any(_is_quantum(e) for _, sub in eqn.subprograms() for e in sub.all_eqns()):
            return ("it applies gates inside branches or loops whose bounds are traced "
                    "values")
        elif reads & downstream:
            after.append(eqn)
            downstream.update(eqn.outputs)
        else:
            before.append(eqn)
    angles = list(dict.fromkeys(a for e in quantum for a in e.inputs
                                if isinstance(a, Var) and not isinstance(a.type, QState)))
    states = [v for v in quantum[-1].outputs if isinstance(v.type, QState)]
    name = f"{program.name}_circuit"
    circuit = Circuit(Program(tuple(angles), tuple(quantum), tuple(readouts), name=name),
                      Program(tuple(angles), tuple(quantum), tuple(states), name=name))
    block = Eqn(quantum_block_p, tuple(angles), tuple(readouts), {"circuit": circuit})
    return Program(program.inputs, (*before, block, *after), program.outputs,
                   name=program.name, in_tree=program.in_tree, out_tree=program.out_tree)

