"""Running quantum programs on density matrices: ``qm.run(program, ..., mode="density")``.

An interpreter of the same IR programs as the branching runner (`runner.py`), built to be
an independent check of its ``exact`` mode. Its quantum value is a density matrix, and a
program point holds a classical-quantum state: a list of records ``(classical values,
rho)`` with ``rho`` unnormalized, ``Tr rho`` the probability of the record. Records whose
live classical values agree are merged by adding their ``rho`` (after every equation), so
mixing happens in the density matrices, not in a list of weighted pure states:

- gates are ``U rho U†``; ``reset`` is the channel ``P0 rho P0 + X P1 rho P1 X`` (no
  split: its outcome is not recorded);
- ``measure`` splits a record by outcome (``P rho P``) and records the bit; once no later
  equation reads the bit, the two records merge back into the dephased state;
- ``postselect`` keeps ``P rho P`` and reports the rest as postselected away;
- readouts (``expval``, ``probs``, ``sample``) are read from ``rho / Tr rho``: they are
  conditioned on the record's live classical values. Their expectation (a returned value,
  or anything linear in it) equals the ``exact`` mode's; a readout fed into nonlinear
  classical code is conditioned on the classical record here and on the branch (including
  outcomes nobody recorded, such as a reset's) in ``exact`` mode;
- ``cond``, ``loop`` and ``while`` run their sub-programs on the records; a ``while`` loop
  iterates until no record is live (records below ``tol`` are pruned and reported as in
  ``exact`` mode; ``max_iter`` aborts the rest and reports it).

``qm.state`` (a statevector) has no meaning here and is refused. States are complex128
whatever the program's dtype, and registers are limited to
`density_matrix.MAX_DENSITY_QUBITS` qubits (a 10-qubit ``rho`` is 16 MiB).

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def coin(theta):
...     q = qm.qubits(2)
...     qm.ry(theta, q[0])
...     bit = qm.measure(q[0])
...     qdiff.cond(bit, lambda: qm.x(q[1]), lambda: None)
...     return qm.expval("IZ", q)
>>> result = qm.run(coin, 1.1, mode="density")
>>> round(float(result.values), 12) == round(float(np.cos(1.1)), 12)
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.control_flow import cond_p, loop_p, while_p
from ...ir.core import Eqn, Literal, Program, Var
from ...ir.errors import QdiffError
from ...ir.primitives import Primitive
from ...ir.types import QState
from ..lang import primitives as qp
from ..lang.fusion import fused_gate_p
from ..lang.gates import gate_spec
from ..lang.primitives import pauli_sum_of
from ..simulator import density_matrix as dm
from .options import DEFAULTS, RunOptions
from .reference import check_finite_angles, draw_bits, fused_gate_ops
from .runner import (
    GATE_PRIMITIVES,
    QuantumResult,
    RunAccounting,
    _eqn_is_quantum,
    enumerated_result,
    remember_sample,
)

__all__ = ["DensityRunner", "run_density"]


class _Rho:
    """Stands for "this record's density matrix" among a record's values."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<rho>"


RHO = _Rho()

# (tag, values, rho): ``tag`` keeps records of different callers apart (a handler's records
# are tagged by their position in its input), ``values`` are the atoms' values with RHO where
# the quantum state is.
Record = tuple[int, list[Any], np.ndarray]


