"""The Bernoulli-factory study: a fair coin whatever the bias, E[rounds] and its derivative
against their closed forms, and training to θ = π/2 (quick settings)."""

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import bernoulli_factory  # noqa: E402


def test_bernoulli_factory_study_passes_its_self_checks(tmp_path):
    assert bernoulli_factory.main(["--quick", "--out", tmp_path]) == 0
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").exists() and (tmp_path / "landscape.png").exists()


def test_closed_form_against_finite_differences():
    h = 1e-6
    for theta in (0.4, 1.3, 2.5):
        _, _, e, de = bernoulli_factory.closed_form(theta)
        fd = (bernoulli_factory.closed_form(theta + h)[2]
              - bernoulli_factory.closed_form(theta - h)[2]) / (2 * h)
        assert abs(fd - de) < 1e-5 * max(1, abs(de))
        p = 0.5 - 0.5 * __import__("math").cos(theta)  # sin^2(θ/2)
        assert abs(e - 1 / (2 * p * (1 - p))) < 1e-12
