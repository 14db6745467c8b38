"""What the case studies share: flags, Adam with a progress bar, scipy's minimize counted and
timed, plots, the results table and the self-checks.

matplotlib and tqdm (the ``studies`` extra) are imported lazily: without them the studies run,
with no plots and no progress bar.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class TrainResult:
    """What a training run found: the parameters, the loss per step, the number of calls of
    the objective (with or without its gradient), and the wall time in seconds."""

    params: np.ndarray
    losses: list[float]
    evaluations: int
    seconds: float


def parse_args(description: str, methods: tuple[str, ...] = (),
               argv: list[str] | None = None) -> argparse.Namespace:
    """The flags every study takes: ``--quick``, ``--seed``, ``--method`` (when ``methods``)
    and ``--out`` (created; default ``case_study_output/<script name>``)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a small setting (seconds)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    if methods:
        parser.add_argument("--method", choices=methods, default=methods[0],
                            help="how gradients are taken")
    parser.add_argument("--out", default=None, help="folder for the plots")
    args = parser.parse_args(argv)
    # the calling study's file names its default folder
    script = Path(sys._getframe(1).f_globals.get("__file__", "study")).stem
    args.out = Path(args.out) if args.out is not None else Path("case_study_output") / script
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def adam(value_and_grad: Callable, x0, *, steps: int, lr: float, desc: str,
         quiet: bool = False) -> TrainResult:
    """Adam on ``value_and_grad(x) -> (loss, gradient)``; a tqdm bar when tqdm is installed."""
    x = np.array(x0, dtype=np.float64)
    m, v = np.zeros_like(x), np.zeros_like(x)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    result = TrainResult(params=x, losses=[], evaluations=0, seconds=0.0)
    start = time.perf_counter()
    bar = _progress(steps, desc, quiet)
    for step in range(1, steps + 1):
        value, grad = value_and_grad(x)
        grad = np.asarray(grad, np.float64)
        result.losses.append(float(value))
        result.evaluations += 1
        m = beta1 * m + (1 - beta1) * grad
        v = beta2 * v + (1 - beta2) * grad ** 2
        x = x - lr * (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + eps)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{float(value):.6g}")
    if bar is not None:
        bar.close()
    result.params, result.seconds = x, time.perf_counter() - start
    return result


def _progress(total: int, desc: str, quiet: bool):
    if quiet:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False)


def minimize(fun: Callable, x0, jac: Callable, *, method: str = "BFGS") -> TrainResult:
    """``scipy.optimize.minimize(fun, x0, jac=jac, method=method)``, counted and timed."""
    from scipy.optimize import minimize as scipy_minimize

    result = TrainResult(params=np.array(x0, dtype=np.float64), losses=[], evaluations=0,
                         seconds=0.0)

    def counted(x):
        result.evaluations += 1
        value = float(fun(x))
        result.losses.append(value)
        return value

    def counted_jac(x):
        result.evaluations += 1
        return np.asarray(jac(x), np.float64)

    start = time.perf_counter()
    found = scipy_minimize(counted, result.params, jac=counted_jac, method=method)
    result.params, result.seconds = np.asarray(found.x), time.perf_counter() - start
    return result


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plots (pip install -e '.[studies]')")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_loss(losses, path) -> Path | None:
    """The loss per step as a PNG at ``path``; None when matplotlib is missing."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(np.arange(len(losses)), losses)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def plot_landscape(f: Callable, xs, ys=None, *, trained=None, path) -> Path | None:
    """f over ``xs`` (a curve) or over ``xs`` × ``ys`` (a contour), the trained point marked."""
    plt = _pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(5, 4))
    if ys is None:
        ax.plot(xs, [f(x) for x in xs])
        if trained is not None:
            ax.plot([trained], [f(trained)], "r*", markersize=12)
    else:
        grid = np.array([[f(x, y) for x in xs] for y in ys])
        contour = ax.contourf(xs, ys, grid, levels=30)
        fig.colorbar(contour, ax=ax)
        if trained is not None:
            ax.plot([trained[0]], [trained[1]], "r*", markersize=12)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def results_table(rows: list[dict], title: str) -> str:
    """The rows as an aligned text table under ``title`` (columns: the first row's keys)."""
    columns = list(rows[0]) if rows else []
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    line = lambda values: "  ".join(v.rjust(w) for v, w in zip(values, widths))  # noqa: E731
    return "\n".join([title, line(columns), line(["-" * w for w in widths]),
                      *(line(r) for r in cells)])


def _cell(value) -> str:
    if isinstance(value, float | np.floating):
        return f"{value:.6g}"
    return str(value)


def check(name: str, found: float, reference: float, tol: float) -> bool:
    """Print how far ``found`` is from ``reference`` and whether that is within ``tol``."""
    diff = abs(float(found) - float(reference))
    passed = bool(diff <= tol)
    print(f"{name}: found {float(found):.10g}, reference {float(reference):.10g}, "
          f"|diff| {diff:.3g} (tol {tol:g}) {'ok' if passed else 'FAILED'}")
    return passed


def finish(passed: bool) -> int:
    """The exit code of a study: 0 when every self-check passed."""
    return 0 if passed else 1