class DensityRunner(RunAccounting):
    """One run of a program on density matrices (see the module docstring).

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def dephased():
    ...     q = qm.qubits(1); qm.h(q[0]); qm.measure(q[0]); return qm.expval("X", q)
    >>> runner = DensityRunner()
    >>> [(float(x), rho.real.round(3).tolist()) for _, (x,), rho in
    ...  runner.run_program(qdiff.trace(dephased), [(0, [], np.ones((1, 1)))])]
    [(0.0, [[0.5, 0.0], [0.0, 0.5]])]
    """

    def __init__(self, options: RunOptions = DEFAULTS, zero_exit_limit: int = 1_000):
        super().__init__(options, zero_exit_limit)
        self._deaths: dict[int, tuple[Program, list[list[Var]], list[Var]]] = {}

    # -- programs ---------------------------------------------------------------------------
    def run_program(self, program: Program, records: list[Record]) -> list[Record]:
        """Run ``program`` on each ``(tag, inputs, rho)``; returns ``(tag, outputs, rho)``,
        merged where the tag and the classical outputs agree."""
        deaths, unused = self._liveness(program)
        entries = []
        for tag, values, rho in records:
            env = dict(zip(program.inputs, values))
            for var in unused:
                env.pop(var, None)
            entries.append((tag, env, rho))
        for eqn, dead in zip(program.eqns, deaths):
            entries = self._step(eqn, entries, dead)
        return merge_records([(tag, [_read(env, a) for a in program.outputs], rho)
                              for tag, env, rho in entries])

    def _liveness(self, program: Program) -> tuple[list[list[Var]], list[Var]]:
        """Per equation, the vars no later equation (nor the outputs) reads."""
        cached = self._deaths.get(id(program))
        if cached is not None and cached[0] is program:
            return cached[1], cached[2]
        last: dict[Var, int] = {}
        for k, eqn in enumerate(program.eqns):
            for atom in eqn.inputs:
                if isinstance(atom, Var):
                    last[atom] = k
        kept = {a for a in program.outputs if isinstance(a, Var)}
        deaths: list[list[Var]] = [[] for _ in program.eqns]
        for var, k in last.items():
            if var not in kept:
                deaths[k].append(var)
        for k, eqn in enumerate(program.eqns):
            deaths[k].extend(v for v in eqn.outputs if v not in last and v not in kept)
        unused = [v for v in program.inputs if v not in last and v not in kept]
        self._deaths[id(program)] = (program, deaths, unused)
        return deaths, unused

    def _step(self, eqn: Eqn, entries: list[tuple[int, dict, np.ndarray]],
              dead: list[Var]) -> list[tuple[int, dict, np.ndarray]]:
        handler = DENSITY_HANDLERS.get(eqn.primitive) if _eqn_is_quantum(eqn) else None
        if handler is None and _eqn_is_quantum(eqn) and (
                any(isinstance(getattr(a, "type", None), QState) for a in eqn.inputs)
                or any(True for _ in eqn.subprograms())):
            raise QdiffError(f"mode='density' cannot run primitive {eqn.primitive.name!r}; "
                             "use mode='exact'")
        result = []
        if handler is None:  # classical, including classical helpers such as bit_to_int
            impl = eqn.primitive.impl("numpy")
            for tag, env, rho in entries:
                outs = impl(*[_read(env, a) for a in eqn.inputs], **eqn.params)
                env.update(zip(eqn.outputs, outs if eqn.primitive.multiple_results else [outs]))
                result.append((tag, env, rho))
        else:
            inputs = [(k, [_read(env, a) for a in eqn.inputs], rho)
                      for k, (_, env, rho) in enumerate(entries)]
            if eqn.primitive in GATE_PRIMITIVES:
                for _, values, _ in inputs:
                    check_finite_angles(eqn, values[1:])
            for k, outs, rho in handler(self, eqn, inputs):
                tag, env, _ = entries[k]
                env = dict(env)
                env.update(zip(eqn.outputs, outs))
                result.append((tag, env, rho))
        for _, env, _ in result:
            for var in dead:
                env.pop(var, None)
        return merge_records(result)

    def keep(self, rho: np.ndarray) -> bool:
        """Whether a record of weight ``Tr rho`` survives pruning (else it is reported)."""
        return self.keep_mass(dm.trace(rho))


def merge_records(records: list[tuple[int, Any, np.ndarray]]) -> list[tuple[int, Any, np.ndarray]]:
    """Merge records with the same tag and classical values by adding their ``rho``.

    Values are a list or a dict (an environment); the first record's object is kept.

    >>> a, b = (0, [np.int64(1), RHO], np.eye(2) / 8), (0, [np.int64(0), RHO], np.eye(2) / 4)
    >>> [(tag, float(np.trace(rho).real)) for tag, _, rho in merge_records([a, b, a])]
    [(0, 0.5), (0, 0.5)]
    """
    index: dict[tuple, int] = {}
    merged: list[list[Any]] = []
    for tag, values, rho in records:
        items = values.values() if isinstance(values, dict) else values
        key = (tag, tuple(_value_key(v) for v in items))
        k = index.get(key)
        if k is None:
            index[key] = len(merged)
            merged.append([tag, values, rho])
        else:
            merged[k][2] = merged[k][2] + rho
    return [(tag, values, rho) for tag, values, rho in merged]


