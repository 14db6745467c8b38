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
                                       tables, bounds, *lk.NO_CHECKPOINTS), members)
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
    for b, (x, u) in enumerate(_assert_overlaps(got, psi, lam, kinds, w0, w1, mats, tables,
                                                gens)):
        np.testing.assert_allclose(lk.from_lanes(p, members)[b], x, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(lk.from_lanes(a, members)[b], u, rtol=1e-10, atol=1e-10)


def _assert_overlaps(got, psi, lam, kinds, w0, w1, mats, tables, gens):
    """Each step's two overlaps 2 Im<λ|Gψ> in ``got`` (members, steps, 2) against dense
    matrices: the later gate's before the step is undone, the earlier gate's after; returns
    each member's (ψ, λ) once every step is undone."""
    final = []
    for b in range(len(got)):
        x, u = psi[b], lam[b]
        for e in range(got.shape[1]):
            late = _expanded(kinds[e], w0[e], w1[e], gens[e, 0])
            np.testing.assert_allclose(got[b, e, 0], 2 * np.vdot(u, late @ x).imag,
                                       rtol=1e-10, atol=1e-10)
            step = _step_matrix(kinds, w0, w1, mats, tables, b, e)
            x, u = step @ x, step @ u
            early = _expanded(kinds[e], w0[e], w1[e], gens[e, 1])
            np.testing.assert_allclose(got[b, e, 1], 2 * np.vdot(u, early @ x).imag,
                                       rtol=1e-10, atol=1e-10)
        final.append((x, u))
    return final


def _run_to(psi, kinds, w0, w1, mats, tables, bounds, q):
    # the states before block q by a run without checkpoints
    want = lk.to_lanes(psi)
    lk.run_circuit(want, kinds[:bounds[q]], w0[:bounds[q]], w1[:bounds[q]],
                   lk.to_lanes(mats[:, :bounds[q]]), tables, bounds[:q + 1],
                   *lk.NO_CHECKPOINTS)
    return want[0]


@pytest.mark.parametrize("kept", [{0: 3, 2: 0, 5: 2, -1: 1},     # the final states too
                                  {1: 1, 2: 0, 5: 2}])           # the run ends in `state`
def test_the_forward_run_keeps_the_states_before_the_blocks_it_is_told_to(kept):
    kinds, w0, w1, mats, tables = random_steps(5)
    psi = _states(5)
    bounds = lk.one_wire_blocks(kinds, w0, 2)
    kept = {q % len(bounds): slot for q, slot in kept.items()}
    saves = np.full(len(bounds), -1, np.int64)
    saves[list(kept)] = list(kept.values())
    assert kinds[bounds[5]] == lk.PERMUTE                  # before a PERMUTE step too
    saved = np.zeros((1, len(kept), 2, 1 << N, 5))
    state = lk.run_circuit(lk.to_lanes(psi), kinds, w0, w1, lk.to_lanes(mats), tables, bounds,
                           saves, saved)
    for q, slot in kept.items():
        np.testing.assert_allclose(saved[0, slot], _run_to(psi, kinds, w0, w1, mats, tables,
                                                           bounds, q), rtol=1e-12, atol=1e-12)
    if len(bounds) - 1 not in kept:
        np.testing.assert_allclose(state[0], _run_to(psi, kinds, w0, w1, mats, tables, bounds,
                                                     len(bounds) - 1), rtol=1e-12, atol=1e-12)


PAULIS = {lk.PAULI_X: np.array([[0, 1], [1, 0]]), lk.PAULI_Y: np.array([[0, -1j], [1j, 0]]),
          lk.PAULI_Z: np.array([[1, 0], [0, -1]])}


def _unitary(size: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(size, size)) + 1j * rng.normal(size=(size, size)))
    return q * (np.diag(r) / abs(np.diag(r)))


# (members, undo_wires, overlap_wires): a layer's undo and overlap blocks of every width
# against its 4 wires: one block for the whole layer (4, 4), blocks of one wire (1, 1),
# a last block narrower than the others (3, 1), overlap blocks wider than the undo's
@pytest.mark.parametrize("members, undo_wires, overlap_wires",
                         [(3, 2, 3), (70, 2, 3), (3, 1, 1), (5, 1, 2), (3, 4, 4), (3, 3, 1)])
