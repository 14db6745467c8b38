"""Repeat-until-success: synthesize a single-qubit unitary through an unbounded retry loop.

Part 1, training. Qubits q (data) and r (ancilla); fixed angles s1..s6 are drawn once from
a seeded generator. Block B: r := |0>; H on r; controlled on r = 1, rz(s1), ry(s2), rz(s3)
on q; X on r; controlled on r = 1, rz(s4), ry(s5), rz(s6) on q; X on r. So B applies
V2 = rz(s6)ry(s5)rz(s4) to q when r then reads 0 and V1 = rz(s3)ry(s2)rz(s1) when it reads
1, each with probability 1/2. The program prepares ry(t5)rx(t4)|0>, runs B, and while
M[r] = 1 applies the correction rz(t1), ry(t2), rz(t3) to q and B again; then it undoes
V2 and the preparation and returns the probability f that q reads 0. The loss is the mean
of (f - 1)^2 over the inputs (t4, t5) in {(0, 0), (pi/2, 0), (pi, 0), (0, pi/2)}. After k
failures q holds V2 (C V1)^k |in>, C = rz(t3)ry(t2)rz(t1), so the loss is 0 exactly when
C = V1^-1 up to a phase: the closed-form optimum is t = (-s3, -s2, -s1). (t1, t2, t3) are
trained by BFGS on exact gradients through the loop (``--method``) and by Adam.

Part 2, four gradients of one loop. A rotation applied only when an ancilla says so: each
round prepares the ancilla with ry(theta), rotates the target by theta/2 controlled on it
and measures the ancilla, E[rounds] = 1/sin^2(theta/2) and <Z> = -sin(theta/2). The loss
(<Z> - z*)^2 + lambda E[rounds] is differentiated through the loop by the adjoint method
(with its certified bound), exact parameter shift, the randomized estimator and, for the
loop written in Qiskit and imported, parameter shift from shots on Aer (when installed;
not with ``--quick``), each next to the closed form.

    python case_studies/repeat_until_success.py            # the full study
    python case_studies/repeat_until_success.py --quick    # fewer samples and steps
"""

from __future__ import annotations

import time

import numpy as np
from common import adam, check, finish, minimize, parse_args, plot_loss, results_table

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


def loss_gradient(theta: float, method: str, **options) -> tuple[float, float, float | None]:
    """(L, dL/dθ, its uncertainty) by ``method``: chain rule over the two expectations. The
    uncertainty is the standard error of an estimate, or the certified bound on what an
    exact sum left out (exact adjoint), or None where neither is computed (exact parameter
    shift has no certificate)."""
    program = qdiff.trace(loss_terms, theta)
    z, rounds = (float(v) for v in qm.run(program, theta).values)
    weight = (2 * (z - TARGET_Z), RUNTIME_WEIGHT)  # dL/d<Z>, dL/dE[rounds]
    result = qm.gradient(program, theta, cotangent=weight, method=method, **options)
    uncertain = result.grad_stderr if result.grad_stderr is not None else result.remainder_bound
    error = None if uncertain is None else float(uncertain)
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


# ---- part 1: synthesizing V1^-1 through the retry loop ------------------------------------

INPUTS = ((0.0, 0.0), (np.pi / 2, 0.0), (np.pi, 0.0), (0.0, np.pi / 2))  # (t4, t5)


def fixed_angles(seed: int) -> np.ndarray:
    """s1..s6, drawn once from a seeded generator."""
    return np.random.default_rng(seed).uniform(-np.pi, np.pi, size=6)


def block(q, s) -> None:
    """B: r := |0>, H on r, V1 on q when r = 1, X on r, V2 on q when r = 1, X on r."""
    qm.reset(q[1])
    qm.h(q[1])
    qm.crz(s[0], q[1], q[0]); qm.cry(s[1], q[1], q[0]); qm.crz(s[2], q[1], q[0])
    qm.x(q[1])
    qm.crz(s[3], q[1], q[0]); qm.cry(s[4], q[1], q[0]); qm.crz(s[5], q[1], q[0])
    qm.x(q[1])


def fidelity(t, s, t4, t5):
    """f: the probability that q reads 0 after the loop and the undoing."""
    q = qm.qubits(2)  # q[0] data, q[1] ancilla
    qm.rx(t4, q[0]); qm.ry(t5, q[0])
    block(q, s)

    def correct_and_retry():
        qm.rz(t[0], q[0]); qm.ry(t[1], q[0]); qm.rz(t[2], q[0])
        block(q, s)

    qdiff.while_loop(lambda: qm.measure(q[1]) == 1, correct_and_retry)
    qm.rz(-s[5], q[0]); qm.ry(-s[4], q[0]); qm.rz(-s[3], q[0])
    qm.ry(-t5, q[0]); qm.rx(-t4, q[0])
    return qm.probs([q[0]])[0]


def synthesis_loss(t, s, method: str = "adjoint", tol: float = 1e-12
                   ) -> tuple[float, np.ndarray]:
    """The mean of (f - 1)^2 over the inputs and its gradient in t (chain rule on the host);
    the loop is summed until the mass still going on is below ``tol``."""
    value, grad = 0.0, np.zeros(3)
    program = qdiff.trace(fidelity, np.zeros(3), s, 0.0, 0.0)  # traced once, run 4 times
    for t4, t5 in INPUTS:
        g = qm.gradient(program, np.asarray(t, dtype=float), s, t4, t5, method=method,
                        tol=tol)
        f = float(g.value)
        value += (f - 1) ** 2 / len(INPUTS)
        grad += 2 * (f - 1) * np.asarray(g.grad) / len(INPUTS)
    return value, grad


