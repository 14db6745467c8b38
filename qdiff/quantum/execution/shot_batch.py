"""Sample mode, vectorized: all shots of a program run together as one batch.

The trajectory runner (`runner.BranchRunner` in ``sample`` mode) runs one shot at a time,
with Python work per equation per shot. `ShotBatchRunner` runs the same semantics on a
batch of shots: the states of all live shots are one ``(shots, 2**n)`` array, a classical
value is either one value shared by every shot or an array with one row per shot
(`Rows`), and

- a gate applies its matrix to every row at once (one matrix, or one per distinct angle
  when the angle differs between shots);
- a measurement draws the outcomes of all rows at once, each row from its own random
  stream (`stream_uniforms`: the shot's number and how many draws it made, hashed with the
  seed), so a shot reads the same numbers in two runs with one seed;
- ``cond`` on a per-shot index runs each branch on the rows that take it;
- a ``while`` loop runs until every row has exited; rows that exit stop being updated, and
  rows still going on at ``max_iter`` (aborted) or ``max_loop_iterations`` (cut off) leave
  the batch, booked as the trajectory runner books them;
- postselection keeps the rows whose draw matches (the others are rejected shots);
- a classical equation runs once when no input differs between shots, on whole arrays when
  it is elementwise, and else once per distinct combination of its per-shot inputs.

Gates run unfused unless ``fuse=k`` asks for blocks of k wires (then each block is one
dense matrix on its wires). Covered: gates, fused gates, measure, reset, postselect,
expval, probs, statevector, ``cond``, ``while``, ``loop`` with bounds shared by every shot,
and classical equations. Not covered
(`NotBatchable`; `qdiff.quantum.run` then runs the trajectories one by one): ``qm.sample``
draws, registers extended mid-program, loop bounds that differ between shots, and
sub-programs of other primitives that hold quantum operations. Shots run in chunks that
keep a batch of states within `CHUNK_BYTES`. The states live where ``backend`` puts them
(`simulator.shot_states`): on the host with Numba kernels by default, as NumPy array
operations for ``"numpy"``, on a GPU with CuPy for ``"cupy"``; every other value, the
random streams and the draws stay on the host.

The estimator is the trajectory runner's (each shot an independent trajectory, the mean
over accepted shots with its standard error), but its random numbers come from the shots'
streams instead of one generator read in order, so a seed gives other samples than the
trajectory runner's, distributed alike. Registers are allocated at the top level (one
allocated inside control flow is `NotBatchable` when met).

>>> from qdiff.quantum.lang.examples import repeat_until_one  # rounds until a 1 is read
>>> import qdiff
>>> from qdiff.quantum.execution.options import RunOptions
>>> program = qdiff.trace(repeat_until_one, 1.0)
>>> result = sample_batched(program, [np.asarray(1.0)], RunOptions(mode="sample",
...                         shots=20000, seed=0))
>>> exact = 1 / np.sin(0.5) ** 2
>>> bool(abs(result.values - exact) < 4 * result.stderr), result.shots
(True, 20000)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...gpu.array_module import array_module_of
from ...ir.control_flow import cond_p, loop_p, while_p
from ...ir.core import Eqn, Literal, Program
from ...ir.errors import QdiffError
from ...ir.types import QState, Tensor
from ..lang import primitives as qp
from ..lang.fusion import fused_gate_p
from ..lang.gate_forms import gate_form
from ..lang.gates import gate_spec
from ..lang.primitives import pauli_sum_of
from ..simulator import get_backend
from ..simulator.shot_kernels import diagonal_phases
from ..simulator.shot_states import shot_states
from .options import RunOptions
from .reference import apply_fused_gate_eqn, check_finite_angles, fused_program
from .runner import NonTerminatingLoopError, QuantumResult, _structure, needs_runner

# a chunk of shots keeps its batch of states within this many bytes
CHUNK_BYTES = 1 << 26


class NotBatchable(QdiffError):
    """A program (or a value met while running it) outside what the batch runner covers."""


@dataclass
class Rows:
    """A value with one row per shot of the batch (axis 0); other values are shared. A
    state also carries each row's random stream: (shot number, draws made so far)."""

    array: np.ndarray
    streams: np.ndarray | None = None


