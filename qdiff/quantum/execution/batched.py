"""Batches of a quantum program as one batched statevector simulation (`qdiff.vmap`).

A program qualifies when its quantum part is one straight circuit: one register
(complex128), then gates, then expectation values, with classical code before (computing
the angles, loops included) and after (a loss on the expectations). Each gate is lowered
(`lowered_gates`) into steps the kernels have (``DENSE1``, ``DENSE2``, ``CONTROLLED1``,
``PERMUTE``): gates of several angles into one-angle rotations, Pauli rotations on three
or more wires into CNOT ladders around ``rz``, fixed gates on three or more wires into
permutation tables and Z-parity rotations (`_wide_fixed`). There is no DENSEk step: a
dense fixed gate on three or more wires of no form `_wide_fixed` knows leaves the program
unclaimed (member by member). It splits into three parts (`BatchedCircuit`):

- ``angles``: a classical program from the inputs to every gate's angle, batched by
  `qdiff.batching` like any classical program (an angle the batch shares stays one number);
- the circuit: the members' states with the members along the SIMD lanes, run by one
  compiled loop over the circuit's steps (`simulator.lane_kernels`), each member's matrices
  built from its angles (``U(θ) = exp(-iθG)`` from the gate's generator ``G``);
- ``outputs``: a classical program from the inputs and the expectation values to the
  results, batched likewise.

Counted loops that carry the state with constant bounds are unrolled first
(`unrolled_state_loops`). Programs outside this form (mid-circuit measurements, resets,
while loops, branches or loops with traced bounds carrying the state, readouts that feed
gates) are not claimed: `qdiff.vmap` runs their members one by one.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> program = qdiff.trace(rotation, 0.1)
>>> theta = np.array([0.0, 0.5, 1.0])
>>> np.allclose(run_batched(program, [theta], [True], 3)[0], np.cos(theta))
True
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from ...batching import register_batched_runner
from ...batching.interpreter import batch_subprogram
from ...ir.control_flow import loop_p
from ...ir.core import Literal, Program, Var
from ...ir.errors import QdiffError
from ...ir.interpreter import evaluate
from ...ir.passes import unpack_scalars
from ...ir.tracer import bind, trace
from ...ir.types import Bit, QState
from ..lang.gates import GateSpec, gate_spec
from ..lang.observables import PauliSum, parity
from ..lang.primitives import QUANTUM_PRIMITIVES, pauli_sum_of
from ..simulator import get_backend, lane_kernels, lane_matrices
from ..simulator.batched_kernels import CONTROLLED1, DENSE1, DENSE2, PERMUTE
from . import array_batched
from .batched_backend import batched_array_module


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


def gate_kind(spec: GateSpec) -> int:
    """The kernel kind that applies ``spec`` (`batched_kernels`): a gate on three or more
    wires is a ``PERMUTE`` (`lowered_gates` only passes permutations on so many wires)."""
    if spec.num_qubits == 1:
        return DENSE1
    if spec.num_qubits > 2:
        return PERMUTE
    if spec.structure == "controlled" and spec.num_controls == 1 \
            and spec.base.num_qubits == 1:
        return CONTROLLED1
    return DENSE2


_H = gate_spec("h")


def _one_a_row_and_column(mask: np.ndarray) -> bool:
    """Whether ``mask`` has exactly one True in every row and every column."""
    return bool(np.all(mask.sum(axis=0) == 1) and np.all(mask.sum(axis=1) == 1))


def _is_permutation(m: np.ndarray) -> bool:
    """Whether ``m`` only moves amplitudes: zeros and ones (to 1e-12), one 1 a row and column."""
    ones = np.abs(m - 1) < 1e-12
    return bool(np.all(ones | (np.abs(m) < 1e-12))) and _one_a_row_and_column(ones)


def _one_wire(spec: GateSpec, wire: int) -> CircuitGate:
    """The fixed one-wire gate ``spec`` on ``wire``."""
    return CircuitGate(spec, (wire,), None, DENSE1)


def _fixed(matrix: np.ndarray, wires: tuple[int, ...]) -> CircuitGate:
    """A fixed gate of ``matrix`` on one or two ``wires`` (or a permutation on more)."""
    spec = gate_spec("unitary", matrix=matrix)
    return CircuitGate(spec, wires, None, gate_kind(spec))


def _diagonal(d: np.ndarray, wires: tuple[int, ...]) -> list[CircuitGate]:
    """``diag(d)`` on ``wires`` (bit ``j`` of its index is ``wires[j]``), up to a global
    phase, as Z-parity rotations: its phases ``φ(x) = Σ_S c_S (-1)^{|x ∧ S|}`` (Walsh
    coefficients ``c_S``), so ``diag(d) = e^{i c_∅} Π_S exp(i c_S Z_S)``."""
    k = len(wires)
    x = np.arange(1 << k)
    phases = np.angle(d)
    gates: list[CircuitGate] = []
    for subset in range(1, 1 << k):
        signs = 1 - 2 * parity(x & subset)
        c = float(np.mean(phases * signs))
        if abs(c) > 1e-15:
            word = "".join("Z" if subset >> j & 1 else "I" for j in range(k))
            matrix = _RZ.matrix(-2 * c)
            gates += _pauli_rotation(word, wires, lambda w, m=matrix: _fixed(m, (w,)))
    return gates


_RZ = gate_spec("rz")


# Fixed gates on more wires are not lowered (their matrices are read whole): member by member
MAX_LOWERED_WIRES = 10


def _z_flips(m: np.ndarray) -> tuple[int, np.ndarray] | None:
    """``(j, P)`` when the diagonal ``m`` is ``H_j P H_j`` for a permutation ``P`` (H on its
    wire ``j``): every entry with bit ``j`` 0 is 1 and every other is ±1 (``mcz``, ``ccz``:
    ``H Z H = X``); ``P`` swaps the pairs whose entry with bit ``j`` set is -1."""
    d = np.diagonal(m)
    if np.any(np.abs(m - np.diag(d)) > 1e-12):
        return None
    index = np.arange(len(d))
    for j in range(len(d).bit_length() - 1):
        low, high = index[(index >> j & 1) == 0], index[(index >> j & 1) == 1]
        flip = np.abs(d[high] + 1) < 1e-12
        if np.all(np.abs(d[low] - 1) < 1e-12) and np.all(flip | (np.abs(d[high] - 1) < 1e-12)):
            source = index.copy()
            source[low[flip]], source[high[flip]] = high[flip], low[flip]
            return j, np.eye(len(d))[source]
    return None


def _wide_fixed(spec: GateSpec, wires: tuple[int, ...]) -> list[CircuitGate] | None:
    """A fixed gate on three or more wires from permutation tables and gates of one and two
    wires, up to a global phase; None when it has none of these forms:

    - a permutation (``ccx``, ``mcx``, ``cswap``): one ``PERMUTE`` gate;
    - H on one wire, a permutation, H again (``ccz``, ``mcz``: ``H Z H = X``);
    - one wire's 2x2 unitary ``V`` where every other wire is 1 (``c3sx``, multi-controlled
      rotations and phases of a fixed angle): ``V = W diag(v) W^†`` from its
      eigenvectors, so the gate is ``W^†`` on that wire, the controlled phases
      (`_controlled_phases`), then ``W``;
    - a permutation with phases (``rccx``; any other diagonal): the permutation, then the
      phases as Z-parity rotations (`_diagonal`).

    A dense fixed gate of no such form, or one on more than `MAX_LOWERED_WIRES` wires,
    runs member by member (no k-wire dense kernel: such gates are rare, and each would need
    its own ``2^k x 2^k`` matrix in every kernel)."""
    k = spec.num_qubits
    if k > MAX_LOWERED_WIRES:
        return None
    m = spec.matrix()
    if _is_permutation(m):
        return [CircuitGate(spec, wires, None, PERMUTE)]
    flips = _z_flips(m)
    if flips is not None:
        j, table = flips
        hadamard = _one_wire(_H, wires[j])
        return [hadamard, _fixed(table, wires), hadamard]
    for j in range(k):
        ones = ((1 << k) - 1) & ~(1 << j)            # every wire but j is 1
        pair = np.ix_([ones, ones | 1 << j], [ones, ones | 1 << j])
        rest = np.eye(len(m), dtype=m.dtype)
        rest[pair] = m[pair]
        if np.allclose(rest, m, rtol=0, atol=1e-12):
            _, w = np.linalg.eig(m[pair])
            w, _ = np.linalg.qr(w)   # orthonormal eigenvectors (V is normal)
            alpha, beta = np.angle(np.diag(w.conj().T @ m[pair] @ w))
            controls = tuple(wires[c] for c in range(k) if c != j)
            return [_fixed(w.conj().T, (wires[j],)),
                    *_controlled_phases(alpha, beta, controls, wires[j]),
                    _fixed(w, (wires[j],))]
    nonzero = np.abs(m) > 1e-12
    if _one_a_row_and_column(nonzero):
        image = np.argmax(nonzero, axis=1)           # m = diag(d) P, P[r, image[r]] = 1
        d = m[np.arange(len(m)), image]
        moves = [] if np.array_equal(image, np.arange(len(m))) else \
            [_fixed(nonzero.astype(np.complex128), wires)]
        return moves + _diagonal(d, wires)
    return None


def _controlled_phases(alpha: float, beta: float, controls: tuple[int, ...],
                       target: int) -> list[CircuitGate]:
    """``diag(e^{iα}, e^{iβ})`` on ``target`` where every control is 1: with ``θ = β - α``,
    ``γ = (α + β)/2``, the multi-controlled X, ``rz(-θ/2)``, the X again and ``rz(θ/2)``
    (``X rz(-θ/2) X = rz(θ/2)``: ``rz(θ)`` where the controls are 1, else nothing), then
    the phase ``e^{iγ}`` where the controls are 1, the same on one control fewer: about
    four steps a control, where a diagonal's Z-parity rotations would be ``2^k``."""
    if not controls:
        return [_fixed(np.diag(np.exp(1j * np.array([alpha, beta]))), (target,))]
    theta, gamma = beta - alpha, (alpha + beta) / 2
    flip = lowered_gates(gate_spec("mcx", num_controls=len(controls)), (*controls, target), [])
    return [*flip, _fixed(_RZ.matrix(-theta / 2), (target,)), *flip,
            _fixed(_RZ.matrix(theta / 2), (target,)),
            *_controlled_phases(0.0, gamma, controls[:-1], controls[-1])]


