"""Each member's matrices of a circuit's steps built from its angles straight into the lane
layout of `lane_kernels` (``mats[t, e, part, row, column, lane]``), runs of one-wire gates
multiplied together, and optionally their adjoints in reverse order (the steps that undo
the circuit, for the adjoint sweep).

A gate's matrix for angle ``θ`` is ``F + Σ_j exp(-iθλ_j) P_j``: a fixed gate's ``F`` with no
eigenvalues, a rotation's eigenvalues ``λ_j`` and projectors ``P_j`` of its generator with
``F = 0``. Building them here, member by member, replaces a chain of whole-batch NumPy
steps (every gate's 4x4 matrix per member, the runs' products, the copy into the lanes and
the copy of the adjoints), each a pass over megabytes for a few flops per entry.

>>> eigenvalues, vectors = np.linalg.eigh([[0, -0.5j], [0.5j, 0]])   # ry's generator Y/2
>>> fixed = np.zeros((1, 4, 4), complex); values = np.zeros((1, 4))
>>> values[0, :2] = eigenvalues
>>> projectors = np.zeros((1, 4, 4, 4), complex)
>>> projectors[0, :2, :2, :2] = np.einsum("ij,kj->jik", vectors, vectors.conj())
>>> out = np.empty((1, 1, 2, 4, 4, 1)); undo = np.empty((1, 1, 2, 4, 4, 1))
>>> theta = np.array([[0.4]]); gates = np.array([0]); runs = np.array([0, 1])
>>> lane_matrices(theta, np.array([0]), np.array([2]), fixed, values, projectors, gates, runs,
...               np.array([-1]), out, undo)
>>> np.allclose(out[0, 0, 0, :2, :2, 0], [[np.cos(0.2), -np.sin(0.2)],
...                                         [np.sin(0.2), np.cos(0.2)]])
True
>>> np.allclose(undo[0, 0, 0, :2, :2, 0], out[0, 0, 0, :2, :2, 0].T)
True
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(inline="always", cache=True)
def _phases(theta, values, g, k, out):  # pragma: no cover - compiled
    # exp(-iθλ_j) for gate g's k eigenvalues; one cosine and sine for the ±λ of a Pauli
    # rotation's generator (they took most of the kernel's time)
    for j in range(k):
        if j and values[g, j] == values[g, 0]:
            out[j] = out[0]
        elif j and values[g, j] == -values[g, 0]:
            out[j] = out[0].conjugate()
        else:
            phase = theta * values[g, j]
            out[j] = complex(math.cos(phase), -math.sin(phase))


@njit(inline="always", cache=True)
def _entry(phases, k, fixed, projectors, g, r, c):  # pragma: no cover - compiled
    # gate g's matrix entry (r, c) from its k phases
    v = fixed[g, r, c]
    for j in range(k):
        v += projectors[g, j, r, c] * phases[j]
    return v


@njit(cache=True)
def lane_matrices(theta, angle_of, sizes, fixed, values, projectors, gates, runs, permutes,
                  out, inverses):  # pragma: no cover - compiled
    """Fill ``out`` (``(tiles, entries, 2, 4, 4, lanes)``) with each entry's matrix for
    every member: entry ``e`` is the product of gates ``gates[runs[e]:runs[e + 1]]`` (their
    2x2 blocks when there are several, the one gate's 4x4 matrix otherwise), zero for a
    permutation entry (``permutes[e] >= 0``) and for the lanes past the last member.
    Member ``b``'s angle of gate ``g`` is ``theta[angle_of[g], b]``, and the gate's matrix
    ``fixed[g] + Σ_{j < sizes[g]} exp(-iθ values[g, j]) projectors[g, j]`` (a fixed gate:
    ``sizes[g] = 0``, ``fixed[g]``). When ``inverses`` has the shape of ``out``, entry
    ``e``'s adjoint is also written there as entry ``entries - 1 - e``."""
    tiles, entries, lanes = out.shape[0], out.shape[1], out.shape[5]
    members = theta.shape[1]
    undo = inverses.shape == out.shape
    m = np.empty((4, 4), np.complex128)
    phases = np.empty(4, np.complex128)
    for t in range(tiles):
        for e in range(entries):
            back = entries - 1 - e
            count = runs[e + 1] - runs[e]
            for lane in range(lanes):
                b = t * lanes + lane
                m[:] = 0.0
                if b < members and permutes[e] < 0:
                    if count == 1:
                        g = gates[runs[e]]
                        k = sizes[g]
                        _phases(theta[angle_of[g], b] if k else 0.0, values, g, k, phases)
                        for r in range(4):
                            for c in range(4):
                                m[r, c] = _entry(phases, k, fixed, projectors, g, r, c)
                    else:   # one wire's run: the product of the 2x2 blocks
                        m[0, 0] = 1.0
                        m[1, 1] = 1.0
                        for k in range(runs[e], runs[e + 1]):
                            g = gates[k]
                            k = sizes[g]
                            _phases(theta[angle_of[g], b] if k else 0.0, values, g, k, phases)
                            u00 = _entry(phases, k, fixed, projectors, g, 0, 0)
                            u01 = _entry(phases, k, fixed, projectors, g, 0, 1)
                            u10 = _entry(phases, k, fixed, projectors, g, 1, 0)
                            u11 = _entry(phases, k, fixed, projectors, g, 1, 1)
                            p00, p01, p10, p11 = m[0, 0], m[0, 1], m[1, 0], m[1, 1]
                            m[0, 0] = u00 * p00 + u01 * p10
                            m[0, 1] = u00 * p01 + u01 * p11
                            m[1, 0] = u10 * p00 + u11 * p10
                            m[1, 1] = u10 * p01 + u11 * p11
                for r in range(4):
                    for c in range(4):
                        out[t, e, 0, r, c, lane] = m[r, c].real
                        out[t, e, 1, r, c, lane] = m[r, c].imag
                        if undo:
                            inverses[t, back, 0, c, r, lane] = m[r, c].real
                            inverses[t, back, 1, c, r, lane] = -m[r, c].imag
