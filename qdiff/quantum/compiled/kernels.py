"""The compiled helpers that compiled quantum programs call.

Generated code (`qdiff.compiler`) applies gates and reads expectation values through the
simulator's own Numba kernels, their serial drivers (a small register is one work item), and
reads probabilities through the two small loops below. `IMPORT` is the line a generated
module imports them with; it carries a fingerprint of the kernels' sources, because Numba's
on-disk cache of a generated function holds their machine code too.

>>> import numpy as np
>>> marginal_probs(np.array([0.6, 0.8j, 0, 0]), np.array([0])).round(12).tolist()
[0.36, 0.64]
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from numba import njit

from ..lang import observables
from ..simulator import indexing, numba_adjoint_kernels, numba_gate_kernels, numba_ranges

pair = numba_gate_kernels.PAIR.serial
dense2 = numba_gate_kernels.DENSE2.serial
densek = numba_gate_kernels.DENSEK.serial
diagonal = numba_gate_kernels.DIAGONAL.serial
permutation = numba_gate_kernels.PERMUTATION.serial
pauli_sums = numba_gate_kernels.PAULI_SUMS.serial
pauli_cross = numba_adjoint_kernels.PAULI_CROSS.serial
pauli_accumulate = numba_adjoint_kernels.PAULI_ACCUMULATE.serial


@njit(cache=True)
def spectral_data(theta: float, sign: float, spectrum: np.ndarray,
                  parts: np.ndarray) -> np.ndarray:
    """``Σ_j e^{-i sign θ λ_j} parts[j]``: the data of a one-parameter gate at ``θ`` from the
    spectral parts of its generator (``sign`` -1: at ``-θ``, the inverse), flat.

    >>> spectral_data(np.pi, 1.0, np.array([-0.5, 0.5]), np.array([[0.5], [0.5]])).round(12)
    array([0.+0.j])
    """
    out = np.zeros(parts.shape[1], np.complex128)
    for j in range(spectrum.shape[0]):
        a = spectrum[j] * theta
        e = complex(np.cos(a), -sign * np.sin(a))
        for k in range(parts.shape[1]):
            out[k] += parts[j, k] * e
    return out


@njit(cache=True)
def marginal_probs(state: np.ndarray, wires: np.ndarray) -> np.ndarray:
    """``|state_i|²`` summed over the basis states with the same bits on ``wires``
    (``wires[0]`` least significant), as ``probs`` reads a register."""
    out = np.zeros(1 << wires.shape[0])
    for i in range(state.shape[0]):
        a = state[i]
        k = 0
        for j in range(wires.shape[0]):
            k |= ((i >> wires[j]) & 1) << j
        out[k] += a.real * a.real + a.imag * a.imag
    return out


@njit(cache=True)
def accumulate_probs_adjoint(lam: np.ndarray, state: np.ndarray, wires: np.ndarray,
                             weights: np.ndarray) -> None:
    """``lam_i += weights[k(i)] state_i``: the adjoint of `marginal_probs` seeded with the
    cotangent ``weights`` (half the derivative of ``Σ_k weights_k p_k`` by ``conj(state)``).

    >>> lam = np.zeros(2, complex)
    >>> accumulate_probs_adjoint(lam, np.array([0.6, 0.8j]), np.array([0]), np.array([1.0, 2.0]))
    >>> lam.tolist()
    [(0.6+0j), 1.6j]
    """
    for i in range(state.shape[0]):
        k = 0
        for j in range(wires.shape[0]):
            k |= ((i >> wires[j]) & 1) << j
        lam[i] += weights[k] * state[i]


def _fingerprint() -> str:
    sources = [Path(m.__file__) for m in (numba_gate_kernels, numba_adjoint_kernels,
                                          numba_ranges, indexing, observables)]
    sources.append(Path(__file__))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources))
    return digest.hexdigest()[:12]


IMPORT = f"from qdiff.quantum.compiled import kernels as qk  # kernels {_fingerprint()}"
