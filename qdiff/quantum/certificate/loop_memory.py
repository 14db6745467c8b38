"""Whether a loop on a measurement forgets its past: the same exit probability every round.

``while M do S od`` is *memoryless* when the test after each body run exits with one
probability ``p`` whatever state the round starts in. Then every round contracts what is
still running by exactly ``1 - p``, which is what the certified tail (`tail_certificate`)
needs, for the program and for every perturbation of it.

The check is a backward light cone over one round (the body, then the test), from the test's
predicate: which classical values and which wires the exit decision reads. Going backward,

    measure[w] → bit:   w is read, in the Z basis only (the bit is Z statistics)
    reset[w]:           w is fresh: no longer read
    diagonal gate, or controlled gate read on its controls only, in the Z basis:
                        Z statistics unchanged: skipped
    permutation gate read in the Z basis:  its wires are read, in the Z basis
    any other gate touching a read wire:   all its wires and its angles are read
    classical equation with a read output: its inputs are read

and at the start of the round nothing may be read but the loop's constants and wires whose
state the previous test fixed (a wire the test measured, when going on implies one value of
the bit: ``while M[q] = 0`` leaves ``q`` in ``|0⟩``; or the body's last measurement of a
do-while, followed at most by the same one-qubit gates every round).

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def until_one(theta):
...     q = qm.qubits(2)
...     qm.h(q[1])
...     qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.ry(theta, q[0]))
...     return qm.expval("ZI", q)
>>> loop = qdiff.trace(until_one, 0.7).eqns[-2]
>>> memory_of(loop) is None
True
>>> def entangled(theta):
...     q = qm.qubits(2)
...     qdiff.while_loop(lambda: qm.measure(q[0]) == 0,
...                      lambda: (qm.ry(theta, q[1]), qm.cx(q[1], q[0])))
...     return qm.expval("ZI", q)
>>> memory_of(qdiff.trace(entangled, 0.7).eqns[-2])
'the exit decision reads wire 1 of the state the previous round left'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...compiler.segment_call import segments_inlined
from ...ir.control_flow import sub_programs
from ...ir.core import Eqn, Literal, Program, Var, producers
from ...ir.types import QState
from ..lang.fusion import GATE_KINDS, gate_parts


@dataclass
class _Reads:
    """What the exit decision reads at a point of the round: vars, and wires (True: only
    their Z statistics)."""

    vars: set[Var] = field(default_factory=set)
    wires: dict[int, bool] = field(default_factory=dict)

    def read_wire(self, wire: int, z_only: bool) -> None:
        self.wires[wire] = self.wires.get(wire, True) and z_only

    def union(self, other: _Reads) -> None:
        self.vars |= other.vars
        for wire, z_only in other.wires.items():
            self.read_wire(wire, z_only)


class _NotMemoryless(Exception):
    pass


def memory_of(loop: Eqn) -> str | None:
    """None when the ``while`` equation ``loop`` is memoryless (module docstring), else what
    the next round's exit decision remembers."""
    p = loop.params
    nc, nb = p["num_cond_consts"], p["num_body_consts"]
    test, body = p["cond"], p["body"]
    try:
        reads = _Reads({test.outputs[0]} if isinstance(test.outputs[0], Var) else set())
        _backward(test, reads)
        carried = [test.inputs[nc + j] for j in range(len(body.outputs))]
        at_body_end = _Reads(wires=dict(reads.wires))
        at_body_end.vars = {out for v, out in zip(carried, body.outputs)
                            if v in reads.vars and isinstance(out, Var)}
        _backward(body, at_body_end)
    except _NotMemoryless as refusal:
        return str(refusal)
    carries = set(body.inputs[nb:])
    if at_body_end.vars & carries:
        index = min(body.inputs.index(v) - nb for v in at_body_end.vars & carries)
        return f"the exit decision reads carry {index} of the previous round"
    fixed = _fixed_wires(test, body, nc, nb)
    for wire in sorted(at_body_end.wires):
        if wire not in fixed:
            return f"the exit decision reads wire {wire} of the state the previous round left"
    return None


def _backward(program: Program, reads: _Reads) -> None:
    for eqn in reversed(program.eqns):
        _step(eqn, reads)
    # inputs of the program are what the caller maps back


