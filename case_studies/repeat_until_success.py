"""Repeat-until-success: tune a rotation that is applied only when an ancilla says so.

Each round prepares an ancilla with ry(θ) and rotates the target by θ/2 controlled on it,
then measures the ancilla; a 0 means failure (the target is untouched), so the round is
repeated. On success the target holds ry(θ/2)H|0>. The loop has no bound on its rounds:

    E[rounds] = 1/sin²(θ/2),     <Z_target> = -sin(θ/2).

The loss weighs accuracy against run time, ``L(θ) = (<Z> - z*)² + λ·E[rounds]``, and is
differentiated through the unbounded loop in four ways:

- exact, by the adjoint method over the measurement branches, with a certified bound on
  what the sum cut off (the loop is memoryless: the ancilla is reset every round);
- exact, by parameter shift (one shifted program per occurrence of each rotation);
- the unbiased randomized estimator (one occurrence drawn per sample, weight 1/p);
- from shots on a Qiskit sampler, for the circuit imported from Qiskit (its ``while_loop``),
  when qiskit-aer is installed.

Then a few steps of gradient descent find the trade-off.

    python case_studies/repeat_until_success.py            # the table and the descent
    python case_studies/repeat_until_success.py --quick    # fewer samples and steps
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm

TARGET_Z = -0.8   # the <Z> we want on the target
RUNTIME_WEIGHT = 0.02  # λ: the price of one round


def rus_rounds_and_z(theta):
    """The number of rounds and Z of the target, per run (their means are the program's)."""
    q = qm.qubits(2)  # q[0] target, q[1] ancilla
    qm.h(q[0])
    rounds = qdiff.Cell(0)

    def round_():
        qm.reset(q[1])
        qm.ry(theta, q[1])
        qm.cry(theta / 2, q[1], q[0])
        rounds.set(rounds.value + 1)

    round_()
    qdiff.while_loop(lambda: qm.measure(q[1]) == 0, round_)
    return qnp.asarray(rounds.value) * 1.0, qm.expval("ZI", q)


def loss_terms(theta):
    rounds, z = rus_rounds_and_z(theta)
    return z, rounds


def closed_form(theta: float) -> tuple[float, float, float, float]:
    """(<Z>, E[rounds], and their derivatives) in closed form."""
    s, c = np.sin(theta / 2), np.cos(theta / 2)
    return -s, 1 / s ** 2, -c / 2, -c / s ** 3


def loss_gradient(theta: float, method: str, **options) -> tuple[float, float, float]:
    """(L, dL/dθ, its uncertainty) by ``method``: chain rule over the two expectations. The
    uncertainty is the standard error of an estimate, or the certified bound on what an
    exact sum left out (exact adjoint), or 0."""
    program = qdiff.trace(loss_terms, theta)
    z, rounds = (float(v) for v in qm.run(program, theta).values)
    weight = (2 * (z - TARGET_Z), RUNTIME_WEIGHT)  # dL/d<Z>, dL/dE[rounds]
    result = qm.gradient(program, theta, cotangent=weight, method=method, **options)
    uncertain = result.grad_stderr if result.grad_stderr is not None else result.remainder_bound
    error = 0.0 if uncertain is None else float(uncertain)
    return (z - TARGET_Z) ** 2 + RUNTIME_WEIGHT * rounds, float(result.grad), error


def qiskit_circuit(theta):
    """The same loop written in Qiskit, with its ``while_loop``."""
    from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister

    qc = QuantumCircuit(QuantumRegister(2), ClassicalRegister(1))
    qc.h(0)
    qc.ry(theta, 1)
    qc.cry(theta / 2, 1, 0)
    qc.measure(1, 0)
    with qc.while_loop((qc.clbits[0], 0)):
        qc.reset(1)
        qc.ry(theta, 1)
        qc.cry(theta / 2, 1, 0)
        qc.measure(1, 0)
    return qc


def qiskit_z_gradient(theta: float, shots: int, seed: int) -> tuple[float, float] | None:
    """d<Z>/dθ of the imported Qiskit circuit from shots on Aer's sampler, or None."""
    try:
        from qiskit.circuit import Parameter
        from qiskit.quantum_info import SparsePauliOp
        from qiskit_aer.primitives import SamplerV2
    except ImportError:
        return None
    program = qm.from_qiskit(qiskit_circuit(Parameter("θ")), SparsePauliOp("IZ"))
    result = qm.gradient(program, np.array([theta]), method="parameter-shift", mode="qiskit",
                         shots=shots, sampler=SamplerV2(seed=seed))
    return float(result.grad[0]), float(result.grad_stderr[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples and steps")
    ap.add_argument("--theta", type=float, default=1.2)
    ap.add_argument("--no-qiskit", action="store_true", help="skip the Qiskit sampler row")
    args = ap.parse_args(argv)
    samples, steps, tol = (300, 4, 1e-6) if args.quick else (4000, 25, 1e-9)
    theta = args.theta
    z, rounds, dz, drounds = closed_form(theta)
    exact = 2 * (z - TARGET_Z) * dz + RUNTIME_WEIGHT * drounds
    print(f"θ = {theta}: <Z> = {z:.6f}, E[rounds] = {rounds:.6f}, "
          f"dL/dθ = {exact:.6f} (closed form)")
    print(f"{'method':<34}{'dL/dθ':>12}{'SE | bound':>12}{'|error|':>12}")
    rows = [
        ("adjoint, exact", loss_gradient(theta, "adjoint")),
        (f"parameter shift, exact (tol {tol:g})",
         loss_gradient(theta, "parameter-shift", tol=tol)),
        (f"randomized estimator, {samples} samples",
         loss_gradient(theta, "parameter-shift", mode="sample", shots=samples, seed=1)),
    ]
    for name, (_, grad, error) in rows:
        print(f"{name:<34}{grad:>12.6f}{error:>12.2e}{abs(grad - exact):>12.2e}")
    z_shots = None if args.no_qiskit else qiskit_z_gradient(theta, samples, seed=2)
    if z_shots is None and not args.no_qiskit:
        print("Qiskit circuit on Aer: qiskit-aer is not installed")
    elif z_shots is not None:
        grad, error = z_shots
        print(f"{'Qiskit circuit on Aer, d<Z>/dθ':<34}{grad:>12.6f}{error:>12.2e}"
              f"{abs(grad - dz):>12.2e}")
    print("\ngradient descent on L (exact adjoint gradients):")
    for step in range(steps):
        value, grad, _ = loss_gradient(theta, "adjoint")
        if step % max(1, steps // 5) == 0 or step == steps - 1:
            z, rounds, _, _ = closed_form(theta)
            print(f"  step {step:>3}: θ = {theta:.4f}, L = {value:.6f}, <Z> = {z:.4f}, "
                  f"E[rounds] = {rounds:.3f}")
        theta -= 0.5 * grad
    return 0


if __name__ == "__main__":
    sys.exit(main())
