"""Amplitude amplification with a measured exit: tune how hard each round checks for success.

Qubits q and r; a = 2 asin(1/N). q := |0>, r := |0>, ry(a) on q. While M[r] = 0 and the
round counter c is at most 4N: a Grover iterate on q (z, ry(-a), z, ry(a)), then ry(t) on r
controlled by q, and c := c + 1. A weak check (small t) rarely stops the loop; a strong one
collapses q back towards the start when it fails (the Zeno effect), so the best t lies in
between. The objective is E[min(K, 4N + 1)] / (4N), the counter's expectation, with K the
number of rounds. t is trained by BFGS on exact gradients through the loop (``--method``)
for N = 10, 15, 20, 25, 30 and checked against a dense scan of t computed by an
independent two-amplitude recursion in NumPy.

    python case_studies/amplitude_amplification.py            # N = 10, 15, 20, 25, 30
    python case_studies/amplitude_amplification.py --quick    # N = 10 only
"""

from __future__ import annotations

import numpy as np
from common import check, finish, minimize, parse_args, plot_landscape, plot_loss, results_table

import qdiff
from qdiff import quantum as qm


def amplify(t, n: int):
    """E[min(K, 4n + 1)] / (4n) as the expectation of the round counter (n is static)."""
    a = 2 * np.arcsin(1 / n)
    q, r = qm.qubits(2)
    qm.ry(a, q)
    c = qdiff.Cell(0)

    def round_():
        qm.z(q); qm.ry(-a, q); qm.z(q); qm.ry(a, q)
        qm.cry(t, q, r)
        c.set(c.value + 1)

    qdiff.while_loop(lambda: (qm.measure(r) == 0) & (c.value <= 4 * n), round_)
    return c.value / (4.0 * n)


def scan(ts: np.ndarray, n: int) -> np.ndarray:
    """The objective for every t, by the recursion on q's two amplitudes: after a failed
    check the |1> amplitude is scaled by cos(t/2), and E[c] = sum_k P(no exit in k rounds)."""
    a = 2 * np.arcsin(1 / n)
    psi = np.zeros((2, len(ts)))
    psi[0], psi[1] = np.cos(a / 2), np.sin(a / 2)
    # the Grover iterate ry(a) z ry(-a) z as a real 2x2 matrix
    c, s = np.cos(a), np.sin(a)
    grover = np.array([[c, s], [s, -c]]) @ np.diag([1.0, -1.0])
    total = np.zeros(len(ts))
    for _ in range(4 * n + 1):
        total += (psi ** 2).sum(axis=0)
        psi = grover @ psi
        psi[1] *= np.cos(ts / 2)
    return total / (4 * n)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], ("adjoint", "parameter-shift"), argv)
    sizes = (10,) if args.quick else (10, 15, 20, 25, 30)
    rng = np.random.default_rng(args.seed)
    ts = np.linspace(0.0, np.pi, 4001)
    passed = True
    rows, losses = [], {}
    for n in sizes:
        program = qdiff.trace(amplify, 1.0, n)  # n is baked in at trace time
        value_and_grad = qdiff.value_and_grad(program, method=args.method)

        def objective(x, value_and_grad=value_and_grad, n=n):
            value, grad = value_and_grad(float(np.asarray(x).reshape(-1)[0]), n)
            return float(value), np.atleast_1d(np.asarray(grad, dtype=float))

        trained = minimize(objective, rng.uniform(0.5, 2.5, size=1), True)
        t_best = float(trained.params[0])
        j_trained = objective(trained.params)[0]
        values = scan(ts, n)
        k = int(np.argmin(values))
        losses[n] = trained.losses
        rows.append({"N": n, "t trained": t_best, "J trained": j_trained,
                     "t scan": ts[k], "J scan": values[k],
                     "E[min(K, 4N+1)]": j_trained * 4 * n,
                     "evaluations": trained.evaluations, "seconds": trained.seconds})
        passed &= check(f"N = {n}: J trained vs dense scan", j_trained, values[k], 1e-6)
        passed &= check(f"N = {n}: J of the program vs the recursion at t trained",
                        j_trained, scan(np.array([t_best]), n)[0], 1e-9)
        if n == sizes[0]:
            plot_landscape(values, ts, trained=[t_best], path=args.out / "landscape.png")
    print(results_table(rows, "amplitude amplification: the best check strength t"))
    plot_loss(losses[sizes[0]], args.out / "loss.png")
    return finish(passed)


if __name__ == "__main__":
    raise SystemExit(main())
