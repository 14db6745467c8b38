"""Loose tolerances: every valid ``tol`` gives a certificate that covers the error, or none.

Regressions: at ``tol=0.1`` and above, pruning (below tol²) hid a loop's exits, so the
certificate read an exit probability of 0 and crashed ("the exit probability must be in
(0, 1], got 0.0"), or of 1 where pruned branches went on, and certified wrong numbers (coin
loop at tol 0.5: gradient 0 with bound 0.34 against the exact 0.41); and a loop exiting with
probability 1e-3 per round was called unable to terminate when its exits were pruned.
"""

import numpy as np
import pytest
from quantum_programs_lib import coin_loop, until_one, von_neumann

from qdiff import quantum as qm

PROGRAMS = {"coin_loop": coin_loop, "until_one": until_one, "von_neumann": von_neumann}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("theta", [0.7, 1.5, 2.5])
def test_loose_tolerance_bounds_cover_the_error_instead_of_crashing(name, theta):
    program = PROGRAMS[name]
    exact = qm.gradient(program, theta, tol=1e-11)
    for tol in (0.05, 0.3, 0.5, 0.9):
        loose = qm.gradient(program, theta, tol=tol)
        assert abs(loose.grad - exact.grad) <= loose.remainder_bound * (1 + 1e-9) + 1e-12
        assert abs(loose.value - exact.value) <= loose.value_remainder_bound * (1 + 1e-9) \
            + 1e-12
        run = qm.run(program, theta, tol=tol)
        assert abs(run.values - exact.value) <= run.remainder_bound * (1 + 1e-9) + 1e-12


def test_coin_loop_at_tol_half_is_not_certified_wrong():
    loose = qm.gradient(coin_loop, 0.7, tol=0.5)
    exact = qm.gradient(coin_loop, 0.7, tol=1e-11).grad
    assert abs(loose.grad - exact) <= loose.remainder_bound


def test_pruned_exits_do_not_make_a_loop_nonterminating():
    theta = 2 * np.arccos(np.sqrt(1e-3))          # exits with probability 1e-3 per round
    result = qm.run(coin_loop, theta, tol=0.1)    # every exit branch is below tol² = 0.01
    mean = np.tan(theta / 2) ** 2                 # 999 rounds
    assert result.dropped_mass + result.unterminated_mass > 0.9
    assert np.isinf(result.remainder_bound) or result.remainder_bound >= mean - result.values
