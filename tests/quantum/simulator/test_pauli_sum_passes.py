"""Expectation sums with X and Y letters: the terms that flip the same wires (one X mask)
share one pass over the state, visiting each pair of amplitudes (i, i^x) once. Checked
against the observables' dense matrices and Qiskit's SparsePauliOp expectation on random
states, against the definition serial and threaded (ranges that split pairs), complex64
and complex128, with groups of one, two and three terms and terms whose X and Z masks
overlap in an odd number of wires (imaginary pair sums)."""

import numpy as np
import pytest
from qiskit.quantum_info import SparsePauliOp, Statevector

from qdiff.quantum.lang.observables import PauliSum
from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.numba_gate_kernels import PAULI_SUMS


def random_state(n, rng, dtype=np.complex128):
    psi = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    return (psi / np.linalg.norm(psi)).astype(dtype)


def heisenberg(n):
    return [(f"{p}{p}", [k, k + 1]) for k in range(n - 1) for p in "XYZ"]


TERMS = {
    "heisenberg": heisenberg(6),
    "mixed": [("XX", [0, 1]), ("YY", [0, 1]), ("XY", [0, 1]), ("ZX", [3, 1]), ("X", [5]),
              ("Y", [5]), ("XZ", [5, 2]), ("Z", [4]), ("YZY", [0, 2, 4]), ("XIX", [0, 3, 4])],
}


def dense_label(letters, wires, n):
    label = ["I"] * n
    for p, w in zip(letters, wires):
        label[w] = p
    return "".join(label)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("name", sorted(TERMS))
def test_grouped_pauli_sums_match_the_dense_observables(name, dtype):
    # all terms in one batch: one kernel call, the terms grouped by X mask inside it
    n = 6
    rng = np.random.default_rng(len(name))
    psi = random_state(n, rng, dtype)
    observables = [PauliSum(dense_label(p, w, n)) for p, w in TERMS[name]]
    want = [np.vdot(psi.astype(complex), o.to_matrix() @ psi.astype(complex)).real
            for o in observables]
    got = get_backend("numba").expval_pauli_sum_batch(psi, n, observables)
    tol = 1e-6 if dtype == np.complex64 else 1e-13
    np.testing.assert_allclose(got, want, atol=tol, rtol=0)


def test_the_heisenberg_chain_matches_qiskit():
    n = 8
    psi = random_state(n, np.random.default_rng(2))
    chain = SparsePauliOp.from_sparse_list([(p, w, 1.0) for p, w in heisenberg(n)], n)
    want = Statevector(psi).expectation_value(chain).real
    got = get_backend("numba").expval_pauli_sum(
        psi, n, PauliSum(" + ".join(dense_label(p, w, n)[::-1] for p, w in heisenberg(n))))
    assert got == pytest.approx(want, abs=1e-13)


@pytest.mark.parametrize("items", [None, 3, 7])
def test_threaded_ranges_count_every_pair_once(items):
    # the kernel's ranges cut through pairs (i, i^x): each pair is summed by the range
    # holding its member with the top flipped bit clear
    n = 7
    rng = np.random.default_rng(5)
    psi = random_state(n, rng)
    xs = np.array([0b11, 0b11, 0b1000001, 0b1000001, 0b100, 0b11], np.int64)
    zs = np.array([0, 0b11, 0b1, 0b1000000, 0b100, 0b10], np.int64)
    got = PAULI_SUMS(items, psi, psi.size, np.zeros(xs.size, np.complex128), xs, zs)
    i = np.arange(psi.size)
    sign = np.array([[1 - 2 * (bin(int(v)).count("1") % 2) for v in i & z] for z in zs])
    want = [np.sum(np.conj(psi[i ^ x]) * s * psi) for x, s in zip(xs, sign)]
    np.testing.assert_allclose(got, want, atol=1e-14, rtol=0)
