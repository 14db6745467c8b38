"""A batch of statevectors run through one circuit with per-member matrices, written once
against an array module ``xp`` (NumPy, or CuPy on a GPU).

The batch is a ``(members, 2**n)`` complex array, bit ``w`` of an amplitude's index being
wire ``w``. The steps are those of `batched_kernels` (``DENSE1``, ``DENSE2``,
``CONTROLLED1``, ``PERMUTE``, with ``mats[b, e]`` a 4x4 array holding step ``e``'s matrix
for member ``b``): a step reshapes the states to ``(members, 2, ..., 2)``, moves its wires
last and multiplies every member's amplitudes by that member's matrix in one batched
``matmul`` (a step whose matrices are diagonal for every member is one elementwise
product), a controlled step acts on the half of the amplitudes where its control is 1,
and a permutation (several gates, or one on three or more wires: how wide gates arrive,
`execution.batched.lowered_gates`) is one index gather. Each step returns new arrays: the
code is the same on NumPy and CuPy, and the NumPy run is what the tests check.

>>> import numpy as np
>>> from qdiff.quantum.simulator.batched_kernels import DENSE1
>>> psi = np.zeros((2, 2), complex); psi[:, 0] = 1
>>> mats = np.zeros((2, 1, 4, 4), complex)
>>> mats[0, 0, :2, :2] = np.eye(2); mats[1, 0, :2, :2] = [[0, 1], [1, 0]]
>>> run_circuit(np, psi, [DENSE1], [0], [0], mats, None).real.tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from ..lang.observables import parity
from .batched_kernels import CONTROLLED1, DENSE1, DENSE2, PERMUTE

__all__ = ["adjoint_sweep", "apply_step", "flip_coefficients", "observable_rows",
           "probabilities", "run_circuit"]


def _wire_axis(num_qubits: int, wire: int) -> int:
    """The axis of ``wire`` in the ``(members, 2, ..., 2)`` view (the highest wire first)."""
    return num_qubits - wire


def _gate_rows(xp: ModuleType, cube: Any, axes: Sequence[int]) -> Any:
    """``cube`` (``(members, ..., 2, ...)``) as ``(members, rows, 2**k)``: the amplitudes of
    each assignment of the other wires, bit ``j`` of the last index being axis ``axes[j]``."""
    last = list(range(cube.ndim - len(axes), cube.ndim))
    moved = xp.moveaxis(cube, list(reversed(axes)), last)   # axes[0] last: index bit 0
    return moved.reshape(cube.shape[0], -1, 1 << len(axes))


def _apply_matrix(xp: ModuleType, cube: Any, axes: Sequence[int], matrix: Any,
                  diagonal: bool) -> Any:
    """``matrix`` (``(members or 1, 2**k, 2**k)``; bit ``j`` of its index is ``axes[j]``)
    applied to the axes ``axes`` of ``cube`` (``(members, ..., 2, ...)``), a new array."""
    rows = _gate_rows(xp, cube, axes)
    if diagonal:   # a diagonal per member: one elementwise product
        product = rows * xp.diagonal(matrix, axis1=-2, axis2=-1)[:, None, :]
    else:
        product = xp.matmul(rows, xp.swapaxes(matrix, -1, -2))
    last = list(range(cube.ndim - len(axes), cube.ndim))
    moved_shape = tuple(xp.moveaxis(cube, list(reversed(axes)), last).shape)
    return xp.moveaxis(product.reshape(moved_shape), last, list(reversed(axes)))


def apply_step(xp: ModuleType, psi: Any, kind: int, wire0: int, wire1: int, matrix: Any,
               diagonal: bool = False, generator: bool = False) -> Any:
    """One step on every member of ``psi`` (``(members, 2**n)``): ``matrix`` is
    ``(members or 1, 4, 4)`` (a 2x2 one in its top-left block), bit ``j`` of a ``DENSE2``
    block's index is wire ``j``, a ``CONTROLLED1`` step applies the 2x2 block to ``wire1``
    where ``wire0`` is 1. ``diagonal``: every member's matrix is diagonal. ``generator``:
    ``matrix`` is a controlled gate's generator ``|1><1| ⊗ G``, zero where the control is 0
    (not the identity of a gate). A new array.

    >>> import numpy as np
    >>> psi = np.array([[0.0, 1.0, 0.0, 0.0]], complex)      # |01>: wire 0 is 1
    >>> x = np.zeros((1, 4, 4), complex); x[0, :2, :2] = [[0, 1], [1, 0]]
    >>> apply_step(np, psi, CONTROLLED1, 0, 1, x).real.tolist()
    [[0.0, 0.0, 0.0, 1.0]]
    """
    members, size = psi.shape
    n = size.bit_length() - 1
    cube = psi.reshape((members,) + (2,) * n)
    if kind == DENSE2:
        new = _apply_matrix(xp, cube, [_wire_axis(n, wire0), _wire_axis(n, wire1)], matrix,
                            diagonal)
    elif kind == CONTROLLED1:
        on = [slice(None)] * cube.ndim
        on[_wire_axis(n, wire0)] = slice(1, 2)   # the half where the control is 1
        new = xp.zeros_like(cube) if generator else cube.copy()
        new[tuple(on)] = _apply_matrix(xp, cube[tuple(on)], [_wire_axis(n, wire1)],
                                       matrix[:, :2, :2], diagonal)
    else:   # the amplitude pairs of a view, no axes moved: a few elementwise products
        a, b = _components(xp, psi, kind, wire0, wire1)
        m = [[matrix[:, i, j][:, None, None] for j in range(2)] for i in range(2)]
        if diagonal:
            new = xp.stack([m[0][0] * a, m[1][1] * b], axis=2)
        else:
            new = xp.stack([m[0][0] * a + m[0][1] * b, m[1][0] * a + m[1][1] * b], axis=2)
    return new.reshape(members, size)


def _components(xp: ModuleType, x: Any, kind: int, wire0: int, wire1: int) -> list[Any]:
    """The amplitudes of ``x`` (``(members, 2**n)``) that a step's matrix mixes, split by
    its index (``2**k`` arrays, each with the members first): a ``DENSE1`` step's two
    halves as views, a controlled step's only where the control is 1."""
    members, size = x.shape
    if kind == DENSE1:
        view = x.reshape(members, size >> (wire0 + 1), 2, 1 << wire0)
        return [view[:, :, 0], view[:, :, 1]]
    n = size.bit_length() - 1
    cube = x.reshape((members,) + (2,) * n)
    if kind == CONTROLLED1:
        on = [slice(None)] * (n + 1)
        on[_wire_axis(n, wire0)] = slice(1, 2)
        rows = _gate_rows(xp, cube[tuple(on)], [_wire_axis(n, wire1)])
    else:
        rows = _gate_rows(xp, cube, [_wire_axis(n, wire0), _wire_axis(n, wire1)])
    return [rows[..., i] for i in range(rows.shape[-1])]