def _pauli_rotation(word: str, wires: tuple[int, ...],
                    rotation: Callable[[int], CircuitGate]) -> list[CircuitGate]:
    """``exp(-iθP/2)`` for a Pauli word as the same matrix from gates of at most two wires:
    each X or Y letter turned into Z (H; S† then H), a CNOT ladder that leaves the parity
    of the Z letters on the last of them, ``rotation(wire)`` (``rz(θ)``) there, and all of
    it undone. Letters I act on nothing; an all-I word is a global phase."""
    active = [(wires[k], letter) for k, letter in enumerate(word) if letter != "I"]
    if not active:
        return []
    into: list[CircuitGate] = []
    out: list[CircuitGate] = []
    for wire, letter in active:
        if letter == "X":
            into.append(_one_wire(_H, wire))
            out.insert(0, _one_wire(_H, wire))
        elif letter == "Y":   # Y = (S H) Z (S H)^†
            into += [_one_wire(gate_spec("sdg"), wire), _one_wire(_H, wire)]
            out[:0] = [_one_wire(_H, wire), _one_wire(gate_spec("s"), wire)]
    cx = gate_spec("cx")
    ladder = [CircuitGate(cx, (a, b), None, CONTROLLED1)
              for (a, _), (b, _) in zip(active, active[1:])]
    return [*into, *ladder, rotation(active[-1][0]), *ladder[::-1], *out]


