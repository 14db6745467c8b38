"""Certified remainders of a loop on a measurement summed to a cut-off.

Exact mode sums ``while M do S od`` = Σ_k E0 (S E1)^k round by round and stops when the mass
still going on, ``m_K``, falls below the tolerance. What the sum misses is bounded from
four numbers (derivations in ``shared/REFERENCES.md``, part B):

- ``p``: every round exits with probability at least ``p``, from any state. Then a round
  contracts the trace norm of anything still going on (a state, or the derivative of one) by
  ``1 - p``.
- ``C``: one round's sensitivity, ``‖∂θ S(ρ)‖₁ ≤ C tr ρ``: the sum over its gates of the
  largest frequency of the gate's spectrum times ``|∂angle/∂θ|``.
- ``A + B n``: a bound on the objective on a run of ``n`` rounds (`output_growth`).
- ``D_K``: the trace norm of the derivative of what is still going on after ``K`` rounds,

      D_0 = (perturbations before the loop),    D_k = (1 - p) D_{k-1} + C m_{k-1}.

With ``V(K) = A + B (K + 1/p)`` (the expected objective of a run still going after ``K``
rounds: it stops after a further 1/p rounds on average),

    |value remainder|      ≤ m_K V(K)
    |derivative remainder| ≤ D_K V(K) + m_K [C (V(K)/p + B/p²) + C_after V(K)]

where ``C_after`` is the sensitivity of what runs after the loop. The first term is what the
rounds already summed do to the rest; the second, the rounds not summed. Branches pruned
(mass ``d``, far below the cut-off) add ``C_path √d V + d (...)``: the derivative of a
branch of mass ``w`` is at most ``∝ √w``, and the pruned branches are disjoint paths, so by
Cauchy–Schwarz their derivatives add up to at most ``C_path √d``.

A fair coin flipped until heads, counting the flips (``A = 0``, ``B = 1``), summed to
``K = 2`` rounds: the value bound is the exact tail ``Σ_{n>2} n 2^-n = 1`` of
``E[flips] = 2`` (a memoryless loop's bound is exact for the value):

>>> bound = loop_tail(p=0.5, sensitivity=1.0, after=0.0, growth=(0.0, 1.0),
...                   going_on=[1.0, 0.5, 0.25], before=0.0)
>>> float(bound.value), float(bound.derivative)
(1.0, 7.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class TailBound:
    """Bounds on what a cut-off sum misses, of the value and of one derivative."""

    value: float
    derivative: Any  # a float, or an array: one bound per input element


def loop_tail(*, p: float, sensitivity: Any, after: Any, growth: tuple[float, float],
              going_on: Sequence[float], before: Any, first: Any = 0.0) -> TailBound:
    """The remainders of a memoryless loop cut after ``K = len(going_on) - 1`` rounds.

    ``going_on[k]`` is the mass still going on after the test of round ``k`` (round 0 is
    the first test, before any body run), ``before`` the trace norm of the derivative of the
    state entering the loop, ``sensitivity`` and ``after`` the ``C`` and ``C_after`` of the
    module docstring, ``growth`` its ``(A, B)``, ``first`` one path's sensitivity before the
    loop. ``D_K`` is also at most ``C_path √m_K`` (the pruning argument, applied to what is
    still going on), which is what a run that stops going on in round ``K`` ends with.
    """
    if not 0 < p <= 1:
        raise ValueError(f"the exit probability must be in (0, 1], got {p}")
    rounds = len(going_on) - 1
    derivative_going_on = before
    for k in range(1, rounds + 1):
        derivative_going_on = (1 - p) * derivative_going_on + sensitivity * going_on[k - 1]
    mass = going_on[-1] if len(going_on) else 0.0
    path = first + (rounds + 1) * sensitivity
    derivative_going_on = np.minimum(derivative_going_on, path * math.sqrt(mass))
    value_to_go, future = to_go(p=p, growth=growth, rounds=rounds, sensitivity=sensitivity,
                                after=after)
    return TailBound(value=mass * value_to_go,
                     derivative=derivative_going_on * value_to_go + mass * future)


def to_go(*, p: float, growth: tuple[float, float], rounds: int, sensitivity: Any,
          after: Any) -> tuple[float, Any]:
    """For a run still going on after ``rounds`` rounds: ``V = A + B (rounds + 1/p)``, a
    bound on its expected objective, and ``C (V/p + B/p²) + C_after V``, on the derivative
    that the rounds not summed (and what runs after the loop) add per unit of its mass.

    >>> to_go(p=0.5, growth=(0.0, 1.0), rounds=2, sensitivity=1.0, after=0.0)
    (4.0, 12.0)
    """
    a, b = growth
    value = a + b * (rounds + 1 / p)
    return value, sensitivity * (value / p + b / p ** 2) + after * value


def pruned_tail(*, mass: float, path_sensitivity: float, value_bound: float,
                future: float) -> TailBound:
    """The remainders of pruned branches of total ``mass``: ``path_sensitivity`` bounds the
    sum of one path's gate sensitivities, ``value_bound`` the objective after them, and
    ``future`` the derivative of the objective per unit of mass still to run.

    >>> pruned_tail(mass=1e-24, path_sensitivity=2.0, value_bound=1.0, future=0.0).derivative
    2e-12
    """
    return TailBound(value=mass * value_bound,
                     derivative=path_sensitivity * math.sqrt(mass) * value_bound
                     + mass * future)
