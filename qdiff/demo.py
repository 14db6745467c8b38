"""The tour behind ``qdiff demo``: trace a program with loops, print it, run it, save it."""

from __future__ import annotations

import numpy as np

from . import numpy as qnp
from .api import program
from .classical.soacs import hist, map, reduce, scan
from .ir.control_flow import cond, fori_loop, while_loop
from .transforms import grad


@program
def damped_walk(x, bins):
    """A small program touching every kind of loop and combinator."""
    # a counted loop: a nonlinear recurrence over the inputs
    state = fori_loop(0, 8, lambda i, s: qnp.tanh(1.5 * s + x[i % x.shape[0]]), 0.0)
    # a while loop whose trip count depends on the data: halve until small
    size = while_loop(lambda v: v > 1e-2, lambda v: 0.5 * v, qnp.abs(state) + 1.0)
    # a branch on a traced value
    signed = cond(state > 0, lambda v: v, lambda v: -v, x)
    energy = reduce("add", 0.0, map(lambda v: v * v * size, signed))
    running = scan("mul", 1.0, x)
    counts = hist(qnp.zeros(3), "add", 0.0, bins, x)
    return energy + running[-1], counts


@program
def smooth(x, y):
    """An elementwise chain whose gradient program is short enough to read."""
    return qnp.sum(qnp.exp(qnp.sin(x) * y) + x)


def run_demo() -> str:
    """Build, print and run the demo program; returns the text shown.

    >>> "loop" in run_demo()
    True
    """
    rng = np.random.default_rng(0)
    x = rng.normal(size=5)
    bins = np.array([0, 2, 1, 2, 0])
    traced = damped_walk.trace(x, bins)
    lines = ["qdiff demo: a Python function traced into the loop-aware IR", "",
             str(traced), ""]
    value, counts = damped_walk(x, bins)
    lines.append(f"run on x = {np.array2string(x, precision=3)}")
    lines.append(f"  value  = {float(value):.6f}")
    lines.append(f"  counts = {np.array2string(counts, precision=3)}")
    restored = type(traced).from_json(traced.to_json())
    lines.append(f"JSON round trip equal: {restored == traced}; "
                 f"same value: {float(restored(x, bins)[0]) == float(value)}")
    lines += ["", *_gradient_lines(x, bins)]
    return "\n".join(lines)


def _gradient_lines(x: np.ndarray, bins: np.ndarray) -> list[str]:
    """Reverse mode through every loop of the demo program, and a readable gradient program."""
    walk_gradient = grad(lambda v: damped_walk(v, bins)[0])(x)
    gradient_program = grad(smooth, argnums=(0, 1)).trace(np.zeros(3), 1.0)
    gx, gy = gradient_program(x[:3], 2.0)
    return ["gradient of the demo value with respect to x (tapeless reverse mode):",
            f"  {np.array2string(walk_gradient, precision=4)}", "",
            "the gradient program of sum(exp(sin(x) * y) + x):", "",
            str(gradient_program), "",
            f"at x = {np.array2string(x[:3], precision=3)}, y = 2: "
            f"dx = {np.array2string(gx, precision=4)}, dy = {float(gy):.4f}"]
