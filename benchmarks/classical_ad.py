"""ADBench GMM objective: primal time, gradient time and their ratio, for qdiff's reference
interpreter and (when installed) JAX.

    python benchmarks/classical_ad.py            # both problem sizes
    python benchmarks/classical_ad.py --small    # only (d=2, K=5, n=1000)

f = -(n·d/2)·log(2π) + Σ_i logsumexp_k(α_k + Σ_j q_kj - ½‖Q_k (x_i - μ_k)‖²)
    - n·logsumexp(α) + Σ_k [½γ²(‖exp(q_k)‖² + ‖l_k‖²) - m Σ_j q_kj]
    - K·(n'·d·(log γ - ½ log 2) - log Γ_d(n'/2)),   n' = d + m + 1,
with Q_k = diag(exp(q_k)) + strictly lower triangular L(l_k) filled column by column and
icf_k = (q_k, l_k). Speed is the Numba back end's job; these numbers record correctness-first
timings.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import multigammaln

import qdiff
import qdiff.numpy as qnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402

SIZES = [(2, 5, 1000), (10, 25, 10000)]
GAMMA, M = 1.0, 0


def lower_index_map(d: int) -> np.ndarray:
    """Index into ``[0, *l_k]`` of each entry of the d×d strictly lower triangle (0: zero),
    filled column by column."""
    table = np.zeros((d, d), np.int64)
    position = 1
    for column in range(d):
        for row in range(column + 1, d):
            table[row, column] = position
            position += 1
    return table


def constant_term(n: int, d: int, k: int) -> float:
    n_prime = d + M + 1
    return (-(n * d / 2) * np.log(2 * np.pi)
            - k * (n_prime * d * (np.log(GAMMA) - 0.5 * np.log(2)) - multigammaln(n_prime / 2, d)))


def gmm_objective(np_like: Any, alphas: Any, means: Any, icf: Any, x: Any) -> Any:
    """The GMM objective written once for any NumPy-like namespace (qdiff.numpy, jax.numpy)."""
    n, d = x.shape
    k = alphas.shape[0]
    q, l = icf[:, :d], icf[:, d:]
    diagonal = np_like.exp(q)
    padded = np_like.concatenate([np_like.zeros((k, 1)), l], axis=1)
    lower = padded[:, lower_index_map(d)]                               # (K, d, d)
    centered = x[:, None, :] - means[None, :, :]                       # (n, K, d)
    transformed = diagonal[None] * centered + np_like.einsum("kij,nkj->nki", lower, centered)
    inner = alphas[None, :] + np_like.sum(q, axis=1)[None, :] \
        - 0.5 * np_like.sum(transformed ** 2, axis=2)
    regularizer = np_like.sum(0.5 * GAMMA ** 2 * (np_like.sum(diagonal ** 2, axis=1)
                                                   + np_like.sum(l ** 2, axis=1))
                              - M * np_like.sum(q, axis=1))
    return (constant_term(n, d, k) + np_like.sum(_logsumexp(np_like, inner))
            - n * _logsumexp(np_like, alphas[None, :])[0] + regularizer)


def _logsumexp(np_like: Any, values: Any) -> Any:
    top = np_like.max(values, axis=1)
    return np_like.log(np_like.sum(np_like.exp(values - top[:, None]), axis=1)) + top


def make_inputs(d: int, k: int, n: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return (rng.normal(size=k), rng.normal(size=(k, d)),
            0.1 * rng.normal(size=(k, d * (d + 1) // 2)), rng.normal(size=(n, d)))


def best_time(fn: Callable[[], Any], repeats: int = 3) -> float:
    return common.best_of(fn, repeats)[0]


def time_qdiff(args: tuple) -> tuple[float, float, np.ndarray]:
    objective = lambda a, mu, icf, x: gmm_objective(qnp, a, mu, icf, x)  # noqa: E731
    primal = qdiff.trace(objective, *args)
    gradient = qdiff.grad(primal, argnums=(0, 1, 2))
    value = primal(*args)
    grads = gradient(*args)
    return (best_time(lambda: primal(*args)), best_time(lambda: gradient(*args)),
            np.concatenate([np.ravel(g) for g in grads]) if value is not None else None)


def time_jax(args: tuple) -> tuple[float, float, np.ndarray] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)
    objective = jax.jit(lambda a, mu, icf, x: gmm_objective(jnp, a, mu, icf, x))
    gradient = jax.jit(jax.grad(lambda a, mu, icf, x: gmm_objective(jnp, a, mu, icf, x),
                                argnums=(0, 1, 2)))
    objective(*args).block_until_ready()
    grads = gradient(*args)
    jax.block_until_ready(grads)
    primal_time = best_time(lambda: objective(*args).block_until_ready())
    gradient_time = best_time(lambda: jax.block_until_ready(gradient(*args)))
    return primal_time, gradient_time, np.concatenate([np.ravel(g) for g in grads])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="only the smallest size")
    sizes = SIZES[:1] if parser.parse_args().small else SIZES
    print(f"{'engine':<18}{'d':>4}{'K':>5}{'n':>7}{'primal s':>12}{'gradient s':>12}"
          f"{'ratio':>8}")
    for d, k, n in sizes:
        args = make_inputs(d, k, n)
        primal_time, gradient_time, ours = time_qdiff(args)
        print(f"{'qdiff interpreter':<18}{d:>4}{k:>5}{n:>7}{primal_time:>12.4f}"
              f"{gradient_time:>12.4f}{gradient_time / primal_time:>8.2f}")
        jax_result = time_jax(args)
        if jax_result is None:
            print(f"{'jax':<18}{'(not installed)':>28}")
            continue
        primal_time, gradient_time, theirs = jax_result
        agree = np.allclose(ours, theirs, rtol=1e-8, atol=1e-10)
        print(f"{'jax (jit, x64)':<18}{d:>4}{k:>5}{n:>7}{primal_time:>12.4f}"
              f"{gradient_time:>12.4f}{gradient_time / primal_time:>8.2f}"
              f"   gradients agree: {agree}")


if __name__ == "__main__":
    main()
