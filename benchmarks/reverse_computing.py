"""Reverse computing against stored carries and checkpoints on a long invertible recurrence.

    taskset -c 1 python benchmarks/reverse_computing.py            # 10^6 steps compiled
    python benchmarks/reverse_computing.py --steps 100000 --interpreter-steps 1000

The recurrence: a chain of ``--width`` pendulums stepped by leapfrog,
``x += dt·v; v -= dt·k·sin(x)`` (carries of 2·width elements), loss ``Σ x² + v²``, gradient
with respect to k (a vector) and dt. The loop's reverse sweep recovers the carries four
ways: by running the inverse step (``invertible=True``: nothing stored), from every stored
carry (the default), from ``checkpoint=2`` (strip-mining, ~2·√n carries) and from
``checkpoint=5`` (~5·n^(1/5) carries, up to 6 forward runs of each step). Each mode runs
in a fresh process, so the peak resident memory it reports (the high-water mark of the
gradient's second call, reset before it, over the memory resident before it) is its own;
"elements" counts the checkpoint-buffer elements of the derivative program. The gradients
of all modes are compared with the stored-carry one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402

MODES = {"reverse computing": {"invertible": True}, "stored carries": {},
         "checkpoint=2": {"checkpoint": 2}, "checkpoint=5": {"checkpoint": 5}}


def _loss(steps: int, options: dict) -> Any:
    import qdiff
    import qdiff.numpy as qnp

    def loss(k: Any, dt: Any, x0: Any) -> Any:
        def step(i: Any, c: Any) -> Any:
            x, v = c
            x = x + dt * v
            v = v - dt * k * qnp.sin(x)
            return x, v

        x, v = qdiff.fori_loop(0, steps, step, (x0, qnp.zeros_like(x0)), **options)
        return qnp.sum(x ** 2 + v ** 2)
    return loss


def _kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # resets VmHWM, the peak resident set (Linux ≥ 4.0)
        return True
    except OSError:
        return False


def measure(mode: str, engine: str, steps: int, width: int) -> dict:
    """One (mode, engine) in this process: time, stored elements, peak memory, gradient."""
    import numpy as np

    import qdiff

    options = MODES[mode]
    k, x0 = np.linspace(0.5, 1.5, width), np.linspace(0.1, 0.4, width)
    dt = 1e-3
    interpreted = qdiff.grad(_loss(steps, options), argnums=(0, 1))
    gradient = qdiff.jit(interpreted) if engine == "numba" else interpreted
    program = interpreted.trace(k, dt, x0)
    elements = sum(e.params["slots"] * e.inputs[0].type.size for e in program.all_eqns()
                   if e.primitive.name == "checkpoint_buffer")
    gradient(k, dt, x0)  # compiles for numba
    resident = _kib("VmRSS")
    peak_known = _reset_peak()
    t0 = time.perf_counter()
    g_k, g_dt = gradient(k, dt, x0)
    seconds = time.perf_counter() - t0
    peak = _kib("VmHWM") - resident if peak_known else None
    if engine == "numba":
        seconds = min(seconds, common.best_within(lambda: gradient(k, dt, x0), budget=2.0,
                                                  min_runs=2, max_runs=5))
    return {"seconds": seconds, "elements": elements, "peak_mib": peak and peak / 1024,
            "gradient": [*map(float, g_k), float(g_dt)]}


def _child(mode: str, engine: str, steps: int, width: int) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", mode, engine,
               str(steps), str(width)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{mode} on {engine} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10 ** 6, help="steps, compiled (Numba)")
    ap.add_argument("--interpreter-steps", type=int, default=10 ** 4,
                    help="steps on the NumPy interpreter (0: skip it)")
    ap.add_argument("--width", type=int, default=8, help="pendulums (carry: 2·width)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    common.pin_threads(1)
    if args.child:
        mode, engine, steps, width = args.child
        print(json.dumps(measure(mode, engine, int(steps), int(width))))
        return
    import numpy as np

    rows = []
    runs = [("numba", args.steps)] + ([("numpy", args.interpreter_steps)]
                                      if args.interpreter_steps else [])
    for engine, steps in runs:
        results = {mode: _child(mode, engine, steps, args.width) for mode in MODES}
        reference = np.array(results["stored carries"]["gradient"])
        for mode, r in results.items():
            error = np.max(np.abs(np.array(r["gradient"]) - reference)) / np.max(
                np.abs(reference))
            peak = "n/a" if r["peak_mib"] is None else f"{r['peak_mib']:.1f}"
            rows.append([engine, f"{steps:.0e}", mode, str(r["elements"]), peak,
                         f"{r['seconds'] * 1e3:.1f}", f"{error:.1e}"])
    common.print_table(["engine", "steps", "reversal", "elements stored", "peak MiB",
                        "gradient ms", "rel. diff"], rows)


if __name__ == "__main__":
    main()