def take(value: Any, rows: np.ndarray) -> Any:
    """``value`` on the batch's ``rows`` (shared values are shared by any rows)."""
    if not isinstance(value, Rows):
        return value
    array = value.array
    on_array = rows if array_module_of(array) is np else array_module_of(array).asarray(rows)
    return Rows(array[on_array], None if value.streams is None else value.streams[rows])


def per_row(value: Any, count: int) -> np.ndarray:
    """``value`` as an array with ``count`` rows."""
    if isinstance(value, Rows):
        return value.array
    array = np.asarray(value)
    return np.broadcast_to(array, (count, *array.shape))


def gather(parts: Sequence[tuple[np.ndarray, list[Any]]], width: int) -> tuple[list[Any],
                                                                             np.ndarray]:
    """Join per-part values (each on its own rows of the batch) into values on the union of
    the rows, in increasing row order; returns them with that order of rows."""
    parts = [(rows, values) for rows, values in parts if len(rows)]
    if not parts:
        return [], np.zeros(0, np.int64)
    rows = np.concatenate([r for r, _ in parts])
    if len(parts) == 1 and np.all(rows[1:] > rows[:-1]):  # one part, in order: as it is
        return list(parts[0][1]), rows
    order = np.argsort(rows, kind="stable")
    joined = []
    for k in range(width):
        column = [v[k] for _, v in parts]
        if len(parts) == 1 or all(not isinstance(v, Rows) for v in column) and all(
                np.array_equal(column[0], v) for v in column[1:]):
            value = column[0]
            joined.append(take(value, order) if isinstance(value, Rows) else value)
        else:
            arrays = [per_row(v, len(r)) for (r, _), v in zip(parts, column)]
            stacked = array_module_of(arrays[0]).concatenate(arrays)
            streams = None
            if all(isinstance(v, Rows) and v.streams is not None for v in column):
                streams = np.concatenate([v.streams for v in column])[order]
            joined.append(Rows(stacked[order], streams))
    return joined, rows[order]


def batch_covers(program: Program) -> bool:
    """Whether `ShotBatchRunner` covers every equation of ``program`` (see the module
    docstring); values met at run time may still raise `NotBatchable`.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import repeat_until_one
    >>> batch_covers(qdiff.trace(repeat_until_one, 1.0))
    True
    """
    for eqn in program.eqns:
        if eqn.primitive in _HANDLERS:
            if not all(batch_covers(sub) for _, sub in eqn.subprograms()):
                return False
        elif _unbatched(eqn):
            return False
    return True


def _unbatched(eqn: Eqn) -> bool:
    # an operation on states without a batch handler, or one holding quantum sub-programs
    touches_state = any(isinstance(getattr(a, "type", None), QState)
                        for a in (*eqn.inputs, *eqn.outputs))
    return touches_state or any(needs_runner(sub) for _, sub in eqn.subprograms())


