"""Random hybrid programs: classical pre-processing with loops, branches and reductions
feeding gate angles; random circuits with mid-circuit measurements and branches on their
outcomes; random Pauli-sum readouts; a classical loss affine in them.

Independent references: central finite differences of exact values for the adjoint and the
parameter-shift gradients, and the density-matrix runner for the value. The generator is
seeded, so a failure names a program that can be rebuilt (its seed).
"""

from __future__ import annotations

import numpy as np
import pytest
from oracles import central_difference

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm

ROTATIONS = ["rx", "ry", "rz", "crx", "cry", "rzz", "rxx", "phase"]
FIXED = ["h", "cx", "cz", "s", "x"]


def _angle_builders(rng: np.random.Generator):
    """Classical code from the inputs x (3 floats) to angles: loops, branches, reductions."""
    w = rng.normal(size=3)

    def recurrence(x):
        return qdiff.fori_loop(0, int(rng_steps), lambda i, s: qnp.tanh(0.9 * s + x[i % 3]),
                               0.1)

    rng_steps = rng.integers(1, 5)

    def branch(x):
        return qdiff.cond(qnp.sum(x) > 0, lambda v: qnp.sin(v[0]) * 2.0,
                          lambda v: v[1] * v[2], x)

    def reduction(x):
        return qnp.sum(qnp.cos(x * w))

    def product(x):
        return x[0] * x[1] + x[2]

    def data_loop(x):
        # a while loop whose trip count depends on the data
        _, s = qdiff.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, qnp.sin(c[1] + x[2])),
                                (0, x[0]), max_iter=5)
        return s

    return [recurrence, branch, reduction, product, data_loop]


def random_hybrid(seed: int):
    rng = np.random.default_rng(seed)
    num_qubits = int(rng.integers(2, 4))
    builders = _angle_builders(rng)
    steps = []
    for _ in range(int(rng.integers(3, 7))):
        kind = rng.choice(["rotation", "fixed", "measure"], p=[0.6, 0.25, 0.15])
        if kind == "rotation":
            name = str(rng.choice(ROTATIONS))
            arity = 1 if name in ("rx", "ry", "rz", "phase") else 2
            wires = [int(v) for v in rng.choice(num_qubits, arity, replace=False)]
            steps.append(("rotation", name, wires, int(rng.integers(len(builders))),
                          float(rng.normal())))
        elif kind == "fixed":
            name = str(rng.choice(FIXED))
            arity = 2 if name in ("cx", "cz") else 1
            steps.append(("fixed", name, [int(v) for v in rng.choice(num_qubits, arity,
                                                                     replace=False)]))
        else:
            wire, target = (int(v) for v in rng.choice(num_qubits, 2, replace=False))
            steps.append(("measure", wire, target, int(rng.integers(len(builders)))))
    labels = ["".join(rng.choice(list("IXYZ"), num_qubits)) for _ in range(2)]
    coefficients = rng.normal(size=2)
    loss_weights = rng.normal(size=2)

    def program(x):
        angles = [build(x) for build in builders]
        q = qm.qubits(num_qubits)
        for step in steps:
            if step[0] == "rotation":
                _, name, wires, source, scale = step
                getattr(qm, name)(scale * angles[source], *[q[w] for w in wires])
            elif step[0] == "fixed":
                getattr(qm, step[1])(*[q[w] for w in step[2]])
            else:  # a mid-circuit measurement and a branch on its outcome
                _, wire, target, source = step
                bit = qm.measure(q[wire])
                angle, wire_b = angles[source], q[target]
                qdiff.cond(bit, lambda a=angle, t=wire_b: qm.ry(a, t),
                           lambda a=angle, t=wire_b: qm.rx(0.5 * a, t))
        first = qm.expval(f"{coefficients[0]:.6f}*{labels[0]}", q)
        second = qm.expval(f"{coefficients[1]:.6f}*{labels[1]}", q)
        return loss_weights[0] * first + loss_weights[1] * second + 0.25

    return qdiff.program(program, name=f"hybrid_{seed}")


@pytest.mark.parametrize("seed", range(24))
def test_random_hybrid_program_gradients_match_finite_differences(seed):
    f = random_hybrid(seed)
    x = np.random.default_rng(1000 + seed).normal(size=3)
    value = qm.run(f, x, tol=1e-12)
    density = qm.run(f, x, mode="density")
    np.testing.assert_allclose(density.values, value.values, atol=1e-10)
    expected = central_difference(lambda v: qm.run(f, v, tol=1e-12).values, x, h=1e-5)
    adjoint = qdiff.grad(f)(x)
    np.testing.assert_allclose(adjoint, expected, atol=1e-6)
    shifted = qm.gradient(f, x, method="parameter-shift").grad
    np.testing.assert_allclose(shifted, adjoint, atol=1e-9)
