"""Batches of parameter sets through one circuit: `qdiff.vmap` against a Python loop over
the members and against PennyLane lightning with parameter broadcasting, value and gradient.

    python benchmarks/batching.py                      # n = 12, L = 10, 64 parameter sets
    python benchmarks/batching.py --quick              # n = 8, L = 5, 16 sets
    python benchmarks/batching.py --sizes 6 12 --layers 10 --batch 64 --threads 1
    python benchmarks/batching.py --backend cupy       # vmap's simulation on the GPU

Circuit: the hardware-efficient ansatz (`common.hea_program`) on n qubits, L layers, with
the observable Σ_i Z_i; the batch holds ``--batch`` independent sets of its 2nL angles.

Methods (each through its library's user API; times in seconds for the whole batch):
  vmap       ``qdiff.vmap(program)(W)`` (value) and ``qdiff.vmap(qdiff.value_and_grad(program))(W)``
             (each member's value and gradient): one batched simulation, one batched
             adjoint sweep (``--backend``: ``auto``, the Numba lane kernels; ``numpy`` or
             ``cupy``, the array-module simulator inside ``qm.batched_backend``)
  loop       ``[program(w) for w in W]`` and ``[qdiff.value_and_grad(program)(w) for w in W]``
  lightning  PennyLane lightning.qubit, a QNode with diff_method="adjoint" called once on the
             broadcast angles (batch on the last axis); the gradient is ``qml.grad`` of the
             sum over the batch, which is each member's gradient (members are independent)

Each of --repeats rounds times every method once (value, then value and gradient), and
each time is the best over the rounds. Columns: value and value+gradient time, and the
ratios vmap / loop and vmap / lightning of the value+gradient times (goals: at most 0.2
and 0.5); max|dg| is the largest difference between each method's gradients and the
loop's. Threads: every pool is pinned to --threads (default 1) before anything is imported.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402


def _parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=None, help="default 12")
    ap.add_argument("--layers", type=int, default=None, help="default 10")
    ap.add_argument("--batch", type=int, default=None, help="parameter sets (default 64)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="n = 8, L = 5, 16 sets, 2 repeats")
    ap.add_argument("--no-lightning", action="store_true")
    common.backend_argument(ap)
    args = ap.parse_args()
    quick = args.quick
    args.sizes = args.sizes or ([8] if quick else [12])
    args.layers = args.layers or (5 if quick else 10)
    args.batch = args.batch or (16 if quick else 64)
    args.repeats = min(args.repeats, 2) if quick else args.repeats
    return args


def _observable(n: int) -> str:
    return " + ".join("I" * i + "Z" + "I" * (n - i - 1) for i in range(n))


def qdiff_methods(n: int, layers: int, angles: Any,
                  backend: str = "auto") -> dict[str, tuple[Callable, Callable]]:
    import qdiff

    program = common.hea_program(n, layers, _observable(n))
    both = qdiff.value_and_grad(program)
    batched, batched_both = qdiff.vmap(program), qdiff.vmap(both)

    return {
        "vmap": (lambda: common.on_batched_backend(backend, batched)(angles),
                 lambda: common.on_batched_backend(backend, batched_both)(angles)),
        "loop": (lambda: [program(w) for w in angles], lambda: [both(w) for w in angles]),
    }


def lightning_methods(n: int, layers: int, angles: Any) -> dict[str, tuple[Callable, Callable]]:
    found = common.lightning_device(n)
    if found is None:
        return {}
    qml, device = found
    from pennylane import numpy as pnp

    observable = qml.Hamiltonian([1.0] * n, [qml.PauliZ(i) for i in range(n)])

    @qml.qnode(device, diff_method="adjoint")
    def circuit(a: Any) -> Any:
        common.pennylane_hea(qml, n, layers, a)
        return qml.expval(observable)

    broadcast = pnp.array(pnp.moveaxis(pnp.asarray(angles), 0, -1), requires_grad=True)
    summed = qml.grad(lambda a: pnp.sum(circuit(a)))

    def value_and_grad() -> tuple[Any, Any]:
        return circuit(broadcast), pnp.moveaxis(summed(broadcast), -1, 0)

    return {"lightning": (lambda: circuit(broadcast), value_and_grad)}


def _gradients(result: Any, name: str) -> Any:
    import numpy as np

    if name == "loop":
        return np.stack([g for _, g in result])
    return np.asarray(result[1])


def main() -> None:
    args = _parse()
    common.pin_threads(args.threads)
    import numpy as np

    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(0)
        angles = np.stack([common.hea_angles(n, args.layers, rng) for _ in range(args.batch)])
        methods = {**qdiff_methods(n, args.layers, angles, args.backend)}
        if not args.no_lightning:
            methods.update(lightning_methods(n, args.layers, angles))
        for value, both in methods.values():
            value(), both()  # warm up: tracing, compiling
        # every method's value and value+gradient in each round, so that the ratios are
        # measured under the same load
        runs = [run for pair in methods.values() for run in pair]
        best, results = common.best_of_rounds(runs, args.repeats)
        times = {name: (best[2 * k], best[2 * k + 1]) for k, name in enumerate(methods)}
        grads = {name: _gradients(results[2 * k + 1], name) for k, name in enumerate(methods)}
        for name, (t_value, t_both) in times.items():
            dg = float(np.max(np.abs(grads[name] - grads["loop"])))
            ratios = [f"{t_both / times[other][1]:.2f}" if other in times else "-"
                      for other in ("loop", "lightning")] if name == "vmap" else ["", ""]
            rows.append([str(n), str(args.layers), str(args.batch), name, f"{t_value:.4f}",
                         f"{t_both:.4f}", *ratios, f"{dg:.1e}"])
    print(f"vmap's batched simulator: {args.backend}")
    common.print_table(["n", "L", "batch", "method", "value s", "value+grad s",
                        "vmap/loop", "vmap/lightning", "max|dg|"], rows)


if __name__ == "__main__":
    main()
