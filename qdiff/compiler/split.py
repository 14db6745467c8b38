"""A program cut into compiled segments and equations that run elsewhere.

`qdiff.jit` cuts a program in two situations with one function, `split_program`: a
classical program with equations that have no compiled form (``fallback="interpret"``:
they run in the interpreter between compiled segments), and a quantum program that does
not compile whole (its classical equations compile in segments around the quantum ones,
which run on the simulator). Each equation that compiles joins the earliest segment after
the equations it reads, and a segment whose values only later segments read then moves
into the first of them, so segments are few and long: the pre-processing of gate angles
becomes one segment even when the program interleaves it with gates.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.core import Eqn, Program, Var


def _pieces(program: Program, compiles: Callable[[Eqn], bool]) -> list[list[Eqn] | Eqn]:
    """Runs of equations that compile (lists) and single equations that do not, in an
    order that keeps every equation after those whose values it reads."""
    pieces: list[list[Eqn] | Eqn] = []
    made_in: dict[Var, int] = {}  # value -> index of the piece computing it
    for eqn in program.eqns:
        if not compiles(eqn):
            pieces.append(eqn)
            index = len(pieces) - 1
        else:
            after = max((made_in[a] for a in eqn.inputs if isinstance(a, Var) and a in made_in),
                        default=-1)
            if eqn.primitive.effectful:  # keeps its place after every earlier equation
                after = len(pieces) - 1 - (bool(pieces) and isinstance(pieces[-1], list))
            index = next((k for k in range(max(after, 0), len(pieces))
                          if isinstance(pieces[k], list)), len(pieces))
            if index == len(pieces):
                pieces.append([])
            run = pieces[index]
            assert isinstance(run, list)
            run.append(eqn)
        for v in eqn.outputs:
            made_in[v] = index
    return _sink(pieces, set(program.outputs))


def _sink(pieces: list[list[Eqn] | Eqn], outputs: set) -> list[list[Eqn] | Eqn]:
    """Move each run whose values only later runs read into the first of them (a value
    converted after a measurement joins the segment that uses it), from the last run up."""
    for k in range(len(pieces) - 1, -1, -1):
        run = pieces[k]
        if not isinstance(run, list) or any(e.primitive.effectful for e in run):
            continue
        made = {v for e in run for v in e.outputs}
        if made & outputs:
            continue
        readers = [j for j in range(k + 1, len(pieces))
                   if any(isinstance(a, Var) and a in made
                          for e in (pieces[j] if isinstance(pieces[j], list) else [pieces[j]])
                          for a in e.inputs)]
        if readers and all(isinstance(pieces[j], list) for j in readers):
            target = pieces[readers[0]]
            assert isinstance(target, list)
            target[:0] = run
            pieces[k] = []
    return [p for p in pieces if not (isinstance(p, list) and not p)]


def split_program(program: Program, compiles: Callable[[Eqn], bool]) -> list[Program | Eqn]:
    """``program``'s top-level equations as segments to compile (sub-Programs over the
    values they read, returning the values later equations or the outputs need) and single
    equations that run as they are, in an order that computes ``program``.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.cos(qnp.sin(x)) + qnp.exp(x), 0.5)
    >>> parts = split_program(p, lambda e: e.primitive.name != "cos")
    >>> [part.primitive.name if isinstance(part, Eqn) else len(part.eqns) for part in parts]
    [2, 'cos', 1]
    """
    pieces = _pieces(program, compiles)
    result: list[Program | Eqn] = []
    for k, piece in enumerate(pieces):
        if isinstance(piece, Eqn):
            result.append(piece)
            continue
        defined = {v for e in piece for v in e.outputs}
        reads: dict[Var, None] = {}
        for e in piece:
            for a in e.inputs:
                if isinstance(a, Var) and a not in defined:
                    reads[a] = None
        later = [e for p in pieces[k + 1:] for e in (p if isinstance(p, list) else [p])]
        needed = {a for e in later for a in e.inputs} | set(program.outputs)
        outputs = [v for e in piece for v in e.outputs if v in needed]
        if outputs:
            result.append(Program(tuple(reads), tuple(piece), tuple(outputs),
                                  name=f"{program.name}_part{k}"))
    return result
