"""Random array programs compiled with `qdiff.jit` (Numba) against the interpreter.

The coarsening pass reorders a program: it gathers elementwise chains, broadcasts and the
reductions and contractions that read them into loop nests, writes a nest when a later
equation needs it, recomputes cheap values instead of storing them, and stores results in
arrays whose values are dead. Each of these has gone wrong once on a particular shape of
program (an array overwritten while a nest written later still read it), so here the
programs are drawn at random from those ingredients: unary and binary elementwise
operations with broadcasting, expansions, reductions over an axis or all of them,
contractions (row products and BLAS-sized matrix products), transposes, cumulative sums,
loops carrying an array, row updates and row gathers, in random order and with random
outputs. Each program and the gradient of a scalar loss of its outputs must equal the
interpreter's to 1e-12 relative. The generator is seeded: a failure names the seed and
prints the program. Each seed compiles two programs (seconds each), so 3 seeds run in the
normal suite and `-m slow` runs 60 more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from tests.backends import assert_agree

SEEDS = [*range(3), *(pytest.param(seed, marks=pytest.mark.slow) for seed in range(3, 63))]
# the program's inputs: names, shapes (one long axis, so matrix products go to BLAS)
INPUTS = {"a": (5, 6), "b": (6,), "c": (5,), "d": (3, 5, 6), "w": (6, 70), "r": (70, 6)}
UNARY: dict[str, Callable[[Any], Any]] = {
    "sin": qnp.sin, "tanh": qnp.tanh, "square": lambda x: x * x, "neg": lambda x: -x,
    "exp_tanh": lambda x: qnp.exp(qnp.tanh(x)), "abs": qnp.abs,
}
BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda x, y: x + y, "mul": lambda x, y: x * y, "sub": lambda x, y: x - y,
    "max": qnp.maximum,
}


def _broadcasts(x: tuple, y: tuple) -> bool:
    try:
        np.broadcast_shapes(x, y)
    except ValueError:
        return False
    return True


def random_steps(seed: int) -> list[tuple]:
    """The program's steps as data: (operation, operand indices, parameters)."""
    rng = np.random.default_rng(seed)
    shapes = list(INPUTS.values())
    steps: list[tuple] = []

    def add(step: tuple, shape: tuple) -> None:
        steps.append(step)
        shapes.append(shape)

    for _ in range(int(rng.integers(4, 11))):
        kind = rng.choice(["unary", "binary", "expand", "reduce", "contract", "transpose",
                           "cumsum", "loop", "update", "gather"],
                          p=[0.16, 0.24, 0.08, 0.1, 0.12, 0.06, 0.06, 0.06, 0.06, 0.06])
        i = int(rng.integers(len(shapes)))
        shape = shapes[i]
        if kind == "unary":
            add(("unary", i, str(rng.choice(list(UNARY)))), shape)
        elif kind == "binary":
            partners = [j for j, s in enumerate(shapes) if _broadcasts(shape, s)
                        and len(np.broadcast_shapes(shape, s)) <= 3]
            j = int(rng.choice(partners))
            add(("binary", (i, j), str(rng.choice(list(BINARY)))),
                np.broadcast_shapes(shape, shapes[j]))
        elif kind == "expand" and len(shape) < 3:
            axis = int(rng.integers(len(shape) + 1))
            add(("expand", i, axis), shape[:axis] + (1,) + shape[axis:])
        elif kind == "reduce" and shape:
            axis = None if rng.random() < 0.3 else int(rng.integers(len(shape)))
            add(("reduce", i, axis),
                () if axis is None else shape[:axis] + shape[axis + 1:])
        elif kind == "contract" and len(shape) >= 1:
            partners = [j for j, s in enumerate(shapes) if len(s) in (1, 2) and s
                        and s[0] == shape[-1]]
            if partners:
                j = int(rng.choice(partners))
                add(("contract", (i, j)), shape[:-1] + shapes[j][1:])
        elif kind == "transpose" and len(shape) >= 2:
            add(("transpose", i), shape[::-1])
        elif kind == "cumsum" and shape:
            add(("cumsum", i, int(rng.integers(len(shape)))), shape)
        elif kind == "loop":
            partners = [j for j, s in enumerate(shapes) if _broadcasts(shape, s)
                        and np.broadcast_shapes(shape, s) == shape]
            add(("loop", (i, int(rng.choice(partners))), int(rng.integers(1, 4))), shape)
        elif kind == "update" and shape:
            partners = [j for j, s in enumerate(shapes) if s == shape[1:]]
            if partners:
                add(("update", (i, int(rng.choice(partners))), int(rng.integers(shape[0]))),
                    shape)
        elif kind == "gather" and shape:
            rows = tuple(int(k) for k in rng.integers(shape[0], size=int(rng.integers(1, 4))))
            add(("gather", i, rows), (len(rows),) + shape[1:])
    if not steps:
        add(("unary", 0, "sin"), shapes[0])
    outputs = sorted({len(shapes) - 1,
                      *map(int, rng.choice(len(shapes), int(rng.integers(1, 4))))})
    steps.append(("outputs", tuple(outputs)))
    return steps


