"""The k-means study: Newton steps from forward over reverse reproduce Lloyd's algorithm."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import kmeans  # noqa: E402


@pytest.mark.parametrize("method", ["forward-over-reverse", "hessian"])
def test_kmeans_quick_run_passes_its_self_checks(tmp_path, method):
    assert kmeans.main(["--quick", "--method", method, "--out", str(tmp_path)]) == 0
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").stat().st_size > 0


def test_hessian_diagonal_counts_the_points_of_each_center():
    points = np.array([[0.0, 0.0], [0.2, 0.1], [5.0, 5.0]])
    centers = np.array([[0.1, 0.0], [4.0, 4.0], [-9.0, 9.0]])   # the last one owns no point
    cost = qdiff.trace(lambda c, p: kmeans.kmeans_cost(qnp, c, p), centers, points)
    diagonal = kmeans.hessian_diagonal("forward-over-reverse", cost, qdiff.grad(cost),
                                       centers, points)
    assert np.array_equal(diagonal, [[4.0, 4.0], [2.0, 2.0], [0.0, 0.0]])
