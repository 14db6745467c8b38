"""Sample mode on unbounded loops: shots per second of the trajectory runner (one shot at a
time, Python work per equation per shot) against the batch runner (every shot of a chunk
together, Numba kernels over the batch), on repeat-until-success and the 6-qubit walk; then
samples per second of the randomized parameter-shift gradient estimator, trajectory by
trajectory against batched; then the exact adjoint's peak memory and time against the number
of rounds of the 6-qubit walk, with every round's records stored and with the rounds in
checkpointed segments (``qdiff/quantum/gradients/loop_segments.py``).

    python benchmarks/loops.py                 # 10^5 batched shots, 300 one by one
    python benchmarks/loops.py --shots 20000 --python-shots 100
    python benchmarks/loops.py --only-adjoint --rounds 100 1000 10000 --stored-up-to 1000
    python benchmarks/loops.py --only-sampling --backend cupy   # the batch's states on a GPU

The programs are the case studies' (``case_studies/repeat_until_success.py``: rounds and
<Z> of the 2-qubit RUS loop at θ = 1.1; ``case_studies/quantum_walk.py``: J(t) of the
6-qubit walk at t = (0.3, 1.2)); each estimate is printed with its standard error next to
the exact value (for the gradient: dE[rounds]/dθ, and dJ/dt1). Each runner is timed once
after a warm-up run (which compiles the kernels); the speed-up column is the ratio of
shots (samples) per second.

The adjoint rows differentiate E[K] of the walk's loop with no cap (``quantum_walk.rounds``)
at t = (0.3, 1.2), where a round succeeds with probability p = 0.00178: the rounds are forced
by ``max_loop_iterations=R`` (the loop is cut off after R rounds; at tol = 1e-12 it would run
about 15500), on the NumPy back end. Each row runs in a fresh process; "peak MB" is how much
its peak resident memory grew during the gradient (ru_maxrss, after a warm-up gradient of
2 rounds). Stored rows above ``--stored-up-to`` are not run: their memory is the per-round
growth measured at the largest stored row times R.
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


def adjoint_memory(rounds: int, how: str) -> tuple[float, float, Any]:
    """(peak resident memory growth in MB, seconds, gradient) of the walk's exact adjoint
    gradient of E[K] over ``rounds`` rounds, in this process (call it in a fresh one):
    ``how`` is "stored" (every round's records), "checkpointed", or "forward" (the exact
    run alone, no gradient: the gradient is then E[K])."""
    import resource
    import warnings

    import numpy as np
    import quantum_walk

    import qdiff
    from qdiff import quantum as qm
    from qdiff.quantum.execution.options import RunOptions
    from qdiff.quantum.gradients.adjoint import RecordedRun

    warnings.simplefilter("ignore")  # the cut-off loop's TruncationWarning: forced on purpose
    program = qdiff.trace(quantum_walk.rounds, np.zeros(2))
    t = np.array([0.3, 1.2])

    def gradient(r: int) -> Any:
        options = RunOptions(max_loop_iterations=r, backend="numpy")
        if how == "forward":
            return [np.atleast_1d(qm.run(program, t, options=options).values)]
        run = RecordedRun(program, [t], options, checkpoints=how == "checkpointed")
        return run.vjp([np.ones(())])

    gradient(2)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    grad = gradient(rounds)
    seconds = time.perf_counter() - start
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    return grown / 1024, seconds, grad[0]  # ru_maxrss is in kB on Linux


def adjoint_memory_table(round_counts: list[int], stored_up_to: int) -> None:
    """Print the adjoint's peak memory and time against the rounds, stored and checkpointed."""
    import json
    import subprocess

    import numpy as np

    def measure(rounds: int, how: str) -> tuple[float, float, np.ndarray]:
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import loops; "
                "mb, s, g = loops.adjoint_memory(int(sys.argv[2]), sys.argv[3]); "
                "print(json.dumps([mb, s, list(map(float, g))]))")
        done = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__),
                               str(rounds), how],
                              capture_output=True, text=True, check=True)
        mb, seconds, grad = json.loads(done.stdout.splitlines()[-1])
        return mb, seconds, np.array(grad)

    print(f"\n{'adjoint, 6-qubit walk dE[K]/dt':<34}{'rounds':>8}{'peak MB':>10}{'seconds':>10}"
          f"{'ms/round':>10}{'max rel. diff':>15}")
    per_round = None
    for rounds in round_counts:
        stored = None
        if rounds <= stored_up_to:
            stored = measure(rounds, "stored")
            per_round = stored[0] / rounds
            print(f"{'every round stored':<34}{rounds:>8}{stored[0]:>10.1f}{stored[1]:>10.1f}"
                  f"{1e3 * stored[1] / rounds:>10.1f}")
        elif per_round is not None:
            print(f"{'every round stored (estimate)':<34}{rounds:>8}{per_round * rounds:>10.0f}"
                  f"{'':>10}{'':>10}")
        mb, seconds, grad = measure(rounds, "checkpointed")
        diff = "" if stored is None else (
            f"{float(np.max(np.abs(grad - stored[2]) / np.abs(stored[2]))):>15.1e}")
        print(f"{'checkpointed segments':<34}{rounds:>8}{mb:>10.1f}{seconds:>10.1f}"
              f"{1e3 * seconds / rounds:>10.1f}{diff}")
        mb, seconds, _ = measure(rounds, "forward")
        print(f"{'the exact run alone (no gradient)':<34}{rounds:>8}{mb:>10.1f}{seconds:>10.1f}"
              f"{1e3 * seconds / rounds:>10.1f}")


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
    ap.add_argument("--rounds", type=int, nargs="+", default=[100, 1000, 10_000],
                    help="rounds of the walk for the adjoint's memory rows")
    ap.add_argument("--stored-up-to", type=int, default=1000,
                    help="run the stored-records adjoint up to this many rounds")
    ap.add_argument("--only-adjoint", action="store_true",
                    help="print the adjoint memory rows only")
    ap.add_argument("--only-sampling", action="store_true",
                    help="print the shots-per-second tables only")
    ap.add_argument("--backend", choices=("auto", "numba", "numpy", "cupy"), default="auto",
                    help="where the batch runner keeps its states (cupy: on a GPU)")
    args = ap.parse_args(argv)
    if not args.only_adjoint:
        sampling(args)
    if not args.only_sampling:
        adjoint_memory_table(args.rounds, args.stored_up_to)


