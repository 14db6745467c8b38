"""Gaussian mixture: fit the ADBench GMM objective to data by gradient steps, checked against JAX.

The objective is ADBench's (written once, in ``benchmarks/classical_ad.py``, for any
NumPy-like namespace): the log-likelihood of the points under K Gaussians with weights
softmax(α), means μ_k and inverse Cholesky factors Q_k = diag(exp(q_k)) + L(l_k), plus
ADBench's Wishart term. Data are drawn from a known mixture (seeded); the fit ascends the
objective over (α, μ, q, l), Adam (with a progress bar) then BFGS, with gradients from
``qdiff.value_and_grad`` (``--method reverse``) or ``qdiff.jacfwd`` (``--method forward``).

Self-checks: the gradient at a random point against central finite differences (relative
1e-6) and against ``jax.grad`` of the same objective in jax.numpy (1e-9, when JAX is
installed); at the fit, the gradient vanishes (relative to its size at the start), the fit
beats the generating parameters, and the fitted means are within 0.15 of the generating
ones.

    python case_studies/gmm.py            # d = 2, K = 3, 2000 points
    python case_studies/gmm.py --quick    # d = 2, K = 3, 300 points
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from pathlib import Path

import common  # case_studies/common.py: this folder is on sys.path however the study starts
import numpy as np

import qdiff
import qdiff.numpy as qnp


def _benchmark():
    """benchmarks/classical_ad.py, loaded from its file (benchmarks/ is a folder of scripts)."""
    name = "benchmarks_classical_ad"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "benchmarks" / "classical_ad.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        saved_path = list(sys.path)
        sys.modules[name] = module  # before running it: its dataclasses look themselves up
        spec.loader.exec_module(module)
        sys.path[:] = saved_path   # it puts benchmarks/ first on sys.path; take that back
    return sys.modules[name]


def gmm_objective(np_like, alphas, means, icf, x):
    """The benchmark's GMM objective (it needs no loop, so none is passed)."""
    return _benchmark().gmm(np_like, None, alphas, means, icf, x)


TRUE_MEANS = np.array([[-2.0, 0.0], [2.0, 0.5], [0.0, 3.0]])
TRUE_SCALES = np.array([0.6, 0.8, 0.5])
TRUE_WEIGHTS = np.array([0.3, 0.4, 0.3])


def sample_data(n: int, rng: np.random.Generator) -> np.ndarray:
    """n points from the generating mixture (isotropic components)."""
    labels = rng.choice(len(TRUE_WEIGHTS), size=n, p=TRUE_WEIGHTS)
    return TRUE_MEANS[labels] + TRUE_SCALES[labels, None] * rng.normal(size=(n, 2))


def generating_parameters() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(α, μ, icf) of the generating mixture: Q = I / scale, no off-diagonal part."""
    icf = np.concatenate([np.repeat(-np.log(TRUE_SCALES)[:, None], 2, axis=1),
                          np.zeros((3, 1))], axis=1)
    return np.log(TRUE_WEIGHTS), TRUE_MEANS.copy(), icf


class Packing:
    """(α, μ, icf) <-> one flat vector, for the optimizers."""

    def __init__(self, k: int, d: int):
        self.shapes = [(k,), (k, d), (k, d * (d + 1) // 2)]
        self.sizes = [int(np.prod(s)) for s in self.shapes]

    def unpack(self, x: np.ndarray) -> list[np.ndarray]:
        parts = np.split(x, np.cumsum(self.sizes)[:-1])
        return [p.reshape(s) for p, s in zip(parts, self.shapes)]

    @staticmethod
    def pack(parts) -> np.ndarray:
        return np.concatenate([np.ravel(p) for p in parts])


def jax_gradient(params: list[np.ndarray], x: np.ndarray) -> np.ndarray | None:
    """The gradient by ``jax.grad`` in double precision, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    grads = jax.grad(lambda a, m, i: gmm_objective(jnp, a, m, i, jnp.asarray(x)),
                     argnums=(0, 1, 2))(*(jnp.asarray(p) for p in params))
    return Packing.pack([np.asarray(g) for g in grads])


