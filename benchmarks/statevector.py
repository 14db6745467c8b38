"""Statevector simulation through the user path, side by side with peer simulators, against
the memory-bandwidth floor.

    python benchmarks/statevector.py                      # n = 12, 16, 20, 22; 1 thread
    python benchmarks/statevector.py --quick              # n = 12, 16
    python benchmarks/statevector.py --sizes 20 22 --layers 10 --threads 2
    python benchmarks/statevector.py --library-only --sizes 20 --dtype complex64

Circuit: the hardware-efficient ansatz, L layers (default 10) of RY and RZ on every qubit
then a CNOT ladder cx(0,1), cx(1,2), ..., cx(n-2,n-1); complex128, from |0...0>, returning
the final state. qdiff runs a traced program (angles are traced inputs) with ``qm.run``, the
user path: the branch runner, the fusion pass (cached with the trace) and the back end.

Columns (milliseconds for the whole circuit; best of --repeats warm runs):
  gates        gate applications without fusion
  passes       passes over the state of qdiff's Numba run with fusion (fused blocks + gates)
  floor        bytes the unfused gates must move / measured copy bandwidth (a 1-qubit gate
               reads and writes every amplitude, a CNOT half of them)
  floor/fused  16 B x 2 x 2^n per fused pass / bandwidth: the floor of the fused program
  numpy, numba             qdiff, fuse=False (one pass per gate)
  numpy+fuse, numba+fuse   qdiff, fuse=True (the default)
  aer          qiskit-aer AerSimulator(method="statevector"), its own fusion on; bound
               circuit, save_statevector, run().result()
  lightning    PennyLane lightning.qubit, a QNode returning qml.state()
  qulacs       QuantumCircuit.update_quantum_state on a reused circuit and state
  qiskit-sv    qiskit.quantum_info.Statevector(...).evolve(circuit)
A value marked ``~`` is extrapolated from one layer because the full circuit would exceed
--budget seconds; "not installed" means the package does not import here.

Library circuits (``--library``; ``--library-only`` skips the ansatz table): the ansatz as a
Qiskit circuit and Qiskit's library circuits, bound and transpiled to standard gates of at
most four qubits (QFT, a stack of QAOA layers on a ring, efficient_su2, phase estimation of a
phase gate, a
graph state, ``random_circuit(n, 10, max_operands=4, seed=5)`` as drawn), imported with
``qm.from_qiskit`` and run on the Numba back end (the program returns the probabilities).
Columns: ``passes`` and ``cost`` (passes by the back end's price list) of the fused plan
qdiff runs; ``bw floor`` its passes x 32 B x 2^n / copy bandwidth (16 B with ``--dtype
complex64``); ``flop floor`` its arithmetic (the gates in their sparse forms, 8 flops per
complex multiply-add per amplitude) / the flop rate of one matrix product in that dtype
(``--dtype``, default complex128; both floors count a block run on the part
of the state still off |0> by that part: ``support_fractions``); qdiff, aer and lightning in
ms (lightning: the transpiled circuit gate for gate in a QNode returning the probabilities,
a gate PennyLane has no name for as its ``QubitUnitary``), qdiff / aer, qdiff / lightning
and qdiff / max(bw floor, flop floor), and max|dp|, the largest difference between
lightning's probabilities and qdiff's. Below the table, each ratio against its goal: every
circuit <= 0.3x Aer and <= 0.5x lightning, the ansatz within 2x of max(floors) of its own
plan, the random circuit within 3x.

Threads: NUMBA_NUM_THREADS, OMP_NUM_THREADS (lightning, qulacs), MKL/OpenBLAS and Aer's
max_parallel_threads are all set to --threads (default 1) before anything is imported.
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
    ap.add_argument("--sizes", type=int, nargs="+", default=None,
                    help="register sizes (default 12 16 20 22)")
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall time, or the process's CPU time (one thread: a shared machine)")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="seconds one measurement may take before it is extrapolated")
    ap.add_argument("--quick", action="store_true", help="n = 12, 16 and 2 repeats")
    ap.add_argument("--library", action="store_true",
                    help="also the table of Qiskit library circuits (default sizes 20 22)")
    ap.add_argument("--library-only", action="store_true",
                    help="only the table of Qiskit library circuits")
    ap.add_argument("--dtype", choices=["complex128", "complex64"], default="complex128",
                    help="qdiff's amplitudes in the library table (complex64: single "
                         "precision; its floors count 16 B per amplitude and a complex64 "
                         "matrix product's flop rate)")
    ap.add_argument("--circuits", nargs="+", default=None,
                    help="library circuits to run (default: all of " + ", ".join(LIBRARY) + ")")
    args = ap.parse_args()
    args.library = args.library or args.library_only
    if args.sizes is None and args.library_only:
        args.sizes = [20, 22]
    if args.sizes is None:
        args.sizes = [12, 16] if args.quick else [12, 16, 20, 22]
    if args.quick:
        args.repeats = min(args.repeats, 2)
    return args


LIBRARY = ("hea", "qft", "qaoa", "su2", "qpe", "graph", "random")
ARGS = _parse() if __name__ == "__main__" else None
if ARGS is not None:  # thread pools are sized when their libraries load: set them first
    common.pin_threads(ARGS.threads, common.THREAD_VARIABLES + ("QULACS_NUM_THREADS",))
    common.use_clock(ARGS.clock, ARGS.threads)

import numpy as np  # noqa: E402

from qdiff import quantum as qm  # noqa: E402
from qdiff.quantum.simulator import available_backends  # noqa: E402


# ------------------------------------------------------------------------------- the circuit
def hea_qiskit(angles: np.ndarray) -> Any:
    layers, _, n = angles.shape
    return common.qiskit_circuit(n, common.hea_gates(n, layers, angles))


# ---------------------------------------------------------------------------------- timing
def best_time(run: Callable[[], Any], repeats: int, budget: float) -> float:
    """Best wall time of ``run()`` in seconds (after one warm-up call)."""
    t0 = common.CLOCK()
    run()
    first = common.CLOCK() - t0
    return common.best_of(run, repeats if first < budget / max(repeats, 1) else 1)[0]


def measure(make: Callable[[int], Callable[[], Any]], layers: int, repeats: int,
            budget: float) -> str:
    """Time ``make(layers)()``; extrapolate from ``make(1)`` when that would exceed budget."""
    one = make(1)
    t0 = common.CLOCK()
    one()
    one()
    est = (common.CLOCK() - t0) / 2 * layers
    if est > budget:
        return f"~{best_time(one, 1, budget) * layers * 1e3:.1f}"
    return f"{best_time(make(layers), repeats, budget) * 1e3:.1f}"


# ------------------------------------------------------------------------------ simulators
def qdiff_runner(n: int, backend: str, fuse: bool, angles: np.ndarray) -> Callable[[int], Any]:
    def make(layers: int) -> Callable[[], Any]:
        program = common.hea_program(n, layers)
        a = np.ascontiguousarray(angles[:layers])
        return lambda: qm.run(program, a, backend=backend, fuse=fuse)

    return make


def aer_runner(threads: int, angles: np.ndarray) -> Callable[[int], Any] | None:
    try:
        from qiskit_aer import AerSimulator
    except ImportError:
        return None
    sim = AerSimulator(method="statevector", max_parallel_threads=threads,
                       max_parallel_experiments=1, max_parallel_shots=1)

    def make(layers: int) -> Callable[[], Any]:
        qc = hea_qiskit(angles[:layers])
        qc.save_statevector()
        return lambda: sim.run(qc).result().get_statevector()

    return make


def lightning_runner(angles: np.ndarray) -> Callable[[int], Any] | None:
    n = angles.shape[2]
    setup = common.lightning_device(n)
    if setup is None:
        return None
    qml, dev = setup

    def make(layers: int) -> Callable[[], Any]:
        @qml.qnode(dev)
        def circuit(a: Any) -> Any:
            common.pennylane_hea(qml, n, layers, a)
            return qml.state()

        a = np.ascontiguousarray(angles[:layers])
        return lambda: circuit(a)

    return make


def qulacs_runner(angles: np.ndarray) -> Callable[[int], Any] | None:
    try:
        import qulacs
    except ImportError:
        return None
    n = angles.shape[2]
    state = qulacs.QuantumState(n)

    def make(layers: int) -> Callable[[], Any]:
        circuit = qulacs.QuantumCircuit(n)
        # qulacs' add_RY_gate is exp(+iθY/2); add_RotY_gate is Qiskit's exp(-iθY/2)
        add = {"ry": circuit.add_RotY_gate, "rz": circuit.add_RotZ_gate,
               "cx": circuit.add_CNOT_gate}
        for name, wires, params in common.hea_gates(n, layers, angles):
            add[name](*wires, *(float(p) for p in params))

        def run() -> Any:
            state.set_zero_state()
            circuit.update_quantum_state(state)
            return state

        return run

    return make


def qiskit_sv_runner(angles: np.ndarray) -> Callable[[int], Any] | None:
    try:
        from qiskit.quantum_info import Statevector
    except ImportError:
        return None
    n = angles.shape[2]

    def make(layers: int) -> Callable[[], Any]:
        qc = hea_qiskit(angles[:layers])
        return lambda: Statevector.from_int(0, 2 ** n).evolve(qc)

    return make


def final_state(name: str, result: Any) -> np.ndarray:
    """The state a runner returned, as a NumPy vector (for the cross-check)."""
    if name.startswith(("numpy", "numba")):
        return np.asarray(result.values)
    if name == "qulacs":
        return np.asarray(result.get_vector())
    if name == "qiskit-sv":
        return np.asarray(result.data)
    if name == "lightning":  # PennyLane's wire 0 is the most significant bit
        vector = np.asarray(result)
        n = vector.size.bit_length() - 1
        return vector.reshape((2,) * n).transpose(range(n - 1, -1, -1)).reshape(-1)
    return np.asarray(result)


# --------------------------------------------------------------------------- library circuits
_BASIS = ["h", "x", "y", "z", "s", "sdg", "t", "tdg", "sx", "rx", "ry", "rz", "p", "u", "cx",
          "cz", "cp", "crz", "swap", "rzz", "rxx", "ryy", "ccx", "cswap"]


def library_circuit(name: str, n: int, seed: int = 5) -> Any:
    """The library circuit ``name`` on ``n`` qubits, its parameters bound to random angles,
    transpiled to standard gates (``random`` as Qiskit draws it)."""
    import qiskit
    from qiskit.circuit import library as lib
    from qiskit.circuit.random import random_circuit
    from qiskit.quantum_info import SparsePauliOp

    rng = np.random.default_rng(seed)
    if name == "random":
        return random_circuit(n, 10, max_operands=4, seed=seed)
    if name == "hea":
        qc = common.qiskit_circuit(n, common.hea_gates(n, 10, common.hea_angles(n, 10, seed)))
    elif name == "qft":
        qc = qiskit.QuantumCircuit(n)
        qc.h(range(n))
        qc.append(lib.QFTGate(n), range(n))
    elif name == "qaoa":
        ring = SparsePauliOp.from_sparse_list([("ZZ", [k, (k + 1) % n], 1.0) for k in range(n)],
                                              n)
        qc = lib.qaoa_ansatz(ring, reps=4)
    elif name == "su2":
        qc = lib.efficient_su2(n, reps=3)
    elif name == "qpe":  # of a phase gate, its powers as phase gates (matrix powers)
        qc = qiskit.QuantumCircuit(n)
        qc.x(n - 1)
        qc.h(range(n - 1))
        for j in range(n - 1):
            qc.cp(2 * np.pi * 0.3183 * 2 ** j, j, n - 1)
        qc.append(lib.QFTGate(n - 1).inverse(), range(n - 1))
    elif name == "graph":
        adjacency = np.zeros((n, n), int)
        for k in range(n):  # a ring and random chords: degree about 3
            for j in ((k + 1) % n, int(rng.integers(n))):
                if j != k:
                    adjacency[k, j] = adjacency[j, k] = 1
        qc = qiskit.QuantumCircuit(n)
        qc.append(lib.GraphStateGate(adjacency), range(n))
    else:
        raise ValueError(f"unknown library circuit {name!r}; known: {', '.join(LIBRARY)}")
    if qc.parameters:
        qc = qc.assign_parameters(rng.uniform(-np.pi, np.pi, qc.num_parameters))
    return qiskit.transpile(qc, basis_gates=_BASIS, optimization_level=0)


# Qiskit's names of the transpiled basis gates -> PennyLane's operations (parameters in the
# same order and convention: u = U3, p = PhaseShift, rzz = IsingZZ = exp(-iθ ZZ/2), ...)
_PENNYLANE_GATES = {
    "h": "Hadamard", "x": "PauliX", "y": "PauliY", "z": "PauliZ", "s": "S", "t": "T",
    "sx": "SX", "rx": "RX", "ry": "RY", "rz": "RZ", "p": "PhaseShift", "u": "U3",
    "cx": "CNOT", "cz": "CZ", "cp": "ControlledPhaseShift", "crz": "CRZ", "swap": "SWAP",
    "rzz": "IsingZZ", "rxx": "IsingXX", "ryy": "IsingYY", "ccx": "Toffoli", "cswap": "CSWAP"}


def lightning_circuit_runner(qc: Any) -> Callable[[], Any] | None:
    """A lightning.qubit QNode applying the transpiled circuit ``qc`` gate for gate and
    returning the probabilities in Qiskit's bit order (Qiskit qubit i is PennyLane wire
    n-1-i, PennyLane's wire 0 being the most significant), or None when not installed."""
    n = qc.num_qubits
    setup = common.lightning_device(n)
    if setup is None:
        return None
    qml, dev = setup
    ops = []
    for item in qc.data:
        name = item.operation.name
        wires = [n - 1 - qc.find_bit(q).index for q in item.qubits]
        params = [float(p) for p in item.operation.params]
        if name == "id":
            continue
        if name in _PENNYLANE_GATES:
            op = getattr(qml, _PENNYLANE_GATES[name])
            ops.append(lambda w=wires, o=op, a=params: o(*a, wires=w))
        else:  # Qiskit's matrix has its first qubit least significant, PennyLane's most
            matrix = np.asarray(item.operation.to_matrix())
            ops.append(lambda w=wires[::-1], m=matrix: qml.QubitUnitary(m, wires=w))

    @qml.qnode(dev)
    def circuit() -> Any:
        for apply in ops:
            apply()
        return qml.probs(wires=range(n))

    return circuit


