"""Per-member gradients of a batched straight circuit by one batched adjoint sweep on the
array-module simulator (`simulator.array_batched`, NumPy or CuPy), selected by
`execution.batched_backend`.

The sweep is the lane kernels' (`batched_adjoint`): the same steps from `_sweep_plan`
(each run of one-wire gates undone two gates a step through their product, the later
gate's overlap on the incoming states and the earlier one's on the outgoing ones, a
permutation run undone by its inverse table), the same inverses and generators; only the
states live on the array module as ``(members, 2**n)`` arrays. The classical parts are
differentiated and batched as for the lane kernels.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> theta = np.array([0.0, 0.5, 1.0])
>>> value, grad = array_value_and_grad(np, qdiff.trace(rotation, 0.1), [theta], [True], 3, 0)
>>> np.allclose(grad, -np.sin(theta))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ...autodiff.arguments import ArgNums, argnum_tuple, wrt_flags, wrt_tree
from ...batching import register_batched_gradient
from ...ir import pytree
from ...ir.core import Program
from ...ir.interpreter import evaluate
from ..execution import array_batched
from ..execution.batched import (
    batched_circuit,
    batched_part,
    fused_one_wire_runs,
    member_matrices,
    outcome_index,
)
from ..execution.batched_backend import batched_array_module
from ..simulator import array_batched as kernels
from .batched_adjoint import _step_generators, _step_inverses, _sweep_plan, _vjp

__all__ = ["array_value_and_grad"]


def _gate_cotangents(xp: ModuleType, circuit: Any, mats: np.ndarray, psi: Any,
                     lam: Any) -> np.ndarray:
    """Every gate angle's cotangent for each member, ``(members, gates)`` on the host, from
    the final states ``psi`` and adjoint vectors ``lam`` (on ``xp``)."""
    kinds, first, last, later, earlier, inverse_tables = _sweep_plan(circuit)
    per_step = array_batched.to_host(kernels.adjoint_sweep(
        xp, psi, lam, kinds, first, last, _step_inverses(later, earlier, mats),
        xp.asarray(inverse_tables), _step_generators(circuit)))
    per_gate = np.zeros((psi.shape[0], len(circuit.gates)))
    for column, gates in enumerate((later, earlier)):
        steps = np.flatnonzero(gates >= 0)
        per_gate[:, gates[steps]] = per_step[:, steps, column]
    return per_gate


def array_value_and_grad(xp: ModuleType, program: Program, values: Sequence[Any],
                         flags: Sequence[bool], size: int,
                         argnums: ArgNums) -> tuple[Any, Any]:
    """Each member's value and gradient (with respect to ``argnums``, structured like
    them) of a scalar-valued ``program``, batch axis first, simulated on ``xp``."""
    circuit = batched_circuit(program)
    assert circuit is not None, "batched gradients need a program batched_circuit accepts"
    flags = tuple(bool(f) for f in flags)
    numbers = argnum_tuple(argnums, program, "grad")
    active = tuple(wrt_flags(program, numbers, "grad"))
    num_readouts, n = len(circuit.readouts), circuit.num_qubits
    angles = evaluate(batched_part(circuit.angles, flags, size, False), *values)
    mats = member_matrices(circuit, angles, size)
    psi = array_batched.final_states(xp, n, fused_one_wire_runs(circuit, mats))
    readouts = array_batched.readout_values(xp, circuit, psi)
    # the outputs' VJP: value, direct input cotangents, readout cotangents
    backward = _vjp(circuit.outputs, (*active, *[True] * num_readouts), True)
    outs = evaluate(batched_part(backward, (*flags, *[True] * num_readouts, False), size, True),
                    *values, *readouts, np.ones((), np.float64))
    value, direct, readout_cts = outs[0], outs[1:1 + sum(active)], outs[1 + sum(active):]
    lam = xp.zeros_like(psi)   # λ = Σ_r ē_r O_r ψ
    for (obs, wires), ct in zip(circuit.readouts, readout_cts):
        ct = xp.asarray(np.asarray(ct, np.float64))
        if obs is None:   # probs: λ_i = p̄_j(i) ψ_i
            lam += ct[:, xp.asarray(outcome_index(n, wires))] * psi
        else:
            lam += ct[:, None] * array_batched.observable_rows(xp, psi, n, obs, wires)
    per_gate = _gate_cotangents(xp, circuit, mats, psi, lam)
    angle_cts = [np.zeros(size) for _ in circuit.angles.outputs]
    for g, gate in enumerate(circuit.gates):
        if gate.angle is not None:
            angle_cts[gate.angle] = angle_cts[gate.angle] + per_gate[:, g]
    back = _vjp(circuit.angles, active, False)
    via = evaluate(batched_part(back, (*flags, *[True] * len(angle_cts)), size, True),
                   *values, *angle_cts)
    grads = [d + v for d, v in zip(direct, via)]
    return value, pytree.unflatten(wrt_tree(program, argnums, numbers), grads)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    circuit = batched_circuit(program)
    return batched_array_module() is not None and circuit is not None \
        and len(program.outputs) == 1 and program.out_types[0].shape == ()


def _run(program: Program, values: Sequence[Any], flags: Sequence[bool], size: int,
         argnums: ArgNums) -> tuple[Any, Any]:
    return array_value_and_grad(batched_array_module(), program, values, flags, size, argnums)


register_batched_gradient(_claims, _run)
