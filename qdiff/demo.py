"""The tour behind ``qdiff demo``: one hybrid program, its IR, and its gradient four ways.

The program has all three parts qdiff exists for: classical pre-processing with a loop, a
quantum loop that ends on a measurement (repeat until success: no bound on its rounds), and
a classical loss. Its gradient comes from the exact adjoint method with a certified bound on
what the cut-off series leaves out, from parameter shift (exact, and the unbiased randomized
estimator over loop occurrences), and from the sampled adjoint method; the table shows them
agreeing. A short classical part follows: a derivative Program, printed.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from . import numpy as qnp
from . import quantum as qm
from .ir.control_flow import fori_loop, while_loop
from .ir.program_function import program
from .ir.tracer import Cell
from .transforms import grad

WEIGHTS = np.array([0.3, -0.8])


@program
def hybrid_loss(w: Any) -> Any:
    """Classical pre-processing, a repeat-until-success loop, a classical loss."""
    # classical: a counted recurrence turns the first weight into the rotation angle
    theta = fori_loop(0, 4, lambda i, s: qnp.tanh(s + w[0]), 0.0) * 2.0 + 1.0
    q = qm.qubits(2)
    rounds = Cell(0.0)

    def attempt() -> None:
        qm.reset(q[0])
        qm.ry(theta, q[0])
        rounds.set(rounds.value + 1.0)

    attempt()
    while_loop(lambda: qm.measure(q[0]) == 0, attempt)   # until the measurement reads 1
    qm.rx(w[1] * theta, q[1])
    # classical loss, affine in what the circuit returns: E[rounds] and <Z> of wire 1
    return 0.5 * rounds.value - qm.expval("IZ", q)


@program
def smooth(x: Any, y: Any) -> Any:
    """An elementwise chain whose gradient program is short enough to read."""
    return qnp.sum(qnp.exp(qnp.sin(x) * y) + x)


def run_demo(shots: int = 200) -> str:
    """The demo's text: the hybrid program, its value, its gradients; a classical gradient
    program. ``shots`` sets the sampled estimators' budget.

    >>> "while" in run_demo(shots=40)
    True
    """
    traced = hybrid_loss.trace(WEIGHTS)
    value = qm.run(hybrid_loss, WEIGHTS, tol=1e-10)
    lines = ["qdiff demo: a hybrid program traced into the loop-aware IR", "",
             "classical pre-processing (a counted loop) -> a quantum loop that ends on a",
             "measurement (repeat until success) -> a classical loss", "", str(traced), "",
             f"value at w = {WEIGHTS.tolist()}: {float(value.values):.8f} "
             f"(certified within {float(value.remainder_bound):.1e})", "",
             *_gradient_table(shots), "", *_classical_lines()]
    return "\n".join(lines)


def gradient_rows(shots: int = 200) -> list[tuple[str, Any]]:
    """The hybrid program's gradient four ways: (label, `QuantumGradient`) per method.

    >>> rows = dict(gradient_rows(shots=40))
    >>> exact = rows["adjoint, exact"]
    >>> bool(np.allclose(rows["parameter shift, exact"].grad, exact.grad, atol=1e-4))
    True
    """
    methods = [
        ("adjoint, exact", dict(tol=1e-10)),
        ("parameter shift, exact", dict(method="parameter-shift", tol=1e-6)),
        (f"adjoint, {shots} sampled runs", dict(mode="sample", shots=shots, seed=1)),
        # each sample of the randomized estimator runs its shifted programs too
        (f"parameter shift, {shots // 4} samples",
         dict(method="parameter-shift", mode="sample", shots=shots // 4, seed=2))]
    return [(label, qm.gradient(hybrid_loss, WEIGHTS, **settings)) for label, settings in methods]


def _gradient_table(shots: int) -> list[str]:
    start = time.perf_counter()
    rows = gradient_rows(shots)
    seconds = time.perf_counter() - start
    width = max(len(label) for label, _ in rows)
    lines = [f"{'gradient by':<{width}}  {'d/dw0':>10}  {'d/dw1':>10}  accuracy"]
    for label, result in rows:
        if result.grad_stderr is not None:
            spread = "± " + ", ".join(f"{e:.2g}" for e in result.grad_stderr) + " (std. error)"
        elif result.remainder_bound is not None:
            spread = f"within {float(np.max(result.remainder_bound)):.1e} (certified)"
        else:
            spread = "cut off where the mass still going on is below 1e-6"
        lines.append(f"{label:<{width}}  {result.grad[0]:>10.5f}  {result.grad[1]:>10.5f}  "
                     f"{spread}")
    return [*lines, f"({seconds:.1f} s for the four)"]


def _classical_lines() -> list[str]:
    """Tapeless reverse mode of classical code: the gradient is itself a Program."""
    x = np.array([0.3, -0.2, 0.5])
    gradient_program = grad(smooth, argnums=(0, 1)).trace(np.zeros(3), 1.0)
    gx, gy = gradient_program(x, 2.0)
    return ["classical code: the gradient program of sum(exp(sin(x) * y) + x):", "",
            str(gradient_program), "",
            f"at x = {x.tolist()}, y = 2: dx = {np.array2string(gx, precision=4)}, "
            f"dy = {float(gy):.4f}"]
