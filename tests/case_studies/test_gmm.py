"""The GMM study: gradients against finite differences and JAX, and the fit."""

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import gmm  # noqa: E402


@pytest.mark.parametrize("method", ["reverse", pytest.param("forward", marks=pytest.mark.slow)])
def test_gmm_quick_run_passes_its_self_checks(tmp_path, method):
    assert gmm.main(["--quick", "--method", method, "--out", str(tmp_path)]) == 0
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").stat().st_size > 0