def _diagonal_steps(mats: np.ndarray) -> np.ndarray:
    """For each step of host matrices ``(members, steps, 4, 4)``, whether every member's
    matrix is diagonal (applied as an elementwise product)."""
    off = mats * (1 - np.eye(4))
    return ~np.any(off, axis=(0, 2, 3))


def run_circuit(xp: ModuleType, psi: Any, kinds: Sequence[int], wire0: Sequence[int],
                wire1: Sequence[int], mats: np.ndarray, tables: Any) -> Any:
    """The steps applied in order to every member of ``psi``; returns the new states.
    ``mats`` (host, ``(members, steps, 4, 4)``) moves to ``xp`` here; a ``PERMUTE`` step
    gathers by ``tables[wire0[e]]`` (``row[i] := row[table[i]]``, tables on ``xp``)."""
    diagonal = _diagonal_steps(mats)
    device = xp.asarray(mats)
    for e, kind in enumerate(kinds):
        if kind == PERMUTE:
            psi = psi[:, tables[int(wire0[e])]]
        else:
            psi = apply_step(xp, psi, int(kind), int(wire0[e]), int(wire1[e]), device[:, e],
                             bool(diagonal[e]))
    return psi


def _overlap(xp: ModuleType, lam: Any, psi: Any, kind: int, wire0: int, wire1: int,
             generator: np.ndarray) -> Any:
    """``2 Im<lam_b|G psi_b>`` for every member ``b`` (``G``, on the host, shared; on the
    step's wires), as ``2 Im Σ_ij G_ij Σ conj(lam_i) psi_j`` over ``G``'s nonzero entries
    (`_components`: for a controlled step, where the control is 1, ``G`` its base's
    generator); ``G ψ`` is never formed."""
    lams = _components(xp, lam, kind, wire0, wire1)
    psis = _components(xp, psi, kind, wire0, wire1)
    block = generator[:len(lams), :len(lams)]
    total = xp.zeros(psi.shape[0], xp.complex128)
    for i, j in zip(*np.nonzero(block), strict=True):
        products = xp.conj(lams[i]) * psis[j]
        total += complex(block[i, j]) * xp.sum(products, axis=tuple(range(1, products.ndim)))
    return 2.0 * total.imag


