"""The case studies run and print what they claim (quick settings)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "case_studies"))

import repeat_until_success  # noqa: E402


def test_repeat_until_success_study(capsys):
    assert repeat_until_success.main(["--quick", "--no-qiskit"]) == 0
    out = capsys.readouterr().out
    rows = {line[:34].strip(): line[34:].split() for line in out.splitlines()
            if line.startswith(("adjoint", "parameter shift", "randomized"))}
    grads = {name: float(values[0]) for name, values in rows.items()}
    exact = repeat_until_success.closed_form(1.2)
    dl = 2 * (exact[0] - repeat_until_success.TARGET_Z) * exact[2] \
        + repeat_until_success.RUNTIME_WEIGHT * exact[3]
    assert abs(grads["adjoint, exact"] - dl) < 1e-6  # printed to 6 decimals
    randomized = next(v for k, v in rows.items() if k.startswith("randomized"))
    assert abs(float(randomized[0]) - dl) < 4 * float(randomized[1])
    assert "step   3" in out  # the descent ran and lowered the loss
    losses = [float(line.split("L = ")[1].split(",")[0]) for line in out.splitlines()
              if line.strip().startswith("step")]
    assert losses == sorted(losses, reverse=True)
