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
from collections.abc import Callable, Sequence
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
    angle_gather,
    angle_rows,
    angle_table,
    batched_circuit,
    batched_part,
    final_lane_states,
    final_readouts,
    lane_circuit,
    lane_circuit_and_inverses,
    member_matrices,
    observable_rows,
    one_wire_runs,
    products_2x2,
    readout_adjoints,
    readout_diagonals,
)
from ..execution.batched_backend import batched_array_module
from ..simulator import lane_kernels
from ..simulator.batched_kernels import DENSE1, PERMUTE


@functools.lru_cache(maxsize=128)
def _vjp(part: Program, active: tuple[bool, ...], with_primal: bool) -> Program:
    return vjp_program(part, list(active), with_primal=with_primal)


@functools.lru_cache(maxsize=64)
def _generators(circuit: BatchedCircuit) -> np.ndarray:
    """Each gate's generator as a 4x4 block (the acting gate's: a controlled gate's base),
    zero for a gate without an angle."""
    gens = np.zeros((len(circuit.gates), 4, 4), np.complex128)
    for g, gate in enumerate(circuit.gates):
        if gate.angle is not None:
            generator = gate.generator()
            gens[g, :generator.shape[0], :generator.shape[1]] = generator
    return gens


@functools.lru_cache(maxsize=64)
def _sweep_plan(circuit: BatchedCircuit) -> tuple[np.ndarray, ...]:
    """The steps of `lane_kernels.adjoint_sweep`, from the circuit's last entry of
    `one_wire_runs` to its first: (kind, first wire, last wire, later gate, earlier gate)
    per step, and the permutation tables' inverses. A run of one-wire gates on a wire is undone two
    gates a step, from its end, each step through the product of its two gates."""
    order, runs, permutes, tables = one_wire_runs(circuit)
    kinds, first, last = circuit.arrays()
    steps: list[tuple[int, int, int, int, int]] = []
    for e in range(len(runs) - 2, -1, -1):
        if permutes[e] >= 0:
            steps.append((PERMUTE, int(permutes[e]), 0, -1, -1))
            continue
        gates = order[runs[e]:runs[e + 1]]
        for stop in range(len(gates), 0, -2):
            late = int(gates[stop - 1])
            early = int(gates[stop - 2]) if stop >= 2 else -1
            steps.append((int(kinds[late]), int(first[late]), int(last[late]), late, early))
    columns = np.array(steps, np.int64).reshape(-1, 5).T
    inverse_tables = np.argsort(tables, axis=1) if len(tables) else tables
    return (*columns, inverse_tables)


@functools.lru_cache(maxsize=64)
def _step_generators(circuit: BatchedCircuit) -> np.ndarray:
    """Each sweep step's generators, ``(steps, 2, 4, 4)``: its later gate's and its earlier
    one's (`_sweep_plan`), zero for none."""
    _, _, _, later, earlier, _ = _sweep_plan(circuit)
    gens = _generators(circuit)
    return np.stack([gens[np.maximum(gates, 0)] * (gates >= 0)[:, None, None]
                     for gates in (later, earlier)], axis=1)


@functools.lru_cache(maxsize=64)
def _segments(circuit: BatchedCircuit) -> np.ndarray | None:
    """The segments of `lane_kernels.adjoint_sweep_checkpointed` as step boundaries (each
    run of one-wire steps one segment, every other step one), or None when a run of
    one-wire gates has more than two gates (its middle gates' overlaps need states inside
    the run: the sweep then undoes the states instead)."""
    kinds = _sweep_plan(circuit)[0]
    _, runs, permutes, _ = one_wire_runs(circuit)
    if np.any(np.diff(runs)[permutes < 0] > 2):
        return None
    starts = [e for e in range(1, len(kinds))
              if kinds[e] != DENSE1 or kinds[e - 1] != DENSE1]
    return np.array([0, *starts, len(kinds)], np.int64)


@functools.lru_cache(maxsize=64)
def _checkpoint_slots(circuit: BatchedCircuit) -> np.ndarray:
    """For each segment (`_segments`), where the forward run keeps the states entering it
    (the final states first), or -1 for a segment that takes no overlap (a permutation,
    a step without an angle): only the final states and those entering a segment with an
    angle are kept."""
    step_gens = _step_generators(circuit)
    segments = _segments(circuit)
    kept = [k == 0 or bool(np.any(step_gens[segments[k]:segments[k + 1]]))
            for k in range(len(segments) - 1)]
    return np.where(kept, np.cumsum(kept) - 1, -1).astype(np.int64)


# The most bytes the forward run's checkpoints may take (one state per kept segment
# boundary, 4 MiB for 64 members at n = 12); beyond it the sweep undoes the states instead.
CHECKPOINT_BYTES = 1 << 30


