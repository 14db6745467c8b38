"""A Qiskit random circuit's parameter sets as one batched simulation: `qdiff.vmap` of the
imported program (value, and value and gradient) against a Python loop of calls.

    python benchmarks/wide_gates.py                        # 64 members, 5 rounds
    python benchmarks/wide_gates.py --batch 4 --repeats 1

The circuit is ``qiskit.circuit.random.random_circuit(10, 10, max_operands=4, seed=...)``
(gates on up to four wires: ccx, cswap, rccx, c3sx, rc3x, ..., and gates of several
angles such as u, u3 and cu) with every numeric angle made a parameter, read out as
``Σ_i Z_i``; the members are its angles plus noise. Each of --repeats rounds times the
batch and the loop once, one after the other, so both see the same load; the table shows
the best of each, in seconds for the whole batch, their ratio, and the largest difference
between the two results.
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
    ap.add_argument("--seed", type=int, default=11)
    return ap.parse_args()


def parameterized_random_circuit(seed: int):
    """The random circuit with each numeric angle a parameter, and the angles' values."""
    from qiskit import QuantumCircuit
    from qiskit.circuit import ParameterVector
    from qiskit.circuit.random import random_circuit

    fixed = random_circuit(10, 10, max_operands=4, seed=seed)
    count = sum(len(i.operation.params) for i in fixed.data)
    theta = ParameterVector("theta", count)
    circuit, values, k = QuantumCircuit(10), [], 0
    for instruction in fixed.data:
        op = instruction.operation.copy()
        if op.params:
            values += [float(p) for p in op.params]
            op.params = [theta[k + j] for j in range(len(op.params))]
            k += len(op.params)
        circuit.append(op, instruction.qubits)
    order = {p: i for i, p in enumerate(theta)}
    return circuit, [values[order[p]] for p in circuit.parameters]


def main() -> None:
    args = _parse()
    common.pin_threads(args.threads)
    import numpy as np
    from qiskit.quantum_info import SparsePauliOp

    import qdiff
    import qdiff.quantum
    from qdiff.quantum.execution.batched import batched_circuit

    circuit, values = parameterized_random_circuit(args.seed)
    names = sorted({i.operation.name for i in circuit.data})
    program = qdiff.quantum.from_qiskit(circuit, SparsePauliOp.from_sparse_list(
        [("Z", [w], 1.0) for w in range(10)], num_qubits=10))
    print(f"{len(circuit.data)} gates ({', '.join(names)}), {len(values)} angles; "
          f"one batched circuit: {batched_circuit(program) is not None}")
    xs = np.asarray(values) + np.random.default_rng(0).normal(0, 0.3, (args.batch, len(values)))
    cases = [("value", common.on_batched_backend(args.backend, qdiff.vmap(program)), program),
             ("value+grad", common.on_batched_backend(
                 args.backend, qdiff.vmap(qdiff.value_and_grad(program))),
              qdiff.value_and_grad(program))]
    print(f"{'what':<11} {'members':>7} {'vmap s':>9} {'loop s':>9} {'vmap/loop':>9} "
          f"{'max diff':>9}")
    for name, batched, member in cases:
        batched(xs[:2]), member(xs[0])   # compile and trace first
        best, (got, want) = common.best_of_rounds(
            [lambda b=batched: b(xs), lambda m=member: [m(x) for x in xs]], args.repeats)
        flat_got = np.concatenate([np.ravel(g) for g in (got if isinstance(got, tuple)
                                                         else (got,))])
        flat_want = np.concatenate([np.ravel(np.stack([w[k] for w in want]))
                                    for k in range(2)]) if isinstance(got, tuple) \
            else np.ravel(want)
        print(f"{name:<11} {args.batch:>7} {best[0]:>9.3f} {best[1]:>9.3f} "
              f"{best[0] / best[1]:>9.3f} {np.abs(flat_got - flat_want).max():>9.1e}")


if __name__ == "__main__":
    main()
