"""Random hybrid programs: classical pre-processing with loops, branches and reductions
feeding gate angles; random circuits with mid-circuit measurements and branches on their
outcomes; random Pauli-sum readouts; a classical loss affine in them.

Independent references: central finite differences of exact values for the adjoint and the
parameter-shift gradients, the density-matrix runner for the value, and, where PennyLane and
JAX are installed, the same program written for them (JAX's control flow for the classical
part, PennyLane's mid-circuit measurements and `qml.cond` for the circuit, `jax.grad` for
the derivative). The generator is seeded: a failure names the seed that rebuilds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from oracles import central_difference

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm

ROTATIONS = ["rx", "ry", "rz", "crx", "cry", "rzz", "rxx", "phase"]
FIXED = ["h", "cx", "cz", "s", "x"]
SEEDS = range(24)


@dataclass(frozen=True)
class Spec:
    """One random hybrid program, as data both front ends build from."""

    num_qubits: int
    weights: np.ndarray
    recurrence_steps: int
    steps: tuple
    labels: tuple[str, str]
    coefficients: np.ndarray
    loss_weights: np.ndarray


def random_spec(seed: int) -> Spec:
    rng = np.random.default_rng(seed)
    num_qubits = int(rng.integers(2, 4))
    weights, recurrence_steps = rng.normal(size=3), int(rng.integers(1, 5))
    steps = []
    for _ in range(int(rng.integers(3, 7))):
        kind = rng.choice(["rotation", "fixed", "measure"], p=[0.6, 0.25, 0.15])
        if kind == "rotation":
            name = str(rng.choice(ROTATIONS))
            arity = 1 if name in ("rx", "ry", "rz", "phase") else 2
            wires = tuple(int(v) for v in rng.choice(num_qubits, arity, replace=False))
            steps.append(("rotation", name, wires, int(rng.integers(5)), float(rng.normal())))
        elif kind == "fixed":
            name = str(rng.choice(FIXED))
            arity = 2 if name in ("cx", "cz") else 1
            steps.append(("fixed", name, tuple(int(v) for v in rng.choice(num_qubits, arity,
                                                                          replace=False))))
        else:
            wire, target = (int(v) for v in rng.choice(num_qubits, 2, replace=False))
            steps.append(("measure", wire, target, int(rng.integers(5))))
    labels = tuple("".join(rng.choice(list("IXYZ"), num_qubits)) for _ in range(2))
    # the coefficients are written into the observable strings: six decimals, exactly
    return Spec(num_qubits, weights, recurrence_steps, tuple(steps), labels,
                rng.normal(size=2).round(6), rng.normal(size=2))


def angles(spec: Spec, x: Any, ops: Any) -> list[Any]:
    """The classical code from the inputs x (3 floats) to five angles, written once over a
    namespace of array functions and control flow (qdiff's, or JAX's)."""
    np_, w = ops.np, spec.weights
    recurrence = ops.fori_loop(0, spec.recurrence_steps,
                               lambda i, s: np_.tanh(0.9 * s + x[i % 3]), 0.1)
    branch = ops.cond(np_.sum(x) > 0, lambda v: np_.sin(v[0]) * 2.0, lambda v: v[1] * v[2], x)
    reduction = np_.sum(np_.cos(x * w))
    product = x[0] * x[1] + x[2]
    # a while loop whose trip count depends on the data
    _, looped = ops.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, np_.sin(c[1] + x[2])),
                               (0, x[0]), 5)
    return [recurrence, branch, reduction, product, looped]


QDIFF_OPS = SimpleNamespace(np=qnp, fori_loop=qdiff.fori_loop, cond=qdiff.cond,
                            while_loop=lambda c, b, init, bound: qdiff.while_loop(
                                c, b, init, max_iter=bound))


def qdiff_program(spec: Spec, seed: int) -> Any:
    def program(x):
        values = angles(spec, x, QDIFF_OPS)
        q = qm.qubits(spec.num_qubits)
        for step in spec.steps:
            if step[0] == "rotation":
                _, name, wires, source, scale = step
                getattr(qm, name)(scale * values[source], *[q[w] for w in wires])
            elif step[0] == "fixed":
                getattr(qm, step[1])(*[q[w] for w in step[2]])
            else:  # a mid-circuit measurement and a branch on its outcome
                _, wire, target, source = step
                bit = qm.measure(q[wire])
                angle, wire_b = values[source], q[target]
                qdiff.cond(bit, lambda a=angle, t=wire_b: qm.ry(a, t),
                           lambda a=angle, t=wire_b: qm.rx(0.5 * a, t))
        first = qm.expval(f"{spec.coefficients[0]:.6f}*{spec.labels[0]}", q)
        second = qm.expval(f"{spec.coefficients[1]:.6f}*{spec.labels[1]}", q)
        return spec.loss_weights[0] * first + spec.loss_weights[1] * second + 0.25

    return qdiff.program(program, name=f"hybrid_{seed}")


def pennylane_loss(spec: Spec) -> Any:
    """The same program for PennyLane + JAX (None when either is missing)."""
    qml = pytest.importorskip("pennylane")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    jnp = jax.numpy

    def bounded_while(cond, body, init, bound):
        # JAX's while_loop has no reverse mode: run `bound` rounds, frozen once cond fails
        def step(i, carry):
            return jax.lax.cond(cond(carry), body, lambda c: c, carry)
        return jax.lax.fori_loop(0, bound, step, init)

    ops = SimpleNamespace(np=jnp, fori_loop=jax.lax.fori_loop,
                          cond=lambda p, t, f, *a: jax.lax.cond(p, t, f, *a),
                          while_loop=bounded_while)
    gates = {"rx": qml.RX, "ry": qml.RY, "rz": qml.RZ, "crx": qml.CRX, "cry": qml.CRY,
             "rzz": qml.IsingZZ, "rxx": qml.IsingXX, "phase": qml.PhaseShift,
             "h": qml.Hadamard, "cx": qml.CNOT, "cz": qml.CZ, "s": qml.S, "x": qml.PauliX}

    def observable(coefficient, label):
        # qdiff's label: character k acts on wire k
        word = {k: c for k, c in enumerate(label) if c != "I"}
        return coefficient * (qml.pauli.PauliWord(word).operation() if word
                              else qml.Identity(0))

    @qml.qnode(qml.device("default.qubit"), interface="jax", mcm_method="deferred")
    def circuit(values):
        for step in spec.steps:
            if step[0] == "rotation":
                _, name, wires, source, scale = step
                gates[name](scale * values[source], wires=list(wires))
            elif step[0] == "fixed":
                gates[step[1]](wires=list(step[2]))
            else:
                _, wire, target, source = step
                bit = qml.measure(wire)
                qml.cond(bit, lambda a=values[source], t=target: qml.RY(a, wires=t),
                         lambda a=values[source], t=target: qml.RX(0.5 * a, wires=t))()
        return (qml.expval(observable(spec.coefficients[0], spec.labels[0])),
                qml.expval(observable(spec.coefficients[1], spec.labels[1])))

    def loss(x):
        first, second = circuit(jnp.stack(angles(spec, x, ops)))
        return spec.loss_weights[0] * first + spec.loss_weights[1] * second + 0.25

    return jax.jit(loss), jax.jit(jax.grad(loss))


@pytest.mark.parametrize("seed", SEEDS)
def test_random_hybrid_program_gradients_match_finite_differences(seed):
    f = qdiff_program(random_spec(seed), seed)
    x = np.random.default_rng(1000 + seed).normal(size=3)
    value = qm.run(f, x, tol=1e-12)
    density = qm.run(f, x, mode="density")
    np.testing.assert_allclose(density.values, value.values, atol=1e-10)
    expected = central_difference(lambda v: qm.run(f, v, tol=1e-12).values, x, h=1e-5)
    adjoint = qdiff.grad(f)(x)
    np.testing.assert_allclose(adjoint, expected, atol=1e-6)
    shifted = qm.gradient(f, x, method="parameter-shift").grad
    np.testing.assert_allclose(shifted, adjoint, atol=1e-9)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_hybrid_program_matches_pennylane_with_jax(seed):
    spec = random_spec(seed)
    loss, loss_grad = pennylane_loss(spec)
    f = qdiff_program(spec, seed)
    x = np.random.default_rng(1000 + seed).normal(size=3)
    np.testing.assert_allclose(f(x), float(loss(x)), atol=1e-10)
    np.testing.assert_allclose(qdiff.grad(f)(x), np.asarray(loss_grad(x)), atol=1e-9)


MEASUREMENT_FREE = [s for s in SEEDS if not any(st[0] == "measure" for st in random_spec(s).steps)]
QUICK_COMPILED = MEASUREMENT_FREE[:2]


def _check_compiled(seed: int) -> None:
    f = qdiff_program(random_spec(seed), seed)
    x = np.random.default_rng(1000 + seed).normal(size=3)
    np.testing.assert_allclose(qdiff.jit(f)(x), qm.run(f, x).values, atol=1e-12)
    np.testing.assert_allclose(qdiff.grad(f, jit=True)(x), qm.gradient(f, x).grad, atol=1e-12)


@pytest.mark.parametrize("seed", QUICK_COMPILED)
def test_random_measurement_free_program_compiles_to_the_simulator_numbers(seed):
    """The classical code (a recurrence, a branch, a data-dependent while loop, reductions)
    and the circuit in one compiled function; its gradient through the compiled adjoint
    sweep and the classical reverse mode of that code."""
    _check_compiled(seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [s for s in MEASUREMENT_FREE if s not in QUICK_COMPILED])
def test_every_random_measurement_free_program_compiles(seed):
    _check_compiled(seed)


@pytest.mark.parametrize("seed", [s for s in SEEDS if s not in MEASUREMENT_FREE][:3])
def test_random_programs_with_measurements_compile_around_the_simulator(seed):
    """Their classical code compiled in segments, the branching part on the simulator:
    the simulator's numbers (the uncompiled run, `qm.run`/`qm.gradient`) to 1e-12."""
    f = qdiff_program(random_spec(seed), seed)
    x = np.random.default_rng(1000 + seed).normal(size=3)
    compiled = qdiff.jit(f)
    np.testing.assert_allclose(compiled(x), qm.run(f, x).values, rtol=1e-12, atol=1e-12)
    assert any(line.startswith("simulator:") for line in compiled.plan)
    np.testing.assert_allclose(qdiff.grad(f, jit=True)(x), qm.gradient(f, x).grad,
                               rtol=1e-12, atol=1e-12)