def _value_key(value: Any) -> Any:
    if value is RHO:
        return "rho"
    array = np.asarray(value)
    return (array.dtype.str, array.shape, array.tobytes())


def _read(env: dict, atom: Any) -> Any:
    return atom.value if isinstance(atom, Literal) else env[atom]


def _num_qubits(rho: np.ndarray) -> int:
    return int(rho.shape[0]).bit_length() - 1


def _check_size(num_qubits: int) -> None:
    if num_qubits > dm.MAX_DENSITY_QUBITS:
        raise QdiffError(
            f"mode='density' keeps a 2^n x 2^n density matrix and handles at most "
            f"{dm.MAX_DENSITY_QUBITS} qubits; this program has {num_qubits} (use mode='exact')")


# ---------------------------------------------------------------------- handlers, one per op
Handler = Callable[[DensityRunner, Eqn, list[Record]], list[Record]]


def _per_record(fn: Callable[[DensityRunner, Eqn, list[Any], np.ndarray],
                             list[tuple[list[Any], np.ndarray]]]) -> Handler:
    """A handler that treats each record on its own: ``fn(runner, eqn, inputs, rho)`` returns
    the record's ``(outputs, rho)`` outcomes."""
    def handler(r: DensityRunner, eqn: Eqn, records: list[Record]) -> list[Record]:
        return [(k, outs, new) for k, inputs, rho in records
                for outs, new in fn(r, eqn, inputs, rho)]
    return handler


