"""Per-member gradients of a batched quantum program by one batched adjoint sweep
(``qdiff.vmap(qdiff.grad(f))`` on a program `execution.batched` accepts).

The classical parts are differentiated by the classical reverse mode and batched like any
program: the outputs' VJP gives each member's cotangents of its expectation values (and
of the inputs the outputs read directly), the adjoint sweep of the circuit turns them
into cotangents of every gate angle (``θ̄ = 2 Im<λ|Gψ>`` with ``λ = Σ ē_r O_r ψ``, plus
``p̄_j(i) ψ_i`` per amplitude for probabilities), and the
angles' VJP carries those back to the inputs.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> theta = np.array([0.0, 0.5, 1.0])
>>> value, grad = batched_value_and_grad(qdiff.trace(rotation, 0.1), [theta], [True], 3, 0)
>>> np.allclose(grad, -np.sin(theta))
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...autodiff.arguments import ArgNums, argnum_tuple, wrt_flags, wrt_tree
from ...autodiff.reverse import vjp_program
from ...batching import register_batched_gradient
from ...ir import pytree
from ...ir.core import Program
from ...ir.interpreter import evaluate
from ..execution.batched import (
    BatchedCircuit,
    batched_circuit,
    batched_part,
    final_states,
    member_matrices,
    observable_rows,
    one_wire_runs,
    outcome_index,
    readout_values,
)
from ..simulator.batched_kernels import adjoint_sweep


@functools.lru_cache(maxsize=128)
def _vjp(part: Program, active: tuple[bool, ...], with_primal: bool) -> Program:
    return vjp_program(part, list(active), with_primal=with_primal)


_PAULI_CODES = {"X": 1, "Y": 2, "Z": 3}


@functools.lru_cache(maxsize=64)
def _generators(circuit: BatchedCircuit) -> tuple[np.ndarray, np.ndarray]:
    """Each gate's generator (4x4 blocks) and its form for `adjoint_sweep`: 0 no angle,
    1/2/3 a rotation about X/Y/Z on the wire the kernel acts on, 4 any other."""
    gens = np.zeros((len(circuit.gates), 4, 4), np.complex128)
    forms = np.zeros(len(circuit.gates), np.int64)
    for g, gate in enumerate(circuit.gates):
        if gate.angle is not None:
            generator = gate.generator()
            gens[g, :generator.shape[0], :generator.shape[1]] = generator
            forms[g] = _PAULI_CODES.get(gate.acting.pauli_word or "", 4)
    return gens, forms


def batched_value_and_grad(program: Program, values: Sequence[Any], flags: Sequence[bool],
                           size: int, argnums: ArgNums) -> tuple[Any, Any]:
    """Each member's value and gradient (with respect to ``argnums``, structured like
    them) of a scalar-valued ``program``, batch axis first."""
    circuit = batched_circuit(program)
    assert circuit is not None, "batched gradients need a program batched_circuit accepts"
    flags = tuple(bool(f) for f in flags)
    numbers = argnum_tuple(argnums, program, "grad")
    active = tuple(wrt_flags(program, numbers, "grad"))
    num_readouts = len(circuit.readouts)
    # forward: angles, states, expectations
    angles = evaluate(batched_part(circuit.angles, flags, size, False), *values)
    mats = member_matrices(circuit, angles, size)
    psi = final_states(circuit, mats)
    readouts = readout_values(circuit, psi)
    # the outputs' VJP: value, direct input cotangents, expectation cotangents
    backward = _vjp(circuit.outputs, (*active, *[True] * num_readouts), True)
    seed = np.ones((), np.float64)
    outs = evaluate(batched_part(backward, (*flags, *[True] * num_readouts, False), size, True),
                    *values, *readouts, seed)
    value, direct, readout_cts = outs[0], outs[1:1 + sum(active)], outs[1 + sum(active):]
    # the adjoint sweep: λ = Σ_r ē_r O_r ψ, then every gate angle's cotangent
    lam = np.zeros_like(psi)
    for (obs, wires), ct in zip(circuit.readouts, readout_cts):
        if obs is None:  # probs: λ_i = p̄_j(i) ψ_i
            lam += ct[:, outcome_index(circuit.num_qubits, wires)] * psi
        else:            # expval: λ = ē O ψ
            lam += ct[:, None] * observable_rows(psi, circuit.num_qubits, obs, wires)
    gens, forms = _generators(circuit)
    per_gate = adjoint_sweep(psi, lam, *circuit.arrays(), *one_wire_runs(circuit), mats, gens,
                             forms, np.zeros((size, len(circuit.gates))))
    angle_cts = [np.zeros(size) for _ in circuit.angles.outputs]
    for g, gate in enumerate(circuit.gates):
        if gate.angle is not None:
            angle_cts[gate.angle] = angle_cts[gate.angle] + per_gate[:, g]
    # the angles' VJP carries them to the inputs
    back = _vjp(circuit.angles, active, False)
    via = evaluate(batched_part(back, (*flags, *[True] * len(angle_cts)), size, True),
                   *values, *angle_cts)
    grads = [d + v for d, v in zip(direct, via)]
    return value, pytree.unflatten(wrt_tree(program, argnums, numbers), grads)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    circuit = batched_circuit(program)
    return circuit is not None and len(program.outputs) == 1 \
        and program.out_types[0].shape == ()


register_batched_gradient(_claims, batched_value_and_grad)

__all__ = ["batched_value_and_grad"]