def support_fractions(fused: Any, n: int) -> list[float]:
    """The share of the state each top-level gate equation of ``fused`` passes over on the
    Numba back end, which runs a fused block, or a lone gate on at most ``MAX_BLOCK_WIRES``
    wires, on wires still ``|0>`` on the first ``2^m`` amplitudes alone
    (`NumbaBackend.apply_fused`, `NumbaBackend.apply_gate`): m grows to the highest wire a
    block has reached; the first block from ``|0...0>`` writes ``U|0>`` into its own
    amplitudes (no pass) when its register (`zero_register_qubits`) is below 2^m or m is
    the top; any other equation makes the back end forget."""
    from qdiff.quantum.lang.fusion import GATE_KINDS
    from qdiff.quantum.simulator.numba_backend import zero_register_qubits
    from qdiff.quantum.simulator.numba_block_kernels import FUSION_MIN_QUBITS, MAX_BLOCK_WIRES

    reached: int | None = 0 if n >= FUSION_MIN_QUBITS else None
    shares = []
    for eqn in fused.eqns:
        if eqn.primitive.name not in GATE_KINDS:
            continue
        wires = eqn.params["wires"]
        if reached is None or (eqn.primitive.name == "gate" and len(wires) > MAX_BLOCK_WIRES):
            reached = None
            shares.append(1.0)
            continue
        m = max(reached, max(wires) + 1)
        on_zero = reached == 0 and (m == n or zero_register_qubits(len(wires)) < m)
        shares.append(0.0 if on_zero else 2.0 ** (m - n) if m < n else 1.0)
        reached = m if m < n else None
    return shares


