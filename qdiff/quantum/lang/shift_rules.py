"""Parameter-shift rules from a gate's spectrum (Wierichs, Izaac, Wang, Lin 2022).

If a gate is ``U(θ) = exp(-iθG)`` and ``G`` has eigenvalues ``λ_1 < ... < λ_m``, every
expectation ``f`` of a program that runs the gate once is a trigonometric polynomial in ``θ``
with the frequencies ``Ω = {λ_j - λ_i > 0}``:
``f(θ + x) = a_0 + Σ_l a_l cos(Ω_l x) + b_l sin(Ω_l x)``. Its odd part gives the derivative:

    f'(θ) = Σ_μ y_μ [f(θ + x_μ) - f(θ - x_μ)],   μ = 1..R, R = |Ω|,

where ``Σ_μ 2 y_μ sin(Ω_l x_μ) = Ω_l`` for every ``l`` (an R×R linear system). For equidistant
frequencies ``Ω_l = l Ω_1`` the solution is closed-form: ``x_μ = (2μ-1)π / (2RΩ_1)``,
``y_μ = (-1)^(μ-1) Ω_1 / (4R sin²(x_μ Ω_1 / 2))``. One frequency (Pauli rotations) gives the
two-term rule ``[f(θ+π/2) - f(θ-π/2)]/2``; ``{1/2, 1}`` (controlled rotations) the four-term
rule with shifts ``π/2, 3π/2``.

>>> rule = shift_rule((1.0,))
>>> [round(x, 6) for x in rule.shifts], [round(y, 6) for y in rule.coefficients]
([1.570796], [0.5])
>>> rule = shift_rule((0.5, 1.0))
>>> [round(x, 6) for x in rule.shifts], [round(y, 7) for y in rule.coefficients]
([1.570796, 4.712389], [0.4267767, -0.0732233])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ...ir.errors import QdiffError
from ..lang.gates import GateSpec, gate_spec


@dataclass(frozen=True)
class ShiftRule:
    """``f'(θ) = Σ_μ coefficients[μ] · [f(θ + shifts[μ]) - f(θ - shifts[μ])]``."""

    frequencies: tuple[float, ...]
    shifts: tuple[float, ...]
    coefficients: tuple[float, ...]

    @property
    def num_evaluations(self) -> int:
        """Shifted evaluations per derivative: two per shift."""
        return 2 * len(self.shifts)

    def terms(self) -> list[tuple[float, float]]:
        """``(shift, coefficient)`` pairs, both signs: ``f' = Σ c · f(θ + s)``.

        >>> [(round(s, 4), round(c, 4)) for s, c in shift_rule((1.0,)).terms()]
        [(1.5708, 0.5), (-1.5708, -0.5)]
        """
        return [pair for x, y in zip(self.shifts, self.coefficients)
                for pair in ((x, y), (-x, -y))]


def frequencies_of(spectrum: Sequence[float], decimals: int = 12) -> tuple[float, ...]:
    """The positive differences of a spectrum, ascending and without repeats.

    >>> frequencies_of((-0.5, 0.0, 0.5))
    (0.5, 1.0)
    """
    values = sorted(spectrum)
    found = {round(b - a, decimals) for i, a in enumerate(values) for b in values[i + 1:]}
    return tuple(sorted(f for f in found if f > 0))


@lru_cache(maxsize=256)
def shift_rule(frequencies: tuple[float, ...]) -> ShiftRule:
    """The first-derivative shift rule for a trigonometric polynomial with ``frequencies``.

    >>> f = lambda t: 0.3 + np.cos(t) - 2 * np.sin(np.sqrt(2) * t) + 0.5 * np.sin(3 * t)
    >>> rule = shift_rule((1.0, np.sqrt(2), 3.0))
    >>> d = sum(c * f(0.4 + s) for s, c in rule.terms())
    >>> bool(np.isclose(d, -np.sin(0.4) - 2 * np.sqrt(2) * np.cos(np.sqrt(2) * 0.4)
    ...                 + 1.5 * np.cos(1.2)))
    True
    """
    omega = tuple(float(w) for w in frequencies)
    if not omega or any(w <= 0 for w in omega) or len(set(omega)) != len(omega):
        raise QdiffError(f"a shift rule needs distinct positive frequencies, got {frequencies}")
    omega = tuple(sorted(omega))
    r = len(omega)
    base = omega[0]
    if all(math.isclose(w, (l + 1) * base, rel_tol=1e-9) for l, w in enumerate(omega)):
        shifts = [(2 * mu - 1) * math.pi / (2 * r * base) for mu in range(1, r + 1)]
        coefficients = [(-1) ** (mu - 1) * base / (4 * r * math.sin(x * base / 2) ** 2)
                        for mu, x in enumerate(shifts, start=1)]
        return ShiftRule(omega, tuple(shifts), tuple(coefficients))
    # Non-equidistant: solve Σ_μ 2 y_μ sin(Ω_l x_μ) = Ω_l on the best-conditioned of a few
    # evenly spread shift grids (any grid with a regular system is exact).
    best = None
    for scale in (base, sum(omega) / r, omega[-1], omega[-1] / r):
        shifts = np.array([(2 * mu - 1) * math.pi / (2 * r * scale) for mu in range(1, r + 1)])
        system = 2 * np.sin(np.outer(omega, shifts))
        condition = np.linalg.cond(system)
        if best is None or condition < best[0]:
            best = (condition, shifts, system)
    assert best is not None
    condition, shifts, system = best
    if not np.isfinite(condition) or condition > 1e8:
        raise QdiffError(f"no well-conditioned shift rule for the frequencies {omega}")
    coefficients = np.linalg.solve(system, np.array(omega))
    return ShiftRule(omega, tuple(map(float, shifts)), tuple(map(float, coefficients)))


def gate_shift_rule(spec: GateSpec | str, slot: int = 0) -> ShiftRule:
    """The shift rule of parameter ``slot`` of a gate, from its generator's spectrum.

    A multi-parameter gate (``u``) contributes each parameter through its rotations: the
    spectrum of the parameter is the sum set of theirs.

    >>> len(gate_shift_rule("rx").shifts), len(gate_shift_rule("crz").shifts)
    (1, 2)
    >>> gate_shift_rule("u", 1).shifts == gate_shift_rule("rz").shifts
    True
    """
    spec = gate_spec(spec)
    if not 0 <= slot < spec.num_params:
        raise QdiffError(f"gate {spec.name!r} has no parameter {slot}")
    if spec.spectrum is not None and spec.num_params == 1:
        return shift_rule(frequencies_of(spec.spectrum))
    spectrum = [0.0]
    for occurrence in spec.occurrences:
        if occurrence.param_index == slot:
            part = gate_spec(occurrence.gate).spectrum or ()
            spectrum = [a + b for a in spectrum for b in part]
    if len(spectrum) < 2:
        raise QdiffError(f"gate {spec.name!r}: parameter {slot} has no known spectrum, so no "
                         "shift rule applies; use method='adjoint' or 'finite-diff'")
    return shift_rule(frequencies_of(spectrum))
