"""Quantum walk search on the 4x4 torus: two coin angles tuned to find the marked vertex fast.

Qubits: coins c1, c2 and positions u = 2·u1 + u2, v = 2·v1 + v2 (each in 0..3). One round
resets all six qubits, spreads the walker over the 16 vertices (H on u1, u2, v1, v2), then
runs COIN; SHIFT; rx(t1) on c1, rx(t2) on c2; H on both coins; COIN; SHIFT, and sets a flag
(c1, reset and reused) to 1 exactly when u = v = 3, and measures it. Rounds repeat while the
flag reads 0: a loop on a measurement with no bound on its rounds K.

- COIN: X on both coins, a Z on coins and positions that flips the sign only when
  c1 = c2 = 0 (before the Xs) and u = v = 3, a CZ between the coins, X on both coins again,
  then H on both coins.
- SHIFT: u -> u + 1 mod 4 when c1 = 1, else u -> u - 1 mod 4; likewise v with c2.

The objective is J(t1, t2) = E[min(K, 5)] / 4. It is trained by BFGS on exact gradients
(``--method``: adjoint or parameter shift) and by Adam on the randomized estimator from
sampled trajectories, and checked against a scan of J over a grid, computed from the
per-round success probability p of one round alone (the rounds are independent because
each starts from a reset, so E[min(K, 5)] = (1 - (1 - p)^5) / p and E[K] = 1/p).

    python case_studies/quantum_walk.py            # the full study
    python case_studies/quantum_walk.py --quick    # fewer steps and shots
"""

from __future__ import annotations

import time

import numpy as np
from common import (
    adam,
    check,
    finish,
    minimize,
    parse_args,
    plot_landscape,
    plot_loss,
    results_table,
)

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm

C1, C2, U1, U2, V1, V2 = range(6)
CAP = 5  # J counts at most this many rounds
BACKEND = "numpy"  # six qubits: the NumPy back end starts at once, Numba would compile first


def coin(q) -> None:
    """The search coin: -1 on |c1 c2 = 00, u = v = 3>, a CZ, then H on both coins."""
    qm.x(q[C1]); qm.x(q[C2])
    qm.mcz([q[C1], q[C2], q[U1], q[U2], q[V1]], q[V2])
    qm.cz(q[C1], q[C2])
    qm.x(q[C1]); qm.x(q[C2])
    qm.h(q[C1]); qm.h(q[C2])


def shift(q) -> None:
    """u -> u ± 1 mod 4 as c1 says (v as c2 says): decrement, then add 2 when the coin is 1."""
    for c, high, low in ((C1, U1, U2), (C2, V1, V2)):
        qm.x(q[low]); qm.cx(q[low], q[high])  # u - 1 mod 4
        qm.cx(q[c], q[high])  # + 2 when the coin reads 1


def reset_all(q) -> None:
    """Reset the six qubits.

    The resets sit in a while loop that runs once: the exact runner merges identical branches
    at the end of a loop body only, and all 2^5 outcome branches of the resets end in
    |000000>, so they merge there into one instead of running the round 32 times (a 6x
    speed-up of the exact run; the semantics is the same).
    """
    def body(i):
        for wire in range(6):
            qm.reset(q[wire])
        return i + 1

    qdiff.while_loop(lambda i: i < 1, body, 0)


def walk_round(q, t) -> None:
    """One round of the search; the flag (on c1) is 1 exactly when u = v = 3."""
    reset_all(q)
    for wire in (U1, U2, V1, V2):
        qm.h(q[wire])
    coin(q); shift(q)
    qm.rx(t[0], q[C1]); qm.rx(t[1], q[C2])
    qm.h(q[C1]); qm.h(q[C2])
    coin(q); shift(q)
    qm.reset(q[C1])
    qm.mcx([q[U1], q[U2], q[V1], q[V2]], q[C1])


def objective(t):
    """J(t) = E[min(K, 5)] / 4 over the unbounded repeat-while-the-flag-reads-0 loop.

    The round counter stops at 5 and the loop then stops testing, since no later round
    changes J (the loop is still one on a measurement; E[K] uses ``rounds``)."""
    q = qm.qubits(6)
    k = qdiff.Cell(0)

    def body():
        walk_round(q, t)
        k.set(k.value + 1)

    body()
    qdiff.while_loop(lambda: (qm.measure(q[C1]) == 0) & (k.value < CAP), body)
    return k.value / (CAP - 1.0)


def rounds(t):
    """K, the number of rounds until the flag reads 1 (no cap: E[K] = 1/p)."""
    q = qm.qubits(6)
    k = qdiff.Cell(0)

    def body():
        walk_round(q, t)
        k.set(k.value + 1)

    body()
    qdiff.while_loop(lambda: qm.measure(q[C1]) == 0, body)
    return qnp.asarray(k.value) * 1.0


