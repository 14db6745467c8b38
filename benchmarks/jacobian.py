"""Jacobians over many observables, side by side: qdiff's batched adjoint sweeps against the
same rows one gradient at a time, PennyLane lightning's adjoint Jacobian and Qiskit's reverse
gradient.

    python benchmarks/jacobian.py                         # n = 12, 16, 20; L = 5, 10; 1 thread
    python benchmarks/jacobian.py --quick                 # n = 12, 16; L = 5

Circuit: the hardware-efficient ansatz of ``benchmarks/gradients.py`` (n qubits, L layers,
2nL angles); outputs the n expectations <Z_i>, so the Jacobian has n rows of 2nL entries.

Methods (each through its library's user API):
  qdiff        ``qdiff.jacobian(program)(w)``: one forward run, then reverse sweeps that each
               undo the gates once for a stack of up to 16 rows
  qdiff-rows   the same rows as n calls of ``qm.gradient(program, w, cotangent=e_i)``: what
               a Jacobian costs without batching (a forward run and a sweep per row)
  lightning    PennyLane lightning.qubit, a QNode returning the n expectations with
               diff_method="adjoint", ``qml.jacobian``
  qiskit-rev   qiskit_algorithms ReverseEstimatorGradient, one job per observable
               (statevector), only where n <= --qiskit-max-n

Columns: jac (the whole Jacobian) and value (one forward run of the n outputs) in seconds,
best of --repeats warm calls (the two alternating), their ratio, and max|dJ|, the largest
absolute difference from qdiff's Jacobian. Threads are pinned to --threads (default 1)
before anything is imported.
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
    common.ansatz_arguments(ap)
    ap.add_argument("--methods", nargs="+", default=None,
                    help="subset of: qdiff qdiff-rows lightning qiskit-rev")
    ap.add_argument("--qiskit-max-n", type=int, default=12,
                    help="largest n for qiskit-rev (its statevector evolution is slow)")
    return common.ansatz_defaults(ap.parse_args())


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:  # thread pools are sized when their libraries load: set them first
    common.pin_threads(ARGS.threads)

import numpy as np  # noqa: E402

import qdiff  # noqa: E402
from qdiff import quantum as qm  # noqa: E402

METHODS = ["qdiff", "qdiff-rows", "lightning", "qiskit-rev"]
Make = Callable[[np.ndarray], tuple[Callable[[], Any], Callable[[], Any]]]


def qdiff_program(n: int, layers: int) -> Any:
    def readouts(angles: Any) -> Any:
        q = qm.qubits(n)
        for name, wires, params in common.hea_gates(n, layers, angles):
            qm.GATES[name](*params, *(q[w] for w in wires))
        return tuple(qm.expval("Z", [q[i]]) for i in range(n))

    return qdiff.program(readouts, name=f"readouts{n}x{layers}")


def qdiff_method(n: int, layers: int) -> Make:
    program = qdiff_program(n, layers)
    jacobian = qdiff.jacobian(program)

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        return lambda: np.stack(jacobian(w)), lambda: qm.run(program, w).values

    return make


def qdiff_rows_method(n: int, layers: int) -> Make:
    program = qdiff_program(n, layers)
    units = [tuple(float(i == k) for i in range(n)) for k in range(n)]

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        return (lambda: np.stack([qm.gradient(program, w, cotangent=c).grad for c in units]),
                lambda: qm.run(program, w).values)

    return make


def lightning_method(n: int, layers: int) -> Make | None:
    setup = common.lightning_device(n)
    if setup is None:
        return None
    qml, dev = setup
    from pennylane import numpy as pnp

    @qml.qnode(dev, diff_method="adjoint")
    def circuit(a: Any) -> Any:
        common.pennylane_hea(qml, n, layers, a)
        return [qml.expval(qml.PauliZ(i)) for i in range(n)]

    def jacobian(a: Any) -> Any:
        return np.stack(qml.jacobian(lambda x: qml.math.stack(circuit(x)))(a))

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        a = pnp.array(w, requires_grad=True)
        return lambda: jacobian(a), lambda: circuit(a)

    return make


def qiskit_method(n: int, layers: int) -> Make | None:
    try:
        from qiskit.circuit import ParameterVector
        from qiskit.primitives import StatevectorEstimator
        from qiskit.quantum_info import SparsePauliOp
        from qiskit_algorithms.gradients import ReverseEstimatorGradient
    except ImportError:
        return None
    theta = np.array(list(ParameterVector("w", layers * 2 * n)), dtype=object)
    qc = common.qiskit_circuit(n, common.hea_gates(n, layers, theta.reshape(layers, 2, n)))
    ops = [SparsePauliOp.from_sparse_list([("Z", [i], 1.0)], num_qubits=n) for i in range(n)]
    gradient, estimator = ReverseEstimatorGradient(), StatevectorEstimator()

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        values = w.reshape(-1)

        def jacobian() -> Any:
            result = gradient.run([qc] * n, ops, [values] * n).result()
            return np.stack([np.asarray(g) for g in result.gradients])

        def value() -> Any:
            return estimator.run([(qc, ops, values)]).result()[0].data.evs

        return jacobian, value

    return make


FACTORIES: dict[str, Callable[[int, int], Make | None]] = {
    "qdiff": qdiff_method, "qdiff-rows": qdiff_rows_method, "lightning": lightning_method,
    "qiskit-rev": qiskit_method,
}


def main() -> None:
    args = ARGS
    assert args is not None
    methods = args.methods or METHODS
    load_before = os.getloadavg()
    header = ["n", "L", "rows", "P", "method", "jac s", "value s", "jac/value", "max|dJ|"]
    rows: list[list[str]] = []
    for n in args.sizes:
        for layers in args.layers:
            w = common.hea_angles(n, layers)
            reference = None
            for method in methods:
                row = [str(n), str(layers), str(n), str(2 * n * layers), method]
                if method == "qiskit-rev" and n > args.qiskit_max_n:
                    rows.append(row + ["skipped", "", "", ""])
                    continue
                make = FACTORIES[method](n, layers)
                if make is None:
                    rows.append(row + ["not installed", "", "", ""])
                    continue
                jac, value = make(w)
                jac()
                value()
                t_jac, t_value, found, _ = common.best_of_pair(jac, value, args.repeats)
                found = np.asarray(found, np.float64).reshape(n, -1)
                if method == "qdiff":
                    reference = found
                diff = "" if reference is None else f"{np.max(np.abs(found - reference)):.1e}"
                rows.append(row + [f"{t_jac:.3f}", f"{t_value:.3f}", f"{t_jac / t_value:.1f}",
                                   diff])
                print(f"  n={n} L={layers} {method}: jac {t_jac:.3f} s, value {t_value:.3f} s",
                      file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    print("Jacobian of <Z_i>, i < n, for the hardware-efficient ansatz, complex128; seconds "
          f"per call, best of {args.repeats} warm calls")
    print(f"threads: {args.threads}; cores={os.cpu_count()}; load average before "
          f"{load_before[0]:.2f}, after {load_after[0]:.2f}")
    common.print_table(header, rows)


if __name__ == "__main__":
    main()