def build(steps: list[tuple]) -> Callable[..., Any]:
    """The program the steps describe, a function of the inputs."""
    def program(*inputs: Any) -> Any:
        values = list(inputs)
        for step in steps:
            kind = step[0]
            if kind == "outputs":
                return tuple(values[k] for k in step[1])
            if kind == "unary":
                values.append(UNARY[step[2]](values[step[1]]))
            elif kind == "binary":
                values.append(BINARY[step[2]](values[step[1][0]], values[step[1][1]]))
            elif kind == "expand":
                values.append(qnp.expand_dims(values[step[1]], step[2]))
            elif kind == "reduce":
                values.append(qnp.sum(values[step[1]], axis=step[2]))
            elif kind == "contract":
                x, y = values[step[1][0]], values[step[1][1]]
                lead = "abc"[:x.ndim - 1]
                free = "r" if y.ndim == 2 else ""
                values.append(qnp.einsum(f"{lead}q,q{free}->{lead}{free}", x, y))
            elif kind == "transpose":
                values.append(qnp.transpose(values[step[1]]))
            elif kind == "cumsum":
                values.append(qnp.cumsum(values[step[1]], axis=step[2]))
            elif kind == "loop":  # a carry updated from another value each step
                x, y = values[step[1][0]], values[step[1][1]]
                values.append(qdiff.fori_loop(0, step[2],
                                              lambda k, c, y=y: qnp.sin(c) * 0.5 + y, x))
            elif kind == "update":  # a row replaced (.at[].set)
                x, y = values[step[1][0]], values[step[1][1]]
                values.append(x.at[step[2]].set(y * 2.0))
            elif kind == "gather":
                values.append(values[step[1]][np.array(step[2])])
        raise AssertionError("no outputs step")

    return program


def _inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(1000 + seed)
    return [rng.normal(size=shape) * 0.5 for shape in INPUTS.values()]


@pytest.mark.parametrize("seed", SEEDS)
def test_random_array_program_compiles_to_the_interpreters_numbers(seed):
    steps = random_steps(seed)
    args = _inputs(seed)
    f = build(steps)
    program = qdiff.trace(f, *args)
    where = f"seed {seed}: {steps}"
    for k, (got, want) in enumerate(zip(CompiledProgram(program)(*args), program(*args))):
        assert_agree(got, want, f"{where}, output {k}")

    def loss(*inputs: Any) -> Any:
        return sum(qnp.sum(qnp.sin(out)) for out in f(*inputs))

    gradient = qdiff.grad(loss, argnums=tuple(range(len(args))))
    compiled = qdiff.jit(gradient)
    for k, (got, want) in enumerate(zip(compiled(*args), gradient(*args))):
        assert_agree(got, want, f"{where}, gradient {k}")
