"""The repeat-until-success study: training reaches the closed-form optimum, and the four
gradients of the rotation loop agree with the closed form (quick settings)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np

import qdiff

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import repeat_until_success as rus  # noqa: E402


def test_repeat_until_success_study_passes_its_self_checks(tmp_path, capsys):
    assert rus.main(["--quick", "--out", tmp_path]) == 0
    out = capsys.readouterr().out
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").exists()
    # before: exact parameter shift printed "bound 0.00e+00", a bound it never computed
    shift_row = next(line for line in out.splitlines()
                     if line.startswith("parameter shift, exact"))
    assert shift_row.split()[6] == "-" and "0.00e+00" not in shift_row


def test_closed_form_optimum_undoes_v1():
    s = rus.fixed_angles(3)
    assert rus.distance_to_inverse(rus.closed_form_optimum(s), s) < 1e-15
    assert rus.distance_to_inverse(np.zeros(3), s) > 1e-3


def test_fidelity_after_k_failures_matches_the_matrices():
    # an independent oracle: f = sum_k 2^-(k+1) |<in| (C V1)^k |in>|^2 for the input |0>
    s, t = rus.fixed_angles(5), np.array([0.3, -0.7, 1.1])
    m = rus._zyz(*t) @ rus._zyz(*s[:3])
    expected = sum(0.5 ** (k + 1) * abs(np.linalg.matrix_power(m, k)[0, 0]) ** 2
                   for k in range(80))
    f = qdiff.trace(rus.fidelity, t, s, 0.0, 0.0)(t, s, 0.0, 0.0)
    assert abs(float(f) - expected) < 1e-10
