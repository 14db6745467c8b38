"""Values and derivatives of loops cut off far from their end say so.

Regression: calling a program (or its gradient) directly returned a truncated value without
a word: repeat-until-success at θ = 0.01 gave 28508.5 instead of 40000.3, after the
100000-round cap cut the loop off with 8% of its probability still going on. The tests cut
at 50 rounds instead (θ = 0.2: 61% still going on), which is the same path, faster.
"""

import warnings

import numpy as np
import pytest

import qdiff
from qdiff import quantum as qm
from qdiff.quantum.execution import run as run_module
from qdiff.quantum.lang.examples import repeat_until_one

slow = qdiff.program(repeat_until_one)


def test_direct_call_of_a_cut_off_loop_warns_with_the_bound(monkeypatch):
    # a direct call runs with the default options: cap their rounds as the 100000 cap did
    monkeypatch.setattr(run_module, "DEFAULTS", qm.RunOptions(max_loop_iterations=50))
    with pytest.warns(qm.TruncationWarning, match="cut off with probability 0.606"):
        value = slow(0.2)
    assert abs(value - 1 / np.sin(0.1) ** 2) > 10  # the cut is real, and now said


def test_gradient_of_a_cut_off_loop_warns():
    with pytest.warns(qm.TruncationWarning, match="the derivative of repeat_until_one"):
        qdiff.grad(slow, max_loop_iterations=50)(0.2)


def test_a_loop_summed_to_tol_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", qm.TruncationWarning)
        assert np.isclose(slow(0.7), 1 / np.sin(0.35) ** 2)
        qdiff.grad(slow)(0.7)


def test_strict_raises_instead_of_returning_a_cut_off_value():
    # strict=True: an error (a RuntimeError) instead of the warning, on qm.run, qm.gradient
    # and qdiff.grad, with the probability still going on in the message
    cut = {"max_loop_iterations": 50, "strict": True}
    with pytest.raises(qm.TruncationError, match="probability 0.606") as raised:
        qm.run(slow, 0.2, **cut)
    assert isinstance(raised.value, RuntimeError) and isinstance(raised.value, qdiff.QdiffError)
    with pytest.raises(qm.TruncationError, match="the derivative of repeat_until_one"):
        qm.gradient(slow, 0.2, **cut)
    with pytest.raises(qm.TruncationError, match="the derivative of repeat_until_one"):
        qdiff.grad(slow, **cut)(0.2)
    with pytest.raises(qm.TruncationError):
        qdiff.value_and_grad(slow, **cut)(0.2)


def test_strict_passes_values_summed_to_tol_and_refuses_non_booleans():
    exact = 1 / np.sin(0.35) ** 2
    assert np.isclose(qm.run(slow, 0.7, strict=True).values, exact)
    assert np.isclose(qdiff.grad(slow, strict=True)(0.7), qm.gradient(slow, 0.7).grad)
    with pytest.raises(qdiff.QdiffError, match="strict must be True or False"):
        qm.run(slow, 0.7, strict="yes")
