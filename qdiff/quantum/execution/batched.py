"""Batches of a quantum program as one batched statevector simulation (`qdiff.vmap`).

A program qualifies when its quantum part is one straight circuit: one register
(complex128), then gates of at most two wires with at most one angle each, then
expectation values, with classical code before (computing the angles, loops included)
and after (a loss on the expectations). It splits into three parts (`BatchedCircuit`):

- ``angles``: a classical program from the inputs to every gate's angle, batched by
  `qdiff.batching` like any classical program (an angle the batch shares stays one number);
- the circuit: a ``(members, 2**n)`` array of states, run by one compiled loop over the
  members (`simulator.batched_kernels`), each member's matrices built from its angles
  (``U(θ) = exp(-iθG)`` from the gate's generator ``G``);
- ``outputs``: a classical program from the inputs and the expectation values to the
  results, batched likewise.

Programs outside this form (mid-circuit measurements, resets, loops carrying the state,
readouts that feed gates) are not claimed: `qdiff.vmap` runs their members one by one.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> program = qdiff.trace(rotation, 0.1)
>>> theta = np.array([0.0, 0.5, 1.0])
>>> np.allclose(run_batched(program, [theta], [True], 3)[0], np.cos(theta))
True
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...batching import register_batched_runner
from ...batching.interpreter import batch_subprogram
from ...ir.control_flow import loop_p
from ...ir.core import Literal, Program, Var
from ...ir.interpreter import evaluate
from ...ir.passes import unpack_scalars
from ...ir.tracer import bind, trace
from ...ir.types import Bit, QState
from ..lang.gates import GateSpec, gate_spec
from ..lang.observables import PauliSum
from ..lang.primitives import QUANTUM_PRIMITIVES, pauli_sum_of
from ..simulator import get_backend
from ..simulator.batched_kernels import CONTROLLED1, DENSE1, DENSE2, run_circuit


@dataclass(frozen=True)
class CircuitGate:
    """One gate of the circuit: its spec, wires, where its angle is among the angles, and
    its kernel kind (a controlled gate acts through its one-wire base)."""

    spec: GateSpec
    wires: tuple[int, ...]
    angle: int | None
    kind: int

    @property
    def acting(self) -> GateSpec:
        """The gate whose matrix the kernel applies: the base of a controlled gate."""
        return self.spec.base if self.kind == CONTROLLED1 else self.spec

    def generator(self) -> np.ndarray:
        """The generator of the acting gate (``U = exp(-iθG)``)."""
        return self.acting.generator_matrix()


def _kind(spec: GateSpec) -> int:
    if spec.num_qubits == 1:
        return DENSE1
    if spec.structure == "controlled" and spec.num_controls == 1 \
            and spec.base.num_qubits == 1:
        return CONTROLLED1
    return DENSE2


@dataclass(frozen=True, eq=False)
class BatchedCircuit:
    """A program split into classical angles, one circuit, and classical outputs."""

    program: Program
    angles: Program
    outputs: Program
    gates: tuple[CircuitGate, ...]
    readouts: tuple[tuple[PauliSum, tuple[int, ...]], ...]
    num_qubits: int

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(kind, first wire, last wire) of each gate, for the kernels."""
        return _arrays(self.gates)


