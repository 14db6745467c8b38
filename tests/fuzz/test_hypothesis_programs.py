"""Hypothesis-generated hybrid programs: classical pre-processing (a bounded `fori_loop`, a
`cond`, elementwise maths) feeding gate angles; gates, mid-circuit measurements with `cond`
branches on their outcomes and bounded `fori_loop`s of gates; two Pauli-sum readouts and a
classical post-processing that mixes them (nonlinearly, where the program measures nothing
mid-circuit; affinely otherwise, as parameter shift requires).

Each program is checked against independent oracles:
- its value against the density-matrix runner (another simulator and another semantics of
  measurement: channels on density matrices instead of enumerated branches);
- its gradient (a vector-Jacobian product with a random cotangent) by every method of
  `qm.gradient` (adjoint, parameter shift, finite differences) against central finite
  differences of exact values;
- forward mode against reverse mode: ``<vjp(c), t> == <c, jvp(t)>`` (the JVP contracts
  the Jacobian's rows with the tangent; the VJP is one adjoint sweep of a recorded run).

200 derandomized examples run in the normal suite; `-m slow` runs 1000 more, randomized.
A failure prints the program's description (Hypothesis shrinks it first).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import central_difference

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm

ROTATIONS = {"rx": 1, "ry": 1, "rz": 1, "phase": 1, "crx": 2, "cry": 2, "rzz": 2, "rxx": 2}
FIXED = {"h": 1, "x": 1, "s": 1, "cx": 2, "cz": 2}
METHODS = ("adjoint", "parameter-shift", "finite-diff")
# the classical pre-processing: angle k is one of these functions of the inputs x (2 floats)
ANGLE_KINDS = ("linear", "sin", "product", "recurrence", "branch")


@dataclass(frozen=True)
class Spec:
    """One random hybrid program, as data (Hypothesis shows it when a check fails)."""

    num_qubits: int
    angles: tuple  # (kind, scale) per angle
    steps: tuple  # ("rotation", name, wires, angle) | ("fixed", name, wires)
    #             | ("measure", wire, target, angle) | ("loop", trips, wire, angle)
    labels: tuple[str, str]
    coefficients: tuple[float, float]


@st.composite
def specs(draw: Any) -> Spec:
    n = draw(st.integers(1, 3))
    scales = st.floats(-1.5, 1.5, allow_nan=False).map(lambda v: round(v, 3))
    angles = tuple((draw(st.sampled_from(ANGLE_KINDS)), draw(scales)) for _ in range(3))
    wire = st.integers(0, n - 1)
    angle = st.integers(0, 2)

    def wires(arity: int) -> tuple[int, ...]:
        return tuple(draw(st.permutations(range(n)))[:arity])

    steps = []
    kinds = ["rotation", "fixed", "loop"] + (["measure"] if n > 1 else [])
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(kinds))
        if kind == "rotation":
            names = [g for g, arity in ROTATIONS.items() if arity <= n]
            name = draw(st.sampled_from(names))
            steps.append(("rotation", name, wires(ROTATIONS[name]), draw(angle)))
        elif kind == "fixed":
            name = draw(st.sampled_from([g for g, arity in FIXED.items() if arity <= n]))
            steps.append(("fixed", name, wires(FIXED[name])))
        elif kind == "loop":
            steps.append(("loop", draw(st.integers(1, 3)), draw(wire), draw(angle)))
        else:
            source, target = wires(2)
            steps.append(("measure", source, target, draw(angle)))
    label = st.text("IXYZ", min_size=n, max_size=n)
    coefficient = st.floats(-2.0, 2.0, allow_nan=False).map(lambda v: round(v, 3))
    return Spec(n, angles, tuple(steps), (draw(label), draw(label)),
                (draw(coefficient), draw(coefficient)))


def _angle(kind: str, scale: float, x: Any) -> Any:
    if kind == "linear":
        return scale * x[0] + 0.3 * x[1]
    if kind == "sin":
        return qnp.sin(scale * x[1]) + x[0]
    if kind == "product":
        return x[0] * x[1] * scale
    if kind == "recurrence":
        return qdiff.fori_loop(0, 3, lambda i, s: qnp.tanh(scale * s + x[i % 2]), 0.2)
    return qdiff.cond(x[0] > x[1], lambda v: qnp.cos(v[0]) * scale, lambda v: v[1] * v[1], x)


def build(spec: Spec) -> Any:
    def program(x):
        values = [_angle(kind, scale, x) for kind, scale in spec.angles]
        q = qm.qubits(spec.num_qubits)
        for step in spec.steps:
            if step[0] == "rotation":
                _, name, wires, source = step
                getattr(qm, name)(values[source], *[q[w] for w in wires])
            elif step[0] == "fixed":
                getattr(qm, step[1])(*[q[w] for w in step[2]])
            elif step[0] == "loop":  # a bounded loop of gates whose angle the index scales
                _, trips, wire, source = step
                qdiff.fori_loop(0, trips, lambda i, a=values[source], w=q[wire]: qm.ry(
                    a * (1.0 + 0.5 * i), w))
            else:  # a mid-circuit measurement and a branch on its outcome
                _, wire, target, source = step
                bit = qm.measure(q[wire])
                qdiff.cond(bit, lambda a=values[source], t=q[target]: qm.rx(a, t),
                           lambda a=values[source], t=q[target]: qm.rz(0.5 * a, t))
        z = "Z" * spec.num_qubits
        first = qm.expval(f"{spec.coefficients[0]}*{spec.labels[0]} + 0.2*{z}", q)
        second = qm.expval(f"{spec.coefficients[1]}*{spec.labels[1]}", q)
        if any(step[0] == "measure" for step in spec.steps):
            # parameter shift needs outputs affine in the branches' expectation values
            # (it refuses others with an error that says so)
            return qnp.stack([first + 0.5 * second, 2.0 * second - first + 0.1])
        return qnp.stack([first + 0.5 * first * second, qnp.sin(second) - first])

    return qdiff.program(program, name="fuzzed")


def check(spec: Spec, x: np.ndarray, cotangent: np.ndarray, tangent: np.ndarray) -> None:
    f = build(spec)
    exact = qm.run(f, x).values
    np.testing.assert_allclose(qm.run(f, x, mode="density").values, exact, atol=1e-10,
                               err_msg="value vs the density-matrix runner")
    reference = central_difference(lambda v: float(cotangent @ qm.run(f, v).values), x, h=1e-5)
    for method in METHODS:
        got = qm.gradient(f, x, cotangent=cotangent, method=method).grad
        np.testing.assert_allclose(got, reference, atol=2e-6 if method == "finite-diff"
                                   else 1e-7, err_msg=f"{method} vs central differences")
    _, pullback = qdiff.vjp(f, x)
    (reverse,) = pullback(cotangent)
    _, forward = qdiff.jvp(f, (x,), (tangent,))  # Jacobian rows, then contracted
    np.testing.assert_allclose(reverse @ tangent, cotangent @ forward, atol=1e-9,
                               err_msg="<vjp(c), t> vs <c, jvp(t)>")


# central differences need the point away from the classical `cond`'s jump at x[0] == x[1]
points = st.tuples(*[st.floats(-2.0, 2.0, allow_nan=False)] * 2).filter(
    lambda p: abs(p[0] - p[1]) > 1e-3).map(np.array)
directions = st.tuples(*[st.floats(-1.0, 1.0, allow_nan=False)] * 2).map(np.array)
COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


@settings(max_examples=200, derandomize=True, **COMMON)
@given(spec=specs(), x=points, cotangent=directions, tangent=directions)
def test_hypothesis_hybrid_programs(spec, x, cotangent, tangent):
    check(spec, x, cotangent, tangent)


@pytest.mark.slow
@settings(max_examples=1000, **COMMON)
@given(spec=specs(), x=points, cotangent=directions, tangent=directions)
def test_hypothesis_hybrid_programs_more_examples(spec, x, cotangent, tangent):
    check(spec, x, cotangent, tangent)
