"""The lane kernels of `qdiff.vmap` over a straight circuit (members along the SIMD lanes)
against dense per-member matrices: every step kind forward, the adjoint sweep's overlaps
and undo, blocks of one-wire steps of every width, and member counts that pad a tile or
need several."""

from __future__ import annotations

import numpy as np
import pytest

from qdiff.quantum.simulator import lane_kernels as lk

N = 4   # wires
rng = np.random.default_rng(11)


def _with_bit(i: int, wire: int, bit: int) -> int:
    return (i & ~(1 << wire)) | (bit << wire)


def dense(kind: int, w0: int, w1: int, m: np.ndarray, table: np.ndarray | None) -> np.ndarray:
    """The 2**N x 2**N matrix of one step, built amplitude by amplitude."""
    full = np.zeros((1 << N, 1 << N), np.complex128)
    for i in range(1 << N):
        if kind == lk.PERMUTE:
            full[i, table[i]] = 1
        elif kind == lk.DENSE2:
            column = (i >> w0 & 1) + 2 * (i >> w1 & 1)
            for row in range(4):
                full[_with_bit(_with_bit(i, w0, row & 1), w1, row >> 1), i] += m[row, column]
        elif kind == lk.CONTROLLED1 and not i >> w0 & 1:
            full[i, i] = 1
        else:
            wire = w1 if kind == lk.CONTROLLED1 else w0
            for row in range(2):
                full[_with_bit(i, wire, row), i] += m[row, i >> wire & 1]
    return full


def random_steps(members: int) -> tuple[np.ndarray, ...]:
    """Every step kind on several wires (runs of one-wire steps, a wire repeated within a
    run), each member with its own random complex matrices."""
    steps = [(lk.DENSE1, 0, 0), (lk.DENSE1, 3, 3), (lk.DENSE1, 1, 1), (lk.DENSE1, 3, 3),
             (lk.DENSE1, 2, 2), (lk.CONTROLLED1, 2, 0), (lk.DENSE2, 1, 3), (lk.PERMUTE, 0, 0),
             (lk.DENSE2, 3, 0), (lk.CONTROLLED1, 0, 3), (lk.DENSE1, 2, 2), (lk.DENSE1, 0, 0),
             (lk.PERMUTE, 1, 0), (lk.DENSE1, 1, 1)]
    kinds, w0, w1 = (np.array(column, np.int64) for column in zip(*steps))
    mats = rng.normal(size=(members, len(steps), 4, 4)) \
        + 1j * rng.normal(size=(members, len(steps), 4, 4))
    tables = np.stack([rng.permutation(1 << N) for _ in range(2)])
    return kinds, w0, w1, mats, tables


def _states(members: int) -> np.ndarray:
    return rng.normal(size=(members, 1 << N)) + 1j * rng.normal(size=(members, 1 << N))


def _step_matrix(kinds, w0, w1, mats, tables, b, e):
    kind = kinds[e]
    block = mats[b, e] if kind == lk.DENSE2 else mats[b, e, :2, :2]
    return dense(kind, w0[e], w1[e], block, tables[w0[e]] if kind == lk.PERMUTE else None)


