"""Per-member gradients of programs whose loops measure: `qdiff.vmap(qdiff.value_and_grad(f))`
(one batched branching run and one reverse sweep) against a Python loop of
`qdiff.value_and_grad(f)` calls.

    python benchmarks/batched_loops.py                   # 64 members, 5 rounds
    python benchmarks/batched_loops.py --batch 8 --repeats 1
    python benchmarks/batched_loops.py --backend cupy    # the batched run on a GPU

Programs (`qdiff.quantum.lang.examples`): ``repeat_until_one`` (a while loop on a
measurement, θ in [0.8, 2.5]: about 10 to 150 rounds before the mass going on is below
tol), ``cycle_walk`` (a coined walk on a 4-cycle stepped until found on the far half, θ in
[0.3, 2.5]) and ``measured_rounds`` (a fori_loop of 3 rounds that measure with reset).
Each of --repeats rounds times the batch and the loop once, one after the other, so both
see the same load; the table shows the best of each, in seconds for the whole batch,
their ratio, and the largest difference between the two gradients relative to the
largest gradient of the loop.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402


def _parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.batch_arguments(ap)
    return ap.parse_args()


def main() -> None:
    args = _parse()
    common.pin_threads(args.threads)
    import numpy as np

    import qdiff
    from qdiff.quantum.lang import examples

    rng = np.random.default_rng(0)
    cases = [("repeat_until_one", examples.repeat_until_one, rng.uniform(0.8, 2.5, args.batch)),
             ("cycle_walk", examples.cycle_walk, rng.uniform(0.3, 2.5, args.batch)),
             ("measured_rounds", examples.measured_rounds,
              rng.uniform(-2, 2, (args.batch, 2)))]
    print(f"{'program':<18} {'members':>7} {'vmap s':>9} {'loop s':>9} {'vmap/loop':>9} "
          f"{'max rel. diff':>13}")
    for name, fn, xs in cases:
        program = qdiff.program(fn)
        batched = common.on_batched_backend(args.backend,
                                            qdiff.vmap(qdiff.value_and_grad(program)))
        member = qdiff.value_and_grad(program)
        batched(xs[:2]), member(xs[0])   # compile and trace first
        best, ((_, grads), loop) = common.best_of_rounds(
            [lambda b=batched, xs=xs: b(xs),
             lambda m=member, xs=xs: np.stack([np.asarray(m(x)[1], np.float64) for x in xs])],
            args.repeats)
        diff = float(np.max(np.abs(grads - loop)) / max(float(np.max(np.abs(loop))), 1e-300))
        print(f"{name:<18} {args.batch:>7} {best[0]:>9.3f} {best[1]:>9.3f} "
              f"{best[0] / best[1]:>9.3f} {diff:>13.1e}")


if __name__ == "__main__":
    main()