def plan_floors(program: Any, n: int, bandwidth: float, flop_rate: float,
                amplitude_bytes: int = 16) -> tuple[int, float, float, float]:
    """(passes, cost, bandwidth floor s, compute floor s) of the plan the Numba back end
    runs, each equation's bytes (a pass reads and writes ``amplitude_bytes`` per amplitude)
    and flops counted over the share of the state it passes over (`support_fractions`)."""
    from qdiff.quantum.execution.reference import fused_program
    from qdiff.quantum.lang.fusion import GATE_KINDS, gate_parts
    from qdiff.quantum.lang.gate_forms import gate_form

    fused, stats = fused_program(program, "numba")
    gates = [e for e in fused.eqns if e.primitive.name in GATE_KINDS]
    shares = support_fractions(fused, n)
    work = [sum(gate_form(spec).cost for spec, _, _, _ in gate_parts(e)) for e in gates]
    passes = sum(shares) + stats.passes - len(gates)   # passes inside sub-programs: whole
    return (stats.passes, stats.cost, passes * 2 * amplitude_bytes * 2 ** n / bandwidth,
            8 * sum(w * f for w, f in zip(work, shares)) * 2 ** n / flop_rate)


def complex_flop_rate(size: int = 384, dtype: Any = np.complex128) -> float:
    """Flops per second of a matrix product of ``dtype`` (8 per multiply-add), best of 5."""
    a = np.ones((size, size), dtype)
    seconds = common.best_of(lambda: a @ a, 5)[0]
    return 8 * size ** 3 / seconds


