"""Bernoulli factory: a fair coin from a biased quantum coin by von Neumann's extractor.

The coin is a qubit rotated by ry(theta) and measured: it reads 1 with probability
p = sin^2(theta/2). Von Neumann's extractor flips it twice per round and repeats while the
two flips agree; the first flip of the last round is the output. So

    P(output = 1) = p(1 - p) / (2 p (1 - p)) = 1/2  for every theta (derivative 0),
    E[rounds] = 1 / (2 p (1 - p)) = 2 / sin^2(theta),  dE/dtheta = -4 cos(theta) / sin^3(theta).

The loop has no bound on its rounds. The study differentiates both outputs through it
exactly (``--method``) and from sampled trajectories, next to the closed forms, then trains
theta to the fewest expected rounds (theta = pi/2, E = 2) by Adam and by BFGS.

    python case_studies/bernoulli_factory.py            # the full study
    python case_studies/bernoulli_factory.py --quick    # fewer shots and steps
"""

from __future__ import annotations

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


def extractor(theta):
    """(the output bit, the number of rounds), per run; their means are the program's."""
    q = qm.qubits(1)
    out = qdiff.Cell(0)
    rounds = qdiff.Cell(0)
    agree = qdiff.Cell(True)

    def flip_twice():
        qm.ry(theta, q[0])
        first = qm.measure(q[0], reset=True)
        qm.ry(theta, q[0])
        second = qm.measure(q[0], reset=True)
        out.set(first * 1)  # the bit as an integer, the type of the cell
        agree.set(first == second)
        rounds.set(rounds.value + 1)

    qdiff.while_loop(lambda: agree.value, flip_twice)
    return qnp.asarray(out.value) * 1.0, qnp.asarray(rounds.value) * 1.0


def expected_rounds(theta):
    """E[rounds], the objective of the training."""
    return extractor(theta)[1]


def closed_form(theta: float) -> tuple[float, float, float, float]:
    """(P(output = 1), its derivative, E[rounds], its derivative)."""
    s, c = np.sin(theta), np.cos(theta)
    return 0.5, 0.0, 2 / s ** 2, -4 * c / s ** 3


def estimate(program: qdiff.Program, theta: float, name: str, settings: dict
             ) -> tuple[dict, object, list]:
    """The table row of one way of estimating (``settings``: `qm.gradient`'s keywords), with
    its run and its gradients of P(output = 1) and of E[rounds]."""
    run = qm.run(program, theta, **{k: v for k, v in settings.items() if k != "method"})
    value = np.asarray(run.values, dtype=float)
    gradients = [qm.gradient(program, theta, cotangent=weights, **settings)
                 for weights in ((1.0, 0.0), (0.0, 1.0))]
    row = {"estimate": name, "P(out=1)": value[0], "dP/dθ": float(gradients[0].grad),
           "E[rounds]": value[1], "dE/dθ": float(gradients[1].grad)}
    return row, run, gradients


def main(argv: list[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], ("adjoint", "parameter-shift"), argv)
    shots, steps = (400, 8) if args.quick else (4000, 100)
    tol = 1e-10
    theta = 0.9
    passed = True
    program = qdiff.trace(extractor, theta)
    p1, dp1, rounds, drounds = closed_form(theta)

    exact, _, _ = estimate(program, theta, f"exact ({args.method})",
                           {"method": args.method, "tol": tol})
    # the sampled run and gradient: their standard errors back the checks below
    sampled, sampled_run, sampled_grads = estimate(
        program, theta, f"sampled ({shots} shots)",
        {"mode": "sample", "shots": shots, "seed": args.seed})
    rows = [exact, sampled, {"estimate": "closed form", "P(out=1)": p1, "dP/dθ": dp1,
                             "E[rounds]": rounds, "dE/dθ": drounds}]
    print(results_table(rows, f"von Neumann extractor at θ = {theta}"))
    for key, reference in (("P(out=1)", p1), ("dP/dθ", dp1), ("E[rounds]", rounds),
                           ("dE/dθ", drounds)):
        passed &= check(f"exact {key}", exact[key], reference, 1e-6)
    # the sampled estimates: within 4 standard errors (from their own spread)
    passed &= check("sampled P(out=1)", sampled["P(out=1)"], p1,
                    4 * float(np.asarray(sampled_run.stderr)[0]))
    passed &= check("sampled dE/dθ", sampled["dE/dθ"], drounds,
                    4 * float(sampled_grads[1].grad_stderr))

    # training: the fewest expected rounds
    rounds_program = qdiff.trace(expected_rounds, theta)
    value_and_grad = qdiff.value_and_grad(rounds_program, method=args.method, tol=tol)

    def objective(t):
        value, grad = value_and_grad(float(np.asarray(t).reshape(-1)[0]))
        return float(value), np.atleast_1d(np.asarray(grad, dtype=float))

    start = np.random.default_rng(args.seed).uniform(0.5, 2.6, size=1)
    adam_run = adam(objective, start, steps=steps, lr=0.1, desc="extractor (Adam)")
    bfgs = minimize(objective, start, True)
    table = [{"training": "Adam", "θ": float(adam_run.params[0]),
              "E[rounds]": objective(adam_run.params)[0], "evaluations": adam_run.evaluations,
              "seconds": adam_run.seconds},
             {"training": "BFGS", "θ": float(bfgs.params[0]),
              "E[rounds]": objective(bfgs.params)[0], "evaluations": bfgs.evaluations,
              "seconds": bfgs.seconds},
             {"training": "closed form", "θ": np.pi / 2, "E[rounds]": 2.0}]
    print(results_table(table, "\nfewest expected rounds"))
    passed &= check("BFGS θ vs π/2", float(bfgs.params[0]), np.pi / 2, 1e-4)
    passed &= check("BFGS E[rounds] vs 2", table[1]["E[rounds]"], 2.0, 1e-6)
    passed &= check("Adam E[rounds] vs 2", table[0]["E[rounds]"], 2.0, 0.1 if args.quick else 1e-3)

    plot_loss(adam_run.losses, args.out / "loss.png")
    grid = np.linspace(0.35, np.pi - 0.35, 61)
    plot_landscape(2 / np.sin(grid) ** 2, grid, trained=[bfgs.params[0]],
                   path=args.out / "landscape.png")
    return finish(passed)


if __name__ == "__main__":
    raise SystemExit(main())