def lowered_gates(spec: GateSpec, wires: Sequence[int],
                  angles: Sequence[int | None]) -> list[CircuitGate] | None:
    """``spec`` on ``wires`` as gates the batched kernels apply, each with at most one angle
    (``angles[k]``: where the gate's parameter ``k`` is among the circuit's angles), with
    the same action on every readout; None when there is no such form.

    - a gate of several angles (``u``) becomes its one-angle rotations
      (`GateSpec.occurrences`), without the global phase ``exp(iα)``, which no
      expectation or probability sees, so every angle keeps one generator;
    - a Pauli rotation on three or more wires: `_pauli_rotation`;
    - a fixed gate on three or more wires: `_wide_fixed`.

    Other gates on three or more wires (with an angle, or dense and fixed of no form
    `_wide_fixed` knows) return None: their batch runs member by member.

    >>> [(g.spec.name, g.wires, g.angle) for g in lowered_gates(gate_spec("u"), (2,), [0, 1, 2])]
    [('rz', (2,), 2), ('ry', (2,), 0), ('rz', (2,), 1)]
    >>> [g.spec.name for g in lowered_gates(gate_spec("mcz", num_controls=2), (0, 1, 2), [])]
    ['h', 'unitary', 'h']
    """
    wires = tuple(int(w) for w in wires)
    if spec.occurrences:
        return [gate for o in spec.occurrences
                for gate in lowered_gates(gate_spec(o.gate), tuple(wires[w] for w in o.wires),
                                          [angles[o.param_index]])]
    if spec.num_params > 1 or (spec.num_params and spec.generator is None):
        return None
    angle = angles[0] if spec.num_params else None
    if spec.num_qubits <= 2:
        return [CircuitGate(spec, wires, angle, gate_kind(spec))]
    if spec.pauli_word is not None:
        return _pauli_rotation(spec.pauli_word, wires,
                               lambda wire: CircuitGate(_RZ, (wire,), angle, DENSE1))
    if spec.num_params:
        return None
    return _wide_fixed(spec, wires)


@dataclass(frozen=True, eq=False)
class BatchedCircuit:
    """A program split into classical angles, one circuit, and classical outputs."""

    program: Program
    angles: Program
    outputs: Program
    gates: tuple[CircuitGate, ...]
    # (observable, wires) of each readout: an expval's Pauli sum, or None for probs
    readouts: tuple[tuple[PauliSum | None, tuple[int, ...]], ...]
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
    readouts: list[tuple[PauliSum | None, tuple[int, ...]]] = []
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
            if any(isinstance(a, Var) and a in derived for a in angles):
                return None  # an expectation value feeds a gate
            lowered = lowered_gates(spec, eqn.params["wires"],
                                    range(len(angle_atoms), len(angle_atoms) + len(angles)))
            if lowered is None:
                return None
            gates.extend(lowered)
            angle_atoms.extend(angles)
        elif name in ("expval", "probs"):
            observable = pauli_sum_of(eqn.params["terms"]) if name == "expval" else None
            readouts.append((observable, tuple(eqn.params["wires"])))
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
def angle_gather(circuit: BatchedCircuit) -> tuple[int, np.ndarray] | None:
    """``(input, flat indices)`` when every gate angle is an element of one float64 input
    read by one ``unpack`` (an ansatz indexing its parameter array): the angles are then
    one gather for the whole batch, and their VJP one scatter, where the batched angles
    program would run two equations per angle through the interpreter. None otherwise.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import rotation   # ry(θ) on a scalar: no unpack
    >>> angle_gather(batched_circuit(qdiff.trace(rotation, 0.1))) is None
    True
    """
    angles = circuit.angles
    if len(angles.eqns) != 1 or angles.eqns[0].primitive.name != "unpack":
        return None
    (eqn,) = angles.eqns
    source = eqn.inputs[0]
    position = {v: k for k, v in enumerate(eqn.outputs)}
    if source not in angles.inputs or source.type.np_dtype != np.float64 \
            or any(not isinstance(a, Var) or a not in position for a in angles.outputs):
        return None
    indices = np.array(eqn.params["indices"], np.int64)
    return angles.inputs.index(source), indices[[position[a] for a in angles.outputs]]


