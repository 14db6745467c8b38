"""Small helpers shared by the type rules of primitives."""

from __future__ import annotations

from collections.abc import Sequence

from .core import Program
from .errors import TypeCheckError
from .types import Tensor, Type


def tensor(t: Type, what: str) -> Tensor:
    """``t`` as a Tensor, or a TypeCheckError naming ``what``."""
    if not isinstance(t, Tensor):
        raise TypeCheckError(f"{what} must be an array, got {t.short()}")
    return t


def int_scalar(t: Type, what: str) -> Tensor:
    """``t`` as an integer scalar tensor."""
    t = tensor(t, what)
    if t.shape != () or t.np_dtype.kind not in "iu":
        raise TypeCheckError(f"{what} must be an integer scalar, got {t.short()}")
    return t


def elementwise_shape(types: Sequence[Tensor]) -> tuple[int, ...]:
    """The common shape of elementwise operands: all equal, except rank-0 scalars."""
    shapes = {t.shape for t in types if t.shape != ()}
    if len(shapes) > 1:
        listed = " and ".join(str(t.shape) for t in types)
        raise TypeCheckError(f"operand shapes {listed} differ (broadcast them first)")
    return shapes.pop() if shapes else ()


def same_dtype(types: Sequence[Tensor]) -> str:
    """The common dtype of operands that must agree."""
    dtypes = {t.dtype for t in types}
    if len(dtypes) > 1:
        listed = " and ".join(t.dtype for t in types)
        raise TypeCheckError(f"operand dtypes {listed} differ (convert them first)")
    return dtypes.pop()


def check_signature(program: Program, expected_in: Sequence[Type], what: str,
                    expected_out: Sequence[Type] | None = None) -> None:
    """Check that a sub-program takes ``expected_in`` (and returns ``expected_out``)."""
    if not isinstance(program, Program):
        raise TypeCheckError(f"{what} must be a Program, got {type(program).__name__}")
    _compare(program.in_types, tuple(expected_in), f"{what} inputs")
    if expected_out is not None:
        _compare(program.out_types, tuple(expected_out), f"{what} outputs")


def _compare(actual: Sequence[Type], expected: Sequence[Type], what: str) -> None:
    if tuple(actual) != tuple(expected):
        raise TypeCheckError(
            f"{what} are ({', '.join(t.short() for t in actual)}) but must be "
            f"({', '.join(t.short() for t in expected)})")


def normalize_axes(axes: Sequence[int], ndim: int, what: str) -> tuple[int, ...]:
    """Axes as sorted non-negative ints, checked against ``ndim``."""
    result = []
    for axis in axes:
        if not -ndim <= axis < ndim:
            raise TypeCheckError(f"{what}: axis {axis} is out of range for {ndim} dimensions")
        result.append(axis % ndim)
    if len(set(result)) != len(result):
        raise TypeCheckError(f"{what}: repeated axis in {tuple(axes)}")
    return tuple(sorted(result))
