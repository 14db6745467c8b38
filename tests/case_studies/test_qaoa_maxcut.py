"""The QAOA MaxCut study: trained values against the closed form and a NumPy simulation."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import qaoa_maxcut  # noqa: E402


def test_qaoa_quick_run_passes_its_self_checks(tmp_path):
    assert qaoa_maxcut.main(["--quick", "--out", str(tmp_path)]) == 0
    if importlib.util.find_spec("matplotlib"):
        for name in ("loss.png", "landscape_p1.png"):
            assert (tmp_path / name).stat().st_size > 0


def test_random_regular_graphs_are_simple_and_three_regular():
    rng = np.random.default_rng(3)
    for n in (10, 12, 14):
        edges = qaoa_maxcut.random_regular_graph(n, 3, rng)
        assert len(set(edges)) == len(edges) == 3 * n // 2
        assert all(a < b for a, b in edges)
        assert np.all(np.bincount(np.ravel(edges), minlength=n) == 3)


@pytest.mark.parametrize("gamma, beta", [(0.3, 0.2), (1.1, -0.4), (2.5, 1.0)])
def test_depth_one_program_matches_closed_form_and_numpy_simulation(gamma, beta):
    # K4 has triangles on every edge: the closed form's λ terms are exercised
    n, edges = 4, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    angles = np.array([[gamma], [beta]])
    value = float(qaoa_maxcut.qaoa_program(n, edges, 1)(angles))
    assert abs(value - qaoa_maxcut.depth_one_closed_form(n, edges, gamma, beta)) < 1e-12
    cuts = qaoa_maxcut.cut_values(n, edges)
    assert abs(value - qaoa_maxcut.numpy_expected_cut(n, cuts, angles)) < 1e-12
    assert cuts.max() == 4   # K4's maximum cut
