"""`RunOptions`: how a quantum program runs and is differentiated, checked once.

`qdiff.quantum.run`, `gradient` and `jacobian` (and `qdiff.grad` & co. on quantum programs)
take these settings as keyword arguments, or one `RunOptions` as ``options=``; the object is
built and validated at that edge, each value against its valid range, and passed down as it
is: runners, recorders and shifted-program jobs read what they need from it.

>>> RunOptions(tol=1e-9).tol
1e-09
>>> RunOptions(tol=0)
Traceback (most recent call last):
    ...
qdiff.ir.errors.QdiffError: tol must be a number in (0, 1), got 0
>>> RunOptions.of(None, mode="sample", shots=10).replace(seed=3).shots
10
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.errors import QdiffError

METHODS = ("auto", "adjoint", "parameter-shift", "finite-diff")


@dataclass(frozen=True)
class RunOptions:
    """Settings of a quantum run or derivative (all optional, each with its valid range).

    - ``mode``: ``"exact"`` (enumerate measurement branches), ``"sample"`` (``shots``
      trajectories), ``"density"`` (density matrices, runs only) or an external executor
      (``"qiskit"``).
    - ``backend``: statevector back end name (``"auto"``, ``"numpy"``, ``"numba"``,
      ``"cupy"``) or a back end object.
    - ``tol`` in (0, 1): loops on measurements are cut off once the mass still going on is
      below it; single branches are pruned below ``tol²``.
    - ``remainder_tol`` > 0: sum further until every certified remainder is at most this.
    - ``exit_probability`` in (0, 1]: a promised lower bound on every round's exit
      probability of a loop that is not memoryless (checked on every round run).
    - ``shots`` ≥ 1 and ``seed``: sample mode and external executors.
    - ``max_loop_iterations`` ≥ 1: rounds one loop may run before its mass is cut off.
    - ``fuse``: gate fusion on (None, True), off (False) or blocks of at most k wires (k ≥ 1).
    - ``sampler`` / ``estimator``: Qiskit primitives for ``mode="qiskit"``.
    - ``executor``: a `concurrent.futures.Executor` for independent evaluations.
    - ``method`` (derivatives): one of `METHODS`; ``step`` > 0 the finite-difference step;
      ``occurrences``: the occurrence distribution of sample-mode parameter shift.
    - ``strict``: raise `TruncationError` (a RuntimeError) instead of returning a value or
      derivative when loops were cut off with more than ``tol`` still going on and no
      certified bound within ``tol`` (by default qm.run and qm.gradient report it in their
      result, and ``qdiff.grad`` warns).
    """

    mode: str = "exact"
    backend: Any = "auto"
    tol: float = 1e-12
    remainder_tol: float | None = None
    exit_probability: float | None = None
    shots: int = 1000
    seed: Any = None
    max_loop_iterations: int = 100_000
    fuse: bool | int | None = None
    sampler: Any = None
    estimator: Any = None
    executor: Executor | None = None
    method: str = "auto"
    step: float = 1e-6
    occurrences: Any = None
    strict: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.strict, (bool, np.bool_)):
            raise QdiffError(f"strict must be True or False, got {self.strict!r}")
        _number("tol", self.tol, low=0.0, high=1.0, low_open=True, high_open=True)
        if self.remainder_tol is not None:
            _number("remainder_tol", self.remainder_tol, low=0.0, low_open=True)
        if self.exit_probability is not None:
            _number("exit_probability", self.exit_probability, low=0.0, high=1.0,
                    low_open=True)
        _count("shots", self.shots)
        _count("max_loop_iterations", self.max_loop_iterations)
        _number("step", self.step, low=0.0, low_open=True)
        if self.fuse is not None and not isinstance(self.fuse, (bool, np.bool_)):
            _count("fuse", self.fuse, what="True, False, None or a block width")
        if not isinstance(self.mode, str):
            raise QdiffError(f"mode must be a string such as 'exact', got {self.mode!r}")
        if self.method not in METHODS:
            raise QdiffError(f"method must be one of {METHODS}, got {self.method!r}")

    @classmethod
    def of(cls, options: RunOptions | None = None, **settings: Any) -> RunOptions:
        """``options`` (default: all defaults) with ``settings`` replaced, validated; an
        unknown setting is an error that lists the known ones."""
        unknown = sorted(set(settings) - _FIELDS)
        if unknown:
            raise QdiffError(f"unknown option(s) {', '.join(unknown)}; the options are "
                             f"{', '.join(sorted(_FIELDS))}")
        base = cls() if options is None else options
        if not isinstance(base, RunOptions):
            raise QdiffError(f"options= must be a qdiff.quantum.RunOptions, got {base!r}")
        built = dataclasses.replace(base, **settings) if settings else base
        if "shots" in settings and built.mode in ("exact", "density"):
            raise QdiffError(f"shots={settings['shots']!r} counts samples, but mode="
                             f"{built.mode!r} computes expectations exactly; pass "
                             "mode='sample' (or 'qiskit') to sample")
        return built

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes`` (validated again)."""
        return dataclasses.replace(self, **changes)

    def for_jobs(self) -> RunOptions:
        """What a job on another process needs: no executor and no Qiskit primitives
        (they do not travel; the job runs on the simulator)."""
        return dataclasses.replace(self, executor=None, sampler=None, estimator=None)




def _number(name: str, value: Any, low: float = -math.inf, high: float = math.inf,
            low_open: bool = False, high_open: bool = False) -> None:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)) and math.isfinite(float(value))
    if ok:
        v = float(value)
        ok = (v > low if low_open else v >= low) and (v < high if high_open else v <= high)
    if not ok:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        span = (f"in {left}{low:g}, {high:g}{right}" if math.isfinite(high)
                else f"{'>' if low_open else '≥'} {low:g}")
        raise QdiffError(f"{name} must be a number {span}, got {value!r}")


def _count(name: str, value: Any, what: str = "an integer ≥ 1") -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < 1:
        raise QdiffError(f"{name} must be {what}, got {value!r}")


_FIELDS = {f.name for f in dataclasses.fields(RunOptions)}
DEFAULTS = RunOptions()
