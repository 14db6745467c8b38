"""Gradients of a variational circuit, side by side: qdiff's adjoint method and parameter
shift against PennyLane lightning's adjoint method, Qiskit's reverse and parameter-shift
gradients and JAX backprop.

    python benchmarks/gradients.py                        # n = 12, 16, 20; L = 5, 10; 1 thread
    python benchmarks/gradients.py --quick                # n = 12, 16; L = 5
    python benchmarks/gradients.py --sizes 20 --layers 10 --threads 2
    python benchmarks/gradients.py --sizes 20 24 --methods qdiff jax --backend cupy   # a GPU

Circuit: the hardware-efficient ansatz on n qubits, L layers, each RY then RZ on every qubit
(2nL parameters, all distinct) then a CNOT ladder cx(0,1), ..., cx(n-2,n-1); complex128, from
|0...0>. Observables: ``Z`` = sum_i Z_i and ``heis`` = sum_i (X_i X_i+1 + Y_i Y_i+1 + Z_i Z_i+1),
the Heisenberg chain. The gradient is d<H>/d(angles) at uniform random angles.

Methods (each through its library's user API):
  qdiff          ``qm.gradient(program, w)`` (method "adjoint"): the program traced once with
                 ``qdiff.program`` and ``qm.*`` gates; the value is ``qm.run(program, w)``
                 (gate fusion on, the default)
  qdiff-shift    ``qm.gradient(program, w, method="parameter-shift")``: 2P shifted programs in
                 exact mode (the hardware-compatible method), limited like qiskit-shift
  lightning      PennyLane lightning.qubit, a QNode with diff_method="adjoint", ``qml.grad``
  qiskit-rev     qiskit_algorithms ReverseEstimatorGradient (statevector), value by the
                 StatevectorEstimator
  qiskit-shift   qiskit_algorithms ParamShiftEstimatorGradient with the StatevectorEstimator:
                 2P circuit runs, O(P^2) gates, so only where n <= --shift-max-n and
                 L <= --shift-max-layers
  jax            ``jax.jit(jax.value_and_grad)`` of a small statevector simulator written here
                 (a scan over layers, each layer rematerialized with ``jax.checkpoint`` so that
                 memory stays at one state per layer)

Columns: grad and value in seconds (best of --repeats warm calls, the two alternating;
values marked ``~`` are single calls, warm-up included: the first gradient or value call
exceeded --budget, so neither was repeated), their ratio, and max|dg|, the largest absolute
difference between the method's gradient and qdiff's. Below the table, qdiff's gradient /
value against the goal of at most 2 (no ratio from single calls), and where that ratio's
floor lies for the adjoint method: qdiff's Numba blocks of the ansatz timed on a random state
of the whole register (none of the first blocks' savings on |0...0>), forward (the blocks of
the forward pass), undo (the reverse sweep's blocks undoing ψ and λ without reading a
derivative) and sweep (the same blocks reading every derivative). A gradient runs the forward
pass and then undoes both states: 1 + sweep/forward is the ratio its blocks alone give, and
1 + undo/forward the ratio even if reading the derivatives cost nothing (``--no-floor``
leaves this out).
"not installed" means the package does not import; "skipped" that the configuration is
outside the method's limits.

Threads: NUMBA_NUM_THREADS, OMP_NUM_THREADS (lightning), MKL/OpenBLAS, and XLA's CPU thread
pool are set to --threads (default 1) before anything is imported.
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
    ap.add_argument("--observables", nargs="+", choices=["Z", "heis"], default=["Z", "heis"])
    ap.add_argument("--methods", nargs="+", default=None,
                    help="subset of: qdiff lightning qiskit-rev qiskit-shift jax")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall time, or the process's CPU time (one thread: a shared machine)")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds one call may take before it is not repeated")
    ap.add_argument("--qiskit-max-n", type=int, default=16,
                    help="largest n for qiskit-rev (its statevector evolution is slow)")
    ap.add_argument("--shift-max-n", type=int, default=12)
    ap.add_argument("--shift-max-layers", type=int, default=5)
    ap.add_argument("--no-floor", action="store_true",
                    help="leave out the forward / undo / sweep blocks of qdiff's Numba back end")
    ap.add_argument("--backend", default=None,
                    help="qdiff's simulator back end (numpy, numba, cupy: a GPU; default auto)")
    return common.ansatz_defaults(ap.parse_args())


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:  # thread pools are sized when their libraries load: set them first
    common.pin_threads(ARGS.threads, xla=True)
    common.use_clock(ARGS.clock, ARGS.threads)

import numpy as np  # noqa: E402

from qdiff import quantum as qm  # noqa: E402

METHODS = ["qdiff", "qdiff-shift", "lightning", "qiskit-rev", "qiskit-shift", "jax"]
Method = Callable[[np.ndarray], tuple[Callable[[], Any], Callable[[], Any]]]


# ------------------------------------------------------------------------------- the problem
def pauli_terms(n: int, observable: str) -> list[tuple[float, str, tuple[int, ...]]]:
    """The observable as (coefficient, Pauli letters, wires) terms."""
    if observable == "Z":
        return [(1.0, "Z", (i,)) for i in range(n)]
    return [(1.0, p + p, (i, i + 1)) for i in range(n - 1) for p in "XYZ"]


def qdiff_observable(n: int, observable: str) -> qm.PauliSum:
    labels = []
    for coef, letters, wires in pauli_terms(n, observable):
        label = ["I"] * n
        for letter, w in zip(letters, wires):
            label[w] = letter
        labels.append((coef, "".join(label)))
    return qm.PauliSum(labels)


def qdiff_program(n: int, layers: int, observable: str) -> Any:
    return common.hea_program(n, layers, qdiff_observable(n, observable))


# ----------------------------------------------------------------------------------- methods
# Each returns (gradient call, value call) for a problem, or None when not installed; a
# gradient call returns the gradient as an array shaped like the angles.
def _backend() -> dict[str, str]:
    """qdiff's run options for --backend (none: the default back end)."""
    return {"backend": ARGS.backend} if ARGS is not None and ARGS.backend else {}


