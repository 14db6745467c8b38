"""Sample mode on unbounded loops: shots per second of the trajectory runner (one shot at a
time, Python work per equation per shot) against the batch runner (every shot of a chunk
together, Numba kernels over the batch), on repeat-until-success and the 6-qubit walk; then
samples per second of the randomized parameter-shift gradient estimator, trajectory by
trajectory against batched.

    python benchmarks/loops.py                 # 10^5 batched shots, 300 one by one
    python benchmarks/loops.py --shots 20000 --python-shots 100

The programs are the case studies' (``case_studies/repeat_until_success.py``: rounds and
<Z> of the 2-qubit RUS loop at θ = 1.1; ``case_studies/quantum_walk.py``: J(t) of the
6-qubit walk at t = (0.3, 1.2)); each estimate is printed with its standard error next to
the exact value (for the gradient: dE[rounds]/dθ, and dJ/dt1). Each runner is timed once
after a warm-up run (which compiles the kernels); the speed-up column is the ratio of
shots (samples) per second.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "case_studies"))  # the studies and their `common`


def _programs() -> list[tuple[str, Any, Any, float, Any, float]]:
    """(name, function, argument, exact value, cotangent, exact gradient's first entry)."""
    import numpy as np
    import quantum_walk
    import repeat_until_success

    from qdiff import quantum as qm

    theta = 1.1
    _, rounds, _, d_rounds = repeat_until_success.closed_form(theta)
    t = np.array([0.3, 1.2])
    walk = quantum_walk.j_from_p(float(qm.run(quantum_walk.success_probability, t).values))
    d_walk = qm.gradient(quantum_walk.objective, t, tol=1e-10).grad[0]
    return [("RUS (2 qubits), E[rounds]", repeat_until_success.rus_rounds_and_z, theta, rounds,
             [np.ones(()), np.zeros(())], d_rounds),
            ("6-qubit walk, J(t)", quantum_walk.objective, t, float(walk), [np.ones(())],
             float(d_walk))]


def shots_per_second(sample: Any, program: Any, values: Any, options: Any) -> tuple[float, Any]:
    """(shots per second, result) of one timed run of ``sample`` after a warm-up (program
    and values None: ``sample(options)``)."""
    def call(opts: Any) -> Any:
        return sample(opts) if program is None else sample(program, values, opts)

    call(options.replace(shots=min(options.shots, 50)))
    start = time.perf_counter()
    result = call(options)
    return options.shots / (time.perf_counter() - start), result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shots", type=int, default=100_000, help="shots of the batch runner")
    ap.add_argument("--python-shots", type=int, default=300,
                    help="shots of the trajectory runner")
    ap.add_argument("--samples", type=int, default=20_000,
                    help="samples of the batched gradient estimator")
    ap.add_argument("--python-samples", type=int, default=60,
                    help="samples of the gradient estimator trajectory by trajectory")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    import numpy as np

    import qdiff
    from qdiff.ir.passes.unpack_scalars import unpack_scalars
    from qdiff.quantum.execution.options import RunOptions
    from qdiff.quantum.execution.run import sample_trajectories
    from qdiff.quantum.execution.shot_batch import sample_batched
    from qdiff.quantum.gradients.batched_shift import batched_parameter_shift
    from qdiff.quantum.gradients.shift_gradient import sampled_parameter_shift

    print(f"{'program':<28}{'runner':<14}{'shots':>8}{'shots/s':>11}{'speed-up':>10}"
          f"{'estimate ± stderr':>22}{'exact':>9}")
    studies = _programs()
    for name, f, x, exact, _, _ in studies:
        program = unpack_scalars(qdiff.trace(f, x))
        values = [np.asarray(x)]
        options = RunOptions(mode="sample", seed=args.seed)
        rows = []
        for runner, sample, shots in (("trajectories", sample_trajectories, args.python_shots),
                                      ("batch", sample_batched, args.shots)):
            rate, result = shots_per_second(sample, program, values,
                                            options.replace(shots=shots))
            value = float(np.ravel(result.values if not isinstance(result.values, tuple)
                                   else result.values[0])[0])
            error = float(np.ravel(result.stderr if not isinstance(result.stderr, tuple)
                                   else result.stderr[0])[0])
            rows.append((runner, shots, rate, value, error))
        base = rows[0][2]
        for runner, shots, rate, value, error in rows:
            estimate = f"{value:.4f} ± {error:.4f}"
            print(f"{name:<28}{runner:<14}{shots:>8}{rate:>11.0f}{rate / base:>9.0f}x"
                  f"{estimate:>22}{exact:>9.4f}")

    print(f"\n{'gradient (parameter shift)':<28}{'estimator':<14}{'samples':>8}"
          f"{'samples/s':>11}{'speed-up':>10}{'estimate ± stderr':>22}{'exact':>9}")
    for name, f, x, _, cotangent, exact in studies:
        program = qdiff.trace(f, x)
        values = [np.asarray(x)]
        rows = []
        for runner, estimate, samples in (
                ("trajectories", sampled_parameter_shift, args.python_samples),
                ("batch", batched_parameter_shift, args.samples)):
            def run(options, estimate=estimate, program=program, values=values,
                    cotangent=cotangent):
                return estimate(program, values, cotangent, [0], options)

            rate, result = shots_per_second(run, None, None, options.replace(shots=samples))
            rows.append((runner, samples, rate, float(np.ravel(result.grads[0])[0]),
                         float(np.ravel(result.grad_stderr[0])[0])))
        base = rows[0][2]
        for runner, samples, rate, value, error in rows:
            estimate = f"{value:.4f} ± {error:.4f}"
            print(f"{name:<28}{runner:<14}{samples:>8}{rate:>11.0f}{rate / base:>9.0f}x"
                  f"{estimate:>22}{exact:>9.4f}")


if __name__ == "__main__":
    main()