def _arrays(gates: Sequence[CircuitGate]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    kinds = np.array([g.kind for g in gates], dtype=np.int64)
    first = np.array([g.wires[0] for g in gates], dtype=np.int64)
    last = np.array([g.wires[-1] for g in gates], dtype=np.int64)
    return kinds, first, last


def _quantum_type(t: Any) -> bool:
    return isinstance(t, (QState, Bit))


def _split(program: Program) -> BatchedCircuit | None:
    gates: list[CircuitGate] = []
    readouts: list[tuple[PauliSum, tuple[int, ...]]] = []
    angle_atoms: list[Any] = []
    readout_vars: list[Var] = []
    classical, before = [], []
    derived: set[Var] = set()   # values computed from expectation values
    num_qubits = None
    for eqn in program.eqns:
        name = eqn.primitive.name
        if name not in QUANTUM_PRIMITIVES:
            if any(_quantum_type(a.type) for a in (*eqn.inputs, *eqn.outputs)) or any(
                    e.primitive.name in QUANTUM_PRIMITIVES
                    for _, sub in eqn.subprograms() for e in sub.all_eqns()):
                return None  # control flow carrying the state
            classical.append(eqn)
            if any(isinstance(a, Var) and a in derived for a in eqn.inputs):
                derived.update(eqn.outputs)
            else:
                before.append(eqn)
            continue
        if name == "qalloc":
            if num_qubits is not None or eqn.params["dtype"] != "complex128":
                return None
            num_qubits = eqn.params["num_qubits"]
        elif name == "gate":
            spec = gate_spec(eqn.params["name"], **(eqn.params.get("static") or {}))
            angles = eqn.inputs[1:]
            if spec.num_qubits > 2 or len(angles) > 1 or (angles and spec.generator is None):
                return None
            if any(isinstance(a, Var) and a in derived for a in angles):
                return None  # an expectation value feeds a gate
            gates.append(CircuitGate(spec, tuple(eqn.params["wires"]),
                                     len(angle_atoms) if angles else None, _kind(spec)))
            angle_atoms.extend(angles)
        elif name == "expval":
            readouts.append((pauli_sum_of(eqn.params["terms"]), tuple(eqn.params["wires"])))
            readout_vars.append(eqn.outputs[1])
            derived.add(eqn.outputs[1])
        else:
            return None
    if num_qubits is None or not readouts \
            or any(_quantum_type(a.type) for a in program.outputs):
        return None
    # one `unpack` for the angles read element by element from a parameter array
    angles = unpack_scalars(Program(program.inputs, tuple(before), tuple(angle_atoms),
                                    name="angles"))
    outputs = Program((*program.inputs, *readout_vars), tuple(classical), program.outputs,
                      name="outputs", out_tree=program.out_tree)
    return BatchedCircuit(program, angles, outputs, tuple(gates), tuple(readouts), num_qubits)


# Counted loops that carry the state are unrolled when their bounds are constants and
# they run at most this many iterations in all.
MAX_UNROLLED_ITERATIONS = 4096


def _carries_state(eqn: Any) -> bool:
    return any(isinstance(a.type, QState) for a in eqn.inputs)


def unrolled_state_loops(program: Program) -> Program | None:
    """``program`` with every counted loop that carries the quantum state and has constant
    bounds replaced by its iterations (nested ones too), so that its gates form one
    straight circuit; ``program`` itself when it has none; None when they would run more
    than `MAX_UNROLLED_ITERATIONS` iterations.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import layers   # three ry(t) in a counted loop
    >>> [e.primitive.name for e in unrolled_state_loops(qdiff.trace(layers, 0.1)).eqns]
    ['qalloc', 'gate', 'gate', 'gate', 'expval']
    """
    if not any(e.primitive is loop_p and _carries_state(e) for e in program.eqns):
        return program
    budget = [MAX_UNROLLED_ITERATIONS]

    def replay(body: Program, args: Sequence[Any]) -> list[Any]:
        env: dict[Var, Any] = dict(zip(body.inputs, args))

        def read(atom: Any) -> Any:
            return atom.value if isinstance(atom, Literal) else env[atom]

        for eqn in body.eqns:
            values = [read(a) for a in eqn.inputs]
            if eqn.primitive is loop_p and _carries_state(eqn):
                start, stop = eqn.inputs[:2]
                if not (isinstance(start, Literal) and isinstance(stop, Literal)):
                    raise _NotStraight
                count = max(0, int(stop.value) - int(start.value))
                budget[0] -= count
                if budget[0] < 0:
                    raise _NotStraight
                nc = eqn.params["num_consts"]
                consts, outs = values[2:2 + nc], values[2 + nc:]
                for i in range(int(start.value), int(stop.value)):
                    index = np.asarray(i, start.value.dtype)
                    outs = replay(eqn.params["body"], [index, *consts, *outs])
            else:
                result = bind(eqn.primitive, *values, **eqn.params)
                outs = result if eqn.primitive.multiple_results else [result]
            env.update(zip(eqn.outputs, outs))
        return [read(a) for a in body.outputs]

    try:
        flat = trace(lambda *args: tuple(replay(program, args)), *program.in_types,
                     name=program.name)
    except _NotStraight:
        return None
    return Program(flat.inputs, flat.eqns, flat.outputs, name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)


class _NotStraight(Exception):
    """A loop carrying the state whose bounds are not constants, or too many iterations."""


_PLANS: dict[int, tuple[Program, BatchedCircuit | None]] = {}


def batched_circuit(program: Program) -> BatchedCircuit | None:
    """``program`` split for batched simulation, or None when it is not of that form
    (cached per program)."""
    hit = _PLANS.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1]
    if len(_PLANS) > 1024:
        _PLANS.clear()
    straight = unrolled_state_loops(program)
    plan = None if straight is None else _split(straight)
    _PLANS[id(program)] = (program, plan)
    return plan