def library_table(args: argparse.Namespace) -> None:
    """The table of library circuits (see the module docstring)."""
    rate = complex_flop_rate(dtype=args.dtype)
    amplitude_bytes = np.dtype(args.dtype).itemsize
    header = ["circuit", "n", "gates", "passes", "cost", "bw floor", "flop floor", "qdiff",
              "aer", "lightning", "qdiff/aer", "qdiff/lightning", "qdiff/floor", "max|dp|"]
    goals: list[str] = []
    rows = []
    aer = None
    try:
        from qiskit import transpile
        from qiskit_aer import AerSimulator

        aer = AerSimulator(method="statevector", max_parallel_threads=args.threads,
                           max_parallel_experiments=1, max_parallel_shots=1)
    except ImportError:
        pass
    for n in args.sizes:
        bandwidth = common.copy_bandwidth(16 << n, args.threads)
        for name in args.circuits or LIBRARY:
            qc = library_circuit(name, n)
            program = qm.from_qiskit(qc, dtype=args.dtype)
            passes, cost, bw_floor, flop_floor = plan_floors(program, n, bandwidth, rate,
                                                             amplitude_bytes)
            ours = best_time(lambda p=program: qm.run(p, backend="numba"), args.repeats,
                             args.budget)
            row = {"circuit": name, "n": str(n), "gates": str(len(qc.data)),
                   "passes": str(passes), "cost": f"{cost:.0f}", "bw floor": _ms(bw_floor),
                   "flop floor": _ms(flop_floor), "qdiff": _ms(ours),
                   "aer": "not installed", "lightning": "not installed", "qdiff/aer": "",
                   "qdiff/lightning": "", "max|dp|": "",
                   "qdiff/floor": f"{ours / max(bw_floor, flop_floor):.2f}"}
            floor_goal = 2.0 if name == "hea" else 3.0 if name == "random" else None
            if floor_goal is not None:
                goals.append(_goal(f"{name} n={n}: qdiff / max(floors)", ours
                                   / max(bw_floor, flop_floor), floor_goal))
            if aer is not None:
                saved = qc.copy()
                saved.save_statevector()
                compiled = transpile(saved, aer)
                theirs = best_time(lambda c=compiled: aer.run(c).result().get_statevector(),
                                   args.repeats, args.budget)
                row["aer"], row["qdiff/aer"] = _ms(theirs), f"{ours / theirs:.2f}"
                goals.append(_goal(f"{name} n={n}: qdiff / aer", ours / theirs, 0.3))
            lightning = lightning_circuit_runner(qc)
            if lightning is not None:
                theirs = best_time(lightning, args.repeats, args.budget)
                row["lightning"] = _ms(theirs)
                row["qdiff/lightning"] = f"{ours / theirs:.2f}"
                probs = np.asarray(qm.run(program, backend="numba").values)
                row["max|dp|"] = f"{np.max(np.abs(np.asarray(lightning()) - probs)):.1e}"
                goals.append(_goal(f"{name} n={n}: qdiff / lightning", ours / theirs, 0.5))
            print(f"  {name} n={n}: " + ", ".join(f"{k} {row[k]}" for k in header[2:]),
                  file=sys.stderr, flush=True)
            rows.append(row)
    print(f"Library circuits, {args.dtype}, one run of the whole circuit, ms ({args.clock} "
          f"time); threads: "
          f"{args.threads}; copy bandwidth {bandwidth / 1e9:.1f} GB/s, complex matmul "
          f"{rate / 1e9:.1f} GFLOP/s")
    common.print_table(header, [[r[h] for h in header] for r in rows])
    try:
        import qulacs  # noqa: F401
    except ImportError:
        print("qulacs: not installed")
    print("Goals (ratios of this run):")
    for line in goals:
        print("  " + line)
    print()


