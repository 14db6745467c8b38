"""What the benchmark scripts share: thread pinning, the hardware-efficient ansatz (its angles,
its gates, and the circuit written for qdiff, Qiskit and PennyLane), timing and the table.

The ansatz: L layers of RY then RZ on every qubit, then a CNOT ladder cx(0,1), ..., cx(n-2,n-1);
its angles are an array ``[layer, 0 = RY / 1 = RZ, wire]``.

The scripts put this folder on ``sys.path`` and import this module as ``common``. A script pins
its thread pools (:func:`pin_threads`) before NumPy, Numba or a simulator loads, so this module
imports only the standard library at the top; NumPy, qdiff and the peers are imported by the
functions that use them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from qiskit import QuantumCircuit

THREAD_VARIABLES = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                    "OPENBLAS_NUM_THREADS")


# ---------------------------------------------------------------------------------- threads
def pin_threads(threads: int, variables: Sequence[str] = THREAD_VARIABLES,
                xla: bool = False) -> None:
    """Size the thread pools: each of ``variables`` is set to ``threads``, and with ``xla``
    XLA's CPU pool too. Call it before the libraries load: their pools are sized then."""
    for var in variables:
        os.environ[var] = str(threads)
    if xla:
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                                   + f" --xla_cpu_multi_thread_eigen={str(threads > 1).lower()}"
                                   + f" intra_op_parallelism_threads={threads}")


# ------------------------------------------------------------------------------- the ansatz
def hea_angles(n: int, layers: int, seed: int | np.random.Generator = 0) -> np.ndarray:
    """Angles ``[layer, 0 = RY / 1 = RZ, wire]``, uniform in [-π, π), drawn from ``seed`` (a
    generator goes on from where it is)."""
    import numpy as np

    return np.random.default_rng(seed).uniform(-np.pi, np.pi, (layers, 2, n))


def hea_gates(n: int, layers: int, angles: Any) -> Iterator[tuple[str, tuple[int, ...], tuple]]:
    """The ansatz gate by gate, as (name, wires, parameters); ``angles`` is anything indexed
    ``[layer, kind, wire]`` (numbers, traced values, Qiskit parameters)."""
    for layer in range(layers):
        for kind, name in enumerate(("ry", "rz")):
            for w in range(n):
                yield name, (w,), (angles[layer, kind, w],)
        for w in range(n - 1):
            yield "cx", (w, w + 1), ()


def hea_program(n: int, layers: int, observable: Any = None) -> Any:
    """The ansatz as a qdiff program of its angles: ``<observable>`` when one is given, the
    final state otherwise."""
    import qdiff
    from qdiff import quantum as qm

    def hea(angles: Any) -> Any:
        q = qm.qubits(n)
        for name, wires, params in hea_gates(n, layers, angles):
            qm.GATES[name](*params, *(q[w] for w in wires))
        return qm.state(q) if observable is None else qm.expval(observable, q)

    return qdiff.program(hea, name=f"hea{n}x{layers}")


def qiskit_circuit(n: int, gates: Iterable[tuple[str, tuple[int, ...], tuple]]) -> QuantumCircuit:
    """A Qiskit circuit of (name, wires, parameters) gates named as Qiskit names them (the
    ansatz's :func:`hea_gates`, or ``GateOp``s)."""
    import qiskit

    qc = qiskit.QuantumCircuit(n)
    for name, wires, params in gates:
        getattr(qc, name)(*params, *wires)
    return qc


def lightning_device(n: int) -> tuple[Any, Any] | None:
    """(pennylane, a lightning.qubit device on ``n`` wires), or None when either is missing."""
    try:
        import pennylane as qml

        return qml, qml.device("lightning.qubit", wires=n)
    except Exception:  # noqa: BLE001 - any import or plugin failure means "not installed"
        return None


def pennylane_hea(qml: Any, n: int, layers: int, angles: Any) -> None:
    """Apply the ansatz inside a PennyLane QNode."""
    ops = {"ry": qml.RY, "rz": qml.RZ, "cx": qml.CNOT}
    for name, wires, params in hea_gates(n, layers, angles):
        ops[name](*params, wires=list(wires))


# ----------------------------------------------------------------------------------- timing
CLOCK: Callable[[], float] = time.perf_counter  # the clock best_of, best_of_pair and
# copy_bandwidth read: wall time, or the process's CPU time (see use_clock)


def use_clock(name: str, threads: int) -> None:
    """Time by ``"wall"`` time or by the ``"cpu"`` time of the process. On a machine shared
    with other jobs a single-threaded call's wall time counts the other processes' turns on
    the core, its CPU time does not; with several threads the CPU time sums them, so
    ``"cpu"`` is refused there."""
    global CLOCK
    if name == "cpu" and threads != 1:
        raise SystemExit("--clock cpu times one thread only (CPU time sums the threads)")
    CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}[name]


def best_of(run: Callable[[], Any], repeats: int,
            stop_after: float = float("inf")) -> tuple[float, Any]:
    """(best time (``CLOCK``) in seconds of ``repeats`` calls of ``run``, the last call's result);
    stops early once the best time exceeds ``stop_after`` seconds."""
    best, result = float("inf"), None
    for _ in range(repeats):
        t0 = CLOCK()
        result = run()
        best = min(best, CLOCK() - t0)
        if best > stop_after:
            break
    return best, result


