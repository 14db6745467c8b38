"""Statevector kernels on a hardware-efficient ansatz, side by side with Qiskit, against the
memory-bandwidth floor.

    python benchmarks/statevector_kernels.py                     # n = 12, 16, 20, 22
    python benchmarks/statevector_kernels.py --qubits 12 16 20 --threads 2

Circuit: L layers (default 10) of RY and RZ on every qubit, then a CNOT ladder
cx(0,1), cx(1,2), ..., cx(n-2,n-1); complex128, starting from |0...0>. Every gate goes
straight through the back-end API (``apply_gate``), one Python call per gate, so the numbers
include the per-call overhead that a Python-level interpreter pays.

Columns (milliseconds for the whole circuit):
  floor        bytes the gates must move / measured NumPy copy bandwidth at this state size, with
               --threads threads (a 1-qubit gate reads and writes every amplitude once, a CNOT
               half of them)
  numpy        the reference back end
  numba        Numba kernels, one call per gate
  numba+fuse   the same after ``fuse_single_qubit_layers`` (RZ·RY -> one 2x2 per qubit)
  cupy         when CuPy and a GPU are present
  aer          qiskit-aer statevector (its own gate fusion on, same thread count), when installed
  qiskit-sv    qiskit.quantum_info.Statevector.evolve
A value marked ``~`` was extrapolated from one layer because the full circuit would exceed
``--budget`` seconds.

NUMBA_NUM_THREADS is fixed before Numba is imported (``--threads``, default: all cores) and
printed with the results.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402


def _parse() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--qubits", type=int, nargs="+", default=[12, 16, 20, 22])
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--budget", type=float, default=20.0,
                    help="seconds one measurement may take before it is extrapolated")
    ap.add_argument("--repeats", type=int, default=3)
    return ap.parse_args()


ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:
    # Must happen before anything imports numba: the thread pool size is fixed at import.
    common.pin_threads(ARGS.threads, ("NUMBA_NUM_THREADS",))

from qdiff.quantum.simulator import (  # noqa: E402
    GateOp,
    available_backends,
    fuse_single_qubit_layers,
    get_backend,
)


def hea_ops(n: int, layers: int, rng: np.random.Generator) -> list[GateOp]:
    """L layers of RY, RZ on every wire, then a CNOT ladder; angles drawn from ``rng``."""
    angles = common.hea_angles(n, layers, rng)
    return [GateOp(name, wires, tuple(float(p) for p in params))
            for name, wires, params in common.hea_gates(n, layers, angles)]


def gate_bytes(ops: list[GateOp], n: int) -> int:
    amp = 16 * (1 << n)
    return sum(2 * amp if len(op.wires) == 1 else amp for op in ops)  # cx: half read + written


def timed(run: Callable[[], object], one_layer: Callable[[], object] | None, layers: int,
          budget: float, repeats: int) -> tuple[float, bool]:
    """Best wall time of ``run`` in seconds; extrapolated from ``one_layer`` when too slow."""
    if one_layer is not None:
        t0 = time.perf_counter()
        one_layer()
        est = (time.perf_counter() - t0) * layers
        if est > budget:
            return est, True
    return common.best_of(run, repeats, stop_after=budget / max(repeats, 1))[0], False


def bench_backend(name: str, ops: list[GateOp], n: int, layers: int, budget: float,
                  repeats: int) -> tuple[float, bool]:
    be = get_backend(name)
    per_layer = len(ops) // layers

    def run(seq: list[GateOp] = ops) -> object:
        psi = be.apply_circuit(be.zero_state(n), n, seq)
        if be.is_gpu:
            be.xp.cuda.Device().synchronize()
        return psi

    run(ops[:per_layer])  # compile / warm up
    return timed(run, lambda: run(ops[:per_layer]), layers, budget, repeats)


def bench_aer(ops: list[GateOp], n: int, threads: int, repeats: int) -> tuple[float, bool] | None:
    try:
        from qiskit_aer import AerSimulator
    except ImportError:
        return None
    qc = common.qiskit_circuit(n, ops)
    qc.save_statevector()
    sim = AerSimulator(method="statevector", max_parallel_threads=threads)
    sim.run(qc).result()
    return common.best_of(lambda: sim.run(qc).result(), repeats)[0], False


def bench_qiskit_sv(ops: list[GateOp], n: int, layers: int, budget: float,
                    repeats: int) -> tuple[float, bool]:
    from qiskit.quantum_info import Statevector

    per_layer = len(ops) // layers
    full, layer = common.qiskit_circuit(n, ops), common.qiskit_circuit(n, ops[:per_layer])
    return timed(lambda: Statevector.from_int(0, 2**n).evolve(full),
                 lambda: Statevector.from_int(0, 2**n).evolve(layer), layers, budget, repeats)


def main() -> None:
    args = ARGS
    assert args is not None
    import numba

    rng = np.random.default_rng(0)
    names = [b for b in ("numpy", "numba", "cupy") if b in available_backends()]
    header = ["n", "gates", "floor"] + names + (["numba+fuse"] if "numba" in names else []) + [
        "aer", "qiskit-sv"]
    rows = []
    for n in args.qubits:
        ops = hea_ops(n, args.layers, rng)
        bw = common.copy_bandwidth(16 << n, args.threads, total_bytes=2e8)
        row: dict[str, str] = {"n": str(n), "gates": str(len(ops)),
                               "floor": f"{gate_bytes(ops, n) / bw * 1e3:.2f}"}
        for name in names:
            t, est = bench_backend(name, ops, n, args.layers, args.budget, args.repeats)
            row[name] = ("~" if est else "") + f"{t * 1e3:.2f}"
        if "numba" in names:
            fused = fuse_single_qubit_layers(ops)
            nb = get_backend("numba")
            nb.apply_circuit(nb.zero_state(n), n, fused)
            t, _ = timed(lambda f=fused, m=n, b=nb: b.apply_circuit(b.zero_state(m), m, f), None,
                         args.layers, args.budget, args.repeats)
            row["numba+fuse"] = f"{t * 1e3:.2f}"
            row["fused_gates"] = str(len(fused))
            row["fused_floor"] = f"{gate_bytes(fused, n) / bw * 1e3:.2f}"
        aer = bench_aer(ops, n, args.threads, args.repeats)
        row["aer"] = "n/a" if aer is None else f"{aer[0] * 1e3:.2f}"
        t, est = bench_qiskit_sv(ops, n, args.layers, args.budget, args.repeats)
        row["qiskit-sv"] = ("~" if est else "") + f"{t * 1e3:.2f}"
        row["bw"] = f"{bw / 1e9:.1f}"
        rows.append(row)
        print(f"  n={n}: done", file=sys.stderr, flush=True)

    print(f"HEA, L={args.layers} layers (RY+RZ on every qubit, CNOT ladder), complex128, "
          f"times in ms for the whole circuit")
    print(f"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS} "
          f"(numba.get_num_threads()={numba.get_num_threads()}), cores={os.cpu_count()}, "
          f"numpy copy bandwidth per size: " + ", ".join(f"n={r['n']}: {r['bw']} GB/s"
                                                         for r in rows))
    common.print_table(header, [[r[h] for h in header] for r in rows])
    if "numba" in names:
        print("\nnumba per applied gate and amplitude, and its ratio to that circuit's floor:")
        for r in rows:
            n = int(r["n"])
            for key, gates, floor in (("numba", r["gates"], r["floor"]),
                                      ("numba+fuse", r["fused_gates"], r["fused_floor"])):
                ms = float(r[key])
                print(f"  n={n:>2} {key:<10} {int(gates):>4} gates  "
                      f"{ms * 1e6 / int(gates) / 2**n:6.2f} ns/amp/gate  "
                      f"{ms / float(floor):5.1f}x floor")


if __name__ == "__main__":
    main()