def angle_rows(circuit: BatchedCircuit, values: Sequence[Any], flags: tuple[bool, ...],
               size: int) -> Sequence[Any]:
    """Every gate angle for the batch, indexed by angle: ``(members,)`` arrays, or one
    number where the batch shares it (the batched angles program, or `angle_gather`'s
    one gather, ``(angles, members)``)."""
    gather = angle_gather(circuit)
    if gather is None:
        return evaluate(batched_part(circuit.angles, flags, size, False), *values)
    k, indices = gather
    source = np.asarray(values[k], np.float64)
    flat = source.reshape(size, -1) if flags[k] else source.reshape(1, -1)
    return np.broadcast_to(flat[:, indices].T, (len(indices), size))


@functools.lru_cache(maxsize=64)
def _eigen_projectors(spec: GateSpec) -> tuple[np.ndarray, np.ndarray]:
    """The generator's eigenvalues and the projectors on its eigenvectors, flattened:
    ``(k,)`` and ``(k, k * k)``."""
    values, vectors = np.linalg.eigh(spec.generator_matrix())
    projectors = np.einsum("ij,kj->jik", vectors, vectors.conj())
    return values, projectors.reshape(len(values), -1)


def _check_finite(gate: CircuitGate, theta: np.ndarray) -> None:
    bad = np.flatnonzero(~np.isfinite(theta))
    if bad.size:  # as on one member: no number such an angle gives is meaningful
        raise QdiffError(f"gate {gate.spec.name} on wires {gate.wires}: angle "
                         f"{theta[bad[0]]} of batch member {int(bad[0])} is not finite; "
                         "check the classical code that computes it")


@functools.lru_cache(maxsize=64)
def _matrix_plan(circuit: BatchedCircuit) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    """The fixed gates' 4x4 blocks (gates x 4 x 4), and the rotations grouped by the gate
    they act with: (spec, gate indices, angle indices, matrix size)."""
    fixed = np.zeros((len(circuit.gates), 4, 4), np.complex128)
    groups: dict[GateSpec, tuple[list[int], list[int]]] = {}
    for g, gate in enumerate(circuit.gates):
        if gate.kind == PERMUTE:
            continue   # a table (`_fusion_plan`), no matrix
        if gate.angle is None:
            m = gate.acting.matrix()
            fixed[g, :m.shape[0], :m.shape[1]] = m
        else:
            found = groups.setdefault(gate.acting, ([], []))
            found[0].append(g)
            found[1].append(gate.angle)
    return fixed, [(spec, np.array(gs), np.array(idx, np.int64),
                    spec.generator_matrix().shape[0])
                   for spec, (gs, idx) in groups.items()]


def angle_table(circuit: BatchedCircuit, angles: Sequence[Any], size: int) -> np.ndarray:
    """Every angle for every member as one ``(angles, size)`` float64 array from
    `angle_rows`'s angles (an angle the batch shares repeated); raises the member's error
    for the first gate whose angle is not finite for some member."""
    if isinstance(angles, np.ndarray):        # `angle_gather`'s rows
        table = np.ascontiguousarray(np.broadcast_to(angles, (len(angles), size)),
                                     np.float64)
    else:
        table = np.empty((len(angles), size))
        for i, angle in enumerate(angles):
            table[i] = angle                  # an angle the batch shares broadcasts
    if not np.isfinite(table).all():
        for gate in circuit.gates:
            if gate.angle is not None:
                _check_finite(gate, table[gate.angle])
    return table


def member_matrices(circuit: BatchedCircuit, angles: Sequence[Any], size: int) -> np.ndarray:
    """Every gate's matrix for every member, ``(size, gates, 4, 4)`` (see `batched_kernels`):
    ``exp(-iθG)`` from the generator's eigenvectors for rotations (the matrix the kernel
    applies: the base of a controlled gate), the fixed matrix otherwise. ``angles``:
    `angle_rows`'s, or `angle_table`'s."""
    fixed, groups = _matrix_plan(circuit)
    mats = np.broadcast_to(fixed, (size, *fixed.shape)).copy()
    table = angle_table(circuit, angles, size) if groups else None
    for spec, gates, idx, k in groups:
        theta = table[idx].T                                           # (size, gates)
        values, projectors = _eigen_projectors(spec)
        # Σ_j exp(-iθλ_j) P_j, all members and gates in one product
        phases = np.exp(-1j * theta[:, :, None] * values)             # (size, gates, k)
        mats[:, gates, :k, :k] = (phases @ projectors).reshape(size, len(idx), k, k)
    return mats