@_per_record
def _qalloc(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    n = eqn.params["num_qubits"]
    _check_size(n)
    if rho.shape != (1, 1):
        raise QdiffError("mode='density' runs programs with one quantum state (one qalloc)")
    return [([RHO], rho[0, 0] * dm.zero_density(n))]


@_per_record
def _qextend(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    k = eqn.params["num_qubits"]
    _check_size(_num_qubits(rho) + k)
    return [([RHO], np.kron(dm.zero_density(k), rho))]  # new wires are the high bits


@_per_record
def _gate(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    _, *angles = inputs
    p = eqn.params
    spec = gate_spec(p["name"], **(p.get("static") or {}))
    return [([RHO], dm.apply_gate(rho, _num_qubits(rho), spec, p["wires"],
                                  [float(a) for a in angles]))]


@_per_record
def _fused_gate(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    # a fused run of gates (`fusion.py`): its parts one by one, each from the gate table
    _, *angles = inputs
    n = _num_qubits(rho)
    for op in fused_gate_ops(eqn.params["wires"], eqn.params["parts"], angles):
        rho = dm.apply_gate(rho, n, op.gate, list(op.wires), list(op.params))
    return [([RHO], rho)]


@_per_record
def _measure(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    n, wire = _num_qubits(rho), eqn.params["wire"]
    out = []
    for outcome in (0, 1):
        branch = dm.project(rho, n, wire, outcome)
        if dm.trace(branch) <= 0 or not r.keep(branch):
            continue
        if eqn.params["reset"] and outcome == 1:
            branch = dm.apply_gate(branch, n, "x", [wire])
        out.append(([RHO, np.asarray(outcome, np.int64)], branch))
    return out


@_per_record
def _reset(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    return [([RHO], dm.reset(rho, _num_qubits(rho), eqn.params["wire"]))]


@_per_record
def _postselect(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    n, wire, value = _num_qubits(rho), eqn.params["wire"], eqn.params["value"]
    r.postselected_away += dm.trace(dm.project(rho, n, wire, 1 - value))
    kept = dm.project(rho, n, wire, value)
    return [([RHO], kept)] if dm.trace(kept) > 0 and r.keep(kept) else []


@_per_record
def _readout(r: DensityRunner, eqn: Eqn, inputs: list[Any], rho: np.ndarray) -> list:
    n, name, p = _num_qubits(rho), eqn.primitive.name, eqn.params
    normalized = rho / dm.trace(rho)
    if name == "expval":
        value = np.asarray(dm.expval(normalized, n, pauli_sum_of(p["terms"]), p["wires"]))
    elif name == "probs":
        value = np.asarray(dm.probs(normalized, n, p["wires"]))
    elif name == "sample":
        value = remember_sample(r, draw_bits(dm.probs(normalized, n, p["wires"]),
                                             p["shots"], r.rng))
    else:
        raise QdiffError("qm.state returns a statevector, which mode='density' does not have; "
                         "read probs/expval instead, or use mode='exact'")
    return [([RHO, value], rho)]


def _cond(r: DensityRunner, eqn: Eqn, records: list[Record]) -> list[Record]:
    branches = eqn.params["branches"]
    chosen: dict[int, list[Record]] = {}
    for k, (index, *operands), rho in records:
        pick = int(np.clip(int(index), 0, len(branches) - 1))
        chosen.setdefault(pick, []).append((k, operands, rho))
    return [out for pick, group in sorted(chosen.items())
            for out in r.run_program(branches[pick], group)]


def _loop(r: DensityRunner, eqn: Eqn, records: list[Record]) -> list[Record]:
    nc = eqn.params["num_consts"]
    bounds = {k: (int(start), int(stop), np.asarray(start).dtype)
              for k, (start, stop, *_), _ in records}
    consts = {k: rest[:nc] for k, (_, _, *rest), _ in records}
    items: list[Record] = [(k, rest[nc:], rho) for k, (_, _, *rest), rho in records]
    lowest = min((b[0] for b in bounds.values()), default=0)
    highest = max((b[1] for b in bounds.values()), default=0)
    for i in range(lowest, highest):
        active = [(k, [np.asarray(i, bounds[k][2]), *consts[k], *c], rho)
                  for k, c, rho in items if bounds[k][0] <= i < bounds[k][1]]
        waiting = [item for item in items if not bounds[item[0]][0] <= i < bounds[item[0]][1]]
        items = waiting + r.run_program(eqn.params["body"], active)
    return items


def _while(r: DensityRunner, eqn: Eqn, records: list[Record]) -> list[Record]:
    p = eqn.params
    nc, nb = p["num_cond_consts"], p["num_body_consts"]
    cond_consts = {k: inputs[:nc] for k, inputs, _ in records}
    body_consts = {k: inputs[nc:nc + nb] for k, inputs, _ in records}
    live: list[Record] = [(k, inputs[nc + nb:], rho) for k, inputs, rho in records]
    finished: list[Record] = []
    iterations = 0
    dropped_before = r.dropped
    while live:
        tested = r.run_program(p["cond"], [(k, [*cond_consts[k], *c], rho) for k, c, rho in live])
        continuing = []
        for k, (pred, *carry), rho in tested:
            (continuing if bool(pred) else finished).append((k, carry, rho))
        if not continuing or r.stop_loop(iterations, p["max_iter"],
                                         sum(dm.trace(rho) for _, _, rho in continuing),
                                         bool(finished) or r.dropped > dropped_before):
            break
        live = r.run_program(p["body"], [(k, [*body_consts[k], *c], rho)
                                          for k, c, rho in continuing])
        iterations += 1
    return merge_records(finished)


DENSITY_HANDLERS: dict[Primitive, Handler] = {
    qp.qalloc_p: _qalloc, qp.qextend_p: _qextend, qp.gate_p: _gate, fused_gate_p: _fused_gate,
    qp.measure_p: _measure, qp.reset_p: _reset, qp.postselect_p: _postselect,
    qp.expval_p: _readout, qp.probs_p: _readout, qp.sample_p: _readout,
    qp.statevector_p: _readout, cond_p: _cond, loop_p: _loop, while_p: _while,
}


# --------------------------------------------------------------------------------- the API
def run_density(program: Program, values: list[Any],
                options: RunOptions = DEFAULTS) -> QuantumResult:
    """Run a traced ``program`` on flat input ``values`` with density matrices; what
    ``qm.run(..., mode="density")`` calls. Values are expectations, as in ``exact`` mode.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def reset_twice():
    ...     q = qm.qubits(1); qm.h(q[0]); qm.reset(q[0]); qm.h(q[0]); return qm.probs(q)
    >>> run_density(qdiff.trace(reset_twice), []).values.round(12).tolist()
    [0.5, 0.5]
    """
    runner = DensityRunner(options)
    records = runner.run_program(program, [(0, list(values), np.ones((1, 1), np.complex128))])
    items = [(dm.trace(rho), outs) for _, outs, rho in records]
    return enumerated_result(runner, program, items, "density")