def _step(eqn: Eqn, reads: _Reads) -> None:
    name = eqn.primitive.name
    outputs_read = any(v in reads.vars for v in eqn.outputs)
    if name in GATE_KINDS:  # a run of gates: each gate, last first
        for spec, wires, lo, hi in reversed(gate_parts(eqn)):
            _gate(spec, wires, eqn.inputs[1 + lo:1 + hi], reads)
    elif name == "measure":
        wire = eqn.params["wire"]
        if eqn.params["reset"] and not outputs_read:
            reads.wires.pop(wire, None)
        elif outputs_read or wire in reads.wires:
            # after a measurement the wire is Z-diagonal: only its Z statistics matter
            reads.wires[wire] = True
    elif name == "reset":
        reads.wires.pop(eqn.params["wire"], None)
    elif name in ("expval", "probs", "statevector", "sample"):
        if eqn.outputs[1] in reads.vars:
            wires = eqn.params.get("wires") or range(_width(eqn))
            for wire in wires:
                reads.read_wire(wire, name in ("probs", "sample"))
    elif name in ("qalloc", "qextend"):
        old = 0 if name == "qalloc" else eqn.inputs[0].type.num_qubits
        for wire in [w for w in reads.wires if w >= old]:
            del reads.wires[wire]
    elif name == "postselect":
        raise _NotMemoryless("the round postselects")
    elif name == "while":
        raise _NotMemoryless("a loop on a measurement inside the round")
    elif name in ("cond", "loop"):
        _control(eqn, reads, outputs_read)
    elif outputs_read:
        reads.vars.update(a for a in eqn.inputs if isinstance(a, Var))


def _width(eqn: Eqn) -> int:
    return next(a.type.num_qubits for a in eqn.inputs if isinstance(a.type, QState))


def _gate(spec: Any, wires: tuple[int, ...], angles: Sequence[Any], reads: _Reads) -> None:
    touched = [w for w in wires if w in reads.wires]
    if not touched:
        return
    z_only = all(reads.wires[w] for w in touched)
    if z_only and _diagonal(spec):
        return
    if z_only and spec.structure == "controlled" and set(touched) <= set(
            wires[:spec.num_controls]):
        return
    if z_only and spec.structure == "permutation":
        for wire in wires:
            reads.read_wire(wire, True)
        return
    for wire in wires:
        reads.read_wire(wire, False)
    reads.vars.update(a for a in angles if isinstance(a, Var))


def _diagonal(spec: Any) -> bool:
    """Diagonal in the Z basis: ``cz`` and ``crz`` are (their base is), ``cx`` is not."""
    return spec.structure == "diagonal" or (spec.structure == "controlled"
                                            and _diagonal(spec.base))


def _control(eqn: Eqn, reads: _Reads, outputs_read: bool) -> None:
    """A branch or a bounded loop inside the round: the union over its paths (a reset on one
    path does not make a wire fresh on the others)."""
    first = len(eqn.inputs) - len(eqn.outputs)
    for _ in range(8):  # loop carries: until what is read settles
        before = (set(reads.vars), dict(reads.wires))
        for _key, _b, sub, operand_of in sub_programs(eqn):
            inner = _Reads(wires=dict(reads.wires))
            skip = len(sub.outputs) - len(eqn.outputs)
            inner.vars = {out for out, var in zip(sub.outputs[skip:], eqn.outputs)
                          if var in reads.vars and isinstance(out, Var)}
            if eqn.primitive.name == "loop":  # the body's carries are the loop's inputs too
                inner.vars |= {out for out, var in zip(sub.outputs, eqn.inputs[first:])
                               if var in reads.vars and isinstance(out, Var)}
            _backward(sub, inner)
            reads.union(inner)
            for var, operand in zip(sub.inputs, operand_of):
                if var in inner.vars and operand is not None:
                    atom = eqn.inputs[operand]
                    if isinstance(atom, Var):
                        reads.vars.add(atom)
        touches = before != (reads.vars, reads.wires) or outputs_read
        if touches:  # the branch index and the trip count decide which paths run
            reads.vars.update(a for a in eqn.inputs[:first if eqn.primitive.name == "loop"
                                                    else 1] if isinstance(a, Var))
        if before == (reads.vars, reads.wires):
            return
    raise _NotMemoryless("could not settle what a loop inside the round reads")