def _goal(what: str, ratio: float, limit: float) -> str:
    return f"{what} = {ratio:.2f} (goal <= {limit}: {'met' if ratio <= limit else 'NOT met'})"


# ---------------------------------------------------------------------------------- the table
def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.{2 if seconds < 0.01 else 1}f}"


def main() -> None:
    args = ARGS
    assert args is not None
    if args.library:
        library_table(args)
        if args.library_only:
            return
    import numba

    qdiff_columns = []
    for backend in ("numpy", "numba"):
        if backend in available_backends():
            qdiff_columns += [(backend, backend, False), (f"{backend}+fuse", backend, True)]
    peers = [("aer", aer_runner), ("lightning", lightning_runner), ("qulacs", qulacs_runner),
             ("qiskit-sv", qiskit_sv_runner)]
    header = (["n", "gates", "passes", "floor", "floor/fused"] + [c[0] for c in qdiff_columns]
              + [p[0] for p in peers])
    rows, notes = [], []
    for n in args.sizes:
        angles = common.hea_angles(n, args.layers)
        row = {"n": str(n), "gates": str(args.layers * (3 * n - 1))}
        makers: dict[str, Callable[[int], Any] | None] = {}
        for name, backend, fuse in qdiff_columns:
            makers[name] = qdiff_runner(n, backend, fuse, angles)
        for name, factory in peers:
            makers[name] = (factory(args.threads, angles) if name == "aer"
                            else factory(angles))
        check_states: dict[str, np.ndarray] = {}
        for name, make in makers.items():
            if make is None:
                row[name] = "not installed"
                continue
            if n <= 16:  # cross-check the final states (up to a global phase)
                check_states[name] = final_state(name, make(args.layers)())
            row[name] = measure(make, args.layers, args.repeats, args.budget)
            print(f"  n={n} {name}: {row[name]} ms", file=sys.stderr, flush=True)
        fused = qm.run(common.hea_program(n, args.layers), angles, backend="auto", fuse=True)
        unfused_bytes = 16 * 2 ** n * args.layers * (2 * 2 * n + (n - 1))
        bw = common.copy_bandwidth(16 << n, args.threads)
        row["passes"] = str(fused.gate_passes)
        row["floor"] = _ms(unfused_bytes / bw)
        row["floor/fused"] = _ms(2 * 16 * 2 ** n * fused.gate_passes / bw)
        row["bw"] = f"{bw / 1e9:.1f}"
        if check_states:
            ref = check_states.get("numpy", next(iter(check_states.values())))
            errors = {k: abs(1 - abs(np.vdot(ref, s))) for k, s in check_states.items()}
            bad = [k for k, e in errors.items() if e > 1e-9]
            notes.append(f"n={n}: final states " + (f"DISAGREE: {bad}" if bad else "agree")
                         + f", max 1-|<numpy|psi>| = {max(errors.values()):.1e} over "
                         + ", ".join(errors))
        rows.append(row)

    print(f"HEA, L={args.layers} layers (RY+RZ on every qubit, CNOT ladder), complex128, "
          f"ms for the whole circuit through each library's user API")
    print(f"threads: {args.threads} (NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, Aer max_parallel_threads="
          f"{args.threads}); cores={os.cpu_count()}; numpy copy bandwidth: "
          + ", ".join(f"n={r['n']}: {r['bw']} GB/s" for r in rows))
    common.print_table(header, [[r[h] for h in header] for r in rows])
    print()
    for r in rows:
        peer_times = {p: float(r[p].lstrip("~")) for p, _ in peers
                      if r[p] != "not installed" and not r[p].startswith("~")}
        ours = {c: float(r[c].lstrip("~")) for c, _, _ in qdiff_columns}
        if peer_times and ours:
            peer, t_peer = min(peer_times.items(), key=lambda kv: kv[1])
            best, t_best = min(ours.items(), key=lambda kv: kv[1])
            ratio = (f"{t_best / t_peer:.2f}x the peer's time" if t_peer > 0
                     else "the peer is below the table's 0.1 ms resolution")
            print(f"n={r['n']}: fastest peer {peer} {t_peer:.1f} ms, fastest qdiff {best} "
                  f"{t_best:.1f} ms: {ratio}")
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
