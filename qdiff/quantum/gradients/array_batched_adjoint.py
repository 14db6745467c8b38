"""Per-member gradients of a batched straight circuit by one batched adjoint sweep on the
array-module simulator (`simulator.array_batched`, NumPy or CuPy), selected by
`execution.batched_backend`.

The sweep is the lane kernels' (`batched_adjoint`): the same steps from `_sweep_plan`
(each run of one-wire gates undone two gates a step through their product, the later
gate's overlap on the incoming states and the earlier one's on the outgoing ones, a
permutation run undone by its inverse table), the same inverses and generators; only the
states live on the array module as ``(members, 2**n)`` arrays. The classical parts are
differentiated and batched as for the lane kernels, by the same function
(`batched_adjoint.value_and_grad_simulated`).

>>> import qdiff
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> theta = np.array([0.0, 0.5, 1.0])
>>> value, grad = array_value_and_grad(np, qdiff.trace(rotation, 0.1), [theta], [True], 3, 0)
>>> np.allclose(grad, -np.sin(theta))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ...autodiff.arguments import ArgNums
from ...batching import register_batched_gradient
from ...ir.core import Program
from ..execution import array_batched
from ..execution.batched import (
    BatchedCircuit,
    batched_circuit,
    fused_one_wire_runs,
    member_matrices,
    readout_adjoints,
)
from ..execution.batched_backend import batched_array_module
from ..simulator import array_batched as kernels
from .batched_adjoint import (
    _step_generators,
    _step_inverses,
    _sweep_plan,
    value_and_grad_simulated,
)

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

    def simulate(circuit: BatchedCircuit, angles: np.ndarray, size: int) -> tuple[
            Sequence[Any], Callable[[Sequence[Any]], np.ndarray]]:
        n = circuit.num_qubits
        mats = member_matrices(circuit, angles, size)
        psi = array_batched.final_states(xp, n, fused_one_wire_runs(circuit, mats))

        def sweep(readout_cts: Sequence[Any]) -> np.ndarray:
            lam = readout_adjoints(xp, circuit, psi, readout_cts, lambda x, obs, wires:
                                   array_batched.observable_rows(xp, x, n, obs, wires))
            return _gate_cotangents(xp, circuit, mats, psi, lam)
        return array_batched.readout_values(xp, circuit, psi), sweep

    return value_and_grad_simulated(simulate, program, values, flags, size, argnums)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    circuit = batched_circuit(program)
    return batched_array_module() is not None and circuit is not None \
        and len(program.outputs) == 1 and program.out_types[0].shape == ()


def _run(program: Program, values: Sequence[Any], flags: Sequence[bool], size: int,
         argnums: ArgNums) -> tuple[Any, Any]:
    return array_value_and_grad(batched_array_module(), program, values, flags, size, argnums)


register_batched_gradient(_claims, _run)