def success_probability(t):
    """p: the probability that one round's flag reads 1."""
    q = qm.qubits(6)
    walk_round(q, t)
    return qm.probs([q[C1]])[1]


def j_from_p(p):
    """E[min(K, 5)] / 4 for rounds that succeed independently with probability p."""
    p = np.asarray(p, dtype=float)
    # 1 - (1 - p)^5 without cancellation: its limit 5p as p -> 0 gives J -> 5/4
    with np.errstate(divide="ignore"):  # p = 1: log1p(-1) = -inf, and 1 - 0^5 = 1 is right
        missing = -np.expm1(CAP * np.log1p(-p))
    return np.where(p > 0, missing / np.where(p > 0, p, 1.0), CAP) / (CAP - 1)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], ("adjoint", "parameter-shift"), argv)
    rng = np.random.default_rng(args.seed)
    grid_n, exact_steps, sample_steps, shots = (
        (13, 30, 3, 10) if args.quick else (97, 100, 12, 60))
    passed = True
    value = qdiff.trace(objective, np.zeros(2))
    run = {"backend": BACKEND}

    # the reference: J on a grid, from the per-round probability of one round alone
    start = time.perf_counter()
    xs = np.linspace(0, 2 * np.pi, grid_n)
    p_program = qdiff.trace(success_probability, np.zeros(2))
    p_grid = np.array([[float(qm.run(p_program, np.array([a, b]), **run).values)
                        for a in xs] for b in xs])
    j_grid = j_from_p(p_grid)
    best = np.unravel_index(np.argmin(j_grid), j_grid.shape)
    grid_best = (xs[best[1]], xs[best[0]])
    grid_seconds = time.perf_counter() - start

    # exact: BFGS on the exact gradient, from a random start
    t0 = rng.uniform(0.6 * np.pi, 1.4 * np.pi, size=2)
    grad = qdiff.value_and_grad(value, method=args.method, **run)
    exact = minimize(lambda t: tuple(float(v) if np.ndim(v) == 0 else np.asarray(v)
                                     for v in grad(t)), t0, True)
    exact.losses = [float(v) for v in exact.losses]
    j_exact = float(qm.run(value, exact.params, **run).values)

    # sampled: Adam on the randomized estimator from sampled trajectories
    t1 = rng.uniform(0.6 * np.pi, 1.4 * np.pi, size=2)
    calls = [0]

    def sampled(t):
        calls[0] += 1
        g = qm.gradient(value, t, mode="sample", shots=shots, seed=args.seed + calls[0], **run)
        return float(g.value), np.asarray(g.grad)

    sample = adam(sampled, t1, steps=sample_steps, lr=0.25, desc="walk (sampled)")
    j_sample = float(qm.run(value, sample.params, **run).values)

    p_exact = float(qm.run(p_program, exact.params, **run).values)
    rows = [
        {"training": f"BFGS, exact ({args.method})", "t": exact.params, "J": j_exact,
         "p per round": p_exact, "E[K]": 1 / p_exact, "evaluations": exact.evaluations,
         "seconds": exact.seconds},
        {"training": f"Adam, sampled ({shots} shots)", "t": sample.params, "J": j_sample,
         "evaluations": sample.evaluations, "seconds": sample.seconds},
        {"training": f"grid scan {grid_n}x{grid_n}", "t": np.array(grid_best),
         "J": j_grid[best], "p per round": p_grid[best], "E[K]": 1 / p_grid[best],
         "evaluations": grid_n * grid_n, "seconds": grid_seconds},
    ]
    print(results_table(rows, "quantum walk search on the 4x4 torus"))

    # self-checks: the trained J against the grid optimum, the loop against the closed form
    # in p, E[K] of the unbounded loop against 1/p, a sampled gradient against the exact one
    passed &= check("J trained (exact) vs grid optimum", j_exact, j_grid[best], 1e-3)
    passed &= check("J of the loop vs (1-(1-p)^5)/(4p)", j_exact, j_from_p(p_exact), 1e-9)
    expected_rounds = qm.run(rounds, exact.params, tol=1e-9, **run)
    passed &= check("E[K] of the unbounded loop vs 1/p", float(expected_rounds.values),
                    1 / p_exact, 1e-6)
    probe = qm.gradient(value, t1, mode="sample", shots=4 * shots, seed=args.seed, **run)
    exact_probe = qm.gradient(value, t1, **run).grad
    worst = int(np.argmax(np.abs(probe.grad - exact_probe) / probe.grad_stderr))
    passed &= check("sampled dJ/dt vs exact (tol: 4 standard errors)", probe.grad[worst],
                    exact_probe[worst], 4 * float(probe.grad_stderr[worst]))

    plot_loss(exact.losses, args.out / "loss.png")
    plot_landscape(j_grid, xs, xs, trained=[exact.params, sample.params],
                   path=args.out / "landscape.png")
    return finish(passed)


if __name__ == "__main__":
    raise SystemExit(main())
