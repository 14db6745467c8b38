"""What every case study shares: flags, training loops, plots, the results table, self-checks.

A study parses its flags with :func:`parse_args`, trains with :func:`adam` or
:func:`minimize` (both count program evaluations and time themselves), saves plots with
:func:`plot_loss` and :func:`plot_landscape`, prints :func:`results_table`, compares what it
found with an independent reference by :func:`check`, and returns :func:`finish` from its
``main``. matplotlib and tqdm (the ``studies`` extra) are imported only when used; without
them a study still runs and checks itself, it just draws no plot and no progress bar.
"""

from __future__ import annotations

import argparse
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np


def _caller_script() -> str:
    """The file name (without .py) of the study that called into this module."""
    here = Path(__file__).resolve()
    for frame in inspect.stack()[1:]:
        path = Path(frame.filename)
        if path.suffix == ".py" and path.resolve() != here:
            return path.stem
    return "case_study"


def parse_args(description: str, methods: tuple[str, ...] = (),
               argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The flags every study takes: ``--quick``, ``--seed``, ``--method`` and ``--out``.

    ``--method`` is offered only when ``methods`` is not empty (its default is the first);
    ``--out`` defaults to ``case_study_output/<script name>`` and is created.

    >>> import tempfile
    >>> out = tempfile.mkdtemp()
    >>> args = parse_args("demo", ("adjoint", "sample"), ["--quick", "--out", out])
    >>> args.quick, args.seed, args.method, args.out.is_dir()
    (True, 0, 'adjoint', True)
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help="a small setting that finishes in seconds (used by the tests)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice")
    if methods:
        parser.add_argument("--method", choices=methods, default=methods[0],
                            help=f"how gradients are taken (default {methods[0]})")
    parser.add_argument("--out", type=Path,
                        default=Path("case_study_output") / _caller_script(),
                        help="folder for the plots (created)")
    args = parser.parse_args(None if argv is None else [str(a) for a in argv])
    args.out = Path(args.out)
    args.out.mkdir(parents=True, exist_ok=True)
    return args


@dataclass
class TrainResult:
    """What a training run returns: the final parameters, the loss at each step, how many
    times the objective (value or gradient) was evaluated, and the wall time in seconds."""

    params: np.ndarray
    losses: list[float] = field(default_factory=list)
    evaluations: int = 0
    seconds: float = 0.0


def _progress(total: int, desc: str, quiet: bool):
    """A tqdm bar, or None when tqdm is missing or the caller asked for quiet."""
    if quiet:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, leave=False)


