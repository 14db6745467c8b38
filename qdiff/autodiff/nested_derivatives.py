"""Derivatives of derivatives of whole-program-rule programs, on concrete values, with jets.

A quantum program has no derivative Program (`qdiff.autodiff.whole_program`), so
``grad(grad(f))``, ``hessian(f)``, ``jacfwd(grad(f))`` or ``jvp(grad(f), …)`` cannot be
built by transforming one. They are evaluated instead: the program runs once per needed
direction in forward mode on jets (`qdiff.autodiff.jets`; the rule's ``taylor``
evaluator), and each derivative layer adds one generator: ``grad`` and ``jacobian`` seed
one input element at a time with a new generator ε_k and read the outputs' ε_k parts;
``jvp`` seeds the tangents; ``hessian`` seeds each pair of input elements once with two
generators (n(n+1)/2 runs for n elements). The layers compose, so any order is exact:
``jacfwd(grad(f))`` takes n² runs with two generators, a third derivative three
generators, and so on.

A *jet function* maps arguments whose leaves are jets (or plain values) to outputs whose
leaves are jets: the base one runs the program, `with_layer` wraps one derivative layer
around it.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> from qdiff.autodiff.whole_program import rule_for
>>> def f(t):
...     q = qm.qubits(1); qm.ry(t, q[0]); return qm.expval("Z", q)
>>> program = qdiff.trace(f, 0.3)
>>> base = base_jet_function(program, rule_for(program).taylor(program, "auto", {}))
>>> second = with_layer(with_layer(base, DerivativeLayer("grad", 0)), DerivativeLayer("grad", 0))
>>> bool(np.isclose(user_values(second((np.float64(0.3),))), -np.cos(0.3)))
True
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import pytree
from ..ir.core import Program
from ..ir.errors import QdiffError
from ..ir.interpreter import coerce_argument, to_user
from .arguments import unflatten_outputs
from .jets import Jet, derivative_along, order_of, primal, seeded
from .whole_program import WholeProgramRule

JetFunction = Callable[[tuple], Any]


@dataclass(frozen=True)
class DerivativeLayer:
    """One derivative transformation of a chain: ``kind`` (``"grad"``,
    ``"value_and_grad"``, ``"jacobian"`` or ``"hessian"``) with respect to ``argnums``, and
    the method and options it was given."""

    kind: str
    argnums: Any = 0
    method: str = "auto"
    options: dict = field(default_factory=dict, compare=False)
    holomorphic: bool = False


def base_jet_function(program: Program, evaluate: Callable[[list[Any]], list[Any]]
                      ) -> JetFunction:
    """The jet function of ``program`` run by ``evaluate`` (flat input jets to flat output
    jets: a whole-program rule's ``taylor`` evaluator).

    >>> import qdiff
    >>> program = qdiff.trace(lambda x: x * 2.0, 1.0)
    >>> base_jet_function(program, lambda leaves: [leaves[0] * 2.0])((3.0,))
    6.0
    """
    def run(args: tuple) -> Any:
        leaves, _ = pytree.flatten(tuple(args))
        return unflatten_outputs(program, evaluate(leaves))

    return run


def chain_function(program: Program, rule: WholeProgramRule,
                   layers: Sequence[DerivativeLayer]) -> tuple[JetFunction, Any]:
    """The jet function of derivative ``layers`` (outermost first) of ``program``, on its
    ``rule``'s ``taylor`` evaluator, and that evaluator (its ``report`` says what the runs
    left out). The layers' options go to the evaluator (inner ones win); a ``method`` other
    than ``"auto"`` on any layer is the evaluator's to accept or refuse.

    >>> import qdiff
    >>> from qdiff.autodiff.whole_program import rule_for
    >>> from qdiff.quantum.lang.examples import rotation
    >>> program = qdiff.trace(rotation, 0.3)
    >>> f, _ = chain_function(program, rule_for(program), [DerivativeLayer("hessian", 0)])
    >>> bool(np.isclose(user_values(f((np.float64(0.3),))), -np.cos(0.3)))
    True
    """
    if any(layer.holomorphic for layer in layers):
        raise QdiffError(f"holomorphic=True: {rule.name} programs have real arguments and "
                         "outputs")
    method = next((layer.method for layer in layers if layer.method != "auto"), "auto")
    options: dict = {}
    for layer in reversed(layers):
        options.update(layer.options)
    evaluator = rule.taylor(program, method, options)
    f = base_jet_function(program, evaluator)
    for layer in reversed(layers):
        f = with_layer(f, layer)
    return f, evaluator


def coerced_arguments(program: Program, args: tuple) -> tuple:
    """``args`` with their leaves converted as the program was traced for them.

    >>> import qdiff
    >>> coerced_arguments(qdiff.trace(lambda x: x * 2.0, np.zeros(2)), (np.arange(2),))[0].dtype
    dtype('float64')
    """
    leaves, tree = pytree.flatten(tuple(args))
    if len(leaves) != len(program.inputs):
        raise QdiffError(f"{program.name} takes {len(program.inputs)} input leaves, got "
                         f"{len(leaves)}")
    return pytree.unflatten(tree, [coerce_argument(program, i, leaf)
                                   for i, leaf in enumerate(leaves)])


def with_layer(f: JetFunction, layer: DerivativeLayer) -> JetFunction:
    """The jet function of ``layer`` applied to ``f``.

    >>> cube = lambda args: args[0] * args[0] * args[0]
    >>> float(with_layer(cube, DerivativeLayer("grad", 0))((np.float64(2.0),)))
    12.0
    """
    if layer.kind == "hessian":
        if not isinstance(layer.argnums, (int, np.integer)):
            raise QdiffError("hessian: argnums must be one int (one argument)")
        return lambda args: hessian_of(f, args, int(layer.argnums))
    if layer.kind not in ("grad", "value_and_grad", "jacobian"):
        raise QdiffError(f"{layer.kind} cannot be composed here")

    def derivative(args: tuple) -> Any:
        value, blocks, selection = derivative_blocks(f, args, layer.argnums, layer.kind)
        out_leaves, out_tree = pytree.flatten(value)
        if layer.kind == "jacobian":
            return pytree.unflatten(out_tree, [pytree.unflatten(selection, row)
                                               for row in blocks])
        if len(out_leaves) != 1 or np.shape(primal(out_leaves[0])) != ():
            raise QdiffError(f"{layer.kind} needs a function returning one float scalar")
        gradient = pytree.unflatten(selection, blocks[0])
        return (value, gradient) if layer.kind == "value_and_grad" else gradient

    return derivative


def argument_numbers(argnums: Any, count: int, what: str) -> tuple[tuple[int, ...], bool]:
    """``argnums`` as non-negative argument numbers, and whether it was one int.

    >>> argument_numbers(-1, 3, "grad"), argument_numbers((0, 2), 3, "grad")
    (((2,), True), ((0, 2), False))
    """
    single = isinstance(argnums, (int, np.integer))
    numbers = (int(argnums),) if single else tuple(int(a) for a in argnums)
    for a in numbers:
        if not -count <= a < count:
            raise QdiffError(f"{what}: argnums {a} is out of range for {count} argument(s)")
    return tuple(a % count for a in numbers), single


def next_bit(args: Any) -> int:
    """The first generator no leaf of ``args`` uses yet, as a one-bit mask.

    >>> next_bit((1.0,)), next_bit((Jet({0: 1.0, 2: 1.0}),))
    (1, 4)
    """
    leaves = pytree.flatten(args)[0]
    return 1 << order_of(m for leaf in leaves if isinstance(leaf, Jet) for m in leaf.parts)


def derivative_blocks(f: JetFunction, args: tuple, argnums: Any, what: str
                      ) -> tuple[Any, list[list[Any]], tuple]:
    """``f(args)`` and the derivative of each of its output leaves ``k`` with respect to each
    selected input leaf ``j``: ``blocks[k][j]`` of shape ``out_k.shape + in_j.shape`` (jets
    in the generators the arguments already carry), and the tree of the selection.

    >>> square = lambda args: args[0] * args[0]
    >>> value, blocks, _ = derivative_blocks(square, (np.array([1.0, 2.0]),), 0, "jacobian")
    >>> blocks[0][0].tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    args = tuple(args)
    numbers, single = argument_numbers(argnums, len(args), what)
    selected = args[numbers[0]] if single else tuple(args[a] for a in numbers)
    bit = next_bit(args)
    per_arg = [pytree.flatten(a) for a in args]
    value = None
    columns: list[list[list[Any]]] = []  # per selected leaf: per element, per output leaf
    shapes = []
    for a in numbers:
        leaves, tree = per_arg[a]
        for j, leaf in enumerate(leaves):
            base = np.asarray(primal(leaf))
            if base.dtype.kind != "f":
                raise QdiffError(f"{what}: argument {a} has a {base.dtype} leaf; only float "
                                 "arguments are differentiated here")
            shapes.append(base.shape)
            elements = []
            for index in np.ndindex(base.shape):
                moved = list(leaves)
                moved[j] = seeded(leaf, bit, _unit(base.shape, index))
                new_args = list(args)
                new_args[a] = pytree.unflatten(tree, moved)
                out = f(tuple(new_args))
                if value is None:
                    value = _without(out, bit)
                elements.append([derivative_along(o, bit) for o in pytree.flatten(out)[0]])
            columns.append(elements)
    if value is None:  # nothing to seed: the value alone
        value = f(args)
    out_leaves = pytree.flatten(value)[0]
    blocks = [[_stack(elements, k, np.shape(primal(out)), shape)
               for elements, shape in zip(columns, shapes)]
              for k, out in enumerate(out_leaves)]
    return value, blocks, pytree.flatten(selected)[1]


