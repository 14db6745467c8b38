"""Where the vectorized sample mode keeps its batch of states, and how it works on them.

The batch runner (`qdiff.quantum.execution.shot_batch`) keeps every live shot's state as one
row of a ``(rows, 2**n)`` array. Everything else it holds (measured bits, loop counters,
random streams, classical values) stays on the host; only the states go where the back end
puts them, and only these operations touch them:

- `HostShotStates`: NumPy arrays and the Numba kernels of `shot_kernels` (``backend="auto"``
  or ``"numba"``): a row at a time, in cache.
- `ArrayShotStates`: whole-batch array operations of an array module, NumPy
  (``backend="numpy"``) or CuPy on a GPU (``backend="cupy"``). A gate gathers the
  amplitudes its block mixes into a ``(rows, bases, 2**k)`` array through an index table
  (uploaded once per gate shape), multiplies by the block (one matrix, or each row's own) and
  scatters them back; a measurement's per-row weights come back to the host (two numbers a
  row), where the outcomes are drawn from the shots' streams, and the collapse is one
  multiplication by a per-row factor.

Both give the same numbers to rounding (same streams, same outcomes), which the tests check.

>>> import numpy as np
>>> states = ArrayShotStates(np)
>>> batch = states.basis(2, 2, np.complex128)
>>> x = np.array([[[0, 1], [1, 0]]], complex)
>>> states.apply_block(batch, [0], 0, x, np.zeros(2, np.int64)).real.tolist()  # X on wire 0
[[0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from qdiff.gpu.array_module import import_cupy

from . import shot_kernels


class HostShotStates:
    """States as NumPy arrays on the host, gates and measurements as Numba kernels."""

    def __init__(self) -> None:
        self.xp: ModuleType = np
        self._uploaded: dict[Any, Any] = {}

    def _device(self, key: Any, make: Any) -> Any:
        # host tables (index tables, signs) go where the states are, once per shape
        found = self._uploaded.get(key)
        if found is None:
            found = self._uploaded[key] = self.xp.asarray(make())
        return found

    def basis(self, rows: int, num_qubits: int, dtype: Any) -> Any:
        """``rows`` copies of |0…0⟩."""
        state = self.xp.zeros((rows, 1 << num_qubits), dtype)
        state[:, 0] = 1
        return state

    def apply_block(self, state: Any, targets: Sequence[int], control_mask: int,
                    blocks: np.ndarray, which: np.ndarray) -> Any:
        """Row ``r`` gets ``blocks[which[r]]`` on ``targets`` where every wire of
        ``control_mask`` is 1 (`shot_kernels.apply_block`); in place, returns the batch."""
        return shot_kernels.apply_block(np.ascontiguousarray(state),
                                        np.asarray(targets, np.int64), int(control_mask),
                                        np.ascontiguousarray(blocks), which)

    def multiply(self, state: Any, phases: np.ndarray, which: np.ndarray) -> Any:
        """Each row times its register-wide diagonal (``phases[which[r]]``), in place."""
        state = np.ascontiguousarray(state)
        state *= phases[0] if len(phases) == 1 else phases[which]
        return state

    def wire_weights(self, state: Any, wire: int) -> np.ndarray:
        """Per row, the squared norms where ``wire`` is 0 and where it is 1 (host array)."""
        return shot_kernels.wire_weights(np.ascontiguousarray(state), wire)

    def collapse(self, state: Any, wire: int, outcome: np.ndarray, scale: np.ndarray,
                 to_zero: bool) -> Any:
        """Row ``r`` keeps its amplitudes where ``wire`` reads ``outcome[r]``, times
        ``scale[r]`` (moved to where ``wire`` is 0 when ``to_zero``); in place."""
        return shot_kernels.collapse(np.ascontiguousarray(state), wire, outcome, scale,
                                     to_zero)

    def expval(self, state: Any, xs: Sequence[int], zs: Sequence[int],
               coefficients: Sequence[complex]) -> np.ndarray:
        """Per row, ⟨ψ|Σ_t c_t X^{x_t} Z^{z_t}|ψ⟩ / ⟨ψ|ψ⟩ of the Pauli terms given as masks
        (host array)."""
        xp = self.xp
        n = state.shape[1].bit_length() - 1
        total = xp.zeros(state.shape[0])
        for x, z, f in zip(xs, zs, coefficients):
            flipped = self._device(("flip", n, x), lambda x=x: np.arange(1 << n) ^ x)
            ket = state
            if z:
                ket = state * self._device(("signs", n, z), lambda z=z: parity_signs(n, z))
            total += (f * xp.einsum("ri,ri->r", state[:, flipped].conj(), ket)).real
        norm = xp.einsum("ri,ri->r", state.conj(), state).real
        return self.to_host(total / norm)

    def probs(self, state: Any, wires: Sequence[int]) -> np.ndarray:
        """Per row, the probabilities of ``wires`` (bit j of the index is ``wires[j]``),
        normalized (host array)."""
        xp = self.xp
        count, n = state.shape[0], state.shape[1].bit_length() - 1
        p = (state.real ** 2 + state.imag ** 2).reshape((count, *(2,) * n))
        kept = [1 + (n - 1 - w) for w in reversed(wires)]
        dropped = tuple(a for a in range(1, n + 1) if a not in kept)
        marginal = p.sum(axis=dropped, keepdims=True) if dropped else p
        marginal = xp.moveaxis(marginal, kept, list(range(n + 1 - len(kept), n + 1)))
        marginal = marginal.reshape(count, 1 << len(wires))
        return self.to_host(marginal / marginal.sum(axis=1, keepdims=True))

    def normalized(self, state: Any, dtype: Any) -> np.ndarray:
        """Each row over its norm, as ``dtype`` (host array)."""
        norm = self.xp.sqrt(self.xp.einsum("ri,ri->r", state.conj(), state).real)
        return self.to_host((state / norm[:, None]).astype(dtype))

    def to_host(self, array: Any) -> np.ndarray:
        """``array`` as a NumPy array."""
        return np.asarray(array)


class ArrayShotStates(HostShotStates):
    """States as arrays of ``xp`` (NumPy, or CuPy on a GPU), worked on by whole-batch array
    operations (see the module docstring)."""

    def __init__(self, xp: ModuleType):
        super().__init__()
        self.xp = xp

    def apply_block(self, state: Any, targets: Sequence[int], control_mask: int,
                    blocks: np.ndarray, which: np.ndarray) -> Any:
        xp = self.xp
        n = state.shape[1].bit_length() - 1
        key = ("block", n, tuple(int(t) for t in targets), int(control_mask))
        index = self._device(key, lambda: block_index(n, key[2], key[3]))
        # (rows, bases, 2^k) @ (2^k, 2^k)ᵀ: the block mixes each base's 2^k amplitudes
        mixed = state[:, index]
        if len(blocks) == 1:
            mixed = mixed @ xp.asarray(blocks[0].T.astype(state.dtype))
        else:
            per_row = xp.asarray(blocks.astype(state.dtype))[xp.asarray(which)]
            mixed = xp.matmul(mixed, per_row.transpose(0, 2, 1))
        state[:, index] = mixed
        return state

    def multiply(self, state: Any, phases: np.ndarray, which: np.ndarray) -> Any:
        xp = self.xp
        table = xp.asarray(phases.astype(state.dtype))
        state *= table[0] if len(phases) == 1 else table[xp.asarray(which)]
        return state

    def _halves(self, state: Any, wire: int) -> Any:
        # (rows, high bits, the wire's bit, low bits): a view, no copy
        return state.reshape(state.shape[0], -1, 2, 1 << wire)

    def wire_weights(self, state: Any, wire: int) -> np.ndarray:
        halves = self._halves(state, wire)
        weights = (halves.real ** 2 + halves.imag ** 2).sum(axis=(1, 3))
        return self.to_host(weights).astype(np.float64)

    def collapse(self, state: Any, wire: int, outcome: np.ndarray, scale: np.ndarray,
                 to_zero: bool) -> Any:
        xp = self.xp
        # the kept half times its scale, the other half times 0: one multiplication
        factor = np.zeros((len(outcome), 2))
        factor[np.arange(len(outcome)), outcome] = scale
        state = xp.ascontiguousarray(state)  # so that the halves are a view of it
        halves = self._halves(state, wire)
        halves *= xp.asarray(factor.astype(state.real.dtype))[:, None, :, None]
        if to_zero:  # a reset: the kept half moves to where the wire is 0 (the other is 0)
            halves[:, :, 0, :] += halves[:, :, 1, :]
            halves[:, :, 1, :] = 0
        return state

    def to_host(self, array: Any) -> np.ndarray:
        return np.asarray(array) if self.xp is np else self.xp.asnumpy(array)



def parity_signs(num_qubits: int, z_mask: int) -> np.ndarray:
    """(-1)^(popcount(i & z_mask)) for every basis index i: a Z string's diagonal.

    >>> parity_signs(2, 0b11).tolist()
    [1.0, -1.0, -1.0, 1.0]
    """
    return 1.0 - 2.0 * (np.bitwise_count(np.arange(1 << num_qubits) & z_mask) & 1)


@functools.lru_cache(maxsize=256)
def block_index(num_qubits: int, targets: tuple[int, ...], control_mask: int) -> np.ndarray:
    """The ``(bases, 2**k)`` table of the amplitudes a block on ``targets`` mixes where the
    wires of ``control_mask`` are 1: row b holds base b (target bits 0, control bits 1) plus
    each of the 2^k settings of the target bits (bit j of the column is ``targets[j]``).

    >>> block_index(2, (1,), 0).tolist()
    [[0, 2], [1, 3]]
    >>> block_index(2, (1,), 0b01).tolist()   # controlled on wire 0
    [[1, 3]]
    """
    index = np.arange(1 << num_qubits)
    target_mask = sum(1 << t for t in targets)
    bases = index[(index & (target_mask | control_mask)) == control_mask]
    offsets = np.zeros(1 << len(targets), np.int64)
    for j, t in enumerate(targets):
        offsets |= ((np.arange(1 << len(targets)) >> j) & 1) << t
    return bases[:, None] + offsets[None, :]


def shot_states(backend: Any) -> HostShotStates:
    """Where a sample-mode batch keeps its states for ``backend`` (a back end name):
    ``"cupy"`` on the GPU (CuPy and a device needed, else an error saying why), ``"numpy"``
    as NumPy array operations, anything else the Numba kernels.

    >>> type(shot_states("auto")).__name__, type(shot_states("numpy")).__name__
    ('HostShotStates', 'ArrayShotStates')
    """
    name = backend if isinstance(backend, str) else getattr(backend, "name", "auto")
    if name == "cupy":
        return ArrayShotStates(import_cupy())
    if name == "numpy":
        return ArrayShotStates(np)
    return HostShotStates()