def qdiff_method(n: int, layers: int, observable: str) -> Any:
    program = qdiff_program(n, layers, observable)

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        return (lambda: np.asarray(qm.gradient(program, w, method="adjoint", **_backend()).grad),
                lambda: qm.run(program, w, **_backend()).values)

    return make


def qdiff_shift_method(n: int, layers: int, observable: str) -> Any:
    program = qdiff_program(n, layers, observable)

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        return (lambda: np.asarray(qm.gradient(program, w, method="parameter-shift",
                                               **_backend()).grad),
                lambda: qm.run(program, w, **_backend()).values)

    return make


def lightning_method(n: int, layers: int, observable: str) -> Any:
    setup = common.lightning_device(n)
    if setup is None:
        return None
    qml, dev = setup
    from pennylane import numpy as pnp

    paulis = {"X": qml.PauliX, "Y": qml.PauliY, "Z": qml.PauliZ}
    ops = []
    coeffs = []
    for coef, letters, wires in pauli_terms(n, observable):
        term = paulis[letters[0]](wires[0])
        for letter, w in zip(letters[1:], wires[1:]):
            term = term @ paulis[letter](w)
        ops.append(term)
        coeffs.append(coef)
    hamiltonian = qml.Hamiltonian(coeffs, ops)

    @qml.qnode(dev, diff_method="adjoint")
    def circuit(a: Any) -> Any:
        common.pennylane_hea(qml, n, layers, a)
        return qml.expval(hamiltonian)

    grad = qml.grad(circuit)

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        a = pnp.array(w, requires_grad=True)
        return lambda: np.asarray(grad(a)), lambda: circuit(a)

    return make


def _qiskit_problem(n: int, layers: int, observable: str) -> Any:
    from qiskit.circuit import ParameterVector
    from qiskit.quantum_info import SparsePauliOp

    theta = np.array(list(ParameterVector("w", layers * 2 * n)), dtype=object)
    qc = common.qiskit_circuit(n, common.hea_gates(n, layers, theta.reshape(layers, 2, n)))
    op = SparsePauliOp.from_sparse_list(
        [(letters, list(wires), coef) for coef, letters, wires in pauli_terms(n, observable)],
        num_qubits=n)
    return qc, op


def qiskit_method(kind: str) -> Callable[[int, int, str], Any]:
    def method(n: int, layers: int, observable: str) -> Any:
        try:
            from qiskit.primitives import StatevectorEstimator
            from qiskit_algorithms.gradients import (
                ParamShiftEstimatorGradient,
                ReverseEstimatorGradient,
            )
        except ImportError:
            return None
        qc, op = _qiskit_problem(n, layers, observable)
        estimator = StatevectorEstimator()
        gradient = (ReverseEstimatorGradient() if kind == "rev"
                    else ParamShiftEstimatorGradient(estimator))

        def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
            values = w.reshape(-1)

            def grad() -> Any:
                result = gradient.run([qc], [op], [values]).result()
                return np.asarray(result.gradients[0]).reshape(w.shape)

            def value() -> Any:
                return float(estimator.run([(qc, op, values)]).result()[0].data.evs)

            return grad, value

        return make

    return method


