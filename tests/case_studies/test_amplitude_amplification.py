"""The amplitude-amplification study: trained t against the dense scan (quick: N = 10)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np

import qdiff

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import amplitude_amplification as aa  # noqa: E402


def test_amplitude_amplification_study_passes_its_self_checks(tmp_path):
    assert aa.main(["--quick", "--out", tmp_path]) == 0
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").exists() and (tmp_path / "landscape.png").exists()


def test_scan_limits_and_program_agree():
    # t = 0 never exits: the counter runs to 4N + 1; the program agrees with the recursion
    n = 5
    assert abs(aa.scan(np.array([0.0]), n)[0] - (4 * n + 1) / (4 * n)) < 1e-12
    program = qdiff.trace(aa.amplify, 1.0, n)
    for t in (0.4, 2.0):
        assert abs(float(program(t, n)) - aa.scan(np.array([t]), n)[0]) < 1e-10