def _fixed_wires(test: Program, body: Program, num_consts: int, num_body_consts: int
                 ) -> set[int]:
    """Wires whose state going on fixes: measured by the test, or measured in the body with
    the bit carried to the test (a do-while), when going on implies one value of the bit
    (``bit == c``). After the measurement the wire is |c⟩, apart from the rest; the same
    one-qubit gates every round (angles from the loop's constants) keep it a known state,
    anything else on it after the measurement is refused."""
    fixed = set()
    test_producers = producers(segments_inlined(test.eqns))
    for eqn in test.eqns:
        if eqn.primitive.name == "measure" and _untouched_after(test, eqn):
            if _decides(test, test_producers, eqn.outputs[1]):
                fixed.add(eqn.params["wire"])
    carried = {out: test.inputs[num_consts + j] for j, out in enumerate(body.outputs)}
    body_producers = producers(segments_inlined(body.eqns))
    for out, test_input in carried.items():
        eqn = body_producers.get(out)
        while eqn is not None and eqn.primitive.name in ("bit_to_int", "convert"):
            eqn = body_producers.get(eqn.inputs[0])
        if (eqn is not None and eqn.primitive.name == "measure"
                and _alone_after(body, eqn, num_body_consts)
                and _untouched_after(test, None, eqn)
                and _decides(test, test_producers, test_input)):
            fixed.add(eqn.params["wire"])
    return fixed


def _alone_after(body: Program, measure: Eqn, num_consts: int) -> bool:
    """Whether everything after ``measure`` that acts on its wire is a one-qubit gate whose
    angles are the same every round (computed from the loop's constants only)."""
    wire = measure.params["wire"]
    made_by = producers(segments_inlined(body.eqns))
    constants = set(body.inputs[:num_consts])

    def steady(atom: Any) -> bool:
        if isinstance(atom, Literal) or atom in constants:
            return True
        eqn = made_by.get(atom)
        return (eqn is not None and eqn.primitive.name not in ("measure", "while", "loop",
                                                                "cond")
                and not any(isinstance(a.type, QState) for a in eqn.inputs)
                and all(steady(a) for a in eqn.inputs))

    for eqn in body.eqns[body.eqns.index(measure) + 1:]:
        if eqn.primitive.name in GATE_KINDS:
            for _, wires, lo, hi in gate_parts(eqn):
                if wire in wires and (len(wires) > 1 or not all(
                        steady(a) for a in eqn.inputs[1 + lo:1 + hi])):
                    return False
        elif wire in eqn.params.get("wires", ()) or eqn.params.get("wire") == wire:
            return False
    return True


def _untouched_after(program: Program, measure: Eqn | None, of: Eqn | None = None) -> bool:
    """Whether nothing after ``measure`` (everything, for None) acts on the wire of ``of``
    (default: of ``measure``)."""
    wire = (of or measure).params["wire"]
    later = program.eqns[program.eqns.index(measure) + 1:] if measure is not None \
        else program.eqns
    return all(wire not in e.params.get("wires", ()) and e.params.get("wire") != wire
               for e in later)


def _decides(test: Program, producers: dict, var: Var) -> bool:
    going_on = [_predicate(test, producers, var, value) for value in (0, 1)]
    return None not in going_on and going_on[0] != going_on[1]


def _predicate(test: Program, producers: dict, bit: Var, value: int) -> bool | None:
    """The test's predicate when ``bit`` is ``value``, if nothing else decides it."""
    dtype = getattr(bit.type, "dtype", "int64")
    env: dict[Var, Any] = {bit: np.asarray(value, "int64" if dtype == "bit" else dtype)}

    def value_of(atom: Any) -> Any:
        if isinstance(atom, Literal):
            return atom.value
        if atom in env:
            return env[atom]
        eqn = producers.get(atom)
        if eqn is None or eqn.primitive.name in ("measure", "while", "loop", "cond") or any(
                isinstance(a.type, QState) for a in eqn.inputs):
            raise KeyError(atom)
        ins = [value_of(a) for a in eqn.inputs]
        outs = eqn.primitive.impl("numpy")(*ins, **eqn.params)
        outs = outs if eqn.primitive.multiple_results else [outs]
        env.update(zip(eqn.outputs, outs))
        return env[atom]

    try:
        return bool(value_of(test.outputs[0]))
    except KeyError:
        return None