def closed_form_optimum(s) -> np.ndarray:
    """C = rz(t3)ry(t2)rz(t1) = V1^-1 = rz(-s1)ry(-s2)rz(-s3): t = (-s3, -s2, -s1)."""
    return np.array([-s[2], -s[1], -s[0]])


def _zyz(a, b, c) -> np.ndarray:
    """rz(c) ry(b) rz(a) as a matrix (rz(a) first)."""
    def rz(x):
        return np.diag([np.exp(-0.5j * x), np.exp(0.5j * x)])

    def ry(x):
        return np.array([[np.cos(x / 2), -np.sin(x / 2)], [np.sin(x / 2), np.cos(x / 2)]])

    return rz(c) @ ry(b) @ rz(a)


def distance_to_inverse(t, s) -> float:
    """1 - |tr(C V1)| / 2: zero exactly when the correction undoes V1 up to a phase."""
    return 1 - abs(np.trace(_zyz(*t) @ _zyz(*s[:3]))) / 2


def gradient_table(quick: bool, seed: int) -> list[dict]:
    """Part 2: dL/dθ of the rotation loop four ways, next to the closed form."""
    theta = 1.2
    samples, tol = (300, 1e-4) if quick else (1000, 1e-8)
    z, _, dz, drounds = closed_form(theta)
    exact = 2 * (z - TARGET_Z) * dz + RUNTIME_WEIGHT * drounds
    rows = []
    for name, method, options in (
            ("adjoint, exact", "adjoint", {}),
            (f"parameter shift, exact (tol {tol:g})", "parameter-shift", {"tol": tol}),
            (f"randomized estimator, {samples} samples", "parameter-shift",
             {"mode": "sample", "shots": samples, "seed": seed + 1})):
        _, grad, error = loss_gradient(theta, method, **options)
        rows.append({"method": name, "dL/dθ": grad,
                     "SE or bound": "-" if error is None else f"{error:.2e}",
                     "|error|": abs(grad - exact), "closed form": exact})
    z_shots = None if quick else qiskit_z_gradient(theta, samples, seed=seed + 2)
    if z_shots is not None:
        grad, error = z_shots
        rows.append({"method": "Qiskit circuit on Aer, d<Z>/dθ", "dL/dθ": grad,
                     "SE or bound": f"{error:.2e}", "|error|": abs(grad - dz),
                     "closed form": dz})
    return rows


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], ("adjoint", "parameter-shift"), argv)
    s = fixed_angles(args.seed)
    rng = np.random.default_rng(args.seed + 1)
    best = closed_form_optimum(s)
    # --quick starts near the optimum and sums the loop to 1e-6 (20 rounds) to stay fast
    t0 = best + rng.uniform(-0.1, 0.1, 3) if args.quick else rng.uniform(-np.pi, np.pi, 3)
    adam_steps, tol = (2, 1e-6) if args.quick else (100, 1e-10)
    passed = True

    def loss(t):
        return synthesis_loss(t, s, args.method, tol)

    start = time.perf_counter()
    best_loss, _ = loss(best)
    closed_seconds = time.perf_counter() - start
    bfgs = minimize(loss, t0, True)
    trained_loss = loss(bfgs.params)[0]
    adam_run = adam(loss, t0, steps=adam_steps, lr=0.05, desc="RUS synthesis (Adam)")
    adam_loss = loss(adam_run.params)[0]
    rows = [
        {"training": f"BFGS ({args.method})", "t": bfgs.params, "loss": trained_loss,
         "1-|tr(C V1)|/2": distance_to_inverse(bfgs.params, s),
         "evaluations": bfgs.evaluations, "seconds": bfgs.seconds},
        {"training": f"Adam ({args.method}, {adam_steps} steps)", "t": adam_run.params,
         "loss": adam_loss, "1-|tr(C V1)|/2": distance_to_inverse(adam_run.params, s),
         "evaluations": adam_run.evaluations, "seconds": adam_run.seconds},
        {"training": "closed form (-s3, -s2, -s1)", "t": best, "loss": best_loss,
         "1-|tr(C V1)|/2": distance_to_inverse(best, s), "evaluations": 1,
         "seconds": closed_seconds},
    ]
    print(results_table(rows, f"repeat-until-success synthesis of V1^-1, s = {np.round(s, 4)}"))
    passed &= check("loss at the closed-form optimum", best_loss, 0.0, 1e-10)
    passed &= check("loss after BFGS", trained_loss, 0.0, 1e-6)
    passed &= check("BFGS correction vs V1^-1 (1-|tr(C V1)|/2)",
                    distance_to_inverse(bfgs.params, s), 0.0, 1e-3)
    plot_loss(bfgs.losses, args.out / "loss.png")

    table = gradient_table(args.quick, args.seed)
    print(results_table(table, "\ndL/dθ through the rotation loop at θ = 1.2"))
    for row in table:
        if row["SE or bound"] != "-":
            tol = max(4 * float(row["SE or bound"]), 1e-9)
        else:
            tol = 1e-3 if args.quick else 1e-6  # what a sum cut at `tol` may miss
        passed &= check(row["method"], row["dL/dθ"], row["closed form"], tol)
    return finish(passed)


if __name__ == "__main__":
    raise SystemExit(main())