class ShotBatchRunner:
    """Runs a program on a batch of shots (see the module docstring), counting as the
    trajectory runner does the shots aborted, cut off and rejected."""

    def __init__(self, options: RunOptions, zero_exit_limit: int = 1_000):
        seed = options.seed
        sequence = seed if isinstance(seed, np.random.SeedSequence) else (
            np.random.SeedSequence(seed))
        self.key = sequence.generate_state(1, np.uint64)[0]
        self.states = shot_states(options.backend)  # where the batch's states live
        self.first_shot = 0  # the shot number of the batch's first row
        self.depth = 0
        self.max_loop_iterations = options.max_loop_iterations
        self.zero_exit_limit = zero_exit_limit
        self.aborted = 0
        self.unterminated = 0
        self.rejected = 0
        self.gate_passes = 0
        self.passes_saved = 0

    def run_program(self, program: Program, inputs: list[Any],
                    count: int) -> tuple[list[Any], np.ndarray | None]:
        """Run ``program`` on ``count`` rows; returns its outputs on the rows that survive
        and those rows (None: all of them)."""
        self.depth += 1
        try:
            return self._run(program, inputs, count)
        finally:
            self.depth -= 1

    def _run(self, program: Program, inputs: list[Any],
             count: int) -> tuple[list[Any], np.ndarray | None]:
        env = dict(zip(program.inputs, inputs))
        kept: np.ndarray | None = None
        for eqn in program.eqns:
            values = [a.value if isinstance(a, Literal) else env[a] for a in eqn.inputs]
            outputs, rows = self.step(eqn, values, count)
            if rows is not None:
                env = {var: take(value, rows) for var, value in env.items()}
                kept = rows if kept is None else kept[rows]
                count = len(rows)
            env.update(zip(eqn.outputs, outputs))
        return [a.value if isinstance(a, Literal) else env[a] for a in program.outputs], kept

    def step(self, eqn: Eqn, values: list[Any],
             count: int) -> tuple[list[Any], np.ndarray | None]:
        """One equation on ``count`` rows: its outputs and the rows that survive it."""
        handler = _HANDLERS.get(eqn.primitive)
        if handler is not None:
            return handler(self, eqn, values, count)
        if _unbatched(eqn):
            raise NotBatchable(f"{eqn.primitive.name} is not run on a batch of shots")
        return classical(eqn, values, count), None

    # -- measurement ------------------------------------------------------------------------
    def draw(self, state: Rows, wire: int, to_zero: bool = False) -> tuple[np.ndarray, Rows]:
        """Measure ``wire`` of every row, in place: the drawn outcomes and the states
        collapsed on them, renormalized (moved to where ``wire`` is 0 when ``to_zero``).
        Each row draws from its own stream, so a shot reads the same numbers in two runs
        that share the seed (common random numbers, as the trajectory runner's shifted
        runs of one sample)."""
        count = state.array.shape[0]
        weights = self.states.wire_weights(state.array, wire)
        total = weights.sum(axis=1)
        uniform = stream_uniforms(self.key, state.streams)
        outcome = (uniform * total >= weights[:, 0]).astype(np.int64)
        scale = 1.0 / np.sqrt(weights[np.arange(count), outcome])
        streams = state.streams + np.array([0, 1])
        collapsed = self.states.collapse(state.array, wire, outcome, scale, to_zero)
        return outcome, Rows(collapsed, streams)


_GOLDEN, _MIX1, _MIX2 = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9),
                         np.uint64(0x94D049BB133111EB))


def _mix(x: np.ndarray) -> np.ndarray:
    # splitmix64's finalizer: every input bit reaches every output bit
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


