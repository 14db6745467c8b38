"""k-means by Newton steps, with the Hessian's diagonal from forward-over-reverse differentiation.

The cost of centers c for points p is J(c) = Σ_p min_k ‖p - c_k‖² (the ADBench k-means
objective). Away from ties its Hessian is diagonal, 2·(number of points nearest to c_k) on
every coordinate of c_k, so one forward-mode derivative of the reverse-mode gradient along
the all-ones direction (``qdiff.jvp`` of ``qdiff.grad``) gives the whole diagonal, and the
Newton step c ← c - ∇J / diag(H) costs two sweeps (``--method forward-over-reverse``;
``--method hessian`` takes the diagonal of the full ``qdiff.hessian`` instead). A center
with no points keeps its place.

Self-checks: the gradient against central finite differences and ``jax.grad``, the Hessian's
diagonal against ``jax.hessian`` (when JAX is installed); the Newton iterates against
Lloyd's algorithm in NumPy from the same start (a Newton step on this cost is a Lloyd step:
each center moves to the mean of its points), and the final cost against Lloyd's.

    python case_studies/kmeans.py            # 20000 points in 8 dimensions, k = 10
    python case_studies/kmeans.py --quick    # 1000 points in 2 dimensions, k = 5
"""

from __future__ import annotations

import time
from pathlib import Path

import common  # case_studies/common.py: this folder is on sys.path however the study starts
import numpy as np

import qdiff
import qdiff.numpy as qnp


def kmeans_cost(np_like, centers, points):
    """Σ_p min_k ‖p - c_k‖², written once for qdiff.numpy, NumPy and jax.numpy."""
    distances = np_like.sum((points[:, None, :] - centers[None, :, :]) ** 2, axis=2)
    return np_like.sum(np_like.min(distances, axis=1))


def lloyd_step(centers: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Each center to the mean of the points nearest to it (the first on ties; a center
    without points stays)."""
    nearest = np.argmin(((points[:, None, :] - centers[None]) ** 2).sum(axis=2), axis=1)
    moved = centers.copy()
    for k in range(len(centers)):
        if np.any(nearest == k):
            moved[k] = points[nearest == k].mean(axis=0)
    return moved


def hessian_diagonal(method: str, cost_program, grad_program, centers, points):
    """diag(∇²J) at the centers: forward over reverse along ones (the Hessian is diagonal),
    or the diagonal of the full Hessian."""
    if method == "forward-over-reverse":
        _, diagonal = qdiff.jvp(grad_program, (centers, points),
                                (np.ones_like(centers), np.zeros_like(points)))
        return np.asarray(diagonal)
    full = np.asarray(qdiff.hessian(cost_program)(centers, points))
    return np.diagonal(full.reshape(centers.size, centers.size)).reshape(centers.shape)


def jax_references(centers: np.ndarray, points: np.ndarray):
    """(gradient, Hessian diagonal) by JAX, or None without it."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    cost = lambda c: kmeans_cost(jnp, c, jnp.asarray(points))  # noqa: E731
    hessian = np.asarray(jax.hessian(cost)(jnp.asarray(centers)))
    return (np.asarray(jax.grad(cost)(jnp.asarray(centers))),
            np.diagonal(hessian.reshape(centers.size, centers.size)).reshape(centers.shape))


def make_points(n: int, d: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """n points around k random centers in d dimensions."""
    truth = rng.uniform(-5, 5, size=(k, d))
    return truth[rng.integers(k, size=n)] + rng.normal(size=(n, d))


def main(argv: list[str] | None = None) -> int:
    args = common.parse_args(__doc__.splitlines()[0], ("forward-over-reverse", "hessian"),
                             argv)
    rng = np.random.default_rng(args.seed)
    n, d, k, steps = (1000, 2, 5, 15) if args.quick else (20000, 8, 10, 40)
    points = make_points(n, d, k, rng)
    start = points[rng.choice(n, k, replace=False)].copy()
    cost = qdiff.trace(lambda c, p: kmeans_cost(qnp, c, p), start, points)
    grad = qdiff.grad(cost)

    # derivative checks at the start; finite differences on the first 1000 points only: among
    # many points one lies within the step of a tie, where the cost has a kink
    g = np.asarray(grad(start, points))
    diagonal = hessian_diagonal(args.method, cost, grad, start, points)
    few = points[:1000]
    few_cost = qdiff.trace(lambda c, p: kmeans_cost(qnp, c, p), start, few)
    few_grad = np.asarray(qdiff.grad(few_cost)(start, few))
    h = 1e-5
    finite = np.array([(float(few_cost(start + h * e, few)) - float(few_cost(start - h * e, few)))
                       / (2 * h) for e in np.eye(start.size).reshape(-1, *start.shape)])
    passed = [common.check("gradient vs central differences (max relative, 1000 points)",
                           np.max(np.abs(few_grad - finite.reshape(g.shape)))
                           / np.max(np.abs(few_grad)), 0.0, 1e-6)]
    scale = np.max(np.abs(g))
    reference = jax_references(start, points)
    if reference is None:
        print("JAX is not installed: no JAX checks")
    else:
        passed += [
            common.check("gradient vs jax.grad (max relative)",
                         np.max(np.abs(g - reference[0])) / scale, 0.0, 1e-12),
            common.check("Hessian diagonal vs jax.hessian (max abs)",
                         np.max(np.abs(diagonal - reference[1])), 0.0, 1e-9),
        ]

    centers, lloyd, costs = start.copy(), start.copy(), []
    evaluations, seconds = 0, 0.0
    for _ in range(steps):
        began = time.perf_counter()
        g = np.asarray(grad(centers, points))
        diagonal = hessian_diagonal(args.method, cost, grad, centers, points)
        step = np.divide(g, diagonal, out=np.zeros_like(g), where=diagonal > 0)
        centers = centers - step
        seconds += time.perf_counter() - began
        evaluations += 2
        costs.append(float(cost(centers, points)))
        lloyd = lloyd_step(lloyd, points)
    lloyd_cost = float(kmeans_cost(np, lloyd, points))
    print(common.results_table([{
        "points": n, "dimensions": d, "k": k, "Newton steps": steps, "cost": costs[-1],
        "Lloyd's cost": lloyd_cost, "cost at start": float(cost(start, points)),
        "evaluations": evaluations, "seconds": f"{seconds:.2f}"}],
        f"k-means by Newton steps ({args.method} Hessian diagonal)"))
    print(f"centers found (first 3): {np.round(centers[:3], 4).tolist()}")
    common.plot_loss(costs, Path(args.out) / "loss.png")
    passed += [
        common.check("Newton centers vs Lloyd's (max abs)", np.max(np.abs(centers - lloyd)),
                     0.0, 1e-9),
        common.check("Newton cost vs Lloyd's cost", costs[-1], lloyd_cost,
                     1e-9 * abs(lloyd_cost)),
    ]
    return common.finish(all(passed))


if __name__ == "__main__":
    raise SystemExit(main())
