"""Second-order array combinators: `map`, `reduce`, `scan`, `hist` (reduce-by-index), `scatter`.

All work along the leading axis. Operators are closed sub-programs on elements; `op_kind`
recognizes the monoids (+, *, max, min) that have closed-form implementations here and
special derivative rules later.

Program layouts (consts are values the lambda reads from enclosing scopes):
- ``map[body, num_consts](*consts, *xs) -> ys``; ``body(*consts, *x_i) -> y_i``.
- ``reduce[op, num_consts](*consts, *neutral, *xs) -> acc``; ``op(*consts, *a, *b) -> a⊙b``.
- ``scan[op, num_consts](*consts, *neutral, *xs) -> ys`` (inclusive: ``ys[i] = ys[i-1] ⊙ xs[i]``).
- ``hist[op, num_consts](*consts, dest, neutral, indices, values) -> dest'`` with
  ``dest'[indices[i]] ⊙= values[i]``; indices outside ``[0, len(dest))`` are ignored.
- ``scatter(dest, indices, values) -> dest'`` with ``dest'[indices[i]] = values[i]``; indices
  outside ``[0, len(dest))`` are ignored; for repeated indices the last write wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..ir import pytree
from ..ir.core import Program
from ..ir.errors import TypeCheckError
from ..ir.interpreter import evaluate
from ..ir.primitives import register_primitive
from ..ir.tracer import as_operand, bind, close_body, trace_body, value_type
from ..ir.type_rules import check_signature, same_dtype, tensor
from ..ir.types import Tensor, Type
from .elementwise import PRIMITIVES

MONOIDS = ("add", "mul", "max", "min")


def op_kind(op: Program, num_consts: int = 0) -> str | None:
    """``"add"``, ``"mul"``, ``"max"`` or ``"min"`` when ``op`` is exactly that scalar
    monoid applied to its two inputs, else None.

    >>> import qdiff.numpy as qnp
    >>> from qdiff.ir.tracer import trace
    >>> op_kind(trace(qnp.add, 0.0, 0.0)), op_kind(trace(lambda a, b: a + 2 * b, 0.0, 0.0))
    ('add', None)
    """
    if num_consts or len(op.inputs) != 2 or len(op.eqns) != 1 or len(op.outputs) != 1:
        return None
    (eqn,) = op.eqns
    if eqn.primitive.name not in MONOIDS or eqn.outputs[0] is not op.outputs[0]:
        return None
    if {id(a) for a in eqn.inputs} != {id(v) for v in op.inputs}:
        return None
    return eqn.primitive.name


def _leading(types: Sequence[Type], what: str) -> int:
    tensors = [tensor(t, f"{what} {i}") for i, t in enumerate(types)]
    if not tensors:
        raise TypeCheckError(f"needs at least one {what}")
    lengths = {t.shape[0] if t.shape else None for t in tensors}
    if None in lengths:
        raise TypeCheckError(f"every {what} needs a leading axis to iterate over")
    if len(lengths) > 1:
        raise TypeCheckError(
            f"{what}s have different lengths: {', '.join(t.short() for t in tensors)}")
    return lengths.pop()


def _element(t: Type) -> Tensor:
    return Tensor(t.shape[1:], t.dtype)


def _stack(t: Type, n: int) -> Tensor:
    return tensor(t, "element").with_shape((n, *t.shape))


# ----------------------------------------------------------------------------------------- map
AD_MODES = ("auto", "reverse", "mixed")


def _map_rule(*args: Type, body: Program, num_consts: int,
              ad_mode: str = "auto") -> tuple[Type, ...]:
    if ad_mode not in AD_MODES:
        raise TypeCheckError(f"map ad_mode must be one of {AD_MODES}, got {ad_mode!r}")
    consts, xs = args[:num_consts], args[num_consts:]
    n = _leading(xs, "mapped array")
    check_signature(body, (*consts, *(_element(x) for x in xs)), "map body")
    return tuple(_stack(t, n) for t in body.out_types)


map_p = register_primitive("map", _map_rule, multiple_results=True, subprogram_params=("body",))

# Batched runs of map bodies that a higher layer runs as a whole (quantum programs), filled
# by `qdiff.batching`: ``find(body, batched) -> run(body, values, batched, size) -> outputs``
# (batch axis first) or None when no batched run claims the body.
MAP_BODY_RUNNERS: list[Callable[[Program, list[bool]], Callable[..., list[Any]] | None]] = []


def _batched_body_run(body: Program, consts: Sequence[Any], xs: Sequence[Any],
                      n: int) -> list[np.ndarray] | None:
    """The rows of a map whose body a registered batched runner claims, run as one batch."""
    flags = [False] * len(consts) + [True] * len(xs)
    for find in MAP_BODY_RUNNERS:
        run = find(body, flags)
        if run is not None:
            outs = run(body, [*consts, *xs], flags, n)
            return [np.asarray(out, dtype=t.np_dtype).reshape((n, *t.shape))
                    for out, t in zip(outs, body.out_types)]
    return None


@map_p.def_impl("numpy")
def _map_impl(*args: Any, body: Program, num_consts: int,
              ad_mode: str = "auto") -> list[np.ndarray]:
    consts, xs = args[:num_consts], args[num_consts:]
    n = xs[0].shape[0]
    if n and scalar_elementwise(body):
        # a fused elementwise lambda on scalars: one vectorized pass instead of n calls
        outs = evaluate(body, *consts, *xs)
        return [out if _fresh_row_array(out, n, t, [*args, *outs[:k]]) else
                np.array(np.broadcast_to(out, (n,)), dtype=t.np_dtype)
                for k, (out, t) in enumerate(zip(outs, body.out_types))]
    batched = _batched_body_run(body, consts, xs, n) if n else None
    if batched is not None:
        return batched
    rows = [evaluate(body, *consts, *(x[i] for x in xs)) for i in range(n)]
    return [np.stack([row[k] for row in rows]) if n else np.zeros((0, *t.shape), t.dtype)
            for k, t in enumerate(body.out_types)]


def scalar_elementwise(body: Program) -> bool:
    """Whether ``body`` takes scalars and applies only elementwise primitives, so running
    it once on whole arrays computes every row."""
    return (all(isinstance(t, Tensor) and t.shape == () for t in body.in_types)
            and all(eqn.primitive.elementwise for eqn in body.eqns))


def _fresh_row_array(out: Any, n: int, t: Tensor, taken: Sequence[Any]) -> bool:
    """Whether a vectorized lambda result can be returned as is: an array of all rows that
    is not an operand or an earlier result."""
    return (isinstance(out, np.ndarray) and out.shape == (n,) and out.dtype == t.np_dtype
            and not any(out is a for a in taken))


def map(f: Callable[..., Any], *xs: Any, ad_mode: str = "auto") -> Any:
    """Apply ``f`` to the leading-axis slices of ``xs`` and stack the results (a parallel map).

    ``ad_mode`` picks how reverse mode differentiates the lambda: "reverse" (re-execute and
    reverse it), "mixed" (forward mode per scalar input) or "auto" (mixed for at most 4
    scalar inputs).

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.trace(lambda m: qdiff.map(lambda row: qnp.sum(row ** 2), m), np.ones((2, 3)))
    >>> f(np.arange(6.0).reshape(2, 3)).tolist()
    [5.0, 50.0]
    """
    arrays = [as_operand(x) for x in xs]
    types = [value_type(x) for x in arrays]
    _leading(types, "mapped array")
    body = trace_body(f, [_element(t) for t in types], scope="map body",
                      allow_cell_writes=False)
    program, consts = close_body(body, leading=0)
    for k, t in enumerate(program.out_types):
        tensor(t, f"map body output {k}")
    mode = {} if ad_mode == "auto" else {"ad_mode": ad_mode}
    outs = bind(map_p, *consts, *arrays, body=program, num_consts=len(consts), **mode)
    return pytree.unflatten(body.out_tree, outs)


# ------------------------------------------------------------------------------ reduce and scan
def _monoid_rule(name: str, stacked: bool) -> Callable[..., tuple[Type, ...]]:
    def rule(*args: Type, op: Program, num_consts: int) -> tuple[Type, ...]:
        consts, rest = args[:num_consts], args[num_consts:]
        if len(rest) % 2:
            raise TypeCheckError("needs one neutral element per array")
        k = len(rest) // 2
        neutral, xs = rest[:k], rest[k:]
        n = _leading(xs, "array")
        elements = tuple(_element(x) for x in xs)
        if tuple(neutral) != elements:
            raise TypeCheckError(
                f"neutral elements ({', '.join(t.short() for t in neutral)}) must have the "
                f"element types ({', '.join(t.short() for t in elements)})")
        check_signature(op, (*consts, *elements, *elements), f"{name} operator", elements)
        return tuple(_stack(e, n) for e in elements) if stacked else elements

    return rule


reduce_p = register_primitive("reduce", _monoid_rule("reduce", False), multiple_results=True,
                              subprogram_params=("op",))
scan_p = register_primitive("scan", _monoid_rule("scan", True), multiple_results=True,
                            subprogram_params=("op",))

_NUMPY_MONOID = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _split(args: Sequence[Any], op: Program,
           num_consts: int) -> tuple[list, list, list, np.ufunc | None]:
    """Consts, accumulators and arrays of a reduce or scan, and the NumPy ufunc computing
    it when its operator is a known monoid."""
    consts, rest = list(args[:num_consts]), list(args[num_consts:])
    k = len(rest) // 2
    kind = op_kind(op, num_consts)
    return consts, rest[:k], rest[k:], None if kind is None else _NUMPY_MONOID[kind]


@reduce_p.def_impl("numpy")
def _reduce_impl(*args: Any, op: Program, num_consts: int) -> list[np.ndarray]:
    consts, acc, xs, ufunc = _split(args, op, num_consts)
    if ufunc is not None:
        # ufunc.reduce only takes a scalar `initial`: fold the neutral element in afterwards
        return [np.asarray(ufunc(acc[0], ufunc.reduce(xs[0], axis=0)) if xs[0].shape[0]
                           else acc[0], dtype=xs[0].dtype)]
    for i in range(xs[0].shape[0]):
        acc = evaluate(op, *consts, *acc, *(x[i] for x in xs))
    return [np.asarray(a) for a in acc]


@scan_p.def_impl("numpy")
def _scan_impl(*args: Any, op: Program, num_consts: int) -> list[np.ndarray]:
    consts, acc, xs, ufunc = _split(args, op, num_consts)
    if ufunc is not None:
        return [np.asarray(ufunc(acc[0], ufunc.accumulate(xs[0], axis=0)), dtype=xs[0].dtype)]
    n = xs[0].shape[0]
    outs = [np.empty_like(x) for x in xs]
    for i in range(n):
        acc = evaluate(op, *consts, *acc, *(x[i] for x in xs))
        for out, a in zip(outs, acc):
            out[i] = a
    return outs


# The operators a reduction can name; both operands are elements of one type, so the
# primitive applies as is (no promotion or broadcasting to insert).
_NAMED_OPERATORS = {"add": "add", "+": "add", "mul": "mul", "*": "mul", "max": "max",
                    "min": "min"}


def _op_function(op: str | Callable[..., Any]) -> Callable[..., Any]:
    if callable(op):
        return op
    if op not in _NAMED_OPERATORS:
        raise TypeCheckError(
            f"unknown operator {op!r}; use one of {sorted(_NAMED_OPERATORS)} or a function")
    primitive = PRIMITIVES[_NAMED_OPERATORS[op]]
    return lambda a, b: bind(primitive, a, b)


def _monoid(prim: Any, what: str, op: Any, neutral: Any, xs: Any) -> Any:
    neutral_leaves, tree = pytree.flatten(neutral)
    x_leaves, x_tree = pytree.flatten(xs)
    if x_tree != tree:
        raise TypeCheckError(f"{what}: the arrays must have the structure of the neutral element")
    arrays = [as_operand(x) for x in x_leaves]
    elements = [_element(value_type(x)) for x in arrays]
    neutral_leaves = [as_operand(v, e.dtype) for v, e in zip(neutral_leaves, elements)]
    for v, e in zip(neutral_leaves, elements):
        if value_type(v) != e:
            raise TypeCheckError(
                f"{what}: neutral element {value_type(v).short()} does not match the array "
                f"elements {e.short()}")
    fn = _op_function(op)
    k = len(arrays)

    def op_flat(*ab: Any) -> Any:
        return fn(pytree.unflatten(tree, list(ab[:k])), pytree.unflatten(tree, list(ab[k:])))

    body = trace_body(op_flat, elements + elements, scope=f"{what} operator",
                      allow_cell_writes=False)
    program, consts = close_body(body, leading=0)
    outs = bind(prim, *consts, *neutral_leaves, *arrays, op=program, num_consts=len(consts))
    return pytree.unflatten(tree, outs)


def reduce(op: str | Callable[..., Any], neutral: Any, xs: Any) -> Any:
    """Fold ``xs`` along its leading axis with an associative ``op`` and its neutral element.

    ``op`` is "add", "mul", "max", "min" or a function of two elements (trees like
    ``neutral``, so tuples of arrays reduce together).

    >>> import qdiff, qdiff.numpy as qnp
    >>> product = qdiff.trace(lambda x: qdiff.reduce("mul", 1.0, x), np.ones(3))
    >>> float(product(np.array([1., 2., 3.])))
    6.0
    """
    return _monoid(reduce_p, "reduce", op, neutral, xs)


def scan(op: str | Callable[..., Any], neutral: Any, xs: Any) -> Any:
    """Inclusive scan of ``xs`` with an associative ``op``: ``ys[i] = ys[i-1] op xs[i]``.

    >>> import qdiff, qdiff.numpy as qnp
    >>> prefix = qdiff.trace(lambda x: qdiff.scan("add", 0.0, x), np.ones(3))
    >>> prefix(np.array([1., 2., 3.])).tolist()
    [1.0, 3.0, 6.0]
    """
    return _monoid(scan_p, "scan", op, neutral, xs)


# ---------------------------------------------------------------------------------------- hist
def _indices_rule(indices: Type, values: Type, dest: Type, what: str) -> None:
    i, v, d = tensor(indices, "indices"), tensor(values, "values"), tensor(dest, "destination")
    if i.ndim != 1 or i.np_dtype.kind not in "iu":
        raise TypeCheckError(f"{what} indices must be a 1-d integer array, got {i.short()}")
    if d.ndim < 1:
        raise TypeCheckError(f"{what} destination must have a leading axis, got {d.short()}")
    same_dtype([d, v])
    if v.shape != (i.shape[0], *d.shape[1:]):
        raise TypeCheckError(
            f"{what} values {v.short()} must have shape {(i.shape[0], *d.shape[1:])} for "
            f"{i.short()} indices into {d.short()}")


def _hist_rule(*args: Type, op: Program, num_consts: int) -> tuple[Type, ...]:
    consts, (dest, neutral, indices, values) = args[:num_consts], args[num_consts:]
    _indices_rule(indices, values, dest, "hist")
    element = _element(dest)
    if neutral != element:
        raise TypeCheckError(f"neutral element {neutral.short()} must be {element.short()}")
    check_signature(op, (*consts, element, element), "hist operator", (element,))
    return (dest,)


hist_p = register_primitive("hist", _hist_rule, subprogram_params=("op",))


def _in_range(indices: np.ndarray, size: int) -> np.ndarray:
    return (indices >= 0) & (indices < size)


@hist_p.def_impl("numpy")
def _hist_impl(*args: Any, op: Program, num_consts: int) -> np.ndarray:
    consts, (dest, _neutral, indices, values) = args[:num_consts], args[num_consts:]
    result = np.array(dest)
    keep = _in_range(indices, dest.shape[0])
    indices, values = indices[keep], values[keep]
    kind = op_kind(op, num_consts)
    if kind is not None:
        _NUMPY_MONOID[kind].at(result, indices, values)
        return result
    for index, value in zip(indices, values):
        (result[index],) = evaluate(op, *consts, result[index], value)
    return result


def hist(dest: Any, op: str | Callable[..., Any], neutral: Any, indices: Any, values: Any) -> Any:
    """Reduce-by-index: ``dest[indices[i]] = op(dest[indices[i]], values[i])`` for every i.

    Indices outside ``[0, len(dest))`` are ignored. ``op`` must be associative and
    commutative with ``neutral`` as its identity.

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.trace(lambda v: qdiff.hist(qnp.zeros(3), "add", 0.0, np.array([0, 2, 0, 5]), v),
    ...                 np.ones(4))
    >>> f(np.array([1.0, 2.0, 3.0, 4.0])).tolist()
    [4.0, 0.0, 2.0]
    """
    dest, indices, values = as_operand(dest), as_operand(indices), as_operand(values)
    element = _element(value_type(dest))
    neutral = as_operand(neutral, element.dtype)
    fn = _op_function(op)
    body = trace_body(fn, [element, element], scope="hist operator", allow_cell_writes=False)
    program, consts = close_body(body, leading=0)
    return bind(hist_p, *consts, dest, neutral, indices, values, op=program,
                num_consts=len(consts))


# ------------------------------------------------------------------------------------- scatter
def _scatter_rule(dest: Type, indices: Type, values: Type) -> tuple[Type, ...]:
    _indices_rule(indices, values, dest, "scatter")
    return (dest,)


scatter_p = register_primitive("scatter", _scatter_rule)


@scatter_p.def_impl("numpy")
def _scatter_impl(dest: np.ndarray, indices: np.ndarray, values: np.ndarray) -> np.ndarray:
    result = np.array(dest)
    keep = np.flatnonzero(_in_range(indices, dest.shape[0]))
    # last write wins: keep the last occurrence of each index
    _, last = np.unique(indices[keep][::-1], return_index=True)
    chosen = keep[::-1][last]
    result[indices[chosen]] = values[chosen]
    return result


def scatter(dest: Any, indices: Any, values: Any) -> Any:
    """``dest`` with ``dest[indices[i]] = values[i]``; out-of-range indices are ignored.

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.trace(lambda d: qdiff.scatter(d, np.array([2, -1, 0]), np.array([7., 8., 9.])),
    ...                 np.zeros(3))
    >>> f(np.zeros(3)).tolist()
    [9.0, 0.0, 7.0]
    """
    dest, indices, values = (as_operand(x) for x in (dest, indices, values))
    return bind(scatter_p, dest, indices, values)
