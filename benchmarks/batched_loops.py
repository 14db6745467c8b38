"""Per-member gradients of programs whose loops measure: `qdiff.vmap(qdiff.value_and_grad(f))`
(one batched branching run and one reverse sweep) against a Python loop of
`qdiff.value_and_grad(f)` calls.

    python benchmarks/batched_loops.py                   # 64 members, 5 rounds
    python benchmarks/batched_loops.py --batch 8 --repeats 1
    python benchmarks/batched_loops.py --backend cupy    # the batched run on a GPU
    python benchmarks/batched_loops.py --memory-rounds 250 1000 4000 --batch 8

Programs (`qdiff.quantum.lang.examples`): ``repeat_until_one`` (a while loop on a
measurement, θ in [0.8, 2.5]: about 10 to 150 rounds before the mass going on is below
tol), ``cycle_walk`` (a coined walk on a 4-cycle stepped until found on the far half, θ in
[0.3, 2.5]) and ``measured_rounds`` (a fori_loop of 3 rounds that measure with reset).
Each of --repeats rounds times the batch and the loop once, one after the other, so both
see the same load; the table shows the best of each, in seconds for the whole batch,
their ratio, and the largest difference between the two gradients relative to the
largest gradient of the loop.

With --memory-rounds, the table is instead the batched sweep's traced peak memory
(tracemalloc) and time against the rounds: ``repeat_until_one`` at the angles whose mass
going on falls below tol = 1e-12 after about R rounds (θ spread over 2% across the members),
with the rounds in checkpointed segments and their exits run to the end as segments close
(the default, `qdiff/quantum/gradients/loop_segments.py`) and with every round kept (up to
--stored-up-to rounds). Seconds are of a call without tracing, the best of --repeats.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402


def _parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common.batch_arguments(ap)
    ap.add_argument("--memory-rounds", type=int, nargs="+", default=None,
                    help="print peak memory against these rounds instead")
    ap.add_argument("--stored-up-to", type=int, default=1000,
                    help="with --memory-rounds: keep every round up to this many rounds")
    return ap.parse_args()


def memory_table(round_counts: list[int], members: int, stored_up_to: int,
                 repeats: int) -> None:
    """Print the batched sweep's traced peak and time against the rounds of
    ``repeat_until_one``, in segments and with every round kept."""
    import tracemalloc

    import numpy as np

    import qdiff
    from qdiff.quantum.gradients import batched_branch_adjoint
    from qdiff.quantum.lang import examples

    program = qdiff.trace(examples.repeat_until_one, 0.3)

    def sweep(theta: np.ndarray, checkpoints: bool) -> np.ndarray:
        return batched_branch_adjoint._recorded(program, [theta], [True], members, [True],
                                                checkpoints=checkpoints)[1][0]

    sweep(np.full(members, 1.5), True)   # compile first
    print(f"{'repeat_until_one':<24} {'members':>7} {'rounds':>7} {'peak MB':>9} {'seconds':>9} "
          f"{'max rel. diff':>13}")
    for rounds in round_counts:
        angle = 2 * np.arcsin(np.sqrt(-np.log(1e-12) / rounds))
        theta = angle * np.linspace(1.0, 1.02, members)
        found = {}
        for name, checkpoints in (("every round kept", False), ("in segments", True)):
            if not checkpoints and rounds > stored_up_to:
                continue
            seconds = min(_timed(lambda c=checkpoints, t=theta: sweep(t, c))
                          for _ in range(repeats))
            tracemalloc.start()
            try:
                found[name] = sweep(theta, checkpoints)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            kept = found.get("every round kept")
            diff = "" if kept is None or not checkpoints else (
                f"{float(np.max(np.abs(found[name] - kept)) / np.max(np.abs(kept))):>13.1e}")
            print(f"{name:<24} {members:>7} {rounds:>7} {peak / 2 ** 20:>9.2f} {seconds:>9.2f} "
                  f"{diff}")


def _timed(call: Any) -> float:
    import time

    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    args = _parse()
    common.pin_threads(args.threads)
    if args.memory_rounds:
        memory_table(args.memory_rounds, args.batch, args.stored_up_to, args.repeats)
        return
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