def hessian_of(f: JetFunction, args: tuple, argnum: int) -> Any:
    """The Hessian of the scalar ``f`` with respect to argument ``argnum``, one run with two
    new generators per pair of its elements (i ≤ j: n(n+1)/2 runs for n elements), shaped
    like ``jacobian(grad(f))``: the argument's structure of the argument's structure, block
    ``(j, k)`` of shape ``leaf_j.shape + leaf_k.shape``.

    >>> f = lambda args: args[0]["a"] * args[0]["a"] * args[0]["b"]
    >>> h = hessian_of(f, ({"a": np.float64(1.0), "b": np.float64(3.0)},), 0)
    >>> {row: {column: float(v) for column, v in h[row].items()} for row in h}
    {'a': {'a': 6.0, 'b': 2.0}, 'b': {'a': 2.0, 'b': 0.0}}
    """
    args = tuple(args)
    (argnum,), _ = argument_numbers(argnum, len(args), "hessian")
    leaves, tree = pytree.flatten(args[argnum])
    shapes = []
    for leaf in leaves:
        base = np.asarray(primal(leaf))
        if base.dtype.kind != "f":
            raise QdiffError(f"hessian: argument {argnum} has a {base.dtype} leaf; only float "
                             "arguments are differentiated here")
        shapes.append(base.shape)
    elements = [(j, index) for j, shape in enumerate(shapes) for index in np.ndindex(shape)]
    first = next_bit(args)
    second = first << 1
    entries: dict[tuple[int, int], Any] = {}
    for p, (jp, ip) in enumerate(elements):
        for q in range(p, len(elements)):
            jq, iq = elements[q]
            moved = list(leaves)
            moved[jp] = seeded(moved[jp], first, _unit(shapes[jp], ip))
            moved[jq] = seeded(moved[jq], second, _unit(shapes[jq], iq))
            new_args = list(args)
            new_args[argnum] = pytree.unflatten(tree, moved)
            out_leaves = pytree.flatten(f(tuple(new_args)))[0]
            if len(out_leaves) != 1 or np.shape(primal(out_leaves[0])) != ():
                raise QdiffError("hessian needs a function returning one float scalar")
            entries[p, q] = entries[q, p] = derivative_along(
                derivative_along(out_leaves[0], second), first)
    starts = np.cumsum([0] + [int(np.prod(shape, dtype=int)) for shape in shapes])
    rows = []
    for j, shape_j in enumerate(shapes):
        row = []
        for k, shape_k in enumerate(shapes):
            block = [entries[p, q] for p in range(starts[j], starts[j + 1])
                     for q in range(starts[k], starts[k + 1])]
            row.append(_array_of(block, shape_j + shape_k))
        rows.append(pytree.unflatten(tree, row))
    return pytree.unflatten(tree, rows)


