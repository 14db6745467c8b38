"""The adjoint method's Numba entry points (used by :class:`NumbaBackend`'s adjoint methods).

- :func:`pauli_cross`: ``<bra|P|ket>`` for every term of a Pauli sum, in one pass over the two
  states, without forming ``P|ket>``.
- :func:`pauli_accumulate`: ``out += O state`` for a Pauli sum ``O`` in one pass (the adjoint
  of a readout adds ``ē O ψ`` to ``λ``).
- :func:`adjoint_block`: the reverse sweep of a gate block on the pair (ψ, λ) in one pass over
  each state. The forward block kernel run backwards on two states at once: a batch of B
  groups of ψ and the same B groups of λ are gathered into split re/im buffers (rows = the
  block's 2^k amplitudes, one row map for both), then for every gate, last first, the
  derivative ``2 Im<λ|G ψ>`` is summed over the buffer while ``U^†`` is applied to both
  buffers, and the batch is scattered back. Each state crosses memory once per block,
  instead of once per gate plus (both states) once per derivative. λ may be a stack (the
  rows of a Jacobian): every λ is read against the one ψ, undone once.

The kernels are in :mod:`.numba_adjoint_kernels`, the block encoding in
:mod:`.adjoint_encoding`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..lang.observables import parity
from .adjoint_encoding import encode_adjoint_block
from .gate_ops import GateOp
from .indexing import index_layout
from .numba_adjoint_kernels import ADJOINT_BLOCK, PAULI_ACCUMULATE, PAULI_CROSS
from .numba_ranges import spread_items

__all__ = ["pauli_cross", "pauli_accumulate", "adjoint_block", "sign_tables"]

_ADJ_AMPS = 1 << 15  # amplitudes per gathered batch of ψ and of one λ (a stack shares 2x this)

_ACC_BITS = 10  # the low index bits whose signs the accumulate kernel tabulates per term


_SIGN_TABLES: dict[tuple[int, bytes, bytes], tuple] = {}


def sign_tables(num_qubits: int, x_masks: np.ndarray, z_masks: np.ndarray
                 ) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Terms sorted by x: (order, L, x masks, z masks, group starts, sign table of the low L
    bits ``signs[k, lo] = (-1)^parity(lo & z_k)``). Remembered: a gradient asks for the
    same generators' tables gate after gate (the kernels only read them)."""
    x_masks = np.asarray(x_masks, np.int64)
    z_masks = np.asarray(z_masks, np.int64)
    key = (num_qubits, x_masks.tobytes(), z_masks.tobytes())
    found = _SIGN_TABLES.get(key)
    if found is None:
        if len(_SIGN_TABLES) > 4096:
            _SIGN_TABLES.clear()
        found = _SIGN_TABLES[key] = _build_sign_tables(num_qubits, x_masks, z_masks)
    return found


def _build_sign_tables(num_qubits: int, x_masks: np.ndarray, z_masks: np.ndarray
                       ) -> tuple[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray,
                                  np.ndarray]:
    order = np.argsort(x_masks, kind="stable")
    xs = np.ascontiguousarray(np.asarray(x_masks, np.int64)[order])
    zs = np.ascontiguousarray(np.asarray(z_masks, np.int64)[order])
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1], True]).astype(np.int64)
    L = min(_ACC_BITS, num_qubits)
    lo = np.arange(1 << L, dtype=np.int64)
    signs = np.ascontiguousarray(1.0 - 2.0 * parity(lo[None, :] & zs[:, None]))
    return order, L, xs, zs, starts, signs


