"""The exits of a while loop at the top of a program, run to the program's end while the
loop still runs: memory bounded in the rounds.

In exact mode every round of a loop on a measurement makes exits of its own (a round
counter makes each distinct), and each holds a state until the loop ends: on the 6-qubit
walk about 3 kB a round. For a loop at the top of the program (`foldable_loops`: what
follows reads no state but the loop's), its exits can instead run to the program's end
as they pile up (`run_exits`); only their final branches' mass and weighted outputs stay
(`FoldedExits`). The exact runner (`runner.BranchRunner.end_round`) does this once a
loop's exits outnumber `FOLD_EXITS` after merging, and the adjoint recorder does it when a
checkpointed segment closes (`qdiff.quantum.gradients.loop_segments`).

>>> import qdiff
>>> from qdiff.quantum.lang.examples import repeat_until_one
>>> program = qdiff.trace(repeat_until_one, 0.7)
>>> [program.eqns[i].primitive.name for i, _ in foldable_loops(program).values()]
['while']
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir.control_flow import while_p
from ...ir.core import Program, Var
from ...ir.types import QState

FOLD_EXITS = 256
"""How many distinct exits of a loop the exact runner holds before running them to the
program's end (a few hundred kilobytes of states on the walk)."""


@dataclass
class LoopExits:
    """Where the exits of a while loop at the top of the recorded program go on: the
    program, the loop's index in it, and the values of the branch that entered the loop
    which the rest of the program reads."""

    program: Program
    index: int
    env: dict[Var, Any]


@dataclass
class FoldedExits:
    """What the exits run to the program's end during the forward pass (`run_exits`)
    contributed: their final branches' mass and weighted outputs Σ w·g, nothing else."""

    mass: float = 0.0
    sums: list[np.ndarray] = field(default_factory=list)
    branches: int = 0

    def add(self, finals: list[tuple[float, list[Any]]]) -> None:
        """Add final (weight, outputs) branches."""
        for w, outs in finals:
            terms = [w * np.asarray(o, np.float64) for o in outs]
            self.sums = [a + b for a, b in zip(self.sums, terms)] if self.sums else terms
            self.mass += w
            self.branches += 1


def foldable_loops(program: Program) -> dict[int, tuple[int, list[Var]]]:
    """The while equations at the top of ``program`` whose exits can run to its end on their
    own, by id: their index and the vars defined before them that the rest of the program
    reads (none may be a state: those are the loop's to consume).

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import rotation   # no loop
    >>> foldable_loops(qdiff.trace(rotation, 0.1))
    {}
    """
    found = {}
    for index, eqn in enumerate(program.eqns):
        if eqn.primitive is not while_p:
            continue
        defined = {v for later in program.eqns[index:] for v in later.outputs}
        atoms = [a for later in program.eqns[index + 1:] for a in later.inputs]
        reads = [a for a in dict.fromkeys([*atoms, *program.outputs])
                 if isinstance(a, Var) and a not in defined]
        if not any(isinstance(v.type, QState) for v in reads):
            found[id(eqn)] = (index, reads)
    return found


def run_exits(runner: Any, exits: LoopExits, items: list[tuple[float, list[Any]]]
              ) -> list[tuple[float, list[Any]]]:
    """Run a loop's exits ``items`` (weight, the loop's outputs) to the program's end, the
    identical ones merged first (as the loop merges the exits it returns): the final
    (weight, program outputs) branches they make."""
    outputs = exits.program.eqns[exits.index].outputs
    branches = [(w, {**exits.env, **dict(zip(outputs, values))})
                for w, values in runner.merge(items)]
    return runner.run_equations(exits.program, exits.index + 1, branches)


__all__ = ["FOLD_EXITS", "FoldedExits", "LoopExits", "foldable_loops", "run_exits"]
