"""Quantum walks: search on the 4x4 torus, and the hitting time on a cycle with an absorbing site.

The first part tunes two coin angles of a search on the 4x4 torus to find the marked vertex fast.

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

The second part is a walk where the loop is the whole story: a coined walk on a cycle of
N = 2^n sites (position register of n qubits, one coin qubit, one flag qubit) with an
absorbing marked site N - 1; the walker starts on the opposite site N/2 - 1 with the coin in
|0>. Each step: the coin C(θ) = ry(θ)·T·H, the shift x -> x + 1 mod N when the coin is 1 and
x -> x - 1 mod N when it is 0, then the flag is set when x = N - 1 and measured; a flag
reading 1 absorbs the walker and ends the loop (unbounded: no cap on the steps). The
objective is the expected hitting time E[T], the loop counter's expectation, trained by
BFGS on its exact adjoint gradient from a seeded start and checked against a dense scan of
E[T] from an independent NumPy simulation of the same walk (explicit absorption, no qdiff).

Why this coin: the absorbing site cuts the cycle into a path, and on a path every phase
of the coin can be gauged away, so E[T] depends on θ only through the coin's transmission
|<0|C|0>|² (a test checks this). A coin ry(θ) alone, ry(θ) followed by
a fixed phase, or two such angles alternating on even and odd steps all contain the
identity coin, whose ballistic walk reaches the marked site in N/2 steps, the fewest
possible: their optimum is the trivial θ = 0. Here |<0|C|0>|² = (1 - sin(θ)/√2)/2 never
reaches 1, no θ is ballistic, and the optimum is interior, at θ = 3π/2 (E[T] = 6.0589 for
N = 8, against N/2 = 4 for the ballistic walk). The transmission never vanishes either
(it is at least 0.146), so no mass is trapped at any θ and E[T] is finite everywhere (the
scan over the whole period finds it so): no cap is needed. ``--method`` chooses the
torus part's gradients; the cycle walk is always differentiated by the adjoint method.

    python case_studies/quantum_walk.py            # the full study: torus, cycles N = 8, 16
    python case_studies/quantum_walk.py --quick    # fewer steps and shots, the cycle N = 8
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


def _walk_until_flagged(t, cap=None):
    """The rounds K run while the flag reads 0 (and, with ``cap``, while K < cap)."""
    q = qm.qubits(6)
    k = qdiff.Cell(0)

    def body():
        walk_round(q, t)
        k.set(k.value + 1)

    body()
    if cap is None:
        qdiff.while_loop(lambda: qm.measure(q[C1]) == 0, body)
    else:
        qdiff.while_loop(lambda: (qm.measure(q[C1]) == 0) & (k.value < cap), body)
    return k.value


def objective(t):
    """J(t) = E[min(K, 5)] / 4 over the unbounded repeat-while-the-flag-reads-0 loop.

    The round counter stops at 5 and the loop then stops testing, since no later round
    changes J (the loop is still one on a measurement; E[K] uses ``rounds``)."""
    return _walk_until_flagged(t, CAP) / (CAP - 1.0)


def rounds(t):
    """K, the number of rounds until the flag reads 1 (no cap: E[K] = 1/p)."""
    return qnp.asarray(_walk_until_flagged(t)) * 1.0


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


def torus_study(args) -> bool:
    """The torus search: train (t1, t2) exactly and from samples, check against the grid."""
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
    return passed


def cycle_walk(theta, n_bits: int):
    """T, the number of steps until the walker on the cycle of 2^n_bits sites is absorbed.

    Wires: the coin, the flag, then the position x, least significant bit first. The loop
    on the flag's measurement has no bound: its expectation is the hitting time E[T]."""
    q = qm.qubits(n_bits + 2)
    coin_wire, flag, position = q[0], q[1], [q[2 + i] for i in range(n_bits)]
    start = 2 ** (n_bits - 1) - 1  # opposite the marked site 2^n_bits - 1
    for i in range(n_bits):
        if start >> i & 1:
            qm.x(position[i])
    k = qdiff.Cell(0)

    def step():
        qm.h(coin_wire); qm.t(coin_wire); qm.ry(theta, coin_wire)
        cycle_shift(position, coin_wire)
        qm.mcx(position, flag)  # the marked site is all ones: one gate finds it
        k.set(k.value + 1)

    qdiff.while_loop(lambda: qm.measure(flag) == 0, step)
    return k.value * 1.0


def cycle_shift(position, coin_wire) -> None:
    """x -> x + 1 mod N when the coin is 1, x - 1 mod N when it is 0: x - 1, then + 2 on the
    coin. An increment flips bit i when all lower bits are 1, from the top bit down; the
    decrement is the same gates in the opposite order (its inverse)."""
    def increment(bits, controls, order):
        for i in order(range(len(bits))):
            wires = controls + bits[:i]
            if wires:
                qm.mcx(wires, bits[i])
            else:
                qm.x(bits[i])

    increment(position, [], list)  # the inverse order: x - 1
    increment(position[1:], [coin_wire], reversed)  # + 2 when the coin reads 1


def cycle_coin(theta) -> np.ndarray:
    """C(θ) = ry(θ)·T·H for every θ in ``theta``: shape (len(theta), 2, 2)."""
    theta = np.atleast_1d(np.asarray(theta, dtype=float))
    c, s = np.cos(theta / 2), np.sin(theta / 2)
    ry = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], -2)
    t_h = np.diag([1.0, np.exp(1j * np.pi / 4)]) @ np.array([[1, 1], [1, -1]]) / np.sqrt(2)
    return ry @ t_h