def checkpoint_segments(circuit: BatchedCircuit, size: int) -> np.ndarray | None:
    """The checkpointed sweep's segments (`_segments`) when the forward run's checkpoints
    (`_checkpoint_slots`) for ``size`` members fit in `CHECKPOINT_BYTES`, else None.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import rotation   # one ry: one segment
    >>> checkpoint_segments(batched_circuit(qdiff.trace(rotation, 0.1)), 64).tolist()
    [0, 1]
    """
    segments = _segments(circuit)
    if segments is None:
        return None
    lanes = -(-size // max(1, -(-size // lane_kernels.MAX_LANES)))
    tiles = -(-size // lanes)
    kept = int(np.sum(_checkpoint_slots(circuit) >= 0))
    if kept * tiles * lanes * 16 << circuit.num_qubits > CHECKPOINT_BYTES:
        return None
    return segments


def _step_inverses(later: np.ndarray, earlier: np.ndarray, mats: np.ndarray) -> np.ndarray:
    """Each sweep step's inverse for every member, ``(members, steps, 4, 4)``: the later
    gate's matrix times the earlier one's (2x2 blocks) where a step has two, conjugated
    and transposed (a permutation step's is unused)."""
    product = mats[:, np.maximum(later, 0)]
    pairs = np.flatnonzero(earlier >= 0)
    product[:, pairs, :2, :2] = products_2x2(mats[:, later[pairs], :2, :2],
                                             mats[:, earlier[pairs], :2, :2])
    return product.conj().swapaxes(-1, -2)


def _lane_sweep(circuit: BatchedCircuit, psi: np.ndarray, lam: np.ndarray,
                inverses: np.ndarray, size: int, segments: np.ndarray | None) -> np.ndarray:
    """Every gate angle's cotangent for each of ``size`` members, ``(size, gates)``, from
    the adjoint vectors ``lam`` (the lane layout), each step's inverse in the lane layout,
    and either the final states (members along the lanes; ``segments`` None) or the
    forward run's checkpoints (`_checkpoint_slots`) at ``segments``
    (`adjoint_sweep_checkpointed`)."""
    kinds, first, last, later, earlier, tables = _sweep_plan(circuit)
    step_gens = _step_generators(circuit)
    lanes = psi.shape[-1]
    out = lane_kernels.aligned_empty((psi.shape[0], len(kinds), 2, lanes))
    if segments is None:
        bounds = lane_kernels.one_wire_blocks(kinds, first,
                                              lane_kernels.block_wires(lanes, 2))
        lane_kernels.adjoint_sweep(psi, lam, kinds, first, last,
                                   inverses, tables, bounds, step_gens, out)
    else:
        lane_kernels.adjoint_sweep_checkpointed(
            psi, _checkpoint_slots(circuit), lam, kinds, first, last, inverses, tables,
            segments, lane_kernels.block_wires(lanes, 1), lane_kernels.block_wires(lanes, 2),
            step_gens, out)
    per_step = np.moveaxis(out, 3, 1).reshape(-1, len(kinds), 2)[:size]
    per_gate = np.zeros((size, len(circuit.gates)))
    for column, gates in enumerate((later, earlier)):
        steps = np.flatnonzero(gates >= 0)
        per_gate[:, gates[steps]] = per_step[:, steps, column]
    return per_gate


def _adjoint_vectors(circuit: BatchedCircuit, state: np.ndarray, psi: np.ndarray | None,
                     readout_cts: Sequence[np.ndarray], size: int) -> np.ndarray:
    """``λ = Σ_r ē_r O_r ψ`` (``p̄_j(i) ψ_i`` per amplitude for probabilities) in the lane
    layout, from the final states ``state`` (lanes) or, when `final_readouts` converted
    them, ``psi``: on the lanes, without converting, where the readouts are diagonals."""
    if psi is None:     # Σ_r ē_r d_r, one weight per amplitude and member
        tiles, lanes = state.shape[0], state.shape[-1]
        cts = np.zeros((len(readout_cts), tiles * lanes))
        for r, ct in enumerate(readout_cts):
            cts[r, :size] = ct
        weights = readout_diagonals(circuit).T @ cts                 # (2**n, members)
        lam = lane_kernels.aligned_empty(state.shape)
        return np.multiply(state, np.moveaxis(weights.reshape(-1, tiles, lanes), 1, 0)[:, None],
                           out=lam)
    n = circuit.num_qubits
    return lane_kernels.to_lanes(readout_adjoints(
        np, circuit, psi, readout_cts, lambda x, obs, wires: observable_rows(x, n, obs, wires)))


def _scatter_add(out: np.ndarray, columns: np.ndarray, values: np.ndarray) -> None:
    """``out[:, columns[j]] += values[:, j]`` for every ``j``, repeated columns summed."""
    if len(np.unique(columns)) == len(columns):
        out[:, columns] += values
    else:
        np.add.at(out, (slice(None), columns), values)


def _angles_vjp(circuit: BatchedCircuit, values: Sequence[Any], flags: tuple[bool, ...],
                size: int, active: tuple[bool, ...], per_gate: np.ndarray) -> list[Any]:
    """The cotangents of the active inputs, ``(size, *shape)`` each, from every gate
    angle's cotangent ``per_gate`` (``(size, gates)``) through the angles program: one
    scatter for `angle_gather`'s form, else its VJP program batched."""
    rotations = [g for g, gate in enumerate(circuit.gates) if gate.angle is not None]
    angle_of = np.array([circuit.gates[g].angle for g in rotations], np.int64)
    gather = angle_gather(circuit)
    if gather is not None:
        source, indices = gather
        via = [np.zeros((size, *np.shape(v)[1 if f else 0:]), np.asarray(v).dtype)
               for v, f, a in zip(values, flags, active) if a]
        if active[source]:
            flat = via[sum(active[:source])].reshape(size, -1)
            _scatter_add(flat, indices[angle_of], per_gate[:, rotations])
        return via
    angle_cts = np.zeros((size, len(circuit.angles.outputs)))
    _scatter_add(angle_cts, angle_of, per_gate[:, rotations])
    back = _vjp(circuit.angles, active, False)
    return evaluate(batched_part(back, (*flags, *[True] * angle_cts.shape[1]), size, True),
                    *values, *angle_cts.T)


Simulation = Callable[[BatchedCircuit, np.ndarray, int],
                      tuple[Sequence[Any], Callable[[Sequence[Any]], np.ndarray]]]


def value_and_grad_simulated(simulate: Simulation, program: Program, values: Sequence[Any],
                             flags: Sequence[bool], size: int,
                             argnums: ArgNums) -> tuple[Any, Any]:
    """Each member's value and gradient (with respect to ``argnums``, structured like
    them) of a scalar-valued ``program``, batch axis first, around a batched simulation:
    ``simulate(circuit, angles, size)`` (`angle_table`'s) runs the circuit and returns its
    readouts'
    values and a function taking their cotangents to every gate angle's cotangent,
    ``(size, gates)`` (the lane kernels' sweep here, the array module's in
    `array_batched_adjoint`). The classical parts around it are differentiated by
    reverse mode and batched."""
    circuit = batched_circuit(program)
    assert circuit is not None, "batched gradients need a program batched_circuit accepts"
    flags = tuple(bool(f) for f in flags)
    numbers = argnum_tuple(argnums, program, "grad")
    active = tuple(wrt_flags(program, numbers, "grad"))
    num_readouts = len(circuit.readouts)
    table = angle_table(circuit, angle_rows(circuit, values, flags, size), size)
    readouts, sweep = simulate(circuit, table, size)
    # the outputs' VJP: value, direct input cotangents, expectation cotangents
    backward = _vjp(circuit.outputs, (*active, *[True] * num_readouts), True)
    seed = np.ones((), np.float64)
    outs = evaluate(batched_part(backward, (*flags, *[True] * num_readouts, False), size, True),
                    *values, *readouts, seed)
    value, direct, readout_cts = outs[0], outs[1:1 + sum(active)], outs[1 + sum(active):]
    via = _angles_vjp(circuit, values, flags, size, active, sweep(readout_cts))
    grads = [d + v for d, v in zip(direct, via)]
    return value, pytree.unflatten(wrt_tree(program, argnums, numbers), grads)


def _lane_simulation(circuit: BatchedCircuit, angles: np.ndarray, size: int) -> tuple[
        Sequence[Any], Callable[[Sequence[Any]], np.ndarray]]:
    # the forward run on the lanes, keeping what the sweep reads; the sweep itself
    segments = checkpoint_segments(circuit, size)
    if segments is None:
        steps = lane_circuit(circuit, angles)
        forward = final = final_lane_states(circuit, angles, steps=steps)
        inverses = lane_kernels.to_lanes(_step_inverses(
            *_sweep_plan(circuit)[3:5], member_matrices(circuit, angles, size)))
    else:   # the states entering the segments that take overlaps, the final ones first
        # each step undoes one entry of the forward run: its matrices' adjoints
        steps, inverses = lane_circuit_and_inverses(circuit, angles)
        kept = segments[:-1][_checkpoint_slots(circuit) >= 0]
        forward = final_lane_states(circuit, angles, len(_sweep_plan(circuit)[0]) - kept,
                                    steps)
        final = forward[:, 0]
    readouts, psi = final_readouts(circuit, final, size)

    def sweep(readout_cts: Sequence[Any]) -> np.ndarray:
        # λ = Σ_r ē_r O_r ψ, then every gate angle's cotangent
        lam = _adjoint_vectors(circuit, final, psi, readout_cts, size)
        return _lane_sweep(circuit, forward, lam, inverses, size, segments)
    return readouts, sweep


def batched_value_and_grad(program: Program, values: Sequence[Any], flags: Sequence[bool],
                           size: int, argnums: ArgNums) -> tuple[Any, Any]:
    """Each member's value and gradient (with respect to ``argnums``, structured like
    them) of a scalar-valued ``program``, batch axis first, on the lane kernels."""
    return value_and_grad_simulated(_lane_simulation, program, values, flags, size, argnums)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    circuit = batched_circuit(program)   # on NumPy/CuPy: `array_batched_adjoint`
    return batched_array_module() is None and circuit is not None \
        and len(program.outputs) == 1 \
        and program.out_types[0].shape == ()


register_batched_gradient(_claims, batched_value_and_grad)

__all__ = ["CHECKPOINT_BYTES", "batched_value_and_grad", "checkpoint_segments",
           "value_and_grad_simulated"]
