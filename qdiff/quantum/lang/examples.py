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
"""

from __future__ import annotations

from typing import Any

from ...ir.control_flow import fori_loop, while_loop
from ...ir.tracer import Cell
from .frontend import GATES, expval, measure, qubits

ry = GATES["ry"]


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
