"""Nested containers of values (tuples, lists, dicts, None) flattened to lists of leaves.

A traced program keeps the tree structure of its arguments and results, so it can be called
like the Python function it came from. Tree definitions are plain JSON-able data.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import SerializationError

# A tree definition is a tuple: ("*",) for a leaf, ("none",), ("tuple", children),
# ("list", children) or ("dict", keys, children). Tuples keep it hashable for caches.
LEAF = ("*",)
# The last argument of a program traced by `tracer.trace_closed` that reads traced values of
# enclosing traces: ``{CLOSURE_KEY: (value, ...)}``. It is no argument of the user's, so
# argument numbers (``argnums``, negative ones too) skip it.
CLOSURE_KEY = "<closure>"


def closure_arguments(captured: Sequence[Any]) -> tuple:
    """The trailing argument carrying ``captured`` values (none when there are none).

    >>> closure_arguments([]), closure_arguments([1.0])
    ((), ({'<closure>': (1.0,)},))
    """
    return ({CLOSURE_KEY: tuple(captured)},) if captured else ()


def is_closure(treedef: tuple) -> bool:
    """Whether ``treedef`` is that of a `closure_arguments` argument."""
    return treedef[0] == "dict" and treedef[1] == (CLOSURE_KEY,)


def flatten(tree: Any) -> tuple[list[Any], tuple]:
    """Flatten a nested structure into its leaves and a tree definition.

    >>> flatten((1, {"a": 2, "b": [3]}))
    ([1, 2, 3], ('tuple', (('*',), ('dict', ('a', 'b'), (('*',), ('list', (('*',),)))))))
    """
    leaves: list[Any] = []
    treedef = _flatten_into(tree, leaves)
    return leaves, treedef


def _flatten_into(tree: Any, leaves: list[Any]) -> tuple:
    if tree is None:
        return ("none",)
    if isinstance(tree, tuple) and not hasattr(tree, "_fields"):
        return ("tuple", tuple(_flatten_into(x, leaves) for x in tree))
    if isinstance(tree, list):
        return ("list", tuple(_flatten_into(x, leaves) for x in tree))
    if isinstance(tree, dict):
        keys = sorted_keys(tree)
        return ("dict", keys, tuple(_flatten_into(tree[k], leaves) for k in keys))
    leaves.append(tree)
    return LEAF


def sorted_keys(mapping: dict) -> tuple:
    """The keys of ``mapping`` in the order its leaves are flattened: sorted when they
    compare (strings, numbers), else sorted by their text (Qiskit ``Parameter`` objects,
    mixed types), so that equal dicts built in any order flatten alike.

    >>> sorted_keys({"b": 1, "a": 2}), sorted_keys({2: 0, "x": 0})
    (('a', 'b'), (2, 'x'))
    """
    try:
        return tuple(sorted(mapping))
    except TypeError:
        return tuple(sorted(mapping, key=lambda k: (str(k), type(k).__name__)))


def unflatten(treedef: tuple, leaves: list[Any]) -> Any:
    """Rebuild the structure described by ``treedef`` from ``leaves``.

    >>> tree = (1, {"a": 2, "b": [3]}); leaves, td = flatten(tree); unflatten(td, leaves) == tree
    True
    """
    iterator = iter(leaves)
    result = _build(treedef, iterator)
    if next(iterator, _END) is not _END:
        raise ValueError("too many leaves for tree definition")
    return result


_END = object()


def _build(treedef: tuple, leaves: Any) -> Any:
    kind = treedef[0]
    if kind == "*":
        value = next(leaves, _END)
        if value is _END:
            raise ValueError("too few leaves for tree definition")
        return value
    if kind == "none":
        return None
    if kind == "tuple":
        return tuple(_build(child, leaves) for child in treedef[1])
    if kind == "list":
        return [_build(child, leaves) for child in treedef[1]]
    if kind == "dict":
        return {key: _build(child, leaves) for key, child in zip(treedef[1], treedef[2])}
    raise ValueError(f"unknown tree node {kind!r}")


def num_leaves(treedef: tuple) -> int:
    """How many leaves a tree definition holds.

    >>> num_leaves(flatten([1, (2, 3)])[1])
    3
    """
    kind = treedef[0]
    if kind == "*":
        return 1
    if kind == "none":
        return 0
    children = treedef[2] if kind == "dict" else treedef[1]
    return sum(num_leaves(child) for child in children)


def treedef_to_json(treedef: tuple) -> Any:
    """A tree definition as JSON data (lists instead of tuples)."""
    kind = treedef[0]
    if kind in ("*", "none"):
        return [kind]
    if kind == "dict":
        unsaved = [k for k in treedef[1] if not isinstance(k, str)]
        if unsaved:
            raise SerializationError(
                f"dict keys {unsaved!r} cannot be saved to JSON: only string keys can (use "
                "the names, e.g. parameter.name, as keys)")
        return [kind, list(treedef[1]), [treedef_to_json(c) for c in treedef[2]]]
    return [kind, [treedef_to_json(c) for c in treedef[1]]]


def treedef_from_json(data: Any) -> tuple:
    """Inverse of :func:`treedef_to_json`."""
    kind = data[0]
    if kind in ("*", "none"):
        return (kind,)
    if kind == "dict":
        return (kind, tuple(data[1]), tuple(treedef_from_json(c) for c in data[2]))
    if kind in ("tuple", "list"):
        return (kind, tuple(treedef_from_json(c) for c in data[1]))
    raise ValueError(f"unknown tree node {kind!r}")


def split_flat(flat: Any, shapes: Sequence[tuple[int, ...]]) -> list[Any]:
    """Consecutive pieces of a flat vector reshaped to ``shapes`` (the inverse of
    concatenating raveled arrays).

    >>> [p.tolist() for p in split_flat(np.arange(5.0), [(2,), (), (1, 2)])]
    [[0.0, 1.0], 2.0, [[3.0, 4.0]]]
    """
    parts, start = [], 0
    flat = np.asarray(flat)
    for shape in shapes:
        size = int(np.prod(shape, dtype=int))
        parts.append(flat[start:start + size].reshape(shape))
        start += size
    return parts
