"""A lone gate (not in any fused block) on the state ``zero_state`` returned: the Numba back
end runs it as a block of its own, on the part of the state that is not zero (a first gate
writes U|0> into its 2^k amplitudes), and keeps that part for the blocks after it, as a
random circuit opening with a 4-wire gate needs; against dense matrices applied to the
whole state (the oracle), complex64 and complex128. The gate's checks stay the base class's."""

import numpy as np
import pytest

from qdiff.quantum.lang.gates import gate_spec
from qdiff.quantum.simulator import get_backend
from tests.quantum.simulator.test_blocks_on_zero_wires import (
    N,
    block_ops,
    dense_apply,
    random_unitary,
    run_oracle,
    tolerance,
    zero_vector,
)

RNG = np.random.default_rng(23)
LONE = [("unitary", (0, 6, 8, 7), (), {"matrix": random_unitary(16, RNG)}),
        ("mcx", (1, 4, 2), (), {}), ("rzz", (3, 5), (0.4,), {}), ("h", (2,), (), {}),
        ("rx", (9,), (1.1,), {}), ("crz", (7, 1), (0.6,), {}),
        ("pauli_rot", (1, 3, 4), (0.8,), {"pauli": "XYZ"})]


def lone_matrix(name, wires, params, static):
    if name == "unitary":
        return static["matrix"]
    if name == "mcx":
        static = {"num_controls": len(wires) - 1}
    return gate_spec(name, **static).matrix(*params)


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
@pytest.mark.parametrize("lone", LONE, ids=[g[0] for g in LONE])
def test_a_lone_first_gate_then_blocks_match_the_dense_matrices(lone, dtype):
    name, wires, params, static = lone
    rng = np.random.default_rng(len(wires))
    be = get_backend("numba")
    psi = be.apply_gate(be.zero_state(N, dtype), N, name, list(wires), params, **static)
    want = dense_apply(zero_vector(N), N, lone_matrix(name, wires, params, static), wires)
    np.testing.assert_allclose(psi, want, atol=10 * tolerance(dtype), rtol=0)
    for block in ((0, 1, 2), (2, 4, 5), (3, 9)):
        ops = block_ops(block, rng)
        psi = be.apply_fused(psi, N, block, ops)
        want = run_oracle(want, N, ops)
        np.testing.assert_allclose(psi, want, atol=20 * tolerance(dtype), rtol=0,
                                   err_msg=f"after the block on {block}")


def test_the_part_not_zero_after_a_lone_gate_is_kept_for_the_next_block():
    # the symptom: a circuit opening with a lone gate ran no block on part of the state
    be = get_backend("numba")
    psi = be.apply_gate(be.zero_state(N), N, "mcx", [0, 6, 3])
    assert be._fresh is not None and be._fresh[0]() is psi and be._fresh[1] == 7
    be.apply_fused(psi, N, (1, 2), block_ops((1, 2), np.random.default_rng(1)))
    assert be._fresh[1] == 7


@pytest.mark.parametrize("wires,params,match", [
    ([0, 1], (0.3,), "acts on 1 wire"), ([0], (), "parameter"), ([10], (0.3,), "out of range")])
def test_a_lone_gate_on_a_fresh_state_is_checked_as_any_gate(wires, params, match):
    be = get_backend("numba")
    with pytest.raises((ValueError, TypeError), match=match):
        be.apply_gate(be.zero_state(N), N, "rx", wires, params)