def pauli_cross(bra: np.ndarray, ket: np.ndarray, x_masks: np.ndarray, z_masks: np.ndarray,
                parallel: bool = False) -> np.ndarray:
    """Per term: ``sum_i conj(bra[i^x]) (-1)^parity(i&z) ket[i]`` (complex128), all terms
    in one pass over the two states.

    >>> psi = np.array([1, 1j])                   # Y: <ψ|Y|ψ> = 2 = i * (-2i); Z: 0
    >>> [complex(c) for c in pauli_cross(psi, psi, np.array([1, 0]), np.array([1, 1]))]
    [-2j, 0j]
    """
    num_qubits = int(ket.shape[0]).bit_length() - 1
    order, L, xs, zs, starts, signs = sign_tables(num_qubits, x_masks, z_masks)
    chunks = ket.shape[0] >> L
    raw = PAULI_CROSS(spread_items(chunks, parallel), ket, chunks,
                      np.zeros(xs.shape[0], np.complex128), bra, L, xs, zs, starts, signs)
    out = np.empty_like(raw)
    out[order] = raw
    return out


def pauli_accumulate(out: np.ndarray, state: np.ndarray, num_qubits: int, x_masks: np.ndarray,
                     z_masks: np.ndarray, factors: np.ndarray, parallel: bool = False) -> None:
    """``out[i] += sum_k factors[k] (-1)^parity((i^x_k)&z_k) state[i^x_k]`` for all i (the
    ``_pauli`` convention), in place, in one pass over ``out``.

    >>> out = np.zeros(2, complex)
    >>> pauli_accumulate(out, np.array([1, 0j]), 1, np.array([0, 1]), np.array([1, 0]),
    ...                  np.array([0.5, 2.0]))
    >>> out.real.tolist()
    [0.5, 2.0]
    """
    order, L, xs, zs, starts, signs = sign_tables(num_qubits, x_masks, z_masks)
    fs = np.asarray(factors, np.complex128)[order] * (1 - 2 * parity(xs & zs))
    fs = np.ascontiguousarray(fs)
    chunks = out.shape[0] >> L
    PAULI_ACCUMULATE(spread_items(chunks, parallel), out, chunks, state, L, xs, zs, fs, starts,
                     signs)


def adjoint_block(psi: np.ndarray, lam: np.ndarray, num_qubits: int, wires: Sequence[int],
                  ops: Sequence[GateOp], want: Sequence[bool], min_batch: int,
                  parallel: bool = False, filled: dict | None = None) -> np.ndarray | None:
    """The block kernel on (ψ, λ) (the contract of ``StatevectorBackend.adjoint_block``),
    or ``None`` when it does not apply: fewer than ``min_batch`` groups of the other wires
    (unless the block is the whole register, one group), or a gate too wide
    (:func:`encode_adjoint_block`). ``lam`` may be a stack of adjoints
    (rows), all undone against the one ψ: then the derivatives have a row per adjoint.

    >>> psi = np.zeros(64, complex); psi[0] = 1; lam = psi.copy()
    >>> g = adjoint_block(psi, lam, 6, [0], [GateOp("rx", (0,), (0.0,))], [True], 32)
    >>> g.tolist(), complex(psi[0])
    ([0.0], (1+0j))
    """
    ws = tuple(sorted(int(w) for w in wires))
    k = len(ws)
    groups = 1 << (num_qubits - k)
    if groups < min_batch and groups > 1:
        return None
    encoded = encode_adjoint_block(ws, ops, want, filled)
    if encoded is None:
        return None
    nslots, *arrays = encoded
    stack = lam if lam.ndim == 2 else lam[None]
    layout = index_layout(num_qubits, ws)
    # a batch of every state fits the cache together: 2 _ADJ_AMPS amplitudes in all
    per_state = 2 * _ADJ_AMPS // (1 + stack.shape[0])
    batch = min(groups, max(min_batch, (1 << (per_state.bit_length() - 1)) >> k))
    nb = groups // batch
    acc = ADJOINT_BLOCK(spread_items(nb, parallel and nb > 1), psi, nb,
                        np.zeros((stack.shape[0], nslots)), stack, batch, layout.positions,
                        layout.offsets, *arrays)
    grads = 2.0 * acc[:, ::-1]
    return grads if lam.ndim == 2 else grads[0]
