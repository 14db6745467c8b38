"""Distributions over occurrence indices for the randomized derivative of unbounded loops.

The derivative of a loop that ends on a measurement is an infinite sum over the executions
(occurrences) of each differentiated gate. The unbiased estimator draws ONE occurrence
``I ~ p``, differentiates the gate only there, and weights by ``1/p(I)``:
``E[D_I / p(I)] = Σ_i D_i`` whenever ``p(i) > 0`` for every ``i``. So ``p`` must have full
support and an exactly known normalizer; both distributions here do, by construction:

- ``zeta(δ)``: ``p(i) = i^-(1+δ) / ζ(1+δ)``, heavy-tailed: the variance stays finite for
  loops whose trip count has a finite moment of order ``1+δ`` (every geometric loop);
- ``geometric(q)``: ``p(i) = (1-q) q^(i-1)``, matched to a loop that continues with
  probability ``q`` per iteration (lighter weights, but its tail must not be lighter than
  the loop's);
- ``uniform(n)``: ``p(i) = 1/n`` on ``1..n``, for a gate that runs at most ``n`` times (inside
  loops with static bounds): full support where it matters, and no heavy weights.

>>> p = zeta(1.0)
>>> round(p.pmf(1), 6), round(p.pmf(2) / p.pmf(1), 6)
(0.607927, 0.25)
>>> rng = np.random.default_rng(0)
>>> draws = [geometric(0.5).sample(rng) for _ in range(4000)]
>>> round(float(np.mean(draws)), 1)  # mean 1/(1-q)
2.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import zeta as riemann_zeta

from ..ir.errors import QdiffError


@dataclass(frozen=True)
class OccurrenceDistribution:
    """A distribution over occurrences ``i = 1, 2, ...`` with its exact ``pmf``."""

    kind: str
    parameter: float

    def pmf(self, i: int) -> float:
        """``p(i)``, exactly normalized."""
        if i < 1:
            return 0.0
        if self.kind == "zeta":
            a = 1.0 + self.parameter
            return float(i ** -a / riemann_zeta(a))
        if self.kind == "uniform":
            return 1.0 / self.parameter if i <= self.parameter else 0.0
        q = self.parameter
        return float((1.0 - q) * q ** (i - 1))

    def sample(self, rng: np.random.Generator) -> int:
        """One draw ``I ≥ 1``."""
        if self.kind == "zeta":
            return int(rng.zipf(1.0 + self.parameter))
        if self.kind == "uniform":
            return int(rng.integers(1, int(self.parameter) + 1))
        return int(rng.geometric(1.0 - self.parameter))


def zeta(delta: float = 0.5) -> OccurrenceDistribution:
    """``p(i) ∝ i^-(1+δ)``, normalized by the Riemann zeta function ``ζ(1+δ)``."""
    if not delta > 0:
        raise QdiffError(f"zeta(δ) needs δ > 0 (the sum diverges otherwise), got {delta}")
    return OccurrenceDistribution("zeta", float(delta))


def geometric(continue_probability: float) -> OccurrenceDistribution:
    """``p(i) = (1-q) q^(i-1)`` for a loop that goes on with probability ``q``."""
    q = float(continue_probability)
    if not 0 < q < 1:
        raise QdiffError(f"geometric(q) needs 0 < q < 1 (full support, normalizable), got {q}")
    return OccurrenceDistribution("geometric", q)


def uniform(n: int) -> OccurrenceDistribution:
    """``p(i) = 1/n`` for ``i = 1..n``: only for gates that run at most ``n`` times."""
    if int(n) < 1:
        raise QdiffError(f"uniform(n) needs n ≥ 1, got {n}")
    return OccurrenceDistribution("uniform", int(n))


def as_distribution(spec: Any) -> OccurrenceDistribution:
    """``None`` (the heavy-tailed default ``zeta(0.5)``), ``"zeta"``, ``("zeta", δ)``,
    ``("geometric", q)`` or an `OccurrenceDistribution`.

    >>> as_distribution(("geometric", 0.9)).pmf(1)
    0.09999999999999998
    """
    if spec is None or spec == "zeta":
        return zeta()
    if isinstance(spec, OccurrenceDistribution):
        return spec
    if isinstance(spec, tuple) and len(spec) == 2 and spec[0] in ("zeta", "geometric"):
        return zeta(spec[1]) if spec[0] == "zeta" else geometric(spec[1])
    raise QdiffError(f"occurrences must be None, 'zeta', ('zeta', δ), ('geometric', q) or an "
                     f"OccurrenceDistribution, got {spec!r}")