def jax_method(n: int, layers: int, observable: str) -> Any:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    # state: a tensor with one axis per qubit, axis a = wire a (the order does not change an
    # expectation value)
    def one_qubit(state: Any, m: Any, wire: int) -> Any:
        moved = jnp.moveaxis(state, wire, 0)
        return jnp.moveaxis(jnp.tensordot(m, moved, axes=1), 0, wire)

    def cnot(state: Any, control: int, target: int) -> Any:
        index = [slice(None)] * n
        index[control] = 1
        index = tuple(index)
        flipped_axis = target - (target > control)  # the control axis is gone in the slice
        return state.at[index].set(jnp.flip(state[index], axis=flipped_axis))

    def layer(state: Any, a: Any) -> tuple[Any, None]:
        for i in range(n):
            c, s = jnp.cos(a[0, i] / 2), jnp.sin(a[0, i] / 2)
            state = one_qubit(state, jnp.array([[c, -s], [s, c]], dtype=jnp.complex128), i)
        for i in range(n):
            phase = jnp.exp(-0.5j * a[1, i])
            state = one_qubit(state, jnp.array([[phase, 0], [0, jnp.conj(phase)]]), i)
        for i in range(n - 1):
            state = cnot(state, i, i + 1)
        return state, None

    def energy(a: Any) -> Any:
        state = jnp.zeros((2,) * n, jnp.complex128).at[(0,) * n].set(1.0)
        state, _ = jax.lax.scan(jax.checkpoint(layer), state, a)
        p = jnp.abs(state) ** 2
        total = 0.0
        for i in range(n):  # Z_i, and Z_i Z_i+1 for the Heisenberg chain
            zi = jnp.moveaxis(p, i, 0)
            if observable == "Z":
                total = total + jnp.sum(zi[0]) - jnp.sum(zi[1])
            elif i < n - 1:
                pair = jnp.moveaxis(p, (i, i + 1), (0, 1))
                total = total + jnp.sum(pair[0, 0] + pair[1, 1] - pair[0, 1] - pair[1, 0])
                amps = jnp.moveaxis(state, (i, i + 1), (0, 1))  # XX + YY = 2 (|01><10| + h.c.)
                total = total + 4 * jnp.sum(jnp.real(jnp.conj(amps[0, 1]) * amps[1, 0]))
        return total

    grad = jax.jit(jax.grad(energy))
    value = jax.jit(energy)

    def make(w: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
        a = jnp.asarray(w)
        return (lambda: np.asarray(grad(a).block_until_ready()),
                lambda: float(value(a).block_until_ready()))

    return make


FACTORIES: dict[str, Callable[[int, int, str], Any]] = {
    "qdiff": qdiff_method, "qdiff-shift": qdiff_shift_method, "lightning": lightning_method,
    "qiskit-rev": qiskit_method("rev"),
    "qiskit-shift": qiskit_method("shift"), "jax": jax_method,
}


# ---------------------------------------------------------------------------------- timing
def best_times(grad: Callable[[], Any], value: Callable[[], Any], repeats: int, budget: float
               ) -> tuple[tuple[float, bool], tuple[float, bool], Any]:
    """Per call, (best wall time in seconds, whether it is a single over-budget call), and
    the gradient. The calls alternate, so that their ratio does not depend on when the
    machine was busy."""
    t0 = common.CLOCK()
    g = grad()
    first_grad = common.CLOCK() - t0
    t0 = common.CLOCK()
    value()
    first_value = common.CLOCK() - t0
    if first_grad > budget or first_value > budget:  # neither is repeated: both single calls
        return (first_grad, True), (first_value, True), g
    if repeats <= 0:
        return (first_grad, False), (first_value, False), g
    t_grad, t_value, g, _ = common.best_of_pair(grad, value, repeats)
    return (t_grad, False), (t_value, False), g


def skipped(args: argparse.Namespace, method: str, n: int, layers: int) -> bool:
    if method == "qiskit-rev":
        return n > args.qiskit_max_n
    if method in ("qiskit-shift", "qdiff-shift"):
        return n > args.shift_max_n or layers > args.shift_max_layers
    return False


def fmt(seconds: float, single: bool) -> str:
    text = f"{seconds:.3f}" if seconds < 10 else f"{seconds:.1f}"
    return ("~" if single else "") + text


# ------------------------------------------------------------------ the adjoint sweep's floor
def sweep_blocks(n: int, layers: int, repeats: int) -> tuple[float, float, float]:
    """Seconds (best of ``repeats``) of qdiff's Numba blocks of the ansatz on a random state
    of ``n`` qubits: the forward pass's blocks, the reverse sweep's blocks undoing ψ and λ
    with no derivative read, and the same blocks reading every derivative."""
    from qdiff.quantum.gradients.adjoint import _adjoint_blocks, apply_gates
    from qdiff.quantum.simulator import get_backend
    from qdiff.quantum.simulator.gate_ops import GateOp

    be = get_backend("numba")
    ops = [GateOp(name, wires, tuple(float(a) for a in params))
           for name, wires, params in common.hea_gates(n, layers, common.hea_angles(n, layers))]
    reverse = _adjoint_blocks(ops, be.adjoint_width(n))
    rng = np.random.default_rng(1)
    psi, lam = (rng.normal(size=(2, 1 << n)) + 1j * rng.normal(size=(2, 1 << n))) / 2 ** (n / 2)

    def run_reverse(read: bool) -> None:
        for wires, block in reversed(reverse):
            be.adjoint_block(psi, lam, n, wires, [ops[k] for k in block],
                             [read and bool(ops[k].params) for k in block])

    return (common.best_of(lambda: apply_gates(be, psi, ops), repeats)[0],
            common.best_of(lambda: run_reverse(False), repeats)[0],
            common.best_of(lambda: run_reverse(True), repeats)[0])


# ---------------------------------------------------------------------------------- the table
def main() -> None:
    args = ARGS
    assert args is not None
    methods = args.methods or METHODS
    load_before = os.getloadavg()
    header = ["n", "L", "P", "H", "method", "grad s", "value s", "grad/value", "max|dg|"]
    rows: list[list[str]] = []
    summary: list[str] = []
    goals: list[str] = []
    for n in args.sizes:
        for layers in args.layers:
            w = common.hea_angles(n, layers)
            for observable in args.observables:
                reference = None
                times: dict[str, tuple[float, float]] = {}
                for method in methods:
                    row = [str(n), str(layers), str(2 * n * layers), observable, method]
                    if skipped(args, method, n, layers):
                        rows.append(row + ["skipped", "", "", ""])
                        continue
                    make = FACTORIES[method](n, layers, observable)
                    if make is None:
                        rows.append(row + ["not installed", "", "", ""])
                        continue
                    grad, value = make(w)
                    (t_grad, single_g), (t_value, single_v), g = best_times(
                        grad, value, args.repeats, args.budget)
                    g = np.asarray(g, np.float64).reshape(w.shape)
                    if method == "qdiff":
                        reference = g
                    diff = "" if reference is None else f"{np.max(np.abs(g - reference)):.1e}"
                    times[method] = (t_grad, t_value, single_g)
                    rows.append(row + [fmt(t_grad, single_g), fmt(t_value, single_v),
                                       f"{t_grad / t_value:.1f}", diff])
                    print(f"  n={n} L={layers} {observable} {method}: grad {t_grad:.3f} s, "
                          f"value {t_value:.3f} s", file=sys.stderr, flush=True)
                if "qdiff" in times and times["qdiff"][2]:
                    goals.append(f"n={n} L={layers} {observable}: qdiff grad / value not "
                                 "measured (single calls over --budget, warm-up "
                                 "included)")
                elif "qdiff" in times:
                    ratio = times["qdiff"][0] / times["qdiff"][1]
                    goals.append(f"n={n} L={layers} {observable}: qdiff grad / value = "
                                 f"{ratio:.2f} (goal <= 2: "
                                 f"{'met' if ratio <= 2 else 'NOT met'})")
                if "qdiff" in times and "lightning" in times:
                    summary.append(
                        f"n={n} L={layers} {observable}: qdiff grad = "
                        f"{times['qdiff'][0] / times['lightning'][0]:.2f}x lightning's grad, "
                        f"{times['qdiff'][0] / times['qdiff'][1]:.2f}x qdiff's value")
    load_after = os.getloadavg()
    import numba

    print("Hardware-efficient ansatz (RY, RZ on every qubit, CNOT ladder), complex128; "
          f"seconds per call ({args.clock} time), best of {args.repeats} warm calls")
    print(f"threads: {args.threads} (NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}); cores={os.cpu_count()}; "
          f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    common.print_table(header, rows)
    print()
    for line in summary:
        print(line)
    print("Goal, the adjoint gradient within 2x of the forward pass (ratios of this run):")
    for line in goals:
        print(line)
    if "qdiff" in methods and not args.no_floor and args.backend in (None, "numba"):
        repeats = max(args.repeats, 3)
        print("The adjoint method's floor: qdiff's Numba blocks on a random state, ms (best of "
              f"{repeats}); undoing two states where the forward pass applies the gates to one")
        floor_rows = []
        for n in args.sizes:
            for layers in args.layers:
                forward, undo, sweep = sweep_blocks(n, layers, repeats)
                floor_rows.append([str(n), str(layers), f"{forward * 1e3:.2f}",
                                   f"{undo * 1e3:.2f}", f"{sweep * 1e3:.2f}",
                                   f"{1 + sweep / forward:.2f}", f"{1 + undo / forward:.2f}"])
        common.print_table(["n", "L", "forward", "undo", "sweep", "1 + sweep/forward",
                            "1 + undo/forward"], floor_rows)


if __name__ == "__main__":
    main()