@functools.lru_cache(maxsize=64)
def _gate_expansions(circuit: BatchedCircuit) -> tuple[np.ndarray, ...]:
    """Each gate's matrix as `lane_matrices.lane_matrices` reads it: the angle it takes
    (0 for none: unread), its fixed part ``(gates, 4, 4)``, and a rotation's generator's size (0 for
    a fixed gate), eigenvalues ``(gates, 4)`` and projectors ``(gates, 4, 4, 4)``."""
    fixed, groups = _matrix_plan(circuit)
    gates = len(circuit.gates)
    angle_of = np.zeros(gates, np.int64)
    sizes = np.zeros(gates, np.int64)
    values = np.zeros((gates, 4))
    projectors = np.zeros((gates, 4, 4, 4), np.complex128)
    for spec, members, idx, k in groups:
        eigenvalues, flat = _eigen_projectors(spec)
        angle_of[members] = idx
        sizes[members] = k
        values[members, :k] = eigenvalues
        projectors[members, :k, :k, :k] = flat.reshape(k, k, k)
    return angle_of, sizes, fixed, values, projectors


def _permutation(gate: CircuitGate, num_qubits: int) -> np.ndarray | None:
    """Where a fixed gate takes each amplitude from (``out[i] = in[source[i]]``) when it
    only moves amplitudes (a matrix of zeros and ones: CNOT, SWAP, X, Toffoli, ...), on
    any number of wires, else None.

    >>> _permutation(CircuitGate(gate_spec("cx"), (0, 1), None, CONTROLLED1), 2).tolist()
    [0, 3, 2, 1]
    """
    if gate.angle is not None:
        return None
    m = gate.spec.matrix()
    if not _is_permutation(m):
        return None
    image = np.argmax(np.abs(m) > 0.5, axis=1)       # row r of the gate takes column image[r]
    amplitudes = np.arange(1 << num_qubits, dtype=np.int64)
    local = np.zeros_like(amplitudes)
    mask = 0
    for j, w in enumerate(gate.wires):
        local |= ((amplitudes >> w) & 1) << j
        mask |= 1 << w
    source = amplitudes & ~mask
    for j, w in enumerate(gate.wires):
        source |= ((image[local] >> j) & 1) << w
    return source


@functools.lru_cache(maxsize=64)
def _fusion_plan(circuit: BatchedCircuit) -> tuple[tuple[np.ndarray, ...], list[list[int]],
                                                   np.ndarray, np.ndarray]:
    """The circuit's entries for the kernels: each run of one-wire gates on a wire fused
    (gates on other wires commute with it, so every pending run is placed before the next
    gate on several wires), and each run of several permutation gates one ``PERMUTE``
    entry. Returns the entries' kernel arrays, the gates each entry holds in order, each
    entry's permutation table index (-1 for none) and the tables."""
    pending: dict[int, list[int]] = {}
    entries: list[list[int]] = []
    for g, gate in enumerate(circuit.gates):
        if gate.kind == DENSE1:
            pending.setdefault(gate.wires[0], []).append(g)
            continue
        entries.extend(pending.values())
        pending.clear()
        entries.append([g])
    entries.extend(pending.values())
    # consecutive permutation gates, one table each run
    n = circuit.num_qubits
    sources = [None if len(gates) > 1 else _permutation(circuit.gates[gates[0]], n)
               for gates in entries]
    merged: list[list[int]] = []
    tables: list[np.ndarray] = []
    permutes: list[int] = []
    e = 0
    while e < len(entries):
        stop = e
        while stop < len(entries) and sources[stop] is not None:
            stop += 1
        # a run of several, or one gate of three or more wires: no other kernel applies it
        if stop - e >= 2 or (stop > e and circuit.gates[entries[e][0]].kind == PERMUTE):
            table = np.arange(1 << n)
            for source in sources[e:stop]:
                table = table[source]
            merged.append([g for gates in entries[e:stop] for g in gates])
            permutes.append(len(tables))
            tables.append(table)
            e = stop
            continue
        merged.append(entries[e])
        permutes.append(-1)
        e += 1
    kinds, first, last = _arrays([circuit.gates[gates[0]] for gates in merged])
    index = np.array(permutes, np.int64)
    kinds[index >= 0] = PERMUTE
    first[index >= 0] = index[index >= 0]
    stacked = np.stack(tables) if tables else np.zeros((0, 1 << n), np.int64)
    return (kinds, first, last), merged, index, stacked


@functools.lru_cache(maxsize=1024)
def gate_step(circuit: BatchedCircuit, g: int, inverse: bool = False
              ) -> tuple[np.ndarray, ...]:
    """Gate ``g`` of ``circuit`` alone as `batched_kernels.run_circuit`'s kind, wire and
    table arrays (a ``PERMUTE`` gate: its table, or with ``inverse`` the table that undoes
    it; the caller passes the gate's matrices, inverted for ``inverse``, as ``mats``).

    >>> from qdiff.quantum.lang.gates import gate_spec
    >>> toffoli = CircuitGate(gate_spec("mcx", num_controls=2), (0, 1, 2), None, PERMUTE)
    >>> gate_step(BatchedCircuit(None, None, None, (toffoli,), (), 3), 0)[3].tolist()
    [[0, 1, 2, 7, 4, 5, 6, 3]]
    """
    gate = circuit.gates[g]
    if gate.kind != PERMUTE:
        kinds, first, last = _arrays([gate])
        return kinds, first, last, np.zeros((0, 1), np.int64)
    table = _permutation(gate, circuit.num_qubits)
    table = np.argsort(table) if inverse else table
    return np.array([PERMUTE]), np.array([0]), np.array([0]), table[None]


