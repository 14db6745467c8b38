"""Reference back end: vectorized array code over any NumPy-compatible array module.

Every kernel builds the explicit index arrays of :mod:`qdiff.quantum.simulator.indexing`'s index
math (group bases ``|`` offsets) and gathers/scatters through them. That is not the fastest way
to simulate, but it is the most direct transcription of the shared index math, which is what a
reference is for; the same class runs on CuPy arrays (see ``cupy_backend``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..lang.observables import parity
from .backend import StatevectorBackend
from .indexing import IndexLayout
from .registry import register_backend

__all__ = ["ArrayModuleBackend", "NumpyBackend"]


class ArrayModuleBackend(StatevectorBackend):
    """Kernels written once against an array module ``xp`` (NumPy or CuPy)."""

    def _device(self, host_array: np.ndarray) -> Any:
        """Move a small host array (offsets, matrix) to the back end's memory."""
        return self.xp.asarray(host_array)

    def _group_indices(self, layout: IndexLayout, offsets: np.ndarray) -> Any:
        # [num_groups, len(offsets)] matrix of amplitude indices: one row per group.
        return layout.group_bases(self.xp)[:, None] | self._device(offsets)[None, :]

    def _dense(self, state: Any, layout: IndexLayout, matrix: Any) -> None:
        idx = self._group_indices(layout, layout.offsets)
        state[idx] = state[idx] @ self._device(matrix).T

    def _diagonal(self, state: Any, layout: IndexLayout, offsets: Any, diag: Any) -> None:
        idx = self._group_indices(layout, offsets)
        state[idx] = state[idx] * self._device(diag)

    def _permutation(self, state: Any, layout: IndexLayout, perm: Any, phases: Any) -> None:
        idx = self._group_indices(layout, layout.offsets)
        state[idx[:, self._device(perm)]] = state[idx] * self._device(phases)

    def _pauli(self, state: Any, num_qubits: int, x_mask: int, z_mask: int,
               alpha: complex, beta: complex) -> None:
        xp = self.xp
        i = xp.arange(state.shape[0], dtype=xp.int64)
        dt = state.dtype.type
        if x_mask == 0:
            sign = 1 - 2 * parity(i & z_mask)
            state *= (dt(alpha) + dt(beta) * sign).astype(state.dtype)
            return
        j = i ^ x_mask
        sign = (1 - 2 * parity(j & z_mask)).astype(state.real.dtype)
        new = dt(beta) * sign * state[j]
        if alpha != 0:
            new += dt(alpha) * state
        state[...] = new


class NumpyBackend(ArrayModuleBackend):
    """The NumPy reference back end (always available).

    >>> be = NumpyBackend(); psi = be.zero_state(1)
    >>> be.apply_gate(psi, 1, "ry", [0], [np.pi]).real.round(12).tolist()
    [0.0, 1.0]
    """

    name = "numpy"

    def __init__(self) -> None:
        super().__init__(np)

    def adjoint_register_qubits(self, num_qubits: int, support: int, width: int) -> int:
        """The reverse sweep's register on ψ zero past ``2^support`` (the base class has the
        contract): ``support`` qubits, the part that is not zero.

        >>> NumpyBackend().adjoint_register_qubits(20, 9, 8)
        9
        """
        return min(num_qubits, support)


register_backend("numpy", NumpyBackend)