def adam(value_and_grad: Callable[[np.ndarray], tuple[float, np.ndarray]], x0, *,
         steps: int, lr: float, desc: str, quiet: bool = False,
         betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> TrainResult:
    """``steps`` steps of Adam on ``value_and_grad(x) -> (loss, gradient)`` from ``x0``.

    ``losses[k]`` is the loss at the k-th iterate (before its step); ``params`` is the last
    iterate. A tqdm bar shows the loss while it runs (none when tqdm is missing or ``quiet``).

    >>> r = adam(lambda x: (float(x @ x), 2 * x), [1.0, -2.0], steps=300, lr=0.1,
    ...          desc="quadratic", quiet=True)
    >>> bool(np.abs(r.params).max() < 1e-3), r.evaluations, len(r.losses)
    (True, 300, 300)
    """
    x = np.array(x0, dtype=float)
    m, v = np.zeros_like(x), np.zeros_like(x)
    losses: list[float] = []
    bar = _progress(steps, desc, quiet)
    start = time.perf_counter()
    for k in range(1, steps + 1):
        value, grad = value_and_grad(x)
        grad = np.asarray(grad, dtype=float).reshape(x.shape)
        losses.append(float(value))
        m = betas[0] * m + (1 - betas[0]) * grad
        v = betas[1] * v + (1 - betas[1]) * grad ** 2
        x = x - lr * (m / (1 - betas[0] ** k)) / (np.sqrt(v / (1 - betas[1] ** k)) + eps)
        if bar is not None:
            bar.set_postfix(loss=f"{float(value):.6g}")
            bar.update()
    if bar is not None:
        bar.close()
    return TrainResult(x, losses, steps, time.perf_counter() - start)


def minimize(fun: Callable, x0, jac: Callable | bool, *, method: str = "BFGS") -> TrainResult:
    """``scipy.optimize.minimize(fun, x0, jac=jac, method=method)``, counted and timed.

    ``jac`` is the gradient function, or ``True`` when ``fun`` returns ``(value, gradient)``.
    ``evaluations`` counts calls of ``fun`` and of ``jac``; ``losses`` holds the loss after
    each iteration (the first entry at ``x0``).

    >>> r = minimize(lambda x: float((x - 3) @ (x - 3)), [0.0], lambda x: 2 * (x - 3))
    >>> bool(abs(r.params[0] - 3) < 1e-6), r.losses[0]
    (True, 9.0)
    """
    from scipy.optimize import minimize as scipy_minimize

    calls = [0]
    seen: dict[bytes, float] = {}

    def counted_fun(x):
        calls[0] += 1
        out = fun(x)
        value = out[0] if jac is True else out
        seen[np.asarray(x, dtype=float).tobytes()] = float(value)
        return out

    def counted_jac(x):
        calls[0] += 1
        return jac(x)

    def loss_at(x) -> float:
        key = np.asarray(x, dtype=float).tobytes()
        if key not in seen:
            counted_fun(x)
        return seen[key]

    x0 = np.array(x0, dtype=float)
    start = time.perf_counter()
    losses = [loss_at(x0)]
    result = scipy_minimize(counted_fun, x0, jac=jac if jac is True else counted_jac,
                            method=method, callback=lambda xk: losses.append(loss_at(xk)))
    return TrainResult(np.asarray(result.x, dtype=float), losses, calls[0],
                       time.perf_counter() - start)


def _pyplot():
    """matplotlib's pyplot on a file-only back end, or None (with a note) when missing."""
    try:
        import matplotlib
    except ImportError:
        print("(matplotlib is not installed: no plot; pip install 'qdiff[studies]')")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_loss(losses: Sequence[float], path) -> Path | None:
    """Save the loss curve (log scale when every loss is positive) as a PNG at ``path``.

    Returns the path, or None (with a printed note) when matplotlib is missing.

    >>> import tempfile
    >>> p = plot_loss([3.0, 1.0, 0.5], Path(tempfile.mkdtemp()) / "loss.png")
    >>> p is None or p.exists()
    True
    """
    plt = _pyplot()
    if plt is None:
        return None
    losses = np.asarray(losses, dtype=float)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(np.arange(len(losses)), losses)
    if len(losses) and np.all(losses > 0):
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    return _save(fig, ax, path)


def _grid_values(f, xs: np.ndarray, ys: np.ndarray | None) -> np.ndarray:
    """f on the grid: a callable is called per point (f(x) or f(x, y)); an array of values
    already computed (shape (len(xs),), or (len(ys), len(xs)) for two parameters) is used."""
    if not callable(f):
        return np.asarray(f, dtype=float)
    if ys is None:
        return np.array([float(f(x)) for x in xs])
    return np.array([[float(f(x, y)) for x in xs] for y in ys])


def plot_landscape(f, xs, ys=None, *, trained=None, path) -> Path | None:
    """Save the objective over one parameter (a curve) or two (a contour plot) as a PNG.

    ``f`` is a callable (``f(x)``, or ``f(x, y)`` with two parameters) or the array of its
    values on the grid (``(len(ys), len(xs))`` for two). ``trained`` marks trained points:
    one point, or a sequence of them. Returns the path, or None when matplotlib is missing.

    >>> import tempfile
    >>> xs = np.linspace(-1, 1, 5)
    >>> p = plot_landscape(lambda x, y: x * x + y * y, xs, xs, trained=(0.0, 0.0),
    ...                    path=Path(tempfile.mkdtemp()) / "landscape.png")
    >>> p is None or p.exists()
    True
    """
    plt = _pyplot()
    if plt is None:
        return None
    xs = np.asarray(xs, dtype=float)
    ys = None if ys is None else np.asarray(ys, dtype=float)
    values = _grid_values(f, xs, ys)
    points = None if trained is None else np.asarray(trained, dtype=float)
    fig, ax = plt.subplots(figsize=(5, 4))
    if ys is None:
        ax.plot(xs, values)
        if points is not None:
            px = points.reshape(-1)
            ax.plot(px, _grid_values(f, px, None) if callable(f) else
                    np.interp(px, xs, values), "o", color="C3", label="trained")
            ax.legend()
        ax.set_xlabel("parameter")
        ax.set_ylabel("objective")
    else:
        contour = ax.contourf(xs, ys, values, levels=30)
        fig.colorbar(contour, ax=ax)
        if points is not None:
            points = points.reshape(-1, 2)
            ax.plot(points[:, 0], points[:, 1], "x", color="C3", markersize=9,
                    label="trained")
            ax.legend()
        ax.set_xlabel("parameter 1")
        ax.set_ylabel("parameter 2")
    return _save(fig, ax, path)


def _cell(value) -> str:
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, np.ndarray) or (isinstance(value, (list, tuple)) and value
                                         and all(isinstance(v, (int, float, np.number))
                                                 for v in value)):
        return "[" + ", ".join(f"{float(v):.4g}" for v in np.ravel(value)) + "]"
    return str(value)


def results_table(rows: list[dict], title: str) -> str:
    """An aligned text table with a title; columns are the rows' keys in first-seen order.

    >>> print(results_table([{"method": "adjoint", "loss": 1e-7},
    ...                      {"method": "sample", "loss": 0.25, "steps": 3}], "demo"))
    demo
    method   loss   steps
    -------  -----  -----
    adjoint  1e-07
    sample   0.25   3
    """
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    cells = [[_cell(row[c]) if c in row else "" for c in columns] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
    lines = [title,
             "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip(),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    return "\n".join(lines)


def check(name: str, found: float, reference: float, tol: float) -> bool:
    """Print how far ``found`` is from an independent ``reference`` and whether that is
    within ``tol``; return whether it passed (a NaN never passes).

    >>> check("optimum", 0.5004, 0.5, 1e-3)
    optimum: found 0.5004, reference 0.5, |diff| 0.0004 (tol 0.001) ok
    True
    """
    diff = abs(float(found) - float(reference))
    passed = bool(diff <= tol)
    print(f"{name}: found {float(found):.10g}, reference {float(reference):.10g}, "
          f"|diff| {diff:.3g} (tol {tol:.3g}) {'ok' if passed else 'FAILED'}")
    return passed


def finish(passed: bool) -> int:
    """The exit code of a study's ``main``: 0 when every self-check passed, else 1.

    >>> finish(True)
    all self-checks passed
    0
    """
    print("all self-checks passed" if passed else "SELF-CHECK FAILED")
    return 0 if passed else 1


def _save(fig, ax, path) -> Path:
    """Write a plot as a PNG (``ax`` with a light grid) and close it."""
    import matplotlib.pyplot as plt

    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path