def one_wire_runs(circuit: BatchedCircuit) -> tuple[np.ndarray, ...]:
    """The entries of `fused_one_wire_runs` as gate indices for the adjoint sweep: entry
    ``e`` is the gates ``order[runs[e]:runs[e + 1]]``; with each entry's permutation table
    index (-1 for none) and the tables."""
    _, entries, permutes, tables = _fusion_plan(circuit)
    order = np.array([g for gates in entries for g in gates], np.int64)
    runs = np.cumsum([0, *[len(gates) for gates in entries]]).astype(np.int64)
    return order, runs, permutes, tables


def products_2x2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for stacks of 2x2 matrices, entry by entry over the whole stacks (numpy's
    matmul loops over the tiny matrices one by one: ten times slower for thousands).

    >>> products_2x2(np.array([[[0, 1], [1, 0]]]), np.array([[[1, 2], [3, 4]]])).tolist()
    [[[3, 4], [1, 2]]]
    """
    out = np.empty(np.broadcast_shapes(a.shape, b.shape), np.result_type(a, b))
    for i in range(2):
        for k in range(2):
            out[..., i, k] = a[..., i, 0] * b[..., 0, k] + a[..., i, 1] * b[..., 1, k]
    return out


def fused_one_wire_runs(circuit: BatchedCircuit, mats: np.ndarray) -> tuple[np.ndarray, ...]:
    """The circuit with each run of one-wire gates on a wire multiplied into one matrix per
    member, and runs of permutation gates as tables: kernel arrays, matrices and tables.
    Runs of one length multiply together."""
    arrays, entries, permutes, tables = _fusion_plan(circuit)
    fused = np.zeros((mats.shape[0], len(entries), 4, 4), np.complex128)
    by_length: dict[int, list[int]] = {}
    for e, gates in enumerate(entries):
        if permutes[e] < 0:
            by_length.setdefault(len(gates), []).append(e)
    for length, rows in by_length.items():
        if length == 1:
            fused[:, rows] = mats[:, [entries[e][0] for e in rows]]
            continue
        product = mats[:, [entries[e][0] for e in rows], :2, :2]
        for step in range(1, length):
            product = products_2x2(mats[:, [entries[e][step] for e in rows], :2, :2], product)
        fused[:, rows, :2, :2] = product
    return (*arrays, fused, tables)


_WORKSPACES = threading.local()
# the most bytes a thread keeps between calls (larger workspaces are allocated per call)
KEPT_WORKSPACE_BYTES = 1 << 27


def _workspace(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialized float64 array of ``shape``, the same one as the last call's on this
    thread when the shape is the same: the forward run's checkpoints take tens of MiB,
    whose first writes to freshly mapped memory (page faults) took longer than the copies
    themselves. Valid until the next call on the thread. One over `KEPT_WORKSPACE_BYTES` is
    not kept: a user's process must not hold that much after the call."""
    kept = getattr(_WORKSPACES, "array", None)
    if kept is None or kept.shape != shape:
        _WORKSPACES.array = kept = None   # release the old one before allocating
        kept = lane_kernels.aligned_empty(shape)
        if kept.nbytes <= KEPT_WORKSPACE_BYTES:
            _WORKSPACES.array = kept
    return kept


