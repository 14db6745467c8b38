"""The value types of the IR: `Tensor(shape, dtype)`, `QState(num_qubits)` and `Bit`.

Shapes are static tuples of ints; dtypes are NumPy dtype names ("float64", "int64", ...).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import TypeCheckError

# Short names used by the printer; the long NumPy names are used everywhere else.
_SHORT_DTYPE = {
    "float64": "f64", "float32": "f32", "float16": "f16",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8",
    "bool": "bool", "complex128": "c128", "complex64": "c64",
}
_LONG_DTYPE = {short: long for long, short in _SHORT_DTYPE.items()}
SUPPORTED_DTYPES = frozenset(_SHORT_DTYPE)


def canonical_dtype(dtype: Any) -> str:
    """Return the IR name of a dtype-like value (``np.float64``, ``"f64"``, ``float``...).

    >>> canonical_dtype(float), canonical_dtype("i64")
    ('float64', 'int64')
    """
    if isinstance(dtype, str) and dtype in _LONG_DTYPE:
        return _LONG_DTYPE[dtype]
    try:
        known = _CANONICAL.get(dtype)
    except TypeError:  # an unhashable dtype-like value
        known = None
    if known is not None:
        return known
    try:
        name = np.dtype(dtype).name
    except TypeError as exc:
        raise TypeCheckError(f"{dtype!r} is not a dtype") from exc
    if name not in SUPPORTED_DTYPES:
        raise TypeCheckError(
            f"dtype {name} is not supported; use one of {sorted(SUPPORTED_DTYPES)}")
    try:
        _CANONICAL[dtype] = name
    except TypeError:
        pass
    return name


# dtype-like value -> IR name, for the ones seen: types are built on every primitive call
_CANONICAL: dict[Any, str] = {}


class Type(ABC):
    """Base class of IR types."""

    @abstractmethod
    def short(self) -> str:
        """The printer's compact form, e.g. ``f64[3]``."""

    @abstractmethod
    def to_json(self) -> dict:
        """The type as a JSON object."""

    @staticmethod
    def from_json(data: dict) -> Type:
        kind = data.get("kind")
        if kind == "tensor":
            return Tensor(tuple(int(d) for d in data["shape"]), data["dtype"])
        if kind == "qstate":
            return QState(int(data["num_qubits"]))
        if kind == "bit":
            return Bit()
        raise TypeCheckError(f"unknown type kind {kind!r} in {data!r}")


@dataclass(frozen=True)
class Tensor(Type):
    """A dense array of static shape; a scalar has shape ``()``.

    >>> Tensor((2, 3), "float64").short()
    'f64[2,3]'
    """

    shape: tuple[int, ...]
    dtype: str = "float64"

    def __post_init__(self) -> None:
        shape = tuple(self.shape)
        if any((not isinstance(d, (int, np.integer))) or d < 0 for d in shape):
            raise TypeCheckError(f"shape {shape} must be a tuple of non-negative ints")
        object.__setattr__(self, "shape", tuple(int(d) for d in shape))
        object.__setattr__(self, "dtype", canonical_dtype(self.dtype))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def is_float(self) -> bool:
        return np.issubdtype(self.np_dtype, np.inexact)

    def with_shape(self, shape: tuple[int, ...]) -> Tensor:
        return Tensor(tuple(shape), self.dtype)

    def with_dtype(self, dtype: Any) -> Tensor:
        return Tensor(self.shape, dtype)

    def short(self) -> str:
        return f"{_SHORT_DTYPE[self.dtype]}[{','.join(map(str, self.shape))}]"

    def to_json(self) -> dict:
        return {"kind": "tensor", "shape": list(self.shape), "dtype": self.dtype}

    def __repr__(self) -> str:
        return f"Tensor({self.shape}, {self.dtype!r})"


@dataclass(frozen=True)
class QState(Type):
    """An n-qubit quantum state. Used linearly: every quantum op consumes one and returns the next.

    >>> QState(3).short()
    'qstate[3]'
    """

    num_qubits: int

    def __post_init__(self) -> None:
        if not isinstance(self.num_qubits, (int, np.integer)) or self.num_qubits < 1:
            raise TypeCheckError(
                f"QState needs a positive number of qubits, got {self.num_qubits!r}")

    def short(self) -> str:
        return f"qstate[{self.num_qubits}]"

    def to_json(self) -> dict:
        return {"kind": "qstate", "num_qubits": self.num_qubits}


@dataclass(frozen=True)
class Bit(Type):
    """A measurement outcome (0 or 1).

    >>> Bit().short()
    'bit'
    """

    def short(self) -> str:
        return "bit"

    def to_json(self) -> dict:
        return {"kind": "bit"}


def type_of_value(value: Any) -> Type:
    """The IR type of a concrete value (NumPy array, Python scalar).

    >>> type_of_value(1.5), type_of_value(np.zeros((2, 2), np.int64))
    (Tensor((), 'float64'), Tensor((2, 2), 'int64'))
    """
    if isinstance(value, Type):
        raise TypeCheckError("expected a value, got a type")
    if isinstance(value, bool):
        return Tensor((), "bool")
    if isinstance(value, int):
        return Tensor((), "int64")
    if isinstance(value, float):
        return Tensor((), "float64")
    if isinstance(value, complex):
        return Tensor((), "complex128")
    array = np.asarray(value)
    if array.dtype == object:
        raise TypeCheckError(
            f"cannot use a value of Python type {type(value).__name__} in a program")
    return Tensor(array.shape, array.dtype)