def sampling(args: argparse.Namespace) -> None:
    """The shots-per-second and gradient-samples-per-second tables."""
    import numpy as np

    import qdiff
    from qdiff.ir.passes.unpack_scalars import unpack_scalars
    from qdiff.quantum.execution.options import RunOptions
    from qdiff.quantum.execution.run import sample_trajectories
    from qdiff.quantum.execution.shot_batch import sample_batched
    from qdiff.quantum.gradients.batched_shift import batched_parameter_shift
    from qdiff.quantum.gradients.shift_gradient import sampled_parameter_shift

    batch = "batch" if args.backend == "auto" else f"batch {args.backend}"
    print(f"{'program':<28}{'runner':<14}{'shots':>8}{'shots/s':>11}{'speed-up':>10}"
          f"{'estimate ± stderr':>22}{'exact':>9}")
    studies = _programs()
    for name, f, x, exact, _, _ in studies:
        program = unpack_scalars(qdiff.trace(f, x))
        values = [np.asarray(x)]
        options = RunOptions(mode="sample", seed=args.seed)
        rows = []
        for runner, sample, shots, backend in (
                ("trajectories", sample_trajectories, args.python_shots, "auto"),
                (batch, sample_batched, args.shots, args.backend)):
            rate, result = shots_per_second(sample, program, values,
                                            options.replace(shots=shots, backend=backend))
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
        for runner, estimate, samples, backend in (
                ("trajectories", sampled_parameter_shift, args.python_samples, "auto"),
                (batch, batched_parameter_shift, args.samples, args.backend)):
            def run(options, estimate=estimate, program=program, values=values,
                    cotangent=cotangent):
                return estimate(program, values, cotangent, [0], options)

            rate, result = shots_per_second(run, None, None,
                                            options.replace(shots=samples, backend=backend))
            rows.append((runner, samples, rate, float(np.ravel(result.grads[0])[0]),
                         float(np.ravel(result.grad_stderr[0])[0])))
        base = rows[0][2]
        for runner, samples, rate, value, error in rows:
            estimate = f"{value:.4f} ± {error:.4f}"
            print(f"{name:<28}{runner:<14}{samples:>8}{rate:>11.0f}{rate / base:>9.0f}x"
                  f"{estimate:>22}{exact:>9.4f}")


if __name__ == "__main__":
    main()
