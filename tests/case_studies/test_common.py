"""The shared case-study helpers: their doctests, and the behaviour the studies rely on."""

import doctest
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import common  # noqa: E402


def test_doctests_of_common():
    failures, tried = doctest.testmod(common)
    assert tried > 0 and failures == 0


def test_method_flag_only_when_methods_are_given(tmp_path):
    args = common.parse_args("x", argv=["--out", tmp_path / "a"])
    assert not hasattr(args, "method") and (tmp_path / "a").is_dir()
    args = common.parse_args("x", ("adjoint", "sample"), ["--method", "sample", "--out", tmp_path])
    assert args.method == "sample"


def test_minimize_counts_every_call_and_finds_the_minimum():
    calls = []

    def fun(x):
        calls.append("f")
        return float(np.sum((x - [1.0, -2.0]) ** 2) + np.cos(x[0]))

    def jac(x):
        calls.append("g")
        return 2 * (x - [1.0, -2.0]) - np.array([np.sin(x[0]), 0.0])

    result = common.minimize(fun, [0.0, 0.0], jac)
    assert result.evaluations == len(calls)
    assert np.allclose(jac(result.params), 0, atol=1e-5)
    assert result.losses[-1] <= result.losses[0]


def test_check_fails_on_nan_and_far_values(capsys):
    assert not common.check("a", float("nan"), 0.0, 1.0)
    assert not common.check("b", 1.0, 0.0, 0.5)
    assert "FAILED" in capsys.readouterr().out
    assert common.finish(False) == 1
