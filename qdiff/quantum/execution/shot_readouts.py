"""Readouts estimated from shots, as a device measures them: what sample mode returns for a
program that never measures mid-circuit (its one state is known, so each readout is drawn
from it ``shots`` times instead of running ``shots`` identical trajectories).

- ``expval`` of ``Σ c_j P_j``: each Pauli string measured ``shots`` times in its eigenbasis,
  each shot a ±1 outcome with ``P(+1) = (1 + <P_j>) / 2``; the estimate is ``Σ c_j`` times
  the mean outcome (unbiased, independent shots per term).
- ``probs``: the outcome frequencies of ``shots`` draws from the Born distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def estimated_expval(backend: Any, state: Any, num_qubits: int,
                     terms: Sequence[tuple[complex, str]], wires: Sequence[int], shots: int,
                     rng: np.random.Generator) -> np.float64:
    """The shot estimate of ``<Σ c_j P_j>``.

    >>> from qdiff.quantum.simulator import get_backend
    >>> be = get_backend("numpy")
    >>> float(estimated_expval(be, be.zero_state(1), 1, [(2.0, "Z")], [0], 10,
    ...                        np.random.default_rng(0)))
    2.0
    """
    labels = [label for _, label in terms]
    exact = np.asarray(backend.expval_pauli_sum_batch(state, num_qubits, labels, list(wires)))
    plus = np.clip((1.0 + exact.real) / 2.0, 0.0, 1.0)
    means = 2.0 * rng.binomial(shots, plus) / shots - 1.0
    return np.float64(sum(complex(c).real * m for (c, _), m in zip(terms, means)))


def estimated_probs(probabilities: np.ndarray, shots: int,
                    rng: np.random.Generator) -> np.ndarray:
    """Outcome frequencies of ``shots`` draws from ``probabilities``.

    >>> estimated_probs(np.array([0.0, 1.0]), 5, np.random.default_rng(0)).tolist()
    [0.0, 1.0]
    """
    p = np.clip(np.asarray(probabilities, np.float64), 0.0, None)
    return rng.multinomial(shots, p / p.sum()) / shots