def cycle_hitting_times(theta, n_sites: int) -> np.ndarray:
    """E[T] of the study's walk for every θ in ``theta``, by `hitting_times` (no qdiff).

    >>> round(float(cycle_hitting_times(3 * np.pi / 2, 8)[0]), 6)  # the optimum for N = 8
    6.058875
    """
    return hitting_times(cycle_coin(theta), n_sites)


def hitting_times(coins: np.ndarray, n_sites: int, tol: float = 1e-15,
                  max_steps: int = 10 ** 6) -> np.ndarray:
    """E[T] on the cycle for each coin in ``coins`` (shape (m, 2, 2)), simulated in NumPy.

    The amplitudes psi[i, coin, x] take the coin, the shift and the absorption (the marked
    amplitudes set to 0) step by step, from x = N/2 - 1 with the coin in |0>;
    E[T] = sum over k >= 0 of P(T > k), the norm still on the cycle after k steps, summed
    until it is below ``tol`` (what is left then adds about tol / (1 - decay per step) at
    most: below 1e-11 on these cycles).

    >>> float(hitting_times(np.eye(2)[None], 8)[0])  # the identity coin: ballistic, N/2
    4.0
    """
    coins = np.asarray(coins)
    m = len(coins)
    psi = np.zeros((m, 2, n_sites), dtype=complex)
    psi[:, 0, n_sites // 2 - 1] = 1.0
    total, alive = np.zeros(m), np.ones(m)
    active = np.arange(m)
    for _ in range(max_steps):
        total[active] += alive
        psi = coins[active] @ psi
        psi[:, 1] = np.roll(psi[:, 1], 1, axis=-1)  # coin 1: x + 1
        psi[:, 0] = np.roll(psi[:, 0], -1, axis=-1)  # coin 0: x - 1
        psi[:, :, n_sites - 1] = 0.0  # found on the marked site: absorbed
        alive = np.sum(np.abs(psi) ** 2, axis=(1, 2))
        going = alive >= tol
        if not going.any():
            return total
        if not going.all():  # drop the finished angles: the long tails are a few
            active, psi, alive = active[going], psi[going], alive[going]
    raise RuntimeError(f"the walk was still on the cycle after {max_steps} steps")


def cycle_study(args) -> bool:
    """The cycle walks: train θ for each N on the exact adjoint gradient, check the scan."""
    rng = np.random.default_rng(args.seed)
    sizes = (8,) if args.quick else (8, 16)
    coarse = np.linspace(0.0, 2 * np.pi, 721)
    passed = True
    rows, losses = [], {}
    for n_sites in sizes:
        n_bits = int(n_sites).bit_length() - 1
        # the register's size is static: n_bits is closed over, not traced
        program = qdiff.trace(lambda theta, n_bits=n_bits: cycle_walk(theta, n_bits), 1.0)
        value_and_grad = qdiff.value_and_grad(program, method="adjoint", backend=BACKEND)

        def objective(x, value_and_grad=value_and_grad):
            value, grad = value_and_grad(float(np.asarray(x).reshape(-1)[0]))
            return float(value), np.atleast_1d(np.asarray(grad, dtype=float))

        # a start in [π, 2π]: the tails stay short there (below 5000 steps for N = 16),
        # where near θ = π/2 they run to 27000
        theta0 = rng.uniform(np.pi, 2 * np.pi, size=1)
        trained = minimize(objective, theta0, True)
        theta_best = float(trained.params[0])
        e_trained = objective(trained.params)[0]
        # the reference: a scan over the whole period, then a dense one (2001 points,
        # 1.7e-5 apart) around its best point: the long tails near θ = π/2 are run once
        start = time.perf_counter()
        landscape = cycle_hitting_times(coarse, n_sites)
        k = int(np.argmin(landscape))
        thetas = np.linspace(coarse[k - 2], coarse[k + 2], 2001)
        scan = cycle_hitting_times(thetas, n_sites)
        scan_seconds = time.perf_counter() - start
        k = int(np.argmin(scan))
        losses[n_sites] = trained.losses
        rows.append({"N": n_sites, "θ trained": theta_best % (2 * np.pi),
                     "E[T] trained": e_trained, "θ scan": thetas[k], "E[T] scan": scan[k],
                     "ballistic N/2": n_sites / 2, "evaluations": trained.evaluations,
                     "seconds": trained.seconds, "scan seconds": scan_seconds})
        passed &= check(f"N = {n_sites}: E[T] trained vs dense scan (tol 1e-6 relative)",
                        e_trained, scan[k], 1e-6 * scan[k])
        passed &= check(f"N = {n_sites}: E[T] of the loop vs NumPy at θ trained",
                        e_trained, cycle_hitting_times(theta_best, n_sites)[0],
                        1e-9 * e_trained)
        # the derivative through the unbounded loop, where it is far from 0: at the start
        h = 1e-4
        fd = (cycle_hitting_times(theta0[0] + h, n_sites)[0]
              - cycle_hitting_times(theta0[0] - h, n_sites)[0]) / (2 * h)
        adjoint = objective(theta0)[1][0]
        passed &= check(f"N = {n_sites}: dE[T]/dθ adjoint vs NumPy central difference at "
                        f"θ0 = {theta0[0]:.4f}", adjoint, fd, 1e-6 * max(1.0, abs(fd)))
        if n_sites == sizes[-1]:
            plot_landscape(landscape, coarse, trained=[theta_best % (2 * np.pi)],
                           path=args.out / "cycle_landscape.png")
    print(results_table(rows, "hitting time on a cycle with an absorbing marked site"))
    plot_loss(losses[sizes[-1]], args.out / "cycle_loss.png")
    return passed


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], ("adjoint", "parameter-shift"), argv)
    passed = torus_study(args)
    passed &= cycle_study(args)
    return finish(passed)


if __name__ == "__main__":
    raise SystemExit(main())
