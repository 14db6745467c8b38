"""The one primitive registry.

Every primitive is registered once with its type rule and its implementation per back end;
its JVP, VJP and transpose rules are filled in beside it by the differentiation layers, its
batching rule by `qdiff.batching`.
Transformations are interpreters over this table, so adding a primitive never means editing
a transformation.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import QdiffError
from .types import Type

TypeRule = Callable[..., tuple[Type, ...]]


@dataclass(eq=False)
class Primitive:
    """A named operation of the IR.

    ``type_rule(*input_types, **params)`` returns the output types (a tuple) or raises
    `TypeCheckError`; ``impls[backend](*values, **params)`` returns the output values (a tuple
    when ``multiple_results``, else one value).
    """

    name: str
    type_rule: TypeRule
    multiple_results: bool = False
    # Effectful primitives (allocation, measurement) are never evaluated at trace time even
    # when all their inputs are constants.
    effectful: bool = False
    subprogram_params: tuple[str, ...] = ()
    # Elementwise primitives act on each element alone (rank-0 operands broadcast): passes
    # fuse them, and a map whose body holds only these runs once on whole arrays.
    elementwise: bool = False
    impls: dict[str, Callable[..., Any]] = field(default_factory=dict)
    jvp: Callable[..., Any] | None = None
    vjp: Callable[..., Any] | None = None
    # ``vjp_keeping(values, active, **params) -> (outputs, backward) | None``: the forward
    # sweep's binding of the primitive, keeping values for the reverse sweep's
    # ``backward(cts_out) -> cts_in`` (None: ``vjp`` recomputes what it needs)
    vjp_keeping: Callable[..., Any] | None = None
    transpose: Callable[..., Any] | None = None
    # ``batch(values, batched, size, **params) -> (outputs, batched)``: the primitive applied
    # to values of which those flagged carry a leading batch axis of ``size`` members
    # (filled by `qdiff.batching`, the `vmap` transformation)
    batch: Callable[..., Any] | None = None

    def def_impl(self, backend: str = "numpy") -> Callable[[Callable], Callable]:
        """Decorator registering the implementation of this primitive on ``backend``."""

        def register(fn: Callable) -> Callable:
            self.impls[backend] = fn
            return fn

        return register

    def impl(self, backend: str = "numpy") -> Callable[..., Any]:
        """The implementation on ``backend``, falling back to the NumPy reference."""
        found = self.impls.get(backend) or self.impls.get("numpy")
        if found is None:
            raise QdiffError(f"primitive {self.name!r} has no implementation on {backend!r}")
        return found

    def __repr__(self) -> str:
        return f"<primitive {self.name}>"


_REGISTRY: dict[str, Primitive] = {}


def register_primitive(name: str, type_rule: TypeRule, **options: Any) -> Primitive:
    """Create and register a primitive; the name must be new.

    >>> from qdiff.ir.types import Tensor
    >>> get_primitive("sin").name
    'sin'
    """
    if name in _REGISTRY:
        raise QdiffError(f"primitive {name!r} is already registered")
    primitive = Primitive(name, type_rule, **options)
    _REGISTRY[name] = primitive
    return primitive


def get_primitive(name: str) -> Primitive:
    """Look a primitive up by name; unknown names raise an error listing close matches."""
    try:
        return _REGISTRY[name]
    except KeyError:
        close = difflib.get_close_matches(name, _REGISTRY, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise QdiffError(f"unknown primitive {name!r}{hint}") from None


def all_primitives() -> dict[str, Primitive]:
    """A snapshot of the registry, name -> primitive."""
    return dict(_REGISTRY)


def elementwise_primitives() -> frozenset[Primitive]:
    """The registered primitives flagged ``elementwise``.

    >>> import qdiff
    >>> get_primitive("add") in elementwise_primitives()
    True
    """
    return frozenset(p for p in _REGISTRY.values() if p.elementwise)