@functools.lru_cache(maxsize=256)
def batched_part(part: Program, flags: tuple[bool, ...], size: int,
                 all_batched: bool) -> Program:
    """A classical part batched for ``flags`` (outputs batched only where they differ per
    member, or all of them with ``all_batched``), cached."""
    force = [True] * len(part.outputs) if all_batched else None
    return batch_subprogram(part, flags, size, force)[0]


@functools.lru_cache(maxsize=64)
def _eigen(spec: GateSpec) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh(spec.generator_matrix())
    return values, vectors


def gate_matrices(gate: CircuitGate, angle: Any, size: int) -> np.ndarray:
    """The matrix the kernel applies for ``gate`` (the base of a controlled gate), for every
    member: ``exp(-iθG)`` from the generator's eigenvectors for a rotation (``(size, k,
    k)``), the fixed matrix otherwise (``(1, k, k)``)."""
    acting = gate.acting
    if gate.angle is None:
        return acting.matrix()[None]
    values, vectors = _eigen(acting)
    theta = np.broadcast_to(np.asarray(angle, np.float64), (size,))
    phases = np.exp(-1j * theta[:, None] * values[None, :])
    return np.einsum("ij,bj,kj->bik", vectors, phases, vectors.conj())


def member_matrices(circuit: BatchedCircuit, angles: Sequence[Any], size: int) -> np.ndarray:
    """Every gate's matrix for every member, ``(size, gates, 4, 4)`` (see `batched_kernels`)."""
    mats = np.zeros((size, len(circuit.gates), 4, 4), np.complex128)
    for g, gate in enumerate(circuit.gates):
        angle = None if gate.angle is None else angles[gate.angle]
        block = gate_matrices(gate, angle, size)
        mats[:, g, :block.shape[1], :block.shape[2]] = block
    return mats


def fused_one_wire_runs(circuit: BatchedCircuit, mats: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The circuit with each run of one-wire gates on a wire multiplied into one matrix per
    member (gates on other wires commute with it): kernel arrays and matrices."""
    pending: dict[int, np.ndarray] = {}
    order: list[tuple[CircuitGate, np.ndarray]] = []

    def flush(wire: int) -> None:
        if wire in pending:
            order.append((CircuitGate(circuit.gates[0].spec, (wire,), None, DENSE1),
                          pending.pop(wire)))

    for g, gate in enumerate(circuit.gates):
        if gate.kind == DENSE1:
            w = gate.wires[0]
            m = mats[:, g, :2, :2]
            pending[w] = m if w not in pending else np.matmul(m, pending[w])
            continue
        for w in gate.wires:
            flush(w)
        order.append((gate, mats[:, g]))
    for w in list(pending):
        flush(w)
    fused = np.zeros((mats.shape[0], len(order), 4, 4), np.complex128)
    for g, (_, m) in enumerate(order):
        fused[:, g, :m.shape[1], :m.shape[2]] = m
    return (*_arrays([gate for gate, _ in order]), fused)


def final_states(circuit: BatchedCircuit, mats: np.ndarray) -> np.ndarray:
    """The circuit run from |0…0> for every member: ``(members, 2**n)``."""
    psi = np.zeros((mats.shape[0], 1 << circuit.num_qubits), np.complex128)
    psi[:, 0] = 1.0
    return run_circuit(psi, *fused_one_wire_runs(circuit, mats))


def expectations(circuit: BatchedCircuit, psi: np.ndarray) -> list[np.ndarray]:
    """Each readout's expectation for every member, ``(members,)`` each."""
    backend = get_backend("auto")
    norms = np.einsum("bi,bi->b", psi.conj(), psi).real
    return [np.array([backend.expval_pauli_sum(row, circuit.num_qubits, obs, list(wires))
                      for row in psi]) / norms for obs, wires in circuit.readouts]


def run_batched(program: Program, values: Sequence[Any], flags: Sequence[bool],
                size: int) -> list[Any]:
    """The outputs of ``program`` for a batch (``values`` flat, batch axis first where
    ``flags`` says so), each with the batch axis first."""
    circuit = batched_circuit(program)
    assert circuit is not None, "run_batched needs a program batched_circuit accepts"
    flags = tuple(bool(f) for f in flags)
    angles = evaluate(batched_part(circuit.angles, flags, size, False), *values)
    psi = final_states(circuit, member_matrices(circuit, angles, size))
    readouts = expectations(circuit, psi)
    outputs = batched_part(circuit.outputs, (*flags, *[True] * len(readouts)), size, True)
    return evaluate(outputs, *values, *readouts)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    return batched_circuit(program) is not None


register_batched_runner(_claims, run_batched)

__all__ = ["BatchedCircuit", "CircuitGate", "batched_circuit", "run_batched"]
