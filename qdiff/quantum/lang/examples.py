"""Small quantum programs that the documentation's examples share, with their closed forms.

Each is a plain Python function in the front end's language; trace it (`qdiff.trace`), run
it (`qdiff.quantum.run`) or differentiate it like any other.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> bool(np.isclose(qdiff.trace(rotation, 0.3)(0.3), np.cos(0.3)))
True
>>> bool(np.isclose(qm.run(layers, 0.2).values, np.cos(0.6)))
True
>>> bool(np.isclose(qm.run(repeat_until_one, 0.7, tol=1e-12).values, 1 / np.sin(0.35) ** 2))
True
>>> round(float(qm.run(cycle_walk, 1.0).values), 6), round(float(qm.run(
...     measured_rounds, np.array([0.4, 1.1])).values), 6)
(4.938392, 0.66966)
"""

from __future__ import annotations

from typing import Any

from ...ir.control_flow import fori_loop, while_loop
from ...ir.tracer import Cell
from .frontend import GATES, expval, measure, qubits

cx, h, rx, ry, t, x = (GATES[name] for name in ("cx", "h", "rx", "ry", "t", "x"))


def rotation(theta: Any) -> Any:
    """⟨Z⟩ after ``ry(θ)`` on |0⟩: ``cos θ``."""
    q = qubits(1)
    ry(theta, q[0])
    return expval("Z", q)


def layers(theta: Any) -> Any:
    """⟨Z⟩ after three ``ry(θ)`` in a counted loop: ``cos 3θ``."""
    q = qubits(1)
    fori_loop(0, 3, lambda i: ry(theta, q[0]))
    return expval("Z", q)


def repeat_until_one(theta: Any) -> Any:
    """Rotate by ``ry(θ)`` until a measurement reads 1; the number of rounds, whose mean is
    ``1 / sin²(θ/2)`` (a loop that ends on a measurement, with no bound on its rounds)."""
    q = qubits(1)
    rounds = Cell(0)

    def body() -> None:
        ry(theta, q[0])
        rounds.set(rounds.value + 1)

    while_loop(lambda: measure(q[0]) == 0, body)
    return rounds.value * 1.0


def cycle_walk(theta: Any) -> Any:
    """A coined quantum walk on a cycle of 4 sites, stepped while the walker is found on
    its starting half: the number of steps (a loop on a measurement with no bound).

    Wires: the coin, the position's two bits in Gray code (sites 0, 1, 2, 3 are 00, 01,
    11, 10 read as ``high low``: a step changes one bit), and a scratch bit. A step applies
    the coin ``ry(θ)·T·H``, then moves the walker +1 when the coin is 1 and -1 when it is
    0, with gates on at most two wires: the scratch takes ``coin ⊕ low ⊕ high``, which says
    whether the move flips ``low`` (1) or ``high`` (0), and is set back to 0 after it. The
    loop measures ``high``: the walker starts on site 0 and stops once it reaches site 2 or
    3. The T gate's phase keeps the coin from ever trapping the walker on sites 0 and 1."""
    q = qubits(4)
    coin, low, high, scratch = q[0], q[1], q[2], q[3]
    steps = Cell(0)

    def step() -> None:
        h(coin); t(coin); ry(theta, coin)
        cx(coin, scratch); cx(low, scratch); cx(high, scratch)
        cx(scratch, low); x(scratch); cx(scratch, high)
        cx(coin, scratch); cx(low, scratch); cx(high, scratch)  # 1 ⊕ (one bit moved) = 0
        steps.set(steps.value + 1)

    while_loop(lambda: measure(high) == 0, step)
    return steps.value * 1.0


def measured_rounds(w: Any) -> Any:
    """Three rounds of a counted loop, each entangling two qubits with angles from ``w`` and
    measuring the second with reset; the value adds ``w[0]`` for every 1 read to ⟨Z⟩ of the
    first qubit at the end (a ``fori_loop`` whose body measures)."""
    q = qubits(2)

    def round_(i: Any, total: Any) -> Any:
        ry(w[0] * (i + 1), q[0]); cx(q[0], q[1]); rx(w[1], q[1])
        return total + measure(q[1], reset=True) * w[0]

    total = fori_loop(0, 3, round_, 0.0)
    return expval("ZI", q) + total
