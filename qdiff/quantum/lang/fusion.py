"""Gate fusion: an IR pass that merges runs of gates into ``fused_gate`` equations.

A statevector simulator pays one pass over the whole state per gate, so a circuit costs
about (number of gates) x (bytes of the state) of memory traffic. Fusion merges gates that
act on a few wires into one equation, applied in one pass: runs of one-qubit gates on a
wire become one gate, one-qubit gates merge into a neighbouring two-qubit gate (before or
after it), and wider blocks form when a back end has a kernel for them (the Numba back end
applies a block of up to eight wires in cache, one pass for the whole block).

A back end's width may carry its price list (:class:`FusionWidth`): then each block's width
is chosen by cost, the passes over the state it saves against the arithmetic it costs
(gates in their sparse forms, :mod:`~qdiff.quantum.lang.gate_forms`, or one dense
``2^k x 2^k`` matrix), and :class:`FusionStats` reports the price of the plan.

Gate angles are traced values, so a fused gate keeps them as operands and its matrix (or its
parts' matrices) is computed when it runs:

- ``fused_gate[wires, parts](s, *angles) -> s'``: the parts in order, on ``wires``;
  ``parts = ((name, local_wires, static, num_angles), ...)``, ``local_wires`` index into
  ``wires``, and the angles are the parts' angles concatenated.

The pass only merges consecutive gates of one state (a run): any other operation on the
state (measurement, reset, postselection, readouts, ``cond``, loops) is a barrier, and the
bodies of loops and branches are fused on their own, never across their boundary. Within a
run it may reorder gates that act on disjoint wires (they commute), never others, so the
program's semantics is unchanged. Classical equations between the gates stay where they are.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def ansatz(theta):
...     q = qm.qubits(2)
...     qm.ry(theta, q[0]); qm.rz(theta, q[1]); qm.cx(q[0], q[1]); qm.rx(theta, q[1])
...     return qm.expval("ZZ", q)
>>> program = qdiff.trace(ansatz, 0.3)
>>> fused, stats = fuse_gates(program, max_qubits=2, report=True)
>>> [e.primitive.name for e in fused.eqns]
['qalloc', 'fused_gate', 'expval']
>>> stats.gates, stats.passes, stats.passes_saved
(4, 1, 3)
>>> bool(abs(qm.run(fused, 0.3, fuse=False).values - qm.run(program, 0.3, fuse=False).values)
...      < 1e-12)
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...ir.core import Eqn, Program, Var
from ...ir.errors import TypeCheckError
from ...ir.types import Type
from .gate_forms import gate_form
from .gates import GateSpec, gate_spec
from .primitives import _register, _state, _wires, check_angles, checked_gate_spec, gate_p

__all__ = ["FusionStats", "FusionWidth", "fuse_gates", "plan_blocks", "plan_cost",
           "fused_gate_parts", "gate_parts", "gate_runs", "unfuse_gates", "fused_gate_p",
           "GATE_KINDS"]


# ------------------------------------------------------------------------------ the primitive
def _part_spec(part: Any, what: str) -> GateSpec:
    try:
        name, local, static, num_angles = part
    except (TypeError, ValueError) as exc:
        raise TypeCheckError(f"{what}: bad part {part!r}: {exc}") from None
    return checked_gate_spec(name, static, num_angles, local, f"{what} part")


def _fused_gate_rule(state: Type, *angles: Type, wires: tuple[int, ...],
                     parts: tuple) -> tuple[Type, ...]:
    s = _state(state)
    _wires(wires, s.num_qubits, "fused_gate")
    if not parts:
        raise TypeCheckError("fused_gate: no parts")
    count = 0
    for part in parts:
        _part_spec(part, "fused_gate")
        local = part[1]
        if len(set(local)) != len(local) or not all(0 <= j < len(wires) for j in local):
            raise TypeCheckError(f"fused_gate: part {part[0]!r} has local wires {local}, "
                                 f"not distinct indices into {len(wires)} wires")
        count += part[3]
    if len(angles) != count:
        raise TypeCheckError(f"fused_gate: its parts take {count} angle(s), got {len(angles)}")
    check_angles(angles, "fused_gate")
    return (s,)


fused_gate_p = _register("fused_gate", _fused_gate_rule)


@dataclass(frozen=True)
class _Plan:
    parts: tuple  # kept so that the id() key of the cache stays valid
    specs: tuple[tuple[GateSpec, tuple[int, ...], int, int], ...]  # spec, wires, angle slice


_PLANS: dict[int, _Plan] = {}


def _plan(wires: tuple[int, ...], parts: tuple) -> _Plan:
    plan = _PLANS.get(id(parts))
    if plan is None or plan.parts is not parts:
        specs, start = [], 0
        for part in parts:
            spec = _part_spec(part, "fused_gate")
            specs.append((spec, tuple(wires[j] for j in part[1]), start, start + part[3]))
            start += part[3]
        plan = _Plan(parts, tuple(specs))
        if len(_PLANS) > 4096:
            _PLANS.clear()
        _PLANS[id(parts)] = plan
    return plan


def fused_gate_parts(wires: tuple[int, ...], parts: tuple
                     ) -> tuple[tuple[GateSpec, tuple[int, ...], int, int], ...]:
    """Per part of a ``fused_gate`` equation: its gate, its wires in the register, and the
    slice ``lo:hi`` of the equation's angles it takes (computed once per ``parts``).

    >>> [(spec.name, ws, lo, hi) for spec, ws, lo, hi in fused_gate_parts(
    ...     (3, 5), (("ry", (1,), None, 1), ("cx", (1, 0), None, 0)))]
    [('ry', (5,), 0, 1), ('cx', (5, 3), 1, 1)]
    """
    return _plan(tuple(wires), parts).specs


GATE_KINDS = ("gate", "fused_gate")
"""The equations that apply gates: one gate, or a run of them (`fusion.gate_runs`)."""

Parts = tuple[tuple[GateSpec, tuple[int, ...], int, int], ...]

_PARTS: dict[int, tuple[Eqn, Parts]] = {}


def gate_parts(eqn: Eqn) -> Parts:
    """The gates a ``gate`` or ``fused_gate`` equation applies, in order: (gate, wires, the
    slice ``lo:hi`` of the equation's angles it takes). Cached per equation.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def two(t):
    ...     q = qm.qubits(2); qm.crx(t, q[0], q[1]); return qm.probs(q)
    >>> [(s.name, ws, lo, hi) for s, ws, lo, hi in gate_parts(qdiff.trace(two, 0.1).eqns[1])]
    [('crx', (0, 1), 0, 1)]
    """
    hit = _PARTS.get(id(eqn))
    if hit is not None and hit[0] is eqn:
        return hit[1]
    p = eqn.params
    if eqn.primitive.name == "fused_gate":
        parts = fused_gate_parts(p["wires"], p["parts"])
    else:  # the type rule already built this spec: num_controls, pauli, matrix are in static
        spec = gate_spec(p["name"], **(p.get("static") or {}))
        parts = ((spec, tuple(p["wires"]), 0, len(eqn.inputs) - 1),)
    if len(_PARTS) > 8192:
        _PARTS.clear()
    _PARTS[id(eqn)] = (eqn, parts)
    return parts


# ----------------------------------------------------------------------------- the cost model
class FusionWidth(int):
    """The widest block a back end takes (an ``int``), with its price list: the planner
    chooses each block's width by cost (:func:`plan_blocks`) instead of the widest that fits.

    Costs are in passes over the state. A block applied in one pass costs ``pass_cost``
    (``low_pass_cost`` when its lowest wire is below ``low_bits``: the Numba block kernel
    transposes such a batch instead of copying runs), plus its arithmetic: with ``dense``,
    one ``2^k x 2^k`` matrix (``2^k`` complex multiply-adds per amplitude), otherwise each
    gate in its sparse form (:attr:`GateForm.cost <qdiff.quantum.lang.gate_forms.GateForm.cost>`;
    :func:`plan_cost` counts a block's diagonal gates, which merge, as one at most).
    ``flops_per_pass`` is the calibration constant: the multiply-adds per amplitude that take
    as long as one pass over memory. A gate left alone costs one pass and its arithmetic.

    ``diagonal_width`` (0: none): the back end applies a block of diagonal gates on up to
    that many wires as one table in one contiguous sweep (one pass and one multiply per
    amplitude, whatever its wires), and the planner merges such blocks across blocks they
    commute with (:func:`plan_blocks`).

    >>> w = FusionWidth(8, flops_per_pass=4.0, dense=False, low_pass_cost=4.0, low_bits=3)
    >>> int(w), w.block_cost((3, 4, 5), [2.0, 2.0, 0.0]), w.block_cost((0, 4), [2.0, 2.0])
    (8, 2.0, 5.0)
    """

    flops_per_pass: float
    dense: bool
    low_pass_cost: float
    low_bits: int
    diagonal_width: int

    def __new__(cls, max_qubits: int, flops_per_pass: float = 8.0, dense: bool = True,
                low_pass_cost: float = 1.0, low_bits: int = 0,
                diagonal_width: int = 0) -> FusionWidth:
        self = super().__new__(cls, max_qubits)
        self.flops_per_pass = float(flops_per_pass)
        self.dense = bool(dense)
        self.low_pass_cost = float(low_pass_cost)
        self.low_bits = int(low_bits)
        self.diagonal_width = int(diagonal_width)
        return self

    def __reduce__(self) -> Any:  # an int subclass with attributes: pickle them too
        return (FusionWidth, (int(self), self.flops_per_pass, self.dense, self.low_pass_cost,
                              self.low_bits, self.diagonal_width))

    def gate_cost(self, cost: float) -> float:
        """Passes of one gate applied alone (its own kernel): one pass and its arithmetic.

        >>> FusionWidth(4, flops_per_pass=4.0).gate_cost(2.0)
        1.5
        """
        return 1.0 + cost / self.flops_per_pass

    def block_cost(self, wires: Sequence[int], costs: Sequence[float],
                   diagonal: bool = False) -> float:
        """Passes of a block of gates (their sparse costs ``costs``) on ``wires``, in one
        pass (a single gate: :meth:`gate_cost`); ``diagonal``: every gate is diagonal (a
        table sweep when the back end has one, see ``diagonal_width``).

        >>> FusionWidth(4, flops_per_pass=4.0).block_cost((0, 1, 2), [2.0, 2.0])  # 8x8 dense
        3.0
        >>> FusionWidth(4, flops_per_pass=4.0, diagonal_width=12).block_cost(
        ...     (0, 1, 2), [0.25, 0.25, 1.0], diagonal=True)
        1.25
        """
        if len(costs) == 1:
            return self.gate_cost(costs[0])
        if diagonal and len(wires) <= self.diagonal_width:
            return self.gate_cost(1.0)  # one multiply per amplitude
        passes = self.low_pass_cost if min(wires) < self.low_bits else 1.0
        work = float(1 << len(wires)) if self.dense else float(sum(costs))
        return passes + work / self.flops_per_pass


def plan_cost(plan: Sequence[Sequence[int]], gate_wires: Sequence[Sequence[int]],
              costs: Sequence[float], width: FusionWidth,
              diagonal: Sequence[bool] | None = None) -> float:
    """Passes over the state a plan of blocks costs (:meth:`FusionWidth.block_cost`);
    ``diagonal[i]``: gate ``i`` is diagonal.

    >>> plan_cost([[0, 1]], [(0,), (0, 1)], [2.0, 0.0], FusionWidth(2, flops_per_pass=4.0))
    2.0
    """
    return sum(width.block_cost(sorted({w for i in block for w in gate_wires[i]}),
                                _block_costs(block, costs, diagonal),
                                diagonal is not None and all(diagonal[i] for i in block))
               for block in plan)


def _block_costs(block: Sequence[int], costs: Sequence[float],
                 diagonal: Sequence[bool] | None) -> list[float]:
    # the arithmetic of a block's gates; its diagonal gates merge into one diagonal (the
    # block kernel multiplies each amplitude once for all of them), so together they cost
    # at most one multiply-add per amplitude
    if diagonal is None or len(block) == 1:
        return [costs[i] for i in block]
    merged = sum(costs[i] for i in block if diagonal[i])
    return [costs[i] for i in block if not diagonal[i]] + ([min(merged, 1.0)] if merged else [])


# --------------------------------------------------------------------------- block planning
def plan_blocks(gate_wires: Sequence[Sequence[int]], max_qubits: int,
                costs: Sequence[float] | None = None,
                diagonal: Sequence[bool] | None = None) -> list[list[int]]:
    """Group a gate sequence into blocks of at most ``max_qubits`` wires; returns the gate
    indices of each block, blocks in execution order, gates in order within a block.

    With a :class:`FusionWidth` and the gates' ``costs`` (``GateForm.cost``), each block of
    the widest plan is planned again at every narrower width, down to its gates one by one,
    and the cheapest of these is kept: a block's width is chosen by its cost.

    Greedy, one gate at a time. A gate joins the block that last touched all its wires when
    the union stays within ``max_qubits`` (it moves earlier past blocks on other wires);
    a gate on wires nothing touched yet may join the latest block. Otherwise it opens a new
    block and pulls in the blocks that last touched its wires and nothing after them (they
    move later, past blocks on other wires) while they fit. So a one-qubit gate always
    merges with its wire's last block, and one-qubit gates before a two-qubit gate merge into
    it. Gates wider than ``max_qubits`` stay alone. Only gates on disjoint wires change order.

    With ``diagonal`` (``diagonal[i]``: gate ``i`` is diagonal) and a width whose
    ``diagonal_width`` is set, diagonal gates commute with each other too: a block of
    diagonal gates moves back past diagonal blocks and blocks on other wires into the latest
    diagonal block it fits (``diagonal_width`` wires), and is priced as one sweep; and the
    gates are planned a second time with every diagonal gate moved as late as it commutes
    (its blocks then gather diagonal gates), the cheaper plan kept; then neighbouring blocks
    merge where the merged block fits and costs less.

    >>> plan_blocks([(0,), (1,), (0, 1), (0,), (1, 2), (2,)], 2)
    [[0, 1, 2, 3], [4, 5]]
    >>> gates, costs = [(0,), (1,), (0, 1), (2,)], [2.0, 2.0, 0.0, 2.0]
    >>> plan_blocks(gates, 3, costs)
    [[0, 1, 2, 3]]
    >>> plan_blocks(gates, FusionWidth(3, flops_per_pass=1.0), costs)  # an 8x8 costs 9 passes
    [[0, 1, 2], [3]]
    >>> star = [(0,), (0, 1), (0, 2), (1,), (2, 1), (2, 3)]  # h, cp, cp, h, cp, cp
    >>> plan_blocks(star, FusionWidth(2, diagonal_width=3), [2, .25, .25, 2, .25, .25],
    ...             [False, True, True, False, True, True])
    [[0, 1, 3], [2, 4], [5]]
    """
    # the runners plan the same gate sequences run after run: remember the plans
    priced = isinstance(max_qubits, FusionWidth) and costs is not None
    diagonals = (tuple(bool(d) for d in diagonal) if priced and diagonal is not None
                 and max_qubits.diagonal_width else None)
    key = (tuple(tuple(ws) for ws in gate_wires), int(max_qubits),
           (tuple(costs), max_qubits.__reduce__()[1]) if priced else None, diagonals)
    plan = _BLOCK_PLANS.get(key)
    if plan is None:
        if len(_BLOCK_PLANS) > 1024:
            _BLOCK_PLANS.clear()
        plan = _plan_in_order(list(range(len(key[0]))), key[0], max_qubits, costs, diagonals)
        if diagonals is not None:  # diagonal gates moved late too, if that plan is cheaper
            cost_list = list(costs or ())
            sunk = _plan_in_order(_sunk_diagonals(key[0], diagonals), key[0], max_qubits,
                                  costs, diagonals)
            if (plan_cost(sunk, key[0], cost_list, max_qubits, diagonals)
                    < plan_cost(plan, key[0], cost_list, max_qubits, diagonals) - 1e-9):
                plan = sunk
            plan = _merge_neighbours(plan, key[0], cost_list, max_qubits, diagonals)
        _BLOCK_PLANS[key] = plan
    return [list(block) for block in plan]


def _plan_in_order(order: list[int], gate_wires: Sequence[Sequence[int]], width: Any,
                   costs: Sequence[float] | None,
                   diagonal: Sequence[bool] | None) -> list[list[int]]:
    # the plan of the gates taken in `order` (a reordering that keeps the program's meaning)
    wires = [gate_wires[i] for i in order]
    plan = _plan_blocks(wires, int(width))
    if isinstance(width, FusionWidth) and costs is not None:
        plan = _priced(plan, wires, [costs[i] for i in order], width,
                       None if diagonal is None else [diagonal[i] for i in order])
    plan = [[order[k] for k in block] for block in plan]
    if diagonal is not None:
        plan = _merge_diagonals(plan, gate_wires, diagonal, width.diagonal_width)
    return plan


def _merge_neighbours(plan: list[list[int]], gate_wires: Sequence[Sequence[int]],
                      costs: list[float], width: FusionWidth,
                      diagonal: Sequence[bool]) -> list[list[int]]:
    # consecutive blocks merged when the merged block fits and costs less (a row of swaps on
    # other wires, say): they run in the same order, so any two neighbours may merge
    out: list[list[int]] = []
    for block in plan:
        if out:
            merged = out[-1] + block
            if (len({w for i in merged for w in gate_wires[i]}) <= int(width)
                    and plan_cost([merged], gate_wires, costs, width, diagonal)
                    < plan_cost([out[-1], block], gate_wires, costs, width, diagonal) - 1e-9):
                out[-1] = merged
                continue
        out.append(list(block))
    return out


def _sunk_diagonals(gate_wires: Sequence[Sequence[int]],
                    diagonal: Sequence[bool]) -> list[int]:
    # the gates in an order where every diagonal gate has moved as late as it can: just
    # before the first later gate on one of its wires that is not diagonal (the gates it
    # passes are diagonal or on other wires: they commute), the others in their own order.
    # Built backwards: a non-diagonal gate takes the next lower key, a diagonal gate the key
    # just below that of the first non-diagonal gate after it on its wires.
    first: dict[int, int] = {}  # wire -> key of the first non-diagonal gate on it so far
    end = len(gate_wires)
    keys: list[float] = [0.0] * len(gate_wires)
    for index in range(len(gate_wires) - 1, -1, -1):
        if diagonal[index]:
            keys[index] = min((first[w] for w in gate_wires[index] if w in first),
                              default=end) - 0.5
        else:
            keys[index] = float(index - end)  # below every key so far
            for w in gate_wires[index]:
                first[w] = index - end
    return sorted(range(len(gate_wires)), key=lambda i: (keys[i], i))


def _merge_diagonals(plan: list[list[int]], gate_wires: Sequence[Sequence[int]],
                     diagonal: Sequence[bool], limit: int) -> list[list[int]]:
    # each all-diagonal block joins the latest all-diagonal block before it that it fits,
    # when every block in between is diagonal or on other wires (they commute)
    out: list[tuple[list[int], set[int], bool]] = []
    for block in plan:
        wires = {w for i in block for w in gate_wires[i]}
        is_diagonal = all(diagonal[i] for i in block)
        if is_diagonal:
            for gates, ws, diag in reversed(out):
                if diag and len(ws | wires) <= limit:
                    gates += block
                    ws |= wires
                    break
                if not diag and ws & wires:
                    out.append((list(block), wires, True))
                    break
            else:
                out.append((list(block), wires, True))
            continue
        out.append((list(block), wires, False))
    return [gates for gates, _, _ in out]


_BLOCK_PLANS: dict[tuple, list[list[int]]] = {}


def _priced(plan: list[list[int]], gate_wires: Sequence[Sequence[int]], costs: list[float],
            width: Any, diagonal: Sequence[bool] | None = None) -> list[list[int]]:
    # each block of the widest plan against its own gates planned narrower: the cheapest
    out: list[list[int]] = []
    for block in plan:
        best, best_cost = [block], plan_cost([block], gate_wires, costs, width, diagonal)
        wires = [gate_wires[i] for i in block]
        for narrower in range(len({w for ws in wires for w in ws}) - 1, -1, -1):
            sub = ([[k] for k in range(len(block))] if narrower == 0
                   else _plan_blocks(wires, narrower))
            candidate = [[block[k] for k in b] for b in sub]
            cost = plan_cost(candidate, gate_wires, costs, width, diagonal)
            if cost < best_cost - 1e-9:
                best, best_cost = candidate, cost
        out += best
    return out


def _plan_blocks(gate_wires: Sequence[Sequence[int]], max_qubits: int) -> list[list[int]]:
    blocks: list[_Block | None] = []
    last: dict[int, _Block] = {}
    for index, ws in enumerate(gate_wires):
        wires = set(ws)
        owners = {id(last[w]): last[w] for w in wires if w in last}
        if not owners and blocks:
            owners = {0: blocks[-1]}  # fresh wires: the gate may move back to any block
        if len(owners) == 1:
            (block,) = owners.values()
            if len(block.wires | wires) <= max_qubits:
                block.gates.append(index)
                block.wires |= wires
                for w in wires:
                    last[w] = block
                continue
        chosen: list[_Block] = []
        if len(wires) <= max_qubits:
            movable = [b for b in owners.values() if all(last[u] is b for u in b.wires)]
            for block in sorted(movable, key=lambda b: (len(b.wires), b.slot)):
                if len(wires | block.wires) <= max_qubits:
                    chosen.append(block)
                    wires |= block.wires
        gates: list[int] = []
        for block in sorted(chosen, key=lambda b: b.slot):
            gates += block.gates
            blocks[block.slot] = None
        new = _Block(len(blocks), wires, gates + [index])
        blocks.append(new)
        for w in wires:
            last[w] = new
    return [b.gates for b in blocks if b is not None]


@dataclass(eq=False)
class _Block:
    slot: int
    wires: set[int]
    gates: list[int]


# ------------------------------------------------------------------------------------ the pass
@dataclass
class FusionStats:
    """What a fusion pass did, counted over the program text (each loop body once).

    ``gates``: gate equations before; ``passes``: gate and fused-gate equations after (each
    is one pass over the state); ``passes_saved = gates - passes``; ``fused``: how many
    ``fused_gate`` equations were formed; ``widest``: the widest one; ``cost``: what the
    plan costs in passes over the state by the back end's price list (:class:`FusionWidth`;
    0 without one), the blocks' arithmetic included.

    >>> FusionStats(gates=10, passes=3, fused=2, widest=4).passes_saved
    7
    """

    gates: int = 0
    passes: int = 0
    fused: int = 0
    widest: int = 0
    cost: float = 0.0

    @property
    def passes_saved(self) -> int:
        """Passes over the state the fused program saves (per run of its text)."""
        return self.gates - self.passes


Width = int | Callable[[int], int]


def fuse_gates(program: Program, max_qubits: Width = 2, report: bool = False) -> Any:
    """The program with its gate runs fused into blocks of at most ``max_qubits`` wires.

    ``max_qubits`` may be a function of the register size (``backend.fusion_width``); 0
    leaves the gates alone, 1 merges runs of one-qubit gates on a wire. With
    ``report=True`` returns ``(program, FusionStats)``. The result computes exactly what
    ``program`` computes (up to rounding); see the module docstring for what is merged.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def layer():
    ...     q = qm.qubits(3)
    ...     for w in q: qm.h(w)
    ...     qm.cx(q[0], q[1]); qm.cx(q[1], q[2])
    ...     return qm.probs(q)
    >>> fused, stats = fuse_gates(qdiff.trace(layer), max_qubits=3, report=True)
    >>> stats.gates, stats.passes, stats.widest
    (5, 1, 3)
    """
    stats = FusionStats()
    fused = _fuse(program, max_qubits, stats)
    return (fused, stats) if report else fused


Origins = dict[int, tuple[Eqn, tuple[Eqn, ...]]]
"""Where the gate equations of a fused program came from: ``id(new) -> (new, the gate
equations it applies, in its parts' order)``."""


def _fuse(program: Program, max_qubits: Width, stats: FusionStats,
          origins: Origins | None = None) -> Program:
    uses: dict[Var, int] = {}
    for eqn in program.eqns:
        for atom in eqn.inputs:
            if isinstance(atom, Var):
                uses[atom] = uses.get(atom, 0) + 1
    for atom in program.outputs:
        if isinstance(atom, Var):
            uses[atom] = uses.get(atom, 0) + 1

    out: list[Eqn] = []
    run: list[Eqn] = []

    def flush() -> None:
        if run:
            out.extend(_fuse_run(run, max_qubits, stats, origins))
            run.clear()

    for eqn in program.eqns:
        if eqn.primitive is gate_p and _width(max_qubits, eqn.inputs[0].type.num_qubits) < 1:
            stats.gates += 1  # the back end does not fuse for this register
            stats.passes += 1
            out.append(eqn)
            continue
        if eqn.primitive is gate_p:
            state = eqn.inputs[0]
            if run and not (state is run[-1].outputs[0] and uses.get(state, 0) == 1):
                flush()
            run.append(eqn)
            continue
        if run and any(a is run[-1].outputs[0] for a in eqn.inputs):
            flush()
        if eqn.primitive.subprogram_params:
            eqn = eqn.map_subprograms(lambda body: _fuse(body, max_qubits, stats, origins))
        elif eqn.primitive is fused_gate_p:
            stats.gates += len(eqn.params["parts"])
            stats.passes += 1
        out.append(eqn)
    flush()
    return Program(program.inputs, tuple(out), program.outputs, name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)


def _width(max_qubits: Width, num_qubits: int) -> int:
    width = max_qubits(num_qubits) if callable(max_qubits) else max_qubits
    return width if isinstance(width, FusionWidth) else int(width)  # keep its price list


def _fuse_run(run: list[Eqn], max_qubits: Width, stats: FusionStats,
              origins: Origins | None = None) -> list[Eqn]:
    state_type = run[0].inputs[0].type
    stats.gates += len(run)
    width = _width(max_qubits, state_type.num_qubits)
    gate_wires = [e.params["wires"] for e in run]
    forms = ([gate_form(gate_parts(e)[0][0]) for e in run]
             if isinstance(width, FusionWidth) else None)
    costs = [f.cost for f in forms] if forms is not None else None
    diagonal = [f.kind == "diagonal" for f in forms] if forms is not None else None
    blocks = plan_blocks(gate_wires, width, costs, diagonal)
    stats.passes += len(blocks)
    if costs is not None:
        stats.cost += plan_cost(blocks, gate_wires, costs, width, diagonal)
    out: list[Eqn] = []
    state = run[0].inputs[0]
    for number, block in enumerate(blocks):
        result = run[-1].outputs[0] if number == len(blocks) - 1 else Var(state_type)
        eqns = [run[i] for i in block]
        if len(eqns) == 1:
            eqn = eqns[0]
            out.append(Eqn(gate_p, (state, *eqn.inputs[1:]), (result,), eqn.params))
        else:
            out.append(_fused_eqn(eqns, state, result))
            stats.fused += 1
            stats.widest = max(stats.widest, len(out[-1].params["wires"]))
        if origins is not None:
            origins[id(out[-1])] = (out[-1], tuple(eqns))
        state = result
    return out


def _fused_eqn(eqns: list[Eqn], state: Var, result: Var) -> Eqn:
    wires: list[int] = []
    for eqn in eqns:
        wires += [w for w in eqn.params["wires"] if w not in wires]
    local = {w: j for j, w in enumerate(wires)}
    parts, angles = [], []
    for eqn in eqns:
        p = eqn.params
        parts.append((p["name"], tuple(local[w] for w in p["wires"]), p.get("static"),
                      len(eqn.inputs) - 1))
        angles += eqn.inputs[1:]
    return Eqn(fused_gate_p, (state, *angles), (result,),
               {"wires": tuple(wires), "parts": tuple(parts)})


_RUNS: dict[int, tuple[Program, Program, Origins]] = {}


def gate_runs(program: Program) -> tuple[Program, Origins]:
    """The program with every run of gates as one equation (``fused_gate``, a part per gate;
    a lone gate stays a ``gate``), and where each of its gate equations came from. Cached
    per program.

    The adjoint method's recorder runs this form: one record per run instead of one per gate,
    and the reverse sweep still reads every part's generator.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def ansatz(t):
    ...     q = qm.qubits(3)
    ...     qm.ry(t, q[0]); qm.cx(q[0], q[1]); qm.rz(t, q[2]); qm.cx(q[1], q[2])
    ...     return qm.expval("ZZZ", q)
    >>> program = qdiff.trace(ansatz, 0.3)
    >>> runs, origins = gate_runs(program)
    >>> [e.primitive.name for e in runs.eqns]
    ['qalloc', 'fused_gate', 'expval']
    >>> [e.params["name"] for e in origins[id(runs.eqns[1])][1]]
    ['ry', 'cx', 'rz', 'cx']
    """
    hit = _RUNS.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1], hit[2]
    origins: Origins = {}
    runs = _fuse(program, lambda num_qubits: num_qubits, FusionStats(), origins)
    if len(_RUNS) > 1024:
        _RUNS.clear()
    _RUNS[id(program)] = (program, runs, origins)
    return runs, origins


_UNFUSED: dict[int, tuple[Program, Program]] = {}


def unfuse_gates(program: Program) -> Program:
    """``program`` with every ``fused_gate`` equation written out as its gates, one ``gate``
    equation per part (cached per program). Differentiation reads gates one by one (shift
    rules, sensitivities, light cones); fusion is applied again when the program runs.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def bell():
    ...     q = qm.qubits(2); qm.h(q[0]); qm.cx(q[0], q[1]); return qm.probs(q)
    >>> fused = fuse_gates(qdiff.trace(bell), max_qubits=2)
    >>> [e.primitive.name for e in unfuse_gates(fused).eqns]
    ['qalloc', 'gate', 'gate', 'probs']
    """
    hit = _UNFUSED.get(id(program))
    if hit is not None and hit[0] is program:
        return hit[1]
    eqns: list[Eqn] = []
    for eqn in program.eqns:
        if eqn.primitive is fused_gate_p:
            state = eqn.inputs[0]
            parts = eqn.params["parts"]
            for k, ((name, _, static, _), (_, wires, lo, hi)) in enumerate(
                    zip(parts, fused_gate_parts(eqn.params["wires"], parts))):
                result = eqn.outputs[0] if k == len(parts) - 1 else Var(state.type)
                params = {"name": name, "wires": wires, **({"static": static} if static else {})}
                eqns.append(Eqn(gate_p, (state, *eqn.inputs[1 + lo:1 + hi]), (result,), params))
                state = result
            continue
        eqns.append(eqn.map_subprograms(unfuse_gates))
    unfused = Program(program.inputs, tuple(eqns), program.outputs, name=program.name,
                      in_tree=program.in_tree, out_tree=program.out_tree)
    if len(_UNFUSED) > 1024:
        _UNFUSED.clear()
    _UNFUSED[id(program)] = (program, unfused)
    return unfused
