"""The array-module batched simulator (`simulator.array_batched`) on NumPy: each step kind on
every wire order against the step's full matrix built by Kronecker products, the
probabilities and Pauli sums against the NumPy back end."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from qdiff.quantum.lang.observables import PauliSum
from qdiff.quantum.simulator import array_batched, get_backend
from qdiff.quantum.simulator.batched_kernels import CONTROLLED1, DENSE1, DENSE2

rng = np.random.default_rng(11)
N, MEMBERS = 3, 4
ONE = np.diag([0.0, 1.0])


def _random_states() -> np.ndarray:
    return rng.normal(size=(MEMBERS, 1 << N)) + 1j * rng.normal(size=(MEMBERS, 1 << N))


def _on_wires(block: np.ndarray, wires: tuple[int, ...]) -> np.ndarray:
    """The full ``2**N`` matrix of ``block`` acting on ``wires`` (bit ``j`` of its index is
    ``wires[j]``), entry by entry: ``block[sub(i), sub(j)]`` where ``i`` and ``j`` agree
    off ``wires``."""
    mask = sum(1 << w for w in wires)

    def sub(i: int) -> int:
        return sum(((i >> w) & 1) << t for t, w in enumerate(wires))

    size = 1 << N
    return np.array([[block[sub(i), sub(j)] if (i & ~mask) == (j & ~mask) else 0
                      for j in range(size)] for i in range(size)])


def _full(kind: int, w0: int, w1: int, m: np.ndarray) -> np.ndarray:
    if kind == DENSE1:
        return _on_wires(m[:2, :2], (w0,))
    if kind == DENSE2:
        return _on_wires(m, (w0, w1))
    # control w0 (bit 0), target w1 (bit 1)
    return _on_wires(np.kron(np.eye(2), np.diag([1.0, 0.0])) + np.kron(m[:2, :2], ONE),
                     (w0, w1))


def _matrices(diagonal: bool) -> np.ndarray:
    m = rng.normal(size=(MEMBERS, 4, 4)) + 1j * rng.normal(size=(MEMBERS, 4, 4))
    return m * np.eye(4) if diagonal else m


STEPS = [(DENSE1, w, w) for w in range(N)] + [
    (kind, a, b) for kind in (DENSE2, CONTROLLED1)
    for a, b in itertools.permutations(range(N), 2)]


@pytest.mark.parametrize("diagonal", [False, True])
@pytest.mark.parametrize("kind, w0, w1", STEPS)
def test_each_step_is_its_full_matrix_on_every_member(kind, w0, w1, diagonal):
    psi, mats = _random_states(), _matrices(diagonal)
    got = array_batched.apply_step(np, psi, kind, w0, w1, mats, diagonal)
    want = np.stack([_full(kind, w0, w1, m) @ row for m, row in zip(mats, psi)])
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("w0, w1", list(itertools.permutations(range(N), 2)))
def test_a_controlled_generator_is_zero_where_the_control_is_0(w0, w1):
    # the adjoint's overlap of a controlled rotation read |0><0| ⊗ I + |1><1| ⊗ G instead
    # of |1><1| ⊗ G: wrong gradients whenever the control was a lower wire than the target
    psi, g = _random_states(), _matrices(False)[:1]
    got = array_batched.apply_step(np, psi, CONTROLLED1, w0, w1, g, generator=True)
    block = _on_wires(np.kron(g[0, :2, :2], ONE), (w0, w1))
    np.testing.assert_allclose(got, psi @ block.T, atol=1e-12)


def test_probabilities_on_wires_in_any_order_sum_the_squared_amplitudes():
    psi = _random_states()
    weights = np.abs(psi) ** 2
    amplitudes = np.arange(1 << N)
    for wires in ([2], [0, 2], [2, 0], [1, 2, 0]):
        outcome = sum(((amplitudes >> w) & 1) << t for t, w in enumerate(wires))
        want = np.stack([np.bincount(outcome, row, 1 << len(wires)) for row in weights])
        np.testing.assert_allclose(array_batched.probabilities(np, psi, wires), want,
                                   atol=1e-12)


@pytest.mark.parametrize("label", ["0.5*ZIZ - 2*IZI + 0.3*III", "XYZ + 0.7*ZZX - 1.5*YIY"])
def test_pauli_sums_equal_the_numpy_back_end(label):
    obs, wires = PauliSum(label), [2, 0, 1]
    psi = _random_states()
    flips = array_batched.flip_coefficients(N, *obs.masks(wires))
    want = np.stack([get_backend("numpy").apply_pauli_sum(row.copy(), N, obs, wires)
                     for row in psi])
    np.testing.assert_allclose(array_batched.observable_rows(np, psi, flips), want,
                               atol=1e-12)
