"""Classical array AD: qdiff's interpreter and its Numba back end against JAX (and PyTorch
when installed), primal and gradient, compile time reported apart.

    taskset -c 0 python benchmarks/classical_ad.py            # every workload
    taskset -c 0 python benchmarks/classical_ad.py --quick    # small sizes, seconds
    taskset -c 0 python benchmarks/classical_ad.py --only gmm --engines "qdiff numba" "jax jit"
    python benchmarks/classical_ad.py --threads 2             # check the pinning holds
    python benchmarks/classical_ad.py --backend numba-cuda    # qdiff.jit's CUDA target too (a GPU)

Every engine runs on the same number of threads (``--threads``, default 1: Numba's pool,
BLAS and XLA's Eigen pool are pinned before they load). Times are the best of several runs
in one process, in CPU time of the process by default (``--clock wall`` for wall time:
on a busy machine a call longer than a scheduler slice is rarely left alone); ratios
compare engines measured in the same run.

Workloads (the classical AD issue's list):
- recurrence: ``x = sin(x)·a + b`` for 1000 steps (``fori_loop``), gradient in (a, b);
- gmm: the ADBench Gaussian mixture objective, (d, K, n) = (10, 25, 10000) and (64, 200, 10000);
- kmeans: the cost Σ_p min_c ‖p − c‖², k=32, n=100000, d=16, gradient in the centres;
- lstm: the ADBench D-LSTM loss, l=2 layers, c=1024 characters, b=14;
- mlp: a 2-layer perceptron, batch 256, width 512, squared error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402

GAMMA, M = 1.0, 0


@dataclass
class Workload:
    name: str
    size: str
    objective: Callable[..., Any]   # objective(np_like, loop, *args): one definition for all
    args: tuple
    wrt: tuple[int, ...]


# ------------------------------------------------------------------------------- workloads
def recurrence(np_like: Any, loop: Callable, a: Any, b: Any) -> Any:
    return loop(0, 1000, lambda i, x: np_like.sin(x) * a + b, np_like.asarray(0.5))


def lower_index_map(d: int) -> Any:
    """Index into ``[0, *l_k]`` of each entry of the d×d strictly lower triangle (0: zero),
    filled column by column."""
    import numpy as np

    table = np.zeros((d, d), np.int64)
    position = 1
    for column in range(d):
        for row in range(column + 1, d):
            table[row, column] = position
            position += 1
    return table


def _logsumexp(np_like: Any, values: Any) -> Any:
    top = np_like.max(values, axis=1)
    return np_like.log(np_like.sum(np_like.exp(values - top[:, None]), axis=1)) + top


def gmm(np_like: Any, loop: Callable, alphas: Any, means: Any, icf: Any, x: Any) -> Any:
    """ADBench GMM: f = -(n·d/2)·log(2π) + Σ_i logsumexp_k(α_k + Σ_j q_kj
    - ½‖Q_k (x_i - μ_k)‖²) - n·logsumexp(α) + Σ_k [½γ²(‖exp(q_k)‖² + ‖l_k‖²) - m Σ_j q_kj]
    + const, with Q_k = diag(exp(q_k)) + strictly lower L(l_k) and icf_k = (q_k, l_k)."""
    import numpy as np
    from scipy.special import multigammaln

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
    n_prime = d + M + 1
    constant = (-(n * d / 2) * np.log(2 * np.pi)
                - k * (n_prime * d * (np.log(GAMMA) - 0.5 * np.log(2))
                       - multigammaln(n_prime / 2, d)))
    return (constant + np_like.sum(_logsumexp(np_like, inner))
            - n * _logsumexp(np_like, alphas[None, :])[0] + regularizer)


def kmeans(np_like: Any, loop: Callable, centres: Any, points: Any) -> Any:
    distances = np_like.sum((points[:, None, :] - centres[None, :, :]) ** 2, axis=2)
    return np_like.sum(np_like.min(distances, axis=1))


def _sigmoid(np_like: Any, x: Any) -> Any:
    return 1.0 / (1.0 + np_like.exp(-x))


def lstm(np_like: Any, loop: Callable, main: Any, extra: Any, state: Any,
         sequence: Any) -> Any:
    """ADBench D-LSTM: ``-Σ_t Σ_j y_{t+1,j} log softmax(predict(x_t))_j / ((c-1)·b)``; each
    layer ``gates = (x, h, x, h)·w + bias`` (four b-blocks), ``c' = c·σ(f) + σ(i)·tanh(g)``,
    ``h' = σ(o)·tanh(c')``."""
    b = sequence.shape[1]
    layers = main.shape[0] // 2

    def step(t: Any, carry: tuple) -> tuple:
        states, total = carry
        x = sequence[t] * extra[0]
        new_states = []
        for layer in range(layers):
            hidden, cell = states[2 * layer], states[2 * layer + 1]
            gates = np_like.concatenate([x, hidden, x, hidden]) * main[2 * layer] \
                + main[2 * layer + 1]
            forget = _sigmoid(np_like, gates[:b])
            ingate = _sigmoid(np_like, gates[b:2 * b])
            outgate = _sigmoid(np_like, gates[2 * b:3 * b])
            change = np_like.tanh(gates[3 * b:])
            cell = cell * forget + ingate * change
            hidden = outgate * np_like.tanh(cell)
            new_states += [hidden, cell]
            x = hidden
        prediction = x * extra[1] + extra[2]
        normalized = prediction - np_like.log(np_like.sum(np_like.exp(prediction)))
        total = total + np_like.sum(sequence[t + 1] * normalized)
        return np_like.stack(new_states), total

    count = (sequence.shape[0] - 1) * b
    _, total = loop(0, sequence.shape[0] - 1, step, (state, np_like.asarray(0.0)))
    return -total / count


def mlp(np_like: Any, loop: Callable, w1: Any, b1: Any, w2: Any, x: Any, y: Any) -> Any:
    hidden = np_like.maximum(x @ w1 + b1, 0.0)
    return np_like.sum((hidden @ w2 - y) ** 2) / x.shape[0]


def workloads(quick: bool) -> list[Workload]:
    import numpy as np

    rng = np.random.default_rng(0)

    def normal(*shape: int, scale: float = 1.0) -> Any:
        return scale * rng.normal(size=shape)

    gmm_sizes = [(2, 5, 1000)] if quick else [(10, 25, 10000), (64, 200, 10000)]
    result = [Workload("recurrence", "1000 steps", recurrence, (0.9, 0.1), (0, 1))]
    for d, k, n in gmm_sizes:
        result.append(Workload("gmm", f"d={d} K={k} n={n}", gmm,
                               (normal(k), normal(k, d), normal(k, d * (d + 1) // 2, scale=0.1),
                                normal(n, d)), (0, 1, 2)))
    k, n, d = (4, 1000, 3) if quick else (32, 100000, 16)
    result.append(Workload("kmeans", f"k={k} n={n} d={d}", kmeans,
                           (normal(k, d), normal(n, d)), (0,)))
    layers, chars, b = (2, 32, 4) if quick else (2, 1024, 14)
    result.append(Workload("lstm", f"l={layers} c={chars} b={b}", lstm,
                           (normal(2 * layers, 4 * b, scale=0.5), normal(3, b),
                            normal(2 * layers, b), normal(chars, b)), (0, 1)))
    batch, width = (16, 32) if quick else (256, 512)
    result.append(Workload("mlp", f"batch={batch} width={width}", mlp,
                           (normal(width, width, scale=width ** -0.5), normal(width),
                            normal(width, 10, scale=width ** -0.5), normal(batch, width),
                            normal(batch, 10)), (0, 1, 2)))
    return result


# --------------------------------------------------------------------------------- engines
CLOCK = "cpu"  # --clock


def best_time(fn: Callable[[], Any]) -> float:
    return common.best_within(fn, budget=2.0, clock=CLOCK)


def qdiff_engine(jit: bool, backend: str = "numba") -> Callable[[Workload], tuple]:
    import qdiff
    import qdiff.numpy as qnp

    def loop(lower: int, upper: int, body: Callable, init: Any) -> Any:
        return qdiff.fori_loop(lower, upper, body, init)

    def run(w: Workload) -> tuple:
        def objective(*args: Any) -> Any:
            return w.objective(qnp, loop, *args)

        primal = qdiff.program(objective)
        gradient = qdiff.grad(primal, argnums=w.wrt)
        if jit:
            primal = qdiff.jit(primal, backend=backend)
            gradient = qdiff.jit(gradient, backend=backend)
        measured = _measure(lambda: primal(*w.args), lambda: gradient(*w.args))
        if backend == "numba-cuda":  # what one gradient call copies between host and GPU
            from qdiff.compiler.cuda.transfers import last_call

            gradient(*w.args)
            t = last_call()
            print(f"  {w.name} {w.size}: one gradient call copies {t.uploads} arrays to the GPU "
                  f"({t.upload_bytes} bytes) and {t.downloads} back ({t.download_bytes} bytes), "
                  f"and allocates {t.allocations} device arrays", file=sys.stderr, flush=True)
        return measured

    return run


def jax_engine() -> Callable[[Workload], tuple] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def run(w: Workload) -> tuple:
        def objective(*args: Any) -> Any:
            return w.objective(jnp, jax.lax.fori_loop, *args)

        primal = jax.jit(objective)
        gradient = jax.jit(jax.grad(objective, argnums=w.wrt))
        return _measure(lambda: jax.block_until_ready(primal(*w.args)),
                        lambda: jax.block_until_ready(gradient(*w.args)))

    return run


def torch_engine() -> Callable[[Workload], tuple] | None:
    try:
        import torch
    except ImportError:
        return None
    if not hasattr(torch, "func"):
        return None
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    class TorchNumpy:
        def __getattr__(self, name: str) -> Any:
            return {"asarray": lambda v: torch.as_tensor(v, dtype=torch.float64),
                    "concatenate": lambda xs, axis=0: torch.cat(list(xs), dim=axis),
                    "max": lambda v, axis=None: torch.amax(v, dim=axis),
                    "min": lambda v, axis=None: torch.amin(v, dim=axis),
                    "sum": lambda v, axis=None: torch.sum(v, dim=axis) if axis is not None
                    else torch.sum(v),
                    "zeros": lambda s: torch.zeros(s, dtype=torch.float64),
                    "maximum": lambda a, b: torch.clamp(a, min=b)}.get(name) or getattr(torch, name)

    def loop(lower: int, upper: int, body: Callable, init: Any) -> Any:
        for i in range(lower, upper):
            init = body(i, init)
        return init

    def run(w: Workload) -> tuple:
        np_like = TorchNumpy()
        args = [torch.as_tensor(a, dtype=torch.float64) for a in w.args]

        def objective(*xs: Any) -> Any:
            return w.objective(np_like, loop, *xs)

        gradient = torch.func.grad(objective, argnums=w.wrt)
        return _measure(lambda: objective(*args), lambda: gradient(*args))

    return run


def _measure(primal: Callable[[], Any], gradient: Callable[[], Any]) -> tuple:
    timer = time.process_time if CLOCK == "cpu" else time.perf_counter
    start = timer()
    primal()
    first_primal = timer() - start
    start = timer()
    result = gradient()
    first_gradient = timer() - start
    primal_time, gradient_time = best_time(primal), best_time(gradient)
    compile_time = max(0.0, first_primal - primal_time) + max(0.0, first_gradient - gradient_time)
    return primal_time, gradient_time, compile_time, result


def _flat(result: Any) -> Any:
    import numpy as np

    leaves = result if isinstance(result, tuple) else (result,)
    return np.concatenate([np.ravel(np.asarray(leaf)) for leaf in leaves])


def _require_gpu(parser: argparse.ArgumentParser) -> None:
    """Stop, saying why, unless Numba finds a real CUDA device (the simulator's timings would
    mean nothing)."""
    try:
        from numba import config, cuda
        usable = cuda.is_available() and not config.ENABLE_CUDASIM
    except Exception as error:  # noqa: BLE001  (any failure to load CUDA means no GPU here)
        parser.error(f"--backend numba-cuda: numba.cuda does not load ({error})")
    if not usable:
        parser.error("--backend numba-cuda needs a CUDA GPU, and numba.cuda finds none "
                     "(install the 'gpu' extra on a machine with one)")


ENGINES = {"qdiff interpreter": lambda: qdiff_engine(False),
           "qdiff numba": lambda: qdiff_engine(True), "jax jit": jax_engine,
           "pytorch": torch_engine}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--threads", type=int, default=1, help="threads for every engine")
    parser.add_argument("--only", nargs="*", help="workload names to run")
    parser.add_argument("--backend", action="append", choices=("numba-cuda",), default=[],
                        help="also run qdiff.jit on this back end (numba-cuda: needs a GPU)")
    parser.add_argument("--engines", nargs="*", choices=list(ENGINES),
                        help="engines to run (default: all; results are checked against "
                        "the first one run)")
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="time the process's CPU (default: robust on a shared machine) "
                        "or the wall clock")
    options = parser.parse_args()
    global CLOCK
    CLOCK = options.clock
    common.pin_threads(options.threads, xla=True)
    import numpy as np

    if "numba-cuda" in options.backend:
        _require_gpu(parser)
    engines = [(name, ENGINES[name]()) for name in options.engines or ENGINES]
    engines += [(f"qdiff {b}", qdiff_engine(True, b)) for b in options.backend]
    print(f"threads per engine: {options.threads}; times in ms (best of several), compile "
          "time (first call minus best) apart")
    header = ["workload", "size", "engine", "primal", "gradient", "grad/primal", "compile s",
              "grad vs jax", "agrees"]
    rows = []
    for w in workloads(options.quick):
        if options.only and w.name not in options.only:
            continue
        measured = {name: engine(w) for name, engine in engines if engine is not None}
        reference = _flat(next(iter(measured.values()))[3])
        jax_gradient = measured.get("jax jit", (None, None))[1]
        for name, (primal, gradient, compile_time, result) in measured.items():
            agrees = np.allclose(_flat(result), reference, rtol=1e-8, atol=1e-10)
            rows.append([w.name, w.size, name, f"{primal * 1e3:.3f}", f"{gradient * 1e3:.3f}",
                         f"{gradient / primal:.2f}", f"{compile_time:.2f}",
                         f"{gradient / jax_gradient:.2f}x" if jax_gradient else "",
                         "yes" if agrees else "NO"])
        rows += [[w.name, w.size, name, "not installed", "", "", "", "", ""]
                 for name, engine in engines if engine is None]
        for row in rows[-len(engines):]:  # as measured: a run cut short still reports
            print("  " + " | ".join(row), file=sys.stderr, flush=True)
        rows.append([""] * len(header))
    common.print_table(header, rows[:-1])


if __name__ == "__main__":
    main()