def stream_uniforms(key: np.uint64, streams: np.ndarray) -> np.ndarray:
    """One uniform number in [0, 1) per row: draw ``streams[r, 1]`` of shot
    ``streams[r, 0]`` under ``key`` (a counter-based generator: no state to carry).

    >>> u = stream_uniforms(np.uint64(7), np.array([[0, 0], [0, 1], [1, 0], [0, 0]]))
    >>> bool(u[0] == u[3] and len(set(u.tolist())) == 3 and 0 <= u.min() and u.max() < 1)
    True
    """
    shot = streams[:, 0].astype(np.uint64)
    draws = streams[:, 1].astype(np.uint64)
    bits = _mix(_mix(key + (shot + np.uint64(1)) * _GOLDEN) + draws * _GOLDEN)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def classical(eqn: Eqn, values: list[Any], count: int) -> list[Any]:
    """A classical equation on the batch: once when every input is shared, on whole arrays
    when the primitive is elementwise, else once per distinct row of its per-shot inputs."""
    impl = eqn.primitive.impl("numpy")
    multiple = eqn.primitive.multiple_results
    batched = [k for k, v in enumerate(values) if isinstance(v, Rows)]
    if not batched:
        outs = impl(*values, **eqn.params)
        return list(outs) if multiple else [outs]
    if eqn.primitive.elementwise and not multiple:
        rank = len(eqn.outputs[0].type.shape)
        args = [v if not isinstance(v, Rows) else v.array.reshape(
            (count, *(1,) * (rank - v.array.ndim + 1), *v.array.shape[1:])) for v in values]
        out = np.asarray(impl(*args, **eqn.params))
        if out.shape == (count, *eqn.outputs[0].type.shape):
            return [Rows(out)]
    keys = np.concatenate([np.ascontiguousarray(values[k].array).reshape(count, -1)
                           .view(np.uint8).reshape(count, -1) for k in batched], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    results = []
    for row in first:
        args = [take(v, row).array if isinstance(v, Rows) else v for v in values]
        outs = impl(*args, **eqn.params)
        results.append([np.asarray(o) for o in (outs if multiple else [outs])])
    if len(results) == 1:
        return results[0]
    return [Rows(np.stack(column)[inverse.ravel()]) for column in zip(*results)]


# ---------------------------------------------------------------------- handlers, one per op
def _qalloc(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    if r.depth > 1:  # the rows of a sub-program are not the shots in order
        raise NotBatchable("a register allocated inside control flow")
    state = r.states.basis(count, eqn.params["num_qubits"], eqn.params["dtype"])
    streams = np.zeros((count, 2), np.int64)
    streams[:, 0] = r.first_shot + np.arange(count)
    return [Rows(state, streams)], None


def _distinct_angles(eqn: Eqn, angles: list[Any], count: int) -> tuple[Any, np.ndarray]:
    # the distinct rows of a gate's angles (one when no angle differs between shots) and
    # the row each shot takes
    if any(isinstance(a, Rows) for a in angles):
        table = np.stack([per_row(a, count).astype(np.float64) for a in angles], axis=1)
        distinct, which = np.unique(table, axis=0, return_inverse=True)
        which = which.ravel()
    else:
        distinct, which = [np.asarray(angles, np.float64)], np.zeros(count, np.int64)
    for row in distinct:
        check_finite_angles(eqn, row)
    return distinct, which


def _gate(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    state, *angles = values
    params = eqn.params
    wires = params["wires"]
    static = dict(params.get("static") or {})
    if params["name"] in ("mcx", "mcz") and "num_controls" not in static:
        static["num_controls"] = len(wires) - 1
    spec = gate_spec(params["name"], **static)
    r.gate_passes += count
    distinct, which = _distinct_angles(eqn, angles, count)
    dtype = state.array.dtype
    matrices = np.stack([np.asarray(spec.matrix(*row.tolist()), dtype) for row in distinct])
    form = gate_form(spec)
    n = state.array.shape[1].bit_length() - 1
    if form.kind == "diagonal":  # one multiplication by the register-wide phases
        phases = diagonal_phases(np.diagonal(matrices, axis1=1, axis2=2), wires, n)
        return [Rows(r.states.multiply(state.array, phases, which), state.streams)], None
    # the block on the targets where every control is 1 (`gate_form`)
    local = sum(1 << c for c in form.controls) | sum(
        ((np.arange(1 << len(form.targets)) >> j) & 1) << t for j, t in enumerate(form.targets))
    blocks = np.ascontiguousarray(matrices[:, local][:, :, local])
    targets = [wires[t] for t in form.targets]
    control_mask = sum(1 << wires[c] for c in form.controls)
    array = r.states.apply_block(state.array, targets, control_mask, blocks, which)
    return [Rows(array, state.streams)], None


def _fused_gate(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    # a block of fused gates (`fuse=k`): its matrix, from its parts applied to each basis
    # state of its wires, on every row
    state, *angles = values
    wires, parts = eqn.params["wires"], eqn.params["parts"]
    r.gate_passes += count
    r.passes_saved += count * (len(parts) - 1)
    distinct, which = _distinct_angles(eqn, angles, count)
    size, local = 1 << len(wires), tuple(range(len(wires)))
    blocks = np.zeros((len(distinct), size, size), state.array.dtype)
    for b, row in enumerate(distinct):
        for j in range(size):
            column = np.zeros(size, np.complex128)
            column[j] = 1
            blocks[b, :, j] = apply_fused_gate_eqn(_NUMPY, column, row, wires=local,
                                                   parts=parts)
    array = r.states.apply_block(state.array, wires, 0, blocks, which)
    return [Rows(array, state.streams)], None


def _measure(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    outcome, state = r.draw(values[0], eqn.params["wire"], eqn.params["reset"])
    return [state, Rows(outcome)], None


def _reset(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    _, state = r.draw(values[0], eqn.params["wire"], True)
    return [state], None


def _postselect(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    outcome, state = r.draw(values[0], eqn.params["wire"])
    rows = np.flatnonzero(outcome == eqn.params["value"])
    r.rejected += count - len(rows)
    return [take(state, rows)], rows


def _expval(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    obs = pauli_sum_of(eqn.params["terms"])
    xs, zs, fs = obs.masks(tuple(eqn.params["wires"]))
    value = r.states.expval(values[0].array, xs.tolist(), zs.tolist(), fs.tolist())
    return [values[0], Rows(value)], None


def _probs(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    return [values[0], Rows(r.states.probs(values[0].array, tuple(eqn.params["wires"])))], None


def _statevector(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    dtype = eqn.params.get("dtype", "complex128")
    return [values[0], Rows(r.states.normalized(values[0].array, dtype))], None


def _cond(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    index, *operands = values
    branches = eqn.params["branches"]
    if not isinstance(index, Rows):
        chosen = branches[int(np.clip(int(index), 0, len(branches) - 1))]
        return r.run_program(chosen, operands, count)
    choice = np.clip(index.array.astype(np.int64), 0, len(branches) - 1)
    parts = []
    for b, branch in enumerate(branches):
        rows = np.flatnonzero(choice == b)
        if len(rows):
            outs, kept = r.run_program(branch, [take(v, rows) for v in operands], len(rows))
            parts.append((rows if kept is None else rows[kept], outs))
    outputs, rows = gather(parts, len(eqn.outputs))
    return _on_rows(r, eqn, outputs, rows, count)


def _on_rows(r: ShotBatchRunner, eqn: Eqn, outputs: list[Any], rows: np.ndarray, count: int):
    # outputs on `rows` of `count`: None when every row survived
    if not len(rows):
        return [_empty(r, atom.type) for atom in eqn.outputs], rows
    return outputs, (None if len(rows) == count else rows)


def _empty(r: ShotBatchRunner, type_: Any) -> Rows:
    if isinstance(type_, QState):
        return Rows(r.states.basis(0, type_.num_qubits, np.complex128),
                    np.zeros((0, 2), np.int64))
    if isinstance(type_, Tensor):
        return Rows(np.zeros((0, *type_.shape), type_.dtype))
    return Rows(np.zeros(0, np.int64))


def _loop(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    start, stop, *rest = values
    if isinstance(start, Rows) or isinstance(stop, Rows):
        raise NotBatchable("a loop whose bounds differ between shots")
    k = eqn.params["num_consts"]
    consts, carry = rest[:k], rest[k:]
    dtype = np.asarray(start).dtype
    kept: np.ndarray | None = None
    for i in range(int(start), int(stop)):
        carry, rows = r.run_program(eqn.params["body"],
                                    [np.asarray(i, dtype), *consts, *carry], count)
        if rows is not None:
            consts = [take(c, rows) for c in consts]
            kept = rows if kept is None else kept[rows]
            count = len(rows)
    return carry, kept


def _while(r: ShotBatchRunner, eqn: Eqn, values: list[Any], count: int):
    p = eqn.params
    nc, nb = p["num_cond_consts"], p["num_body_consts"]
    cond_consts, body_consts, carry = values[:nc], values[nc:nc + nb], values[nc + nb:]
    live = np.arange(count)
    finished = []
    iterations = 0
    while True:
        outs, kept = r.run_program(p["cond"], [*_on(cond_consts, live, count), *carry],
                                   len(live))
        if kept is not None:
            live = live[kept]
        pred, *carry = outs
        going = per_row(pred, len(live)).astype(bool)
        if not going.any():  # every row exits (no copies)
            finished.append((live, carry))
            break
        if not going.all():
            exits, going_rows = np.flatnonzero(~going), np.flatnonzero(going)
            finished.append((live[exits], [take(c, exits) for c in carry]))
            live, carry = live[going_rows], [take(c, going_rows) for c in carry]
        if p["max_iter"] is not None and iterations >= p["max_iter"]:
            r.aborted += len(live)  # while^(T): abort, the shot is dropped
            break
        if iterations >= r.max_loop_iterations:
            r.unterminated += len(live)
            break
        if iterations >= r.zero_exit_limit:
            raise NonTerminatingLoopError(
                f"the while loop's exit probability stayed zero for {iterations} iterations: "
                "it cannot terminate (check the loop test and what the body prepares)")
        carry, kept = r.run_program(p["body"], [*_on(body_consts, live, count), *carry],
                                    len(live))
        if kept is not None:
            live = live[kept]
        iterations += 1
    outputs, rows = gather(finished, len(eqn.outputs))
    return _on_rows(r, eqn, outputs, rows, count)


def _on(values: list[Any], rows: np.ndarray, count: int) -> list[Any]:
    # `values` (on `count` rows) on `rows`, without copies when that is all of them
    return values if len(rows) == count else [take(v, rows) for v in values]


_HANDLERS = {
    qp.qalloc_p: _qalloc, qp.gate_p: _gate, qp.measure_p: _measure, qp.reset_p: _reset,
    qp.postselect_p: _postselect, qp.expval_p: _expval, qp.probs_p: _probs,
    qp.statevector_p: _statevector, cond_p: _cond, loop_p: _loop, while_p: _while,
    fused_gate_p: _fused_gate,
}
_NUMPY = get_backend("numpy")


def chunk_size(program: Program, shots: int) -> int:
    """Shots per batch: as many as keep the largest register's batch within `CHUNK_BYTES`."""
    widest = max((1 << t.num_qubits for t in _state_types(program)), default=1)
    return max(1, min(shots, CHUNK_BYTES // (16 * widest)))


def _state_types(program: Program) -> list[QState]:
    found = [v.type for eqn in program.eqns for v in eqn.outputs if isinstance(v.type, QState)]
    for eqn in program.eqns:
        for _, sub in eqn.subprograms():
            found += _state_types(sub)
    return found


def sample_batched(program: Program, values: list[Any], options: RunOptions) -> QuantumResult:
    """``qm.run(..., mode="sample")`` of ``program`` on a batch of shots: the mean over the
    accepted shots with its standard error, and the masses as the trajectory runner books
    them (see the module docstring; `NotBatchable` where it does not cover the program)."""
    shots = options.shots
    if isinstance(options.fuse, int) and not isinstance(options.fuse, bool):
        # fusion where it is asked for with a width: by default the batch kernels apply
        # each gate in its sparse form, which beats a dense block on small registers
        program = fused_program(program, options.backend, int(options.fuse))[0]
    runner = ShotBatchRunner(options)
    columns: list[list[np.ndarray]] = [[] for _ in program.outputs]
    done = 0
    while done < shots:
        count = min(chunk_size(program, shots), shots - done)
        runner.first_shot = done
        outs, kept = runner.run_program(program, [np.asarray(v) for v in values], count)
        accepted = count if kept is None else len(kept)
        for column, value in zip(columns, outs):
            column.append(_as_numbers(runner.states.to_host(per_row(value, accepted))))
        done += count
    stacked = [np.concatenate(c) for c in columns]
    accepted = stacked[0].shape[0] if stacked else shots
    if accepted == 0:
        raise QdiffError("no trajectory was accepted (postselection rejected every shot)")
    means = [s.mean(axis=0) for s in stacked]
    errors = [s.std(axis=0, ddof=1) / math.sqrt(accepted) if accepted > 1
              else np.full_like(m, np.inf) for s, m in zip(stacked, means)]
    result = QuantumResult(
        values=_structure(program, means), mode="sample", stderr=_structure(program, errors),
        shots=accepted, unterminated_mass=runner.unterminated / shots,
        aborted_mass=runner.aborted / shots, postselection_probability=accepted / shots,
        trajectories=ShotTrajectories(program, stacked))
    result.gate_passes, result.passes_saved = runner.gate_passes, runner.passes_saved
    return result


def _as_numbers(array: np.ndarray) -> np.ndarray:
    return array if array.dtype.kind == "c" else array.astype(np.float64)


class ShotTrajectories(Sequence):
    """The accepted shots' outputs, one structure per shot, made when read (a batch of 10^5
    shots would otherwise build 10^5 Python objects nobody reads)."""

    def __init__(self, program: Program, stacked: list[np.ndarray]):
        self.program, self.stacked = program, stacked

    def __len__(self) -> int:
        return self.stacked[0].shape[0] if self.stacked else 0

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return _structure(self.program, [s[index] for s in self.stacked])