def test_the_checkpointed_sweep_takes_every_generators_overlaps_as_dense_matrices_do(
        members, undo_wires, overlap_wires):
    # layers of one-wire steps (every (later, earlier) pair of generators: none, each
    # Pauli, one with all four Pauli parts, in turn on the wires), then controlled,
    # two-wire and permutation steps; the states entering each segment that takes an
    # overlap from dense matrices of the steps, then the sweep against overlaps taken
    # step by step (steps on distinct wires commute)
    choices = [np.zeros((2, 2)), 0.5 * PAULIS[lk.PAULI_X], -0.5 * PAULIS[lk.PAULI_Y],
               0.5 * PAULIS[lk.PAULI_Z], np.array([[0.3, 0.1 - 0.2j], [0.1 + 0.2j, -0.7]])]
    pairs = [(late, early) for late in range(5) for early in range(5)]
    steps, gen_rows = [], []
    for start in range(0, len(pairs), N):
        for wire, (late, early) in enumerate(pairs[start:start + N]):
            steps.append((lk.DENSE1, wire, wire))
            gen_rows.append((choices[late], choices[early]))
        steps.append((lk.CONTROLLED1, start % N, (start + 1) % N))
        gen_rows.append((choices[4], choices[0]))
        steps.append((lk.DENSE2, (start + 2) % N, start % N))
        four = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
        gen_rows.append((four + four.conj().T, np.zeros((4, 4))))
        steps.append((lk.PERMUTE, start % 2, 0))
        gen_rows.append((np.zeros((2, 2)), np.zeros((2, 2))))
    kinds, w0, w1 = (np.array(column, np.int64) for column in zip(*steps))
    gens = np.zeros((len(steps), 2, 4, 4), np.complex128)
    for e, (late, early) in enumerate(gen_rows):
        gens[e, 0, :late.shape[0], :late.shape[1]] = late
        gens[e, 1, :early.shape[0], :early.shape[1]] = early
    # unitary steps: the overlaps of steps on other wires are unchanged by them only then
    inverses = np.zeros((members, len(steps), 4, 4), np.complex128)
    for b, e in np.ndindex(members, len(steps)):
        size = 4 if kinds[e] == lk.DENSE2 else 2
        inverses[b, e, :size, :size] = _unitary(size)
    tables = np.stack([rng.permutation(1 << N) for _ in range(2)])
    segments = [0] + [e for e in range(1, len(steps))
                      if kinds[e] != lk.DENSE1 or kinds[e - 1] != lk.DENSE1] + [len(steps)]
    psi, lam = _states(members), _states(members)
    entering = [psi]
    x = psi
    for k in range(len(segments) - 1):
        for e in range(segments[k], segments[k + 1]):
            x = np.stack([_step_matrix(kinds, w0, w1, inverses, tables, b, e) @ x[b]
                          for b in range(members)])
        entering.append(x)
    # only the segments with a generator keep their states (and the first, the final ones)
    kept = [k == 0 or bool(np.any(gens[segments[k]:segments[k + 1]]))
            for k in range(len(segments) - 1)]
    assert not all(kept)
    slots = np.where(kept, np.cumsum(kept) - 1, -1)
    saved = np.stack([lk.to_lanes(entering[k]) for k in np.flatnonzero(kept)], axis=1)
    out = np.empty((saved.shape[0], len(steps), 2, saved.shape[-1]))
    a = lk.to_lanes(lam)
    lk.adjoint_sweep_checkpointed(saved, slots, a, kinds, w0, w1, lk.to_lanes(inverses), tables,
                                  np.array(segments), undo_wires, overlap_wires, gens, out)
    got = np.moveaxis(out, 3, 1).reshape(-1, len(steps), 2)[:members]
    for b, (_, u) in enumerate(_assert_overlaps(got, psi, lam, kinds, w0, w1, inverses,
                                                tables, gens)):
        np.testing.assert_allclose(lk.from_lanes(a, members)[b], u, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("members", [3, 70])
def test_diagonal_expectations_are_the_members_sums_over_their_amplitudes(members):
    psi = _states(members) * rng.uniform(0.5, 2, (members, 1))     # unnormalized too
    diagonals = rng.normal(size=(2, 1 << N))
    values, norms = lk.diagonal_expectations(lk.to_lanes(psi), diagonals)
    weights = abs(psi) ** 2
    np.testing.assert_allclose(norms.reshape(-1)[:members], weights.sum(axis=1), rtol=1e-13)
    np.testing.assert_allclose(values.reshape(2, -1)[:, :members], diagonals @ weights.T,
                               rtol=1e-12, atol=1e-13)


def test_lane_states_and_matrices_start_a_cache_line_whatever_numpy_allocates():
    # NumPy's large arrays start 16 bytes past a page: rows that start mid-line made
    # half the kernels' vector loads straddle two lines
    import qdiff
    from qdiff.quantum.execution.batched import batched_circuit, final_lane_states, lane_circuit
    from qdiff.quantum.lang.examples import rotation

    for shape in [(3, 2, 1 << 12, 64), (7,), (0, 0)]:
        for array in (lk.aligned_empty(shape), lk.aligned_zeros(shape)):
            assert array.shape == shape and array.flags.c_contiguous
            assert array.ctypes.data % lk.LINE_BYTES == 0
        assert not lk.aligned_zeros(shape).any()
    for members in (1, 64, 70):
        assert lk.to_lanes(_states(members)).ctypes.data % lk.LINE_BYTES == 0
        circuit = batched_circuit(qdiff.trace(rotation, 0.1))
        angles = rng.normal(size=(1, members))
        for array in (lane_circuit(circuit, angles)[3], final_lane_states(circuit, angles)):
            assert array.ctypes.data % lk.LINE_BYTES == 0
