"""Swap gates as relabellings of wires instead of passes over the state.

A ``swap(a, b)`` exchanges two wires' contents; applying it costs a pass over the state
(three, when built from ``cx`` gates). Nothing after it needs the contents moved, only the
wires renamed: the pass keeps a map ``physical[w]`` from each wire of the program to the
wire of the state that holds it, drops the swap and updates the map,

    swap(a, b) ; op(…, wires W)   ≡   op(…, wires physical[W])   with physical[a] ↔ physical[b],

and rewrites the wires of every later gate, measurement, reset, postselection and readout
through the map (an ``expval``'s labels stay with their wires, and ``probs``/``sample``
list their wires in the program's order, so their values are unchanged). Where the
layout itself is read (``statevector``, a loop or branch that carries the state, any other
operation on it, or a sub-program's returned state), the swaps still owed are applied
there, at most ``n - 1`` of them, and the map is the identity again. Bodies of loops and
branches are relabelled on their own, each returning its state in the program's layout.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def swapped():
...     q = qm.qubits(3); qm.x(q[0]); qm.swap(q[0], q[2]); qm.h(q[2])
...     return qm.probs(q)
>>> program = qdiff.trace(swapped)
>>> [(e.primitive.name, e.params.get("wires")) for e in relabel_swaps(program).eqns]
[('qalloc', None), ('gate', (0,)), ('gate', (0,)), ('probs', (2, 1, 0))]
>>> np.allclose(relabel_swaps(program)(), program())
True
"""

from __future__ import annotations

from typing import Any

from ...ir.core import Atom, Eqn, Program, Var
from ...ir.types import QState
from .primitives import gate_p

# operations on the state whose wires the pass rewrites (anything else on a state reads
# its layout: the swaps owed are applied first)
_WIRED = frozenset(("gate", "measure", "reset", "postselect", "expval", "probs", "sample"))


def _is_swap(eqn: Eqn) -> bool:
    return (eqn.primitive is gate_p and eqn.params["name"] == "swap"
            and not eqn.params.get("static") and len(eqn.inputs) == 1)


class _Layout:
    """The wire map of one state as a program's equations are rewritten."""

    def __init__(self) -> None:
        self.physical: list[int] = []
        self.eqns: list[Eqn] = []
        self.renamed: dict[Var, Atom] = {}

    def read(self, atom: Atom) -> Atom:
        return self.renamed.get(atom, atom) if isinstance(atom, Var) else atom

    def rewired(self, eqn: Eqn) -> Eqn:
        params = dict(eqn.params)
        if "wires" in params:
            params["wires"] = tuple(self.physical[w] for w in params["wires"])
        if "wire" in params:
            params["wire"] = self.physical[params["wire"]]
        return Eqn(eqn.primitive, eqn.inputs, eqn.outputs, params)

    def settle(self, state: Atom) -> Atom:
        """Apply the swaps still owed to ``state`` (the map becomes the identity); the
        state that results."""
        for wire in range(len(self.physical)):
            here = self.physical[wire]
            if here == wire:
                continue
            other = self.physical.index(wire)  # the program's wire now held at ``wire``
            out = Var(state.type)
            self.eqns.append(Eqn(gate_p, (state,), (out,), {"name": "swap",
                                                          "wires": (here, wire)}))
            self.physical[other], self.physical[wire] = here, wire
            state = out
        return state

    def add(self, eqn: Eqn) -> None:
        eqn = Eqn(eqn.primitive, tuple(map(self.read, eqn.inputs)), eqn.outputs,
                  eqn.params)
        name = eqn.primitive.name
        states = [k for k, a in enumerate(eqn.inputs) if isinstance(a.type, QState)]
        if states and not self.physical:  # a body's state comes in the program's layout
            self.physical = list(range(eqn.inputs[states[0]].type.num_qubits))
        if name == "qalloc":
            self.physical = list(range(eqn.params["num_qubits"]))
        elif name == "qextend":
            n = len(self.physical)
            self.physical += range(n, n + eqn.params["num_qubits"])
        elif _is_swap(eqn):
            a, b = eqn.params["wires"]
            self.physical[a], self.physical[b] = self.physical[b], self.physical[a]
            self.renamed[eqn.outputs[0]] = eqn.inputs[0]
            return
        elif name in _WIRED and states == [0]:
            eqn = self.rewired(eqn)
        elif states:
            inputs = list(eqn.inputs)
            for k in states:
                inputs[k] = self.settle(inputs[k])
            eqn = Eqn(eqn.primitive, tuple(inputs), eqn.outputs, eqn.params)
        self.eqns.append(eqn.map_subprograms(relabel_swaps))


def relabel_swaps(program: Program) -> Program:
    """``program`` with its swap gates turned into relabellings of the wires that follow
    (see the module docstring); the same values, the same gradients.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def ghz():
    ...     q = qm.qubits(2); qm.h(q[0]); qm.cx(q[0], q[1]); qm.swap(q[0], q[1])
    ...     return qm.expval("ZI", q)
    >>> [e.params.get("wires") for e in relabel_swaps(qdiff.trace(ghz)).eqns][1:]
    [(0,), (0, 1), (1, 0)]
    """
    if not any(_is_swap(e) for e in program.all_eqns()):
        return program
    layout = _Layout()
    for eqn in program.eqns:
        layout.add(eqn)
    outputs: list[Any] = []
    for out in program.outputs:
        out = layout.read(out)
        outputs.append(layout.settle(out) if isinstance(out, Var)
                       and isinstance(out.type, QState) else out)
    return Program(program.inputs, tuple(layout.eqns), tuple(outputs), name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)
