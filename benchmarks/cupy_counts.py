"""What the CuPy simulator asks of a GPU per gate and per parameter, counted without one.

    python benchmarks/cupy_counts.py                  # n = 8, L = 2 and 4, <sum Z_i>
    python benchmarks/cupy_counts.py --sizes 10 --layers 2 4 8
    python benchmarks/cupy_counts.py --sizes 14 --layers 10 --host-time
    python benchmarks/cupy_counts.py --sizes 20 24 --layers 10 --count-only

Runs the hardware-efficient ansatz's value (``qm.run``, fusion on) and adjoint gradient
(``qm.gradient``) on the CuPy back end over ``tests/quantum/simulator/counting_cupy.py``, a
NumPy stand-in for CuPy that counts host-to-device copies (h2d), device-to-host copies that
wait for the device (d2h) and kernel launches, and checks both against the NumPy back end.
Prints the counts per call and per gate (value) or per parameter (gradient); the differences
between two layer counts give the cost of one more layer, free of per-call constants.
``--host-time`` also times the calls with the kernels counted but not run: the host's side
of a GPU run (Python and planning; CuPy's own few microseconds a launch come on top).
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # common.py, however started
sys.path.insert(0, os.path.dirname(HERE))  # the tests' stand-in for CuPy

import common  # noqa: E402
import numpy as np  # noqa: E402

from qdiff import quantum as qm  # noqa: E402
from qdiff.quantum.simulator.cupy_backend import CupyBackend  # noqa: E402
from tests.quantum.simulator.counting_cupy import CountingCupy  # noqa: E402


def host_time(n: int, layers: int, repeats: int = 5) -> dict[str, float]:
    """Seconds of host work per warm call (best of ``repeats``), kernels counted but not run:
    Python, planning and the host's share of each launch, not CuPy's own launch cost."""
    be = CupyBackend(xp=CountingCupy(run_kernels=False))
    program, x = _program(n, layers)
    calls = {"value": lambda: qm.run(program, x, backend=be),
             "gradient": lambda: qm.gradient(program, x, backend=be)}
    out = {}
    for what, call in calls.items():
        call()
        out[what] = common.best_of(call, repeats)[0]
    return out


def _program(n: int, layers: int) -> tuple:
    obs = qm.PauliSum([(1.0, "I" * k + "Z" + "I" * (n - k - 1)) for k in range(n)])
    return common.hea_program(n, layers, obs), common.hea_angles(n, layers, seed=1)


def counts(n: int, layers: int, use_kernels: bool = True,
           run_kernels: bool = True) -> dict[str, dict[str, int]]:
    """``{"value": counts, "gradient": counts}`` of one warm call each, checked against NumPy
    (``run_kernels=False``: kernels counted, not run, nothing checked; for large registers)."""
    cp = CountingCupy(run_kernels=run_kernels)
    be = CupyBackend(use_kernels=use_kernels, xp=cp)
    program, x = _program(n, layers)
    out = {}
    for what, call in (("value", lambda b: qm.run(program, x, backend=b).values),
                       ("gradient", lambda b: qm.gradient(program, x, backend=b).grad)):
        call(be)  # warm: plans, caches of device tables
        cp.reset()
        got = call(be)
        out[what] = cp.reset()
        if not run_kernels:
            continue
        want = call("numpy")
        np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float),
                                   rtol=1e-10, atol=1e-12)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[8])
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--no-kernels", action="store_true",
                    help="the array-module code instead of the CUDA kernels")
    ap.add_argument("--count-only", action="store_true",
                    help="count kernel launches without running them (nothing checked)")
    ap.add_argument("--host-time", action="store_true",
                    help="also time the host's work per call (kernels not run)")
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        for layers in args.layers:
            c = counts(n, layers, not args.no_kernels, not args.count_only)
            gates, params = n * layers * 2 + (n - 1) * layers, 2 * n * layers
            for what, per in (("value", gates), ("gradient", params)):
                k = c[what]
                unit = "gate" if what == "value" else "parameter"
                rows.append([str(n), str(layers), what, str(k["h2d"]), str(k["d2h"]),
                             str(k["launches"]),
                             f"{k['h2d'] / per:.2f} / {k['d2h'] / per:.2f} / "
                             f"{k['launches'] / per:.2f} per {unit}"])
    common.print_table(["n", "L", "call", "h2d", "d2h", "launches", "per unit"], rows)
    if args.host_time:
        rows = []
        for n in args.sizes:
            for layers in args.layers:
                t = host_time(n, layers)
                rows.append([str(n), str(layers), f"{t['value'] * 1e3:.1f}",
                             f"{t['gradient'] * 1e3:.1f}"])
        print()
        common.print_table(["n", "L", "value host ms", "gradient host ms"], rows)


if __name__ == "__main__":
    main()