def _unit(shape: tuple, index: tuple) -> np.ndarray:
    direction = np.zeros(shape)
    direction[index] = 1.0
    return direction


def _without(value: Any, bit: int) -> Any:
    """``value`` with the parts along generator ``bit`` left out."""
    leaves, tree = pytree.flatten(value)
    kept = []
    for leaf in leaves:
        if isinstance(leaf, Jet):
            parts = {m: v for m, v in leaf.parts.items() if not m & bit}
            leaf = Jet(parts) if len(parts) > 1 else parts[0]
        kept.append(leaf)
    return pytree.unflatten(tree, kept)


def _stack(elements: list[list[Any]], k: int, out_shape: tuple, in_shape: tuple) -> Any:
    """Output leaf ``k``'s derivatives along each input element as one block of shape
    ``out_shape + in_shape``."""
    stacked = _array_of([per_out[k] for per_out in elements], in_shape, out_shape)
    moved = tuple(range(len(in_shape)))
    to = tuple(range(len(out_shape), len(out_shape) + len(in_shape)))
    if isinstance(stacked, Jet):
        return stacked.map(lambda v: np.moveaxis(v, moved, to))
    return np.moveaxis(stacked, moved, to)


def _array_of(values: list[Any], shape: tuple, inner: tuple = ()) -> Any:
    """Values (jets or arrays, each of shape ``inner``), one per element of ``shape`` in C
    order, as one jet of shape ``shape + inner``."""
    masks = sorted({m for v in values if isinstance(v, Jet) for m in v.parts} | {0})
    parts = {}
    for mask in masks:
        rows = [np.asarray(v.part(mask) if isinstance(v, Jet) else
                           (v if mask == 0 else np.zeros_like(v))) for v in values]
        stacked = np.stack(rows) if rows else np.zeros((0, *inner))
        parts[mask] = stacked.reshape(shape + inner)
    return Jet(parts) if len(parts) > 1 else parts[0]