def adjoint_sweep(xp: ModuleType, psi: Any, lam: Any, kinds: Sequence[int],
                  wire0: Sequence[int], wire1: Sequence[int], inverses: np.ndarray,
                  tables: Any, gens: np.ndarray) -> Any:
    """The reverse sweep of `lane_kernels.adjoint_sweep` on ``(members, 2**n)`` states:
    ``psi`` the final states, ``lam`` the adjoint vectors, step ``e`` undoing its gates by
    ``inverses[:, e]`` (host, ``(members, steps, 4, 4)``; for ``PERMUTE``,
    ``tables[wire0[e]]`` is the inverse table). Returns ``out`` ``(members, steps, 2)``:
    ``out[:, e, 0] = 2 Im<lam|G psi>`` on the incoming states with ``G = gens[e, 0]`` (the
    step's last gate's generator) and ``out[:, e, 1]`` the same on the outgoing states
    with ``gens[e, 1]`` (its first gate's, a step of two one-wire gates); zero where a
    generator is zero."""
    out = xp.zeros((psi.shape[0], len(kinds), 2))
    undo = xp.asarray(inverses)
    diagonal = _diagonal_steps(inverses)
    present = np.any(gens, axis=(2, 3))
    for e, kind in enumerate(kinds):
        kind, w0, w1 = int(kind), int(wire0[e]), int(wire1[e])
        if kind == PERMUTE:
            psi, lam = psi[:, tables[w0]], lam[:, tables[w0]]
            continue
        if present[e, 0]:
            out[:, e, 0] = _overlap(xp, lam, psi, kind, w0, w1, gens[e, 0])
        psi = apply_step(xp, psi, kind, w0, w1, undo[:, e], bool(diagonal[e]))
        lam = apply_step(xp, lam, kind, w0, w1, undo[:, e], bool(diagonal[e]))
        if present[e, 1]:
            out[:, e, 1] = _overlap(xp, lam, psi, kind, w0, w1, gens[e, 1])
    return out


def flip_coefficients(num_qubits: int, x_masks: Sequence[int], z_masks: Sequence[int],
                      factors: Sequence[complex]) -> list[tuple[int, np.ndarray]]:
    """A Pauli sum (`PauliSum.masks`) as one ``(x, c_x)`` per distinct flip pattern ``x``:
    ``(O ψ)_i = Σ_x c_x[i] ψ_{i ^ x}`` with ``c_x[i] = Σ_k f_k (-1)^popcount((i ^ x) & z_k)``
    over the terms with that ``x``, so that I/Z terms (Σ Z_i) are one diagonal.

    >>> [(x, c.real.tolist()) for x, c in flip_coefficients(1, [0, 1], [1, 0], [1, 2])]
    [(0, [1.0, -1.0]), (1, [2.0, 2.0])]
    """
    amplitudes = np.arange(1 << num_qubits, dtype=np.int64)
    by_flip: dict[int, np.ndarray] = {}
    for x, z, f in zip(x_masks, z_masks, factors, strict=True):
        c = by_flip.setdefault(int(x), np.zeros(1 << num_qubits, np.complex128))
        c += f * (1 - 2 * parity((amplitudes ^ int(x)) & int(z)))
    return sorted(by_flip.items())


def observable_rows(xp: ModuleType, psi: Any,
                    flips: Sequence[tuple[int, Any]]) -> Any:
    """``O ψ_b`` for every row of ``psi``, ``O`` given by `flip_coefficients` (``c_x`` on
    ``xp``): one product per flip pattern, the flips as index gathers."""
    amplitudes = xp.arange(psi.shape[1], dtype=xp.int64)
    out = xp.zeros_like(psi)
    for x, c in flips:
        out += c * (psi if x == 0 else psi[:, amplitudes ^ x])
    return out


def probabilities(xp: ModuleType, psi: Any, wires: Sequence[int]) -> Any:
    """Each member's unnormalized probabilities of the outcomes on ``wires`` (bit ``t`` of
    an outcome is ``wires[t]``), ``(members, 2**len(wires))``.

    >>> import numpy as np
    >>> probabilities(np, np.array([[0.6, 0.8j, 0, 0]]), [1]).round(12).tolist()
    [[1.0, 0.0]]
    """
    members, size = psi.shape
    n = size.bit_length() - 1
    weights = (xp.conj(psi) * psi).real.reshape((members,) + (2,) * n)
    kept = [_wire_axis(n, w) for w in reversed(wires)]   # wires[0] last: outcome bit 0
    others = tuple(a for a in range(1, n + 1) if a not in kept)
    summed = xp.sum(weights, axis=others) if others else weights
    order = sorted(kept)
    moved = xp.moveaxis(summed, [1 + order.index(a) for a in kept],
                        list(range(1, len(kept) + 1)))
    return moved.reshape(members, 1 << len(wires))
