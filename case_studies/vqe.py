"""VQE: ground energies of H2 and of an Ising chain, checked against exact diagonalization.

A hardware-efficient ansatz (L layers of ry and rz on every qubit, then a CNOT ladder; the
layers are a ``qdiff.fori_loop``) is trained on two Hamiltonians:

- H2 in the STO-3G minimal basis at bond length 0.735 Å, reduced to 2 qubits by the parity
  mapping with two-qubit reduction. The coefficients (Hartree, electronic energy without the
  nuclear repulsion of 0.7199689944 Ha) are those of Qiskit's VQE tutorial and of the
  qiskit-algorithms test suite (``H2_SPARSE_PAULI`` in test_numpy_eigensolver.py); their exact
  ground energy is -1.857275030202 Ha. The trained energy must be within 1e-6 of exact
  diagonalization.
- The open transverse-field Ising chain H = -Σ Z_i Z_{i+1} - h Σ X_i at the critical field
  h = 1 on 10 qubits (8 with --quick). The ansatz reaches it only approximately; the script
  reports the relative error and checks it against a bound, and checks that the energy is not
  below the exact one (the variational principle).

Training: Adam (with a progress bar), then, for H2, ``scipy.optimize.minimize(jac=...)``
(BFGS; on the chain's 140 parameters it would take thousands of steps), with gradients from
``qdiff.value_and_grad`` by the adjoint method or parameter shift (``--method``; parameter
shift runs two programs per parameter, about 25 times the adjoint method's time on the
chain, so it takes minutes even with --quick). Exact diagonalization builds the
Hamiltonians' matrices with Qiskit's ``SparsePauliOp.to_matrix`` (independent of
qdiff's observables) and calls scipy's ``eigsh``.

    python case_studies/vqe.py            # H2, and the Ising chain on 10 qubits
    python case_studies/vqe.py --quick    # H2, and the Ising chain on 8 qubits
"""

from __future__ import annotations

from pathlib import Path

import common  # case_studies/common.py: this folder is on sys.path however the study starts
import numpy as np
from qiskit.quantum_info import SparsePauliOp
from scipy.sparse.linalg import eigsh

import qdiff
from qdiff import quantum as qm

# Qiskit's label order: the last character acts on qubit 0.
H2_HAMILTONIAN = SparsePauliOp.from_list([
    ("II", -1.052373245772859),
    ("IZ", 0.39793742484318045),
    ("ZI", -0.39793742484318045),
    ("ZZ", -0.01128010425623538),
    ("XX", 0.18093119978423156),
])
H2_TOLERANCE = 1e-6


def ising_chain(n: int, field: float = 1.0) -> SparsePauliOp:
    """H = -Σ_i Z_i Z_{i+1} - field·Σ_i X_i on an open chain of n qubits."""
    return SparsePauliOp.from_sparse_list(
        [("ZZ", [i, i + 1], -1.0) for i in range(n - 1)]
        + [("X", [i], -field) for i in range(n)], num_qubits=n)


def exact_ground_energy(hamiltonian: SparsePauliOp) -> float:
    """The lowest eigenvalue of the Hamiltonian's matrix (Lanczos; dense when it is small)."""
    matrix = hamiltonian.to_matrix(sparse=True)
    if matrix.shape[0] <= 16:
        return float(np.linalg.eigvalsh(matrix.toarray())[0])
    return float(eigsh(matrix, k=1, which="SA")[0][0])


def ansatz_energy(hamiltonian: SparsePauliOp, layers: int):
    """energy(w), w of shape (layers, 2, n): ry(w[l, 0, i]) and rz(w[l, 1, i]) on every qubit
    i, then a CNOT ladder, per layer; the energy is <H> on the final state."""
    n = hamiltonian.num_qubits

    def energy(w):
        q = qm.qubits(n)

        def layer(l):
            for i in range(n):
                qm.ry(w[l, 0, i], q[i])
                qm.rz(w[l, 1, i], q[i])
            for i in range(n - 1):
                qm.cx(q[i], q[i + 1])

        qdiff.fori_loop(0, layers, layer)
        # one final rotation layer, so that the last CNOTs are not wasted
        for i in range(n):
            qm.ry(w[layers, 0, i], q[i])
            qm.rz(w[layers, 1, i], q[i])
        return qm.expval(hamiltonian, q)

    return energy