def best_within(run: Callable[[], Any], budget: float, min_runs: int = 3,
                max_runs: int = 1000, clock: str = "wall") -> float:
    """The best time of ``run``: at least ``min_runs`` calls, more while they fit in
    ``budget`` seconds of wall time (short calls get many samples, long ones a few).
    ``clock="cpu"`` times the CPU the process spent (all its threads) instead of the wall
    time: on a shared machine a call longer than a scheduler slice is rarely left alone,
    and its wall time then counts other processes' work."""
    timer = {"wall": time.perf_counter, "cpu": time.process_time}[clock]
    best, spent, runs = float("inf"), 0.0, 0
    while runs < min_runs or (spent < budget and runs < max_runs):
        t0, w0 = timer(), time.perf_counter()
        run()
        elapsed = timer() - t0
        best, spent, runs = min(best, elapsed), spent + time.perf_counter() - w0, runs + 1
    return best


def ansatz_arguments(ap: Any) -> None:
    """The options of a benchmark over the hardware-efficient ansatz: --sizes, --layers,
    --threads, --repeats, --quick (defaults filled by :func:`ansatz_defaults`)."""
    ap.add_argument("--sizes", type=int, nargs="+", default=None,
                    help="register sizes (default 12 16 20)")
    ap.add_argument("--layers", type=int, nargs="+", default=None,
                    help="numbers of layers (default 5 10)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="n = 12, 16, L = 5, 2 repeats")


def batch_arguments(ap: Any) -> None:
    """The options of a benchmark of a batch against a loop over its members: --batch,
    --repeats, --threads, --backend."""
    ap.add_argument("--batch", type=int, default=64, help="members (default 64)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    backend_argument(ap)


def backend_argument(ap: Any) -> None:
    """--backend: the simulator of vmap's batched runs (``qm.batched_backend``)."""
    ap.add_argument("--backend", choices=("auto", "numpy", "cupy"), default="auto",
                    help="vmap's batched simulator (default: the Numba lane kernels; cupy "
                    "on a GPU)")


def on_batched_backend(backend: str, run: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` with vmap's batched simulations on ``backend``; results come back to the host,
    so a timed call is synchronous on a GPU too."""
    def within(*args: Any) -> Any:
        from qdiff import quantum as qm

        with qm.batched_backend(backend):
            return run(*args)
    return within


def ansatz_defaults(args: Any) -> Any:
    """``args`` with the sizes and layers of a full run, or of a --quick one."""
    if args.sizes is None:
        args.sizes = [12, 16] if args.quick else [12, 16, 20]
    if args.layers is None:
        args.layers = [5] if args.quick else [5, 10]
    if args.quick:
        args.repeats = min(args.repeats, 2)
    return args


def best_of_rounds(runs: Sequence[Callable[[], Any]], repeats: int
                   ) -> tuple[list[float], list[Any]]:
    """(best time of each of ``runs``, their last results) over ``repeats`` rounds that call
    each in turn: ratios of their times are not skewed by the machine being faster while
    one of them runs."""
    best = [float("inf")] * len(runs)
    results: list[Any] = [None] * len(runs)
    for _ in range(repeats):
        for k, run in enumerate(runs):
            t0 = CLOCK()
            results[k] = run()
            best[k] = min(best[k], CLOCK() - t0)
    return best, results


def best_of_pair(first: Callable[[], Any], second: Callable[[], Any], repeats: int
                 ) -> tuple[float, float, Any, Any]:
    """(best time of ``first``, best time of ``second``, their last results) over ``repeats``
    rounds that call one after the other (`best_of_rounds`)."""
    (t_first, t_second), (r_first, r_second) = best_of_rounds([first, second], repeats)
    return t_first, t_second, r_first, r_second


def copy_bandwidth(num_bytes: int, threads: int, total_bytes: float = 4e8) -> float:
    """Bytes per second ``np.copyto`` moves (read + write) between two complex128 arrays of
    this size: the better of one thread and ``threads`` threads each copying a slice (NumPy
    releases the GIL while copying). Each timed sample copies about ``total_bytes``."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    a = np.ones(num_bytes // 16, np.complex128)
    b = np.empty_like(a)
    bounds = np.linspace(0, a.size, threads + 1).astype(int)
    slices = [slice(lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]
    reps = max(3, int(total_bytes // max(num_bytes, 1)))

    def rate(copy: Callable[[], Any]) -> float:
        copy()
        best = float("inf")
        for _ in range(3):
            t0 = CLOCK()
            for _ in range(reps):
                copy()
            best = min(best, (CLOCK() - t0) / reps)
        return 2 * a.nbytes / best

    single = rate(lambda: np.copyto(b, a))
    if threads == 1:
        return single
    with ThreadPoolExecutor(threads) as pool:
        multi = rate(lambda: list(pool.map(lambda sl: np.copyto(b[sl], a[sl]), slices)))
    return max(single, multi)


# ------------------------------------------------------------------------------------ table
def print_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """The header and rows, each column right-aligned to its widest cell."""
    widths = [max(len(h), *(len(r[k]) for r in rows)) for k, h in enumerate(header)]
    for line in (header, *rows):
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
