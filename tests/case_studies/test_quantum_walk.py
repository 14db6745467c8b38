"""The quantum-walk study trains to its references and checks itself (quick settings): the
torus search against the grid, the cycle walk's hitting time against a NumPy scan."""

import importlib.util
import sys
from pathlib import Path

import numpy as np

import qdiff
from qdiff import quantum as qm

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import quantum_walk  # noqa: E402


def test_quantum_walk_study_passes_its_self_checks(tmp_path, capsys):
    assert quantum_walk.main(["--quick", "--out", tmp_path]) == 0
    out = capsys.readouterr().out
    # both parts ran their checks, the cycle walk's included: E[T] within 1e-6 relative of
    # the NumPy scan, and its adjoint derivative against a central difference
    assert "N = 8: E[T] trained vs dense scan (tol 1e-6 relative)" in out
    assert "N = 8: dE[T]/dθ adjoint vs NumPy central difference" in out
    assert "FAILED" not in out
    if importlib.util.find_spec("matplotlib"):
        for name in ("loss.png", "landscape.png", "cycle_loss.png", "cycle_landscape.png"):
            assert (tmp_path / name).exists(), name


def test_j_from_p_has_its_limits():
    assert quantum_walk.j_from_p(0.0) == 1.25  # five rounds, every one fails
    assert abs(quantum_walk.j_from_p(1.0) - 0.25) < 1e-15  # the first round succeeds
    assert abs(quantum_walk.j_from_p(1e-20) - 1.25) < 1e-15



def test_cycle_walk_without_a_turn_is_found_after_half_the_cycle():
    # the identity coin (outside the study's family) keeps the walker going one way
    for n_sites in (4, 8, 16):
        assert quantum_walk.hitting_times(np.eye(2)[None], n_sites)[0] == n_sites / 2


def test_cycle_hitting_time_depends_on_the_coin_only_through_its_transmission():
    # the absorbing site cuts the cycle into a path, where the coin's phases gauge away:
    # the docstring's reason why the coin needs a fixed H·T to have an interior optimum
    def rz(a):
        return np.diag([np.exp(-0.5j * a), np.exp(0.5j * a)])

    c, s = np.cos(0.55), np.sin(0.55)
    ry = np.array([[c, -s], [s, c]])  # ry(1.1)
    coins = np.stack([ry] + [rz(a) @ ry @ rz(b) for a, b in ((0.3, 2.0), (4.0, -1.0))])
    times = quantum_walk.hitting_times(coins, 8)
    assert np.allclose(times, times[0], rtol=1e-12, atol=0)


def test_cycle_walk_program_matches_the_numpy_walk_on_four_sites():
    # a second register size: the shift's carries and the marked-site test on two bits
    program = qdiff.trace(lambda theta: quantum_walk.cycle_walk(theta, 2), 1.0)
    for theta in (0.4, 3 * np.pi / 2, 5.5):
        found = float(qm.run(program, theta, backend="numpy").values)
        assert abs(found - quantum_walk.cycle_hitting_times(theta, 4)[0]) < 1e-9