def solve(name: str, hamiltonian: SparsePauliOp, layers: int, args, *, adam_steps: int,
          restarts: int, polish: bool) -> dict:
    """Train the ansatz from ``restarts`` seeded random starts (Adam, then BFGS when
    ``polish``); return the best run's row of the results table, with its loss curve and
    program."""
    n = hamiltonian.num_qubits
    shape = (layers + 1, 2, n)
    rng = np.random.default_rng(args.seed)
    program = qdiff.trace(ansatz_energy(hamiltonian, layers), np.zeros(shape))
    value_and_grad = qdiff.value_and_grad(program, method=args.method)

    def flat_value_and_grad(x):
        value, grad = value_and_grad(x.reshape(shape))
        return float(value), np.asarray(grad).ravel()

    best = None
    for restart in range(restarts):
        x0 = rng.uniform(-np.pi, np.pi, size=np.prod(shape))
        trained = common.adam(flat_value_and_grad, x0, steps=adam_steps, lr=0.05,
                              desc=f"{name} Adam, start {restart + 1}/{restarts}")
        polished = common.TrainResult(params=trained.params, losses=[], evaluations=0,
                                      seconds=0.0)
        if polish:
            polished = common.minimize(lambda x: flat_value_and_grad(x)[0], trained.params,
                                       jac=lambda x: flat_value_and_grad(x)[1])
        energy = float(program(polished.params.reshape(shape)))
        run = dict(losses=trained.losses + polished.losses, energy=energy,
                   params=polished.params.reshape(shape),
                   evaluations=trained.evaluations + polished.evaluations,
                   seconds=trained.seconds + polished.seconds)
        if best is None or energy < best["energy"]:
            best = run
        else:
            best["evaluations"] += run["evaluations"]
            best["seconds"] += run["seconds"]
    exact = exact_ground_energy(hamiltonian)
    best.update(name=name, qubits=n, parameters=int(np.prod(shape)), exact=exact,
                program=program)
    return best


def main(argv: list[str] | None = None) -> int:
    args = common.parse_args(__doc__.splitlines()[0], ("adjoint", "parameter-shift"), argv)
    chain_qubits, chain_layers, chain_steps = (8, 3, 150) if args.quick else (10, 6, 400)
    h2 = solve("H2 (STO-3G, 0.735 Å)", H2_HAMILTONIAN, 1, args, adam_steps=100, restarts=2,
               polish=True)
    chain = solve(f"Ising chain, h = 1, n = {chain_qubits}", ising_chain(chain_qubits),
                  chain_layers, args, adam_steps=chain_steps, restarts=1, polish=False)
    rows = [{"system": r["name"], "qubits": r["qubits"], "parameters": r["parameters"],
             "VQE energy": f"{r['energy']:.10f}", "exact": f"{r['exact']:.10f}",
             "error": f"{r['energy'] - r['exact']:.2e}",
             "relative": f"{(r['energy'] - r['exact']) / abs(r['exact']):.2e}",
             "evaluations": r["evaluations"], "seconds": f"{r['seconds']:.1f}"}
            for r in (h2, chain)]
    print(common.results_table(rows, f"VQE, hardware-efficient ansatz, {args.method} gradients"))
    print(f"H2 parameters found: {np.round(h2['params'].ravel(), 6).tolist()}")

    common.plot_loss(h2["losses"], Path(args.out) / "h2_loss.png")
    common.plot_loss(chain["losses"], Path(args.out) / "ising_loss.png")
    # the H2 energy over the two angles of qubit 0's first layer, the others at the optimum
    trained = h2["params"]

    def slice_energy(a, b):
        w = trained.copy()
        w[0, 0, 0], w[0, 1, 0] = a, b
        return float(h2["program"](w))

    angles = np.linspace(-np.pi, np.pi, 25 if args.quick else 61)
    common.plot_landscape(slice_energy, trained[0, 0, 0] + angles, trained[0, 1, 0] + angles,
                          trained=(trained[0, 0, 0], trained[0, 1, 0]),
                          path=Path(args.out) / "h2_landscape.png")

    chain_bound = 5e-2 if args.quick else 1e-2
    passed = [
        common.check("H2 energy vs exact diagonalization", h2["energy"], h2["exact"],
                     H2_TOLERANCE),
        common.check("Ising relative error vs exact diagonalization",
                     (chain["energy"] - chain["exact"]) / abs(chain["exact"]), 0.0, chain_bound),
        common.check("Ising energy not below the exact ground energy (margin)",
                     min(0.0, chain["energy"] - chain["exact"]), 0.0, 1e-9),
    ]
    return common.finish(all(passed))


if __name__ == "__main__":
    raise SystemExit(main())
