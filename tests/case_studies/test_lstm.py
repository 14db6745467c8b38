"""The D-LSTM study: gradients against finite differences and JAX, and training."""

import importlib.util
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import lstm  # noqa: E402


def test_lstm_quick_run_passes_its_self_checks(tmp_path):
    assert lstm.main(["--quick", "--out", str(tmp_path)]) == 0
    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "loss.png").stat().st_size > 0


def test_lstm_objective_matches_a_plain_python_loop():
    # the objective with an ordinary Python loop and NumPy: the fori_loop changes nothing
    rng = np.random.default_rng(1)
    b, c = 3, 5
    sequence, _ = lstm.markov_sequence(c, b, rng)
    main_params, extra = rng.normal(size=(4, 4 * b)), rng.normal(size=(3, b))
    state = rng.normal(size=(4, b))

    def python_loop(lower, upper, body, carry):
        for t in range(lower, upper):
            carry = body(t, carry)
        return carry

    import qdiff
    import qdiff.numpy as qnp

    traced = float(qdiff.trace(
        lambda m, e, s, x: lstm.lstm_objective(qnp, qdiff.fori_loop, m, e, s, x),
        main_params, extra, state, sequence)(main_params, extra, state, sequence))
    plain = float(lstm.lstm_objective(np, python_loop, main_params, extra, state, sequence))
    assert abs(traced - plain) < 1e-12
