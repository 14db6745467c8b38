"""Probabilities of every wire in another order (a register whose wires were renamed, as a
QFT's swaps leave it): the Numba back end's one-pass tiled kernel against an independent
oracle, the state as a tensor whose axes are transposed by NumPy, complex64 and complex128,
registers below and above the tile's 4 bits; and a QFT, whose swaps are renamings, against
Qiskit's Statevector."""

import numpy as np
import pytest

from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.indexing import permutation_tiles


def oracle(psi, n, wires):
    """|psi|^2 with bit j of the result's index = bit wires[j] of psi's: an axis transpose."""
    t = (np.abs(psi.astype(np.complex128)) ** 2).reshape((2,) * n)  # axis a = wire n - 1 - a
    return np.transpose(t, [n - 1 - w for w in reversed(wires)]).reshape(-1)


def random_state(n, dtype, rng):
    psi = rng.normal(size=1 << n) + 1j * rng.normal(size=1 << n)
    return (psi / np.linalg.norm(psi)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("n", [2, 3, 4, 5, 9, 13])
def test_permuted_probabilities_match_the_transposed_state(n, dtype):
    rng = np.random.default_rng(n)
    psi = random_state(n, dtype, rng)
    be = get_backend("numba")
    orders = [tuple(range(n - 1, -1, -1)), (1, 0, *range(2, n)), (*range(1, n), 0)]
    orders += [tuple(int(w) for w in rng.permutation(n)) for _ in range(4)]
    for wires in orders:
        got = be.probs(psi, n, wires)
        assert got.dtype == np.float64
        assert np.allclose(got, oracle(psi, n, wires), rtol=1e-12, atol=1e-300), wires


def test_tiles_cover_every_index_once():
    # every amplitude index is read once and every output index written once
    n, wires = 9, (4, 8, 0, 2, 6, 1, 7, 3, 5)
    tile_pos, in_offs, out_offs, out_bit = permutation_tiles(n, wires)
    free = [b for b in range(n) if b not in tile_pos]
    reads, writes = [], []
    for h in range(1 << len(free)):
        base = sum(((h >> j) & 1) << b for j, b in enumerate(free))
        obase = sum(((base >> b) & 1) << int(out_bit[b]) for b in range(n))
        reads += [base | int(u) for u in in_offs]
        writes += [obase | int(u) for u in out_offs]
    assert sorted(reads) == list(range(1 << n)) == sorted(writes)


def test_permutation_tiles_refuse_a_partial_order():
    with pytest.raises(ValueError, match="not a permutation"):
        permutation_tiles(3, (0, 2))


def test_qft_probabilities_after_its_swaps_match_qiskit():
    # QFT's swaps rename the wires: its probabilities are read in reversed order
    qiskit = pytest.importorskip("qiskit")
    from qiskit.circuit.library import QFTGate
    from qiskit.quantum_info import Statevector

    from qdiff import quantum as qm

    n = 10
    qc = qiskit.QuantumCircuit(n)
    qc.ry(0.3, range(n))
    qc.x(1)
    qc.append(QFTGate(n), range(n))
    qc = qiskit.transpile(qc, basis_gates=["h", "cp", "swap", "ry", "x"], optimization_level=0)
    for dtype, tol in ((np.complex128, 1e-12), (np.complex64, 1e-6)):
        probs = np.asarray(qm.run(qm.from_qiskit(qc, dtype=dtype), backend="numba").values)
        assert np.max(np.abs(probs - Statevector(qc).probabilities())) < tol
