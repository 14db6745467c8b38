"""Kernel launches per call of the CUDA target's D-LSTM value and gradient, counted without a
GPU: under the CUDA simulator, with `device.launch` replaced by a counter that runs nothing
(the host function runs as on a GPU, its loops and launches included; kernels compute
nothing, so the results are meaningless and not read).

    NUMBA_ENABLE_CUDASIM=1 python benchmarks/cuda_launches.py            # l=2 c=1024 b=14
    NUMBA_ENABLE_CUDASIM=1 python benchmarks/cuda_launches.py --chars 32 --b 4
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import classical_ad  # noqa: E402


def count_launches(compiled: Any, args: tuple) -> int:
    """Launches (kernels, fills, final folds) of one call of ``compiled``, none run."""
    from qdiff.compiler.cuda import device as rtc

    counted = [0]

    def launch(kernel: Any, blocks: int, threads: int, arguments: Any) -> None:
        counted[0] += 1

    saved, rtc.launch = rtc.launch, launch
    marked, rtc.raise_marked = getattr(rtc, "raise_marked", None), lambda mark: None
    try:
        compiled(*args)
    finally:
        rtc.launch = saved
        if marked is not None:
            rtc.raise_marked = marked
    return counted[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--chars", type=int, default=1024)
    parser.add_argument("--b", type=int, default=14)
    options = parser.parse_args()
    if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        sys.exit("set NUMBA_ENABLE_CUDASIM=1 (launches are counted under the simulator)")
    import numpy as np

    import qdiff
    import qdiff.numpy as qnp

    rng = np.random.default_rng(0)
    layers, b = options.layers, options.b
    args = (0.5 * rng.normal(size=(2 * layers, 4 * b)), rng.normal(size=(3, b)),
            rng.normal(size=(2 * layers, b)), rng.normal(size=(options.chars, b)))

    def objective(*values: Any) -> Any:
        return classical_ad.lstm(qnp, lambda lo, hi, body, init: qdiff.fori_loop(
            lo, hi, body, init), *values)

    value = qdiff.jit(objective, backend="numba-cuda")
    gradient = qdiff.jit(qdiff.grad(objective, argnums=(0, 1)), backend="numba-cuda")
    for label, compiled in (("value", value), ("gradient", gradient)):
        compiled.compiled(*args)
        kernels = compiled.source.count("@cuda.jit(cache=True)")
        print(f"D-LSTM l={layers} c={options.chars} b={b} {label}: "
              f"{count_launches(compiled, args)} launches per call, {kernels} kernels")


if __name__ == "__main__":
    main()