def main(argv: list[str] | None = None) -> int:
    args = common.parse_args(__doc__.splitlines()[0], ("reverse", "forward"), argv)
    rng = np.random.default_rng(args.seed)
    n, steps = (300, 150) if args.quick else (2000, 400)
    x = sample_data(n, rng)
    k, d = TRUE_MEANS.shape
    packing = Packing(k, d)
    objective = qdiff.trace(lambda a, m, i, pts: gmm_objective(qnp, a, m, i, pts),
                            *generating_parameters(), x)
    if args.method == "reverse":
        value_and_grad = qdiff.value_and_grad(objective, argnums=(0, 1, 2))
    else:
        forward = qdiff.jacfwd(objective, argnums=(0, 1, 2))
        value_and_grad = lambda *a: (objective(*a), forward(*a))  # noqa: E731

    def loss_and_grad(flat):   # the fit ascends the objective: minimize its negative
        value, grads = value_and_grad(*packing.unpack(flat), x)
        return -float(value), -Packing.pack(grads)

    # gradient checks at a random point
    point = Packing.pack([rng.normal(size=k), rng.normal(size=(k, d)),
                          0.1 * rng.normal(size=(k, d * (d + 1) // 2))])
    grad = -loss_and_grad(point)[1]
    h = 1e-6
    finite = np.array([(float(objective(*packing.unpack(point + h * e), x))
                        - float(objective(*packing.unpack(point - h * e), x))) / (2 * h)
                       for e in np.eye(point.size)])
    scale = np.max(np.abs(grad))
    passed = [common.check("gradient vs central differences (max relative)",
                           np.max(np.abs(grad - finite)) / scale, 0.0, 1e-6)]
    reference = jax_gradient(packing.unpack(point), x)
    if reference is None:
        print("JAX is not installed: no JAX check")
    else:
        passed.append(common.check("gradient vs jax.grad (max relative)",
                                   np.max(np.abs(grad - reference)) / scale, 0.0, 1e-9))

    start = Packing.pack([np.zeros(k), x[rng.choice(n, k, replace=False)],
                          np.zeros((k, d * (d + 1) // 2))])
    first = common.adam(loss_and_grad, start, steps=steps, lr=0.05, desc=f"GMM ({args.method})")
    polished = common.minimize(lambda p: loss_and_grad(p)[0], first.params,
                               jac=lambda p: loss_and_grad(p)[1])
    fitted = packing.unpack(polished.params)
    value = -loss_and_grad(polished.params)[0]
    truth = float(objective(*generating_parameters(), x))
    # components come out in any order: match them to the generating ones
    order = min(itertools.permutations(range(k)),
                key=lambda p: np.sum((fitted[1][list(p)] - TRUE_MEANS) ** 2))
    means = fitted[1][list(order)]
    weights = np.exp(fitted[0] - np.max(fitted[0]))
    weights = (weights / weights.sum())[list(order)]
    rows = [{"component": c, "weight": weights[c], "true weight": TRUE_WEIGHTS[c],
             "mean": np.round(means[c], 4).tolist(), "true mean": TRUE_MEANS[c].tolist()}
            for c in range(k)]
    print(common.results_table(rows, f"GMM fit, d = {d}, K = {k}, n = {n}"))
    print(common.results_table([{
        "objective at fit": value, "at generating parameters": truth,
        "evaluations": first.evaluations + polished.evaluations,
        "seconds": f"{first.seconds + polished.seconds:.1f}"}], "objective"))
    common.plot_loss(first.losses + polished.losses, Path(args.out) / "loss.png")

    final_grad = np.max(np.abs(loss_and_grad(polished.params)[1]))
    passed += [
        common.check("gradient at the fit (relative to the start)",
                     final_grad / np.max(np.abs(loss_and_grad(start)[1])), 0.0, 1e-4),
        common.check("fit beats the generating parameters (shortfall)",
                     max(0.0, truth - value), 0.0, 0.0),
        common.check("largest error of a fitted mean", np.max(np.abs(means - TRUE_MEANS)),
                     0.0, 0.15),
    ]
    return common.finish(all(passed))


if __name__ == "__main__":
    raise SystemExit(main())