def jvp_of(f: JetFunction, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """``(f(primals), the derivative of f along tangents)`` as jets in the generators the
    primals already carry.

    >>> cube = lambda args: args[0] * args[0] * args[0]
    >>> [float(v) for v in jvp_of(cube, (np.float64(2.0),), (0.5,))]
    [8.0, 6.0]
    """
    leaves, tree = pytree.flatten(tuple(primals))
    tangent_leaves, tangent_tree = pytree.flatten(tuple(tangents))
    if tangent_tree != tree:
        raise QdiffError("jvp: the tangents must have the structure of the primals")
    bit = next_bit(tuple(primals))
    moved = [seeded(leaf, bit, t) if np.asarray(primal(leaf)).dtype.kind == "f" else leaf
             for leaf, t in zip(leaves, tangent_leaves)]
    out = f(tuple(pytree.unflatten(tree, moved)))
    out_leaves, out_tree = pytree.flatten(out)
    return (_without(out, bit),
            pytree.unflatten(out_tree, [derivative_along(o, bit) for o in out_leaves]))


def vjp_of(f: JetFunction, primals: Sequence[Any]) -> tuple[Any, Callable[[Any], tuple]]:
    """``(f(primals), vjp_fn)``: the Jacobian with respect to every float argument,
    contracted with the cotangent when ``vjp_fn`` is called.

    >>> cube = lambda args: args[0] * args[0] * args[0]
    >>> value, back = vjp_of(cube, (np.float64(2.0),))
    >>> float(value), float(back(2.0)[0])
    (8.0, 24.0)
    """
    primals = tuple(primals)
    floats = tuple(k for k, a in enumerate(primals)
                   if all(np.asarray(primal(leaf)).dtype.kind == "f"
                          for leaf in pytree.flatten(a)[0]))
    value, blocks, _ = derivative_blocks(f, primals, floats, "vjp")
    per_arg = [pytree.flatten(primals[a]) for a in floats]

    def vjp_fn(cotangent: Any) -> tuple:
        cts = [np.asarray(c) for c in pytree.flatten(cotangent)[0]]
        result: list[Any] = [None] * len(primals)
        start = 0
        for a, (leaves, tree) in zip(floats, per_arg):
            grads = []
            for j in range(len(leaves)):
                total = sum(np.tensordot(c, user_values(blocks[k][start + j]), axes=c.ndim)
                            for k, c in enumerate(cts))
                grads.append(np.asarray(total))
            start += len(leaves)
            result[a] = pytree.unflatten(tree, grads)
        return tuple(result)

    return user_values(value), vjp_fn


def user_values(value: Any) -> Any:
    """The values of a tree of jets, as the caller sees them (0-d arrays as scalars).

    >>> user_values((Jet({0: np.asarray(1.0), 1: np.asarray(2.0)}), [np.ones(1)]))
    (np.float64(1.0), [array([1.])])
    """
    leaves, tree = pytree.flatten(value)
    return pytree.unflatten(tree, [to_user(np.asarray(primal(leaf))) for leaf in leaves])
