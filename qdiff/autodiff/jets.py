"""Jets: values with exact derivatives of any order, for forward mode on concrete values.

A jet is a truncated polynomial in nilpotent generators ε_0, ε_1, … with ε_i² = 0: a value
``x`` with its parts ``x[S]``, one array per set ``S`` of generators (a bit mask), so
``x = Σ_S x[S] ε^S``. Seeding input ``x`` with ``ε_0·a + ε_1·b`` and reading the part
``{0, 1}`` of an output gives the second derivative ``f''(x)[a, b]`` exactly (hyper-dual
numbers); each further generator adds one order. Only the parts that are not zero are
stored; part 0 (the primal value) always is.

Arithmetic (``+ - *``, division by a number, `power`, `exp`, any function through its
derivatives with `taylor`) follows the product rule, so code written for numbers runs on
jets: the forward mode of quantum programs (`qdiff.quantum.gradients.forward_mode`) keeps
branch weights, states and classical values as jets.

>>> x = Jet({0: np.asarray(2.0), 1: np.asarray(1.0), 2: np.asarray(1.0)})
>>> y = x * x * x                       # x³ at 2 along ε_0 and ε_1
>>> [float(y.part(m)) for m in range(4)]  # 8, 3x², 3x², 6x
[8.0, 12.0, 12.0, 12.0]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


class Jet:
    """A value and its nonzero derivative parts, keyed by generator bit mask (see module)."""

    __slots__ = ("parts",)
    __array_ufunc__ = None  # ``ndarray * Jet`` is the jet's product, not an object array

    def __init__(self, parts: dict[int, Any]):
        if 0 not in parts:
            raise ValueError("a jet needs its primal part (mask 0)")
        self.parts = parts

    @property
    def primal(self) -> Any:
        """The value itself (part 0)."""
        return self.parts[0]

    def part(self, mask: int) -> Any:
        """Part ``mask`` (zeros shaped like the primal when it is not stored)."""
        found = self.parts.get(mask)
        return np.zeros_like(self.primal) if found is None else found

    def map(self, f: Callable[[Any], Any]) -> Jet:
        """A linear map applied to every part."""
        return Jet({m: f(v) for m, v in self.parts.items()})

    def __add__(self, other: Any) -> Jet:
        other = as_jet(other)
        parts = dict(self.parts)
        for m, v in other.parts.items():
            parts[m] = parts[m] + v if m in parts else v
        return Jet(parts)

    __radd__ = __add__

    def __neg__(self) -> Jet:
        return self.map(lambda v: -v)

    def __sub__(self, other: Any) -> Jet:
        return self + (-as_jet(other))

    def __rsub__(self, other: Any) -> Jet:
        return as_jet(other) + (-self)

    def __mul__(self, other: Any) -> Jet:
        other = as_jet(other)
        parts: dict[int, Any] = {}
        for a, x in self.parts.items():
            for b, y in other.parts.items():
                if a & b:
                    continue  # ε_i² = 0
                term = x * y
                parts[a | b] = parts[a | b] + term if (a | b) in parts else term
        return Jet(parts)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> Jet:
        if isinstance(other, Jet):
            return self * power(other, -1.0)
        return self.map(lambda v: v / other)

    def __float__(self) -> float:
        return float(self.primal)

    # comparisons look at the value only (loop cut-offs, pruning)
    def __lt__(self, other: Any) -> bool:
        return bool(self.primal < primal(other))

    def __gt__(self, other: Any) -> bool:
        return bool(self.primal > primal(other))

    def __le__(self, other: Any) -> bool:
        return bool(self.primal <= primal(other))

    def __ge__(self, other: Any) -> bool:
        return bool(self.primal >= primal(other))

    def __repr__(self) -> str:
        return f"Jet({self.parts!r})"


def as_jet(value: Any) -> Jet:
    """``value`` as a jet (a plain value has no derivative parts).

    >>> as_jet(2.0).parts
    {0: 2.0}
    """
    return value if isinstance(value, Jet) else Jet({0: value})


def primal(value: Any) -> Any:
    """The value of a jet; a plain value unchanged.

    >>> primal(Jet({0: 2.0, 1: 1.0})), primal(3.0)
    (2.0, 3.0)
    """
    return value.primal if isinstance(value, Jet) else value


def order_of(masks: Any) -> int:
    """The number of generators the masks use (one more than the highest bit).

    >>> order_of([0, 1, 4])
    3
    """
    return max((int(m).bit_length() for m in masks), default=0)


def popcount(mask: int) -> int:
    """The number of generators in ``mask`` (the order of that part).

    >>> popcount(0b101)
    2
    """
    return bin(mask).count("1")


def taylor(x: Any, derivative: Callable[[int], Any]) -> Any:
    """``f(x)`` for a function given by ``derivative(k)`` = f⁽ᵏ⁾ at ``x``'s value:
    Σ_k f⁽ᵏ⁾(x₀) δᵏ/k! with δ = x - x₀ (nilpotent, so the sum is finite).

    >>> x = Jet({0: np.asarray(0.0), 1: np.asarray(1.0), 2: np.asarray(1.0)})
    >>> s = taylor(x, lambda k: [0.0, 1.0, 0.0, -1.0][k % 4])  # sin at 0
    >>> [float(s.part(m)) for m in range(4)]
    [0.0, 1.0, 1.0, 0.0]
    """
    if not isinstance(x, Jet):
        return derivative(0)
    delta = Jet({0: np.zeros_like(x.primal), **{m: v for m, v in x.parts.items() if m}})
    result = as_jet(derivative(0))
    term: Jet = as_jet(np.ones_like(x.primal))
    for k in range(1, nilpotency(delta) + 1):  # δᵏ = 0 beyond
        term = (term * delta) / k
        result = result + term * derivative(k)
    return result


def nilpotency(delta: Jet) -> int:
    """The highest power of a jet with zero value that can be nonzero: the number of
    generators its parts use together.

    >>> nilpotency(Jet({0: 0.0, 1: 1.0, 6: 1.0}))
    3
    """
    used = 0
    for m in delta.parts:
        used |= m
    return popcount(used)


def power(x: Any, exponent: float) -> Any:
    """``x ** exponent`` for a jet with a nonzero value.

    >>> y = power(Jet({0: np.asarray(4.0), 1: np.asarray(1.0)}), 0.5)
    >>> float(y.primal), float(y.part(1))
    (2.0, 0.25)
    """
    x0 = primal(x)

    def derivative(k: int) -> Any:
        falling = math.prod(exponent - j for j in range(k))
        return falling * np.power(x0, exponent - k)

    return taylor(x, derivative)


def exp(x: Any) -> Any:
    """``exp(x)`` (real or complex).

    >>> y = exp(Jet({0: np.asarray(0.0), 1: np.asarray(2.0)}))
    >>> float(y.primal), float(y.part(1))
    (1.0, 2.0)
    """
    value = np.exp(primal(x))
    return taylor(x, lambda k: value)


def real(x: Any) -> Any:
    """The real part of every part.

    >>> {m: float(v) for m, v in real(Jet({0: 1 + 2j, 1: 3j})).parts.items()}
    {0: 1.0, 1: 0.0}
    """
    return x.map(np.real) if isinstance(x, Jet) else np.real(x)


def inner(a: Any, b: Any, product: Callable[[Any, Any], Any] = np.vdot) -> Any:
    """``⟨a, b⟩`` of two jets of vectors (``product`` conjugates its first argument): a jet
    of scalars, by the product rule.

    >>> a = Jet({0: np.array([1.0, 0.0]), 1: np.array([0.0, 1.0])})
    >>> [complex(inner(a, a).part(m)) for m in range(2)]
    [(1+0j), 0j]
    """
    a, b = as_jet(a), as_jet(b)
    parts: dict[int, Any] = {}
    for m, x in a.parts.items():
        for n, y in b.parts.items():
            if m & n:
                continue
            term = product(x, y)
            parts[m | n] = parts[m | n] + term if (m | n) in parts else term
    return Jet(parts)


def seeded(value: Any, mask: int, direction: Any) -> Jet:
    """``value`` (a jet or a plain array) with ``direction`` added to its part ``mask``.

    >>> x = seeded(np.array([1.0, 2.0]), 1, [0.0, 1.0]); x.part(1).tolist()
    [0.0, 1.0]
    """
    jet = as_jet(value)
    base = np.asarray(jet.primal)
    add = np.asarray(direction, dtype=np.result_type(base.dtype, np.float64)) \
        if base.dtype.kind != "c" else np.asarray(direction, base.dtype)
    return jet + Jet({0: np.zeros_like(add), mask: add})


def derivative_along(value: Any, bit: int) -> Any:
    """The coefficient of generator ``bit`` (a one-bit mask) in ``value``, itself a jet in the
    other generators: ``{S: value[S | bit]}``.

    >>> x = Jet({0: np.asarray(1.0), 1: np.asarray(2.0), 2: np.asarray(3.0), 3: np.asarray(4.0)})
    >>> d = derivative_along(x, 2); float(d.primal), float(d.part(1))
    (3.0, 4.0)
    """
    if not isinstance(value, Jet):
        return np.zeros_like(np.asarray(value, np.float64))
    parts = {m & ~bit: v for m, v in value.parts.items() if m & bit}
    if 0 not in parts:
        parts[0] = np.zeros_like(value.primal)
    return Jet(parts) if len(parts) > 1 else parts[0]


def simplified(value: Any) -> Any:
    """A jet without derivative parts as its plain value.

    >>> simplified(Jet({0: 2.0})), simplified(3.0)
    (2.0, 3.0)
    """
    return value.primal if isinstance(value, Jet) and len(value.parts) == 1 else value