@pytest.mark.parametrize("members", [1, 5, 64, 70, 130])
def test_lane_layout_round_trips_states_and_matrices_for_any_member_count(members):
    psi = _states(members)
    state = lk.to_lanes(psi)
    assert state.shape[0] == -(-members // lk.MAX_LANES) and state.shape[-1] <= lk.MAX_LANES
    np.testing.assert_array_equal(lk.from_lanes(state, members), psi)
    mats = random_steps(members)[3]
    lanes = lk.to_lanes(mats)
    b = members - 1
    t, lane = divmod(b, lanes.shape[-1])
    np.testing.assert_array_equal(lanes[t, 3, 0, :, :, lane], mats[b, 3].real)
    np.testing.assert_array_equal(lanes[t, 3, 1, :, :, lane], mats[b, 3].imag)


@pytest.mark.parametrize("members, max_wires", [(3, 1), (70, 2), (70, 4)])
def test_every_step_kind_applies_each_members_dense_matrix(members, max_wires):
    kinds, w0, w1, mats, tables = random_steps(members)
    psi = _states(members)
    bounds = lk.one_wire_blocks(kinds, w0, max_wires)
    got = lk.from_lanes(lk.run_circuit(lk.to_lanes(psi), kinds, w0, w1, lk.to_lanes(mats),
                                       tables, bounds), members)
    for b in range(members):
        want = psi[b]
        for e in range(len(kinds)):
            want = _step_matrix(kinds, w0, w1, mats, tables, b, e) @ want
        np.testing.assert_allclose(got[b], want, rtol=1e-12, atol=1e-12)


def test_blocks_group_runs_of_one_wire_steps_up_to_their_wire_count():
    kinds, w0, _, _, _ = random_steps(1)
    assert lk.one_wire_blocks(kinds, w0, 2).tolist() == [0, 2, 4, 5, 6, 7, 8, 9, 10, 12,
                                                          13, 14]
    assert lk.one_wire_blocks(kinds, w0, 3).tolist() == [0, 4, 5, 6, 7, 8, 9, 10, 12, 13,
                                                          14]
    assert lk.one_wire_blocks(kinds[:0], w0[:0], 3).tolist() == [0]
    assert lk.block_wires(1, 1) == 11 and lk.block_wires(64, 2) == 4


def _expanded(kind: int, w0: int, w1: int, g: np.ndarray) -> np.ndarray:
    # a step's generator over all wires: on the target where the control is 1 for a
    # controlled step; none for a permutation
    if kind == lk.PERMUTE:
        return np.zeros((1 << N, 1 << N))
    if kind == lk.CONTROLLED1:
        only_on = dense(lk.CONTROLLED1, w0, w1, np.zeros((2, 2)), None)
        return dense(lk.CONTROLLED1, w0, w1, g[:2, :2], None) - only_on
    return dense(kind, w0, w1, g if kind == lk.DENSE2 else g[:2, :2], None)


@pytest.mark.parametrize("members", [4, 70])
def test_the_sweep_takes_each_steps_overlaps_and_undoes_it_as_dense_matrices_do(members):
    kinds, w0, w1, mats, tables = random_steps(members)
    gens = rng.normal(size=(len(kinds), 2, 4, 4)) + 1j * rng.normal(size=(len(kinds), 2, 4, 4))
    gens[kinds == lk.PERMUTE] = 0
    gens[kinds != lk.DENSE1, 1] = 0      # an earlier gate only in steps of one-wire gates
    psi, lam = _states(members), _states(members)
    bounds = lk.one_wire_blocks(kinds, w0, 2)
    out = np.empty((-(-members // lk.MAX_LANES), len(kinds), 2, lk.to_lanes(psi).shape[-1]))
    p, a = lk.to_lanes(psi), lk.to_lanes(lam)
    lk.adjoint_sweep(p, a, kinds, w0, w1, lk.to_lanes(mats), tables, bounds, gens, out)
    got = np.moveaxis(out, 3, 1).reshape(-1, len(kinds), 2)[:members]
    for b in range(members):
        x, u = psi[b], lam[b]
        for e in range(len(kinds)):
            late = _expanded(kinds[e], w0[e], w1[e], gens[e, 0])
            np.testing.assert_allclose(got[b, e, 0], 2 * np.vdot(u, late @ x).imag,
                                       rtol=1e-10, atol=1e-10)
            step = _step_matrix(kinds, w0, w1, mats, tables, b, e)
            x, u = step @ x, step @ u
            early = _expanded(kinds[e], w0[e], w1[e], gens[e, 1])
            np.testing.assert_allclose(got[b, e, 1], 2 * np.vdot(u, early @ x).imag,
                                       rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(lk.from_lanes(p, members)[b], x, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(lk.from_lanes(a, members)[b], u, rtol=1e-10, atol=1e-10)
