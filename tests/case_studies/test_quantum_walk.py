"""The quantum-walk study trains to the grid optimum and checks itself (quick settings)."""

import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import quantum_walk  # noqa: E402


def test_quantum_walk_study_passes_its_self_checks(tmp_path):
    assert quantum_walk.main(["--quick", "--out", tmp_path]) == 0
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").exists() and (tmp_path / "landscape.png").exists()


def test_j_from_p_has_its_limits():
    assert quantum_walk.j_from_p(0.0) == 1.25  # five rounds, every one fails
    assert abs(quantum_walk.j_from_p(1.0) - 0.25) < 1e-15  # the first round succeeds
    assert abs(quantum_walk.j_from_p(1e-20) - 1.25) < 1e-15