def _lane_steps(circuit: BatchedCircuit, table: np.ndarray,
                inverses: bool) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
    """`lane_circuit`'s arrays, and with ``inverses`` the adjoints of its matrices in
    reverse order (else an empty array), both built by one pass from the angles."""
    arrays, entries, permutes, tables = _fusion_plan(circuit)
    order, runs, _, _ = one_wire_runs(circuit)
    size = table.shape[1]
    tiles = max(1, -(-size // lane_kernels.MAX_LANES))
    lanes = -(-size // tiles)
    shape = (tiles, len(entries), 2, 4, 4, lanes)
    mats = lane_kernels.aligned_empty(shape)
    undo = lane_kernels.aligned_empty(shape if inverses else (0,) * len(shape))
    lane_matrices.lane_matrices(table, *_gate_expansions(circuit), order, runs, permutes,
                                mats, undo)
    return (*arrays, mats, tables), undo


def lane_circuit(circuit: BatchedCircuit, angles: np.ndarray) -> tuple[np.ndarray, ...]:
    """`fused_one_wire_runs` for the members of `angle_table`'s ``angles``, the matrices
    in the lane layout (`lane_kernels.to_lanes`), built straight from the angles: the
    kernels' arrays for `final_lane_states`.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import rotation
    >>> circuit = batched_circuit(qdiff.trace(rotation, 0.1))
    >>> lane_circuit(circuit, np.zeros((1, 3)))[3].shape
    (1, 1, 2, 4, 4, 3)
    """
    return _lane_steps(circuit, angles, False)[0]


def lane_circuit_and_inverses(circuit: BatchedCircuit, angles: np.ndarray) -> tuple[
        tuple[np.ndarray, ...], np.ndarray]:
    """`lane_circuit`'s arrays and the steps that undo them: its matrices' adjoints, last
    entry first (a permutation entry's is zero), from the same pass."""
    return _lane_steps(circuit, angles, True)


def final_lane_states(circuit: BatchedCircuit, angles: np.ndarray,
                      save_before: Sequence[int] = (),
                      steps: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
    """The circuit run from |0…0> for every member of `angle_table`'s ``angles``, the
    members along the lanes:
    ``(tiles, 2, 2**n, lanes)`` (`lane_kernels`). With ``save_before`` (indices of the
    kernels' entries, `fused_one_wire_runs`, each the first of a block or one past the
    last), the states before each of those entries instead:
    ``(tiles, len(save_before), 2, 2**n, lanes)``. ``steps``: `lane_circuit`'s arrays
    when the caller has them."""
    kinds, first, last, lane_mats, tables = steps or lane_circuit(circuit, angles)
    state = lane_kernels.aligned_zeros((lane_mats.shape[0], 2, 1 << circuit.num_qubits,
                                        lane_mats.shape[-1]))
    state[:, 0, 0, :] = 1.0   # members that pad the last tile have zero matrices: end at 0
    bounds = lane_kernels.one_wire_blocks(kinds, first,
                                          lane_kernels.block_wires(state.shape[-1], 1))
    if not len(save_before):
        return lane_kernels.run_circuit(state, kinds, first, last, lane_mats, tables, bounds,
                                        *lane_kernels.NO_CHECKPOINTS)
    saves = np.full(len(bounds), -1, np.int64)
    saves[np.searchsorted(bounds, save_before)] = np.arange(len(save_before))
    assert np.array_equal(bounds[saves >= 0][np.argsort(saves[saves >= 0])],
                          save_before), "checkpoints must be at block boundaries"
    saved = _workspace((state.shape[0], len(save_before), *state.shape[1:]))
    lane_kernels.run_circuit(state, kinds, first, last, lane_mats, tables, bounds, saves,
                             saved)
    return saved


@functools.lru_cache(maxsize=64)
def observable_diagonal(num_qubits: int, obs: PauliSum,
                        wires: tuple[int, ...]) -> np.ndarray | None:
    """The diagonal of ``obs`` on ``wires`` over all ``2**num_qubits`` amplitudes when
    every term is made of I and Z (``Σ_k c_k (-1)^popcount(i & z_k)``), else None.

    >>> observable_diagonal(2, PauliSum("Z0 + 2*Z1"), (0, 1)).real.tolist()
    [3.0, 1.0, -1.0, -3.0]
    """
    x_masks, z_masks, factors = obs.masks(wires)
    if np.any(x_masks):
        return None
    amplitudes = np.arange(1 << num_qubits, dtype=np.int64)
    diagonal = np.zeros(1 << num_qubits, np.complex128)
    for z, f in zip(z_masks, factors, strict=True):
        diagonal += f * (1 - 2 * parity(amplitudes & z))
    diagonal.flags.writeable = False  # shared by every call (cached)
    return diagonal


def observable_rows(psi: np.ndarray, num_qubits: int, obs: PauliSum,
                    wires: Sequence[int]) -> np.ndarray:
    """``O ψ_b`` for every row ``ψ_b`` of ``psi``: one product with ``O``'s diagonal when
    it has only I and Z terms (Σ Z_i: one pass, not one per term), else one call of the
    back end, where the rows, padded to a power-of-two count, are read as one state whose
    high wires number the member, and ``O`` acts on the low ones."""
    diagonal = observable_diagonal(num_qubits, obs, tuple(int(w) for w in wires))
    if diagonal is not None:
        return psi * diagonal
    members = psi.shape[0]
    padded = 1 << max(0, (members - 1).bit_length())
    stacked = psi if padded == members else np.concatenate(
        [psi, np.zeros((padded - members, psi.shape[1]), psi.dtype)])
    extra = padded.bit_length() - 1
    flat = get_backend("auto").apply_pauli_sum(stacked.reshape(-1), num_qubits + extra, obs,
                                               list(wires))
    return flat.reshape(padded, -1)[:members]


@functools.lru_cache(maxsize=64)
def outcome_index(num_qubits: int, wires: tuple[int, ...]) -> np.ndarray:
    """For each amplitude, the outcome of ``probs`` on ``wires`` it counts towards (bit
    ``t`` of the outcome is ``wires[t]``).

    >>> outcome_index(2, (1,)).tolist()
    [0, 0, 1, 1]
    """
    amplitudes = np.arange(1 << num_qubits)
    return sum(((amplitudes >> w) & 1) << t for t, w in enumerate(wires))


def readout_values(circuit: BatchedCircuit, psi: np.ndarray) -> list[np.ndarray]:
    """Each readout for every member: an expectation ``(members,)`` or probabilities
    ``(members, 2**k)``, normalized like the single-member readouts."""
    norms = np.einsum("bi,bi->b", psi.conj(), psi).real
    values = []
    for obs, wires in circuit.readouts:
        if obs is None:
            index = outcome_index(circuit.num_qubits, wires)
            weights = (psi.conj() * psi).real
            p = np.zeros((psi.shape[0], 1 << len(wires)))
            np.add.at(p, (slice(None), index), weights)
            values.append(p / norms[:, None])
        else:
            values.append(np.einsum("bi,bi->b", psi.conj(),
                                    observable_rows(psi, circuit.num_qubits, obs, wires)).real
                          / norms)
    return values


def readout_adjoint(xp: ModuleType, psi: Any, num_qubits: int, obs: PauliSum | None,
                    wires: Sequence[int], cotangent: Any,
                    rows: Callable[[Any, PauliSum, Sequence[int]], Any]) -> Any:
    """One readout's part of ``λ``, ``(members, 2**n)`` on the array module ``xp``: ``ē O ψ``
    for an expectation, ``p̄_j(i) ψ_i`` per amplitude for probabilities (``obs`` None), from
    its cotangent; ``rows(psi, obs, wires)`` is ``O ψ`` row by row on that module."""
    ct = xp.asarray(np.asarray(cotangent, np.float64))
    if obs is None:
        return ct[:, xp.asarray(outcome_index(num_qubits, tuple(wires)))] * psi
    return ct[:, None] * rows(psi, obs, wires)


def readout_adjoints(xp: ModuleType, circuit: BatchedCircuit, psi: Any,
                     readout_cts: Sequence[Any],
                     rows: Callable[[Any, PauliSum, Sequence[int]], Any]) -> Any:
    """``λ = Σ_r`` `readout_adjoint` over the readouts of ``circuit``, from their cotangents."""
    lam = xp.zeros_like(psi)
    for (obs, wires), ct in zip(circuit.readouts, readout_cts):
        lam += readout_adjoint(xp, psi, circuit.num_qubits, obs, wires, ct, rows)
    return lam


@functools.lru_cache(maxsize=64)
def readout_diagonals(circuit: BatchedCircuit) -> np.ndarray | None:
    """``(readouts, 2**n)``: each readout's observable as a real diagonal when every
    readout is an expectation of I and Z terms (Σ Z_i), else None."""
    rows = []
    for obs, wires in circuit.readouts:
        diagonal = None if obs is None else observable_diagonal(circuit.num_qubits, obs, wires)
        if diagonal is None or np.any(diagonal.imag):
            return None
        rows.append(diagonal.real)
    stacked = np.stack(rows)
    stacked.flags.writeable = False  # shared by every call (cached)
    return stacked


def final_readouts(circuit: BatchedCircuit, state: np.ndarray,
                   size: int) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Each readout for the ``size`` members of the final states ``state`` (the lane
    layout), as `readout_values`, and the ``(members, 2**n)`` states it converted them to:
    None when the readouts' diagonals (`readout_diagonals`) were read on the lanes, one
    pass (`lane_kernels.diagonal_expectations`), without converting."""
    diagonals = readout_diagonals(circuit)
    if diagonals is None:
        psi = lane_kernels.from_lanes(state, size)
        return readout_values(circuit, psi), psi
    sums, norms = lane_kernels.diagonal_expectations(state, diagonals)
    return list(sums.reshape(len(diagonals), -1)[:, :size] / norms.reshape(-1)[:size]), None


def run_batched(program: Program, values: Sequence[Any], flags: Sequence[bool],
                size: int) -> list[Any]:
    """The outputs of ``program`` for a batch (``values`` flat, batch axis first where
    ``flags`` says so), each with the batch axis first."""
    circuit = batched_circuit(program)
    assert circuit is not None, "run_batched needs a program batched_circuit accepts"
    flags = tuple(bool(f) for f in flags)
    angles = angle_rows(circuit, values, flags, size)
    table = angle_table(circuit, angles, size)
    xp = batched_array_module()   # None: the lane kernels; else NumPy or CuPy
    if xp is None:
        readouts, _ = final_readouts(circuit, final_lane_states(circuit, table), size)
    else:
        psi = array_batched.final_states(
            xp, circuit.num_qubits, fused_one_wire_runs(circuit,
                                                        member_matrices(circuit, table, size)))
        readouts = array_batched.readout_values(xp, circuit, psi)
    outputs = batched_part(circuit.outputs, (*flags, *[True] * len(readouts)), size, True)
    return evaluate(outputs, *values, *readouts)


def _claims(program: Program, flags: Sequence[bool]) -> bool:
    return batched_circuit(program) is not None


register_batched_runner(_claims, run_batched)

__all__ = ["BatchedCircuit", "CircuitGate", "angle_gather", "angle_rows", "angle_table",
           "batched_circuit", "final_lane_states", "final_readouts", "gate_step",
           "lane_circuit", "lane_circuit_and_inverses",
           "lowered_gates", "one_wire_runs",
           "products_2x2", "readout_adjoint", "readout_adjoints", "readout_diagonals",
           "run_batched"]
