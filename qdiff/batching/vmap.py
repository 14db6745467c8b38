"""`qdiff.vmap`: a function of one member turned into a function of a batch of members.

``vmap(f, in_axes, out_axes)`` traces ``f`` for one member (the arguments with their batch
axis removed), batches that program (`batch_program`: a rule per primitive, loops and
branches included), and calls it on the arguments with their batch axes moved first. It
is a `ProgramFunction`: ``.trace(*args)`` is the batched Program, and `grad`, `jacobian`,
`jit` and `vmap` itself take it like any function (per-example gradients are
``vmap(grad(f))``).

Programs run on a simulator as a whole (quantum programs, and their derivatives) are not
rewritten: called with concrete values, a batched run that a quantum back end registered
(`register_batched_runner`) takes them when it claims the program, and otherwise each
member runs on its own, one after the other. A `qdiff.map` whose body such a runner claims
(a circuit mapped over parameter rows) runs its rows through the same batched run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..autodiff.arguments import Function, as_closed_program, as_program, unflatten_outputs
from ..autodiff.nested_derivatives import DerivativeLayer
from ..autodiff.whole_program import rule_for
from ..classical import soacs
from ..ir import pytree
from ..ir.core import Program
from ..ir.errors import QdiffError
from ..ir.program_function import ProgramFunction, holds_tracer
from ..ir.tracer import as_operand, value_type
from ..ir.types import Tensor
from .interpreter import batch_eval, materialize, move_axis

Axes = int | None | Sequence[Any] | dict

# (claims(program, batched flags), run(program, flat member-first values, flags, size))
_BATCHED_RUNNERS: list[tuple[Callable[..., bool], Callable[..., list[Any]]]] = []


def register_batched_runner(claims: Callable[[Program, list[bool]], bool],
                            run: Callable[[Program, list[Any], list[bool], int], list[Any]]
                            ) -> None:
    """Run batches of a program that a whole-program rule claims (a quantum program) with
    ``run(program, values, batched, size) -> flat outputs, batch axis first`` when
    ``claims(program, batched)`` holds; the values carry their batch axis first where
    ``batched`` says so."""
    _BATCHED_RUNNERS.append((claims, run))


def claimed_runner(program: Program, flags: list[bool]) -> Callable[..., list[Any]] | None:
    """The registered batched run of ``program`` for these batched ``flags``, or None when
    no batched runner claims it (then its members run one by one)."""
    for claims, run in _BATCHED_RUNNERS:
        if claims(program, flags):
            return run
    return None


# `qdiff.map` over a body run on a simulator as a whole (a circuit) runs it as one batch
soacs.MAP_BODY_RUNNERS.append(claimed_runner)


# (claims(program, batched flags), run(program, values, flags, size, argnums) -> (value, grads))
_BATCHED_GRADIENTS: list[tuple[Callable[..., bool], Callable[..., tuple[Any, Any]]]] = []


def register_batched_gradient(claims: Callable[[Program, list[bool]], bool],
                              run: Callable[..., tuple[Any, Any]]) -> None:
    """Compute ``vmap(grad(f))`` and ``vmap(value_and_grad(f))`` of a program that a
    whole-program rule claims with ``run(program, values, batched, size, argnums) ->
    (values, gradients)``, batch axis first, when ``claims(program, batched)`` holds."""
    _BATCHED_GRADIENTS.append((claims, run))


def leaf_axes(axes: Axes, value: Any, what: str) -> list[int | None]:
    """The batch axis of each leaf of ``value``, from ``axes``: an int or None for every
    leaf, or a prefix of ``value``'s structure (tuples, lists, dicts) as in JAX.

    >>> leaf_axes((0, None), (np.zeros(2), {"a": 1.0, "b": 2.0}), "in_axes")
    [0, None, None]
    """
    if axes is None or (isinstance(axes, (int, np.integer)) and not isinstance(axes, bool)):
        return [None if axes is None else int(axes)] * len(pytree.flatten(value)[0])
    if isinstance(axes, (tuple, list)) and isinstance(value, (tuple, list)) \
            and len(axes) == len(value):
        return [a for sub, v in zip(axes, value) for a in leaf_axes(sub, v, what)]
    if isinstance(axes, dict) and isinstance(value, dict) and set(axes) == set(value):
        return [a for key in pytree.sorted_keys(value)
                for a in leaf_axes(axes[key], value[key], what)]
    shown = pytree.unflatten(pytree.flatten(value)[1], ["*"] * len(pytree.flatten(value)[0]))
    raise QdiffError(f"vmap: {what}={axes!r} is neither an int, None nor a prefix of the "
                     f"structure {shown!r} it applies to")


def _batch_size(leaves: list[Any], axes: list[int | None]) -> int:
    sizes = {}
    for k, (leaf, axis) in enumerate(zip(leaves, axes)):
        if axis is None:
            continue
        t = value_type(leaf)
        if not isinstance(t, Tensor) or not -t.ndim <= axis < t.ndim:
            raise QdiffError(f"vmap: in_axes gives argument leaf {k} ({t.short()}) the batch "
                             f"axis {axis}, which it does not have")
        sizes[k] = t.shape[axis]
    if not sizes:
        raise QdiffError("vmap needs at least one argument with a batch axis (in_axes is "
                         "None for all of them)")
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"leaf {k}: {n}" for k, n in sizes.items())
        raise QdiffError(f"vmap: the batch axes have different sizes ({shown})")
    return next(iter(sizes.values()))


def _member(leaf: Any, axis: int | None) -> Any:
    """An example value of one member of ``leaf`` (no memory spent on it)."""
    if axis is None:
        return leaf
    t = value_type(leaf)
    shape = t.shape[:axis % t.ndim] + t.shape[axis % t.ndim + 1:]
    return np.broadcast_to(np.zeros((), t.np_dtype), shape)


class VmappedFunction(ProgramFunction):
    """``f`` mapped over a batch axis of its arguments (see `vmap`)."""

    def __init__(self, f: Function, in_axes: Axes = 0, out_axes: Axes = 0):
        if not (isinstance(f, Program) or callable(f)):
            raise QdiffError(f"vmap: cannot batch {f!r}; pass a Program or a function")
        label = getattr(f, "name", None) or getattr(f, "__name__", "f")
        super().__init__(self._batched, f"vmap_{label}")
        self.source, self.in_axes, self.out_axes = f, in_axes, out_axes
        # plain functions read as programs when called, traced once per signature
        self._programs: dict[int, ProgramFunction] = {}

    def signature_source(self) -> Callable[..., Any] | None:
        source = self.source
        if isinstance(source, ProgramFunction):
            return source.signature_source()
        return None if isinstance(source, Program) else source

    def _split(self, args: tuple) -> tuple[list[Any], tuple, list[int | None], int, tuple]:
        """Leaves, tree, batch axes and size of ``args``, and one member's example args."""
        leaves, tree = pytree.flatten(tuple(args))
        axes = leaf_axes(tuple(self.in_axes) if isinstance(self.in_axes, list)
                         else self.in_axes, tuple(args), "in_axes")
        leaves = [leaf if axis is None else as_operand(leaf) for leaf, axis in zip(leaves, axes)]
        size = _batch_size(leaves, axes)
        members = pytree.unflatten(tree, [_member(x, a) for x, a in zip(leaves, axes)])
        return leaves, tree, axes, size, tuple(members)

    def _batched(self, *args: Any) -> Any:
        leaves, tree, axes, size, members = self._split(args)
        program, captured = as_closed_program(self.source, members)
        if rule_for(program) is not None:
            raise QdiffError(
                f"vmap of a {rule_for(program).name} program runs on the simulator when it is "
                "called with concrete values; it cannot be traced, nor differentiated from "
                "outside (use vmap(grad(f)) for each member's gradient)")
        skeleton = unflatten_outputs(program, list(range(len(program.outputs))))
        out_axes = leaf_axes(self.out_axes, skeleton, "out_axes")
        flags = [a is not None for a in axes] + [False] * len(captured)
        moved = [x if a is None else move_axis(x, a, 0) for x, a in zip(leaves, axes)]
        # replayed into this trace (not called as a program: calling would fold the
        # repeated constants of the batch into literals)
        outs, natural = batch_eval(program, [*moved, *captured], flags, size)
        for k, (axis, varies) in enumerate(zip(out_axes, natural)):
            if axis is None and varies:
                raise QdiffError(f"vmap: out_axes is None for output leaf {k}, but it differs "
                                 "from member to member")
        placed = [x if a is None else move_axis(materialize(x, b, size), 0, a)
                  for x, b, a in zip(outs, natural, out_axes)]
        return unflatten_outputs(program, placed)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = self.bind_arguments(args, kwargs)
        if not holds_tracer(args):
            whole = self._on_simulator(args)
            if whole is not None:
                return whole
        return super().__call__(*args)

    def _on_simulator(self, args: tuple) -> Any:
        """The batch run by a batched runner or member by member, when ``f`` is run on a
        simulator as a whole; None when it is rewritten like any program."""
        leaves, tree, axes, size, members = self._split(args)
        gradient = _gradient_layer(self.source)
        try:
            program = self._member_program(self.source if gradient is None
                                           else self.source.source, members)
        except QdiffError:
            program = None  # a derivative computed on a simulator has no program
        if program is not None and rule_for(program) is None:
            return None  # a classical program, or its derivative: rewritten
        flags = [a is not None for a in axes]
        moved = [np.moveaxis(np.asarray(x), a, 0) if a is not None else x
                 for x, a in zip(leaves, axes)]
        if program is not None and self.out_axes == 0:
            found = _batched_run(program, gradient, moved, flags, size)
            if found is not None:
                return found[0]
        return self._member_by_member(tree, moved, flags, size)

    def _member_program(self, fn: Function, members: tuple) -> Program:
        """``fn``'s program for one member (cached per signature)."""
        if isinstance(fn, (Program, ProgramFunction)) or not callable(fn):
            return as_program(fn, members)
        wrapped = self._programs.setdefault(id(fn), ProgramFunction(fn))
        return wrapped.trace(*members)

    def _member_by_member(self, tree: tuple, moved: list[Any], flags: list[bool],
                          size: int) -> Any:
        """``f`` called on each member in turn, the results stacked."""
        results = [self.source(*pytree.unflatten(tree, [x[b] if f else x
                                                        for x, f in zip(moved, flags)]))
                   for b in range(size)]
        first, out_tree = pytree.flatten(results[0])
        out_axes = leaf_axes(self.out_axes, results[0], "out_axes")
        stacked = []
        for k, axis in enumerate(out_axes):
            column = [np.asarray(pytree.flatten(r)[0][k]) for r in results]
            stacked.append(np.asarray(first[k]) if axis is None else np.stack(column, axis))
        return pytree.unflatten(out_tree, stacked)


def _gradient_layer(f: Any) -> DerivativeLayer | None:
    """The derivative ``f`` is when it is a gradient (``grad`` or ``value_and_grad``, whose
    batches a batched adjoint sweep may run), else None."""
    layer = getattr(f, "layer", None)
    return layer if layer is not None and layer.kind in ("grad", "value_and_grad") else None


def _batched_run(program: Program, gradient: DerivativeLayer | None, values: list[Any],
                 flags: list[bool], size: int) -> tuple[Any] | None:
    """``(result,)`` from a registered batched runner (or batched gradient, for a gradient's
    derivative layer), or None when none claims the program."""
    if gradient is None:
        run = claimed_runner(program, flags)
        if run is None:
            return None
        return (unflatten_outputs(program, run(program, values, flags, size)),)
    argnums, method, options = gradient.argnums, gradient.method, gradient.options
    with_value = gradient.kind == "value_and_grad"
    if method not in ("auto", "adjoint") or options:
        return None
    for claims, run in _BATCHED_GRADIENTS:
        if claims(program, flags):
            value, grads = run(program, values, flags, size, argnums)
            return ((value, grads) if with_value else grads,)
    return None


def vmap(f: Function, in_axes: Axes = 0, out_axes: Axes = 0) -> VmappedFunction:
    """``f`` mapped over a batch axis: ``vmap(f)(xs)[b] == f(xs[b])``, computed as one
    batched program rather than a Python loop.

    ``in_axes`` gives each argument's batch axis (an int, None for an argument shared by
    every member, or a prefix of the arguments' structure, as in JAX); ``out_axes`` where
    the batch axis goes in each output (None for an output that every member shares).
    Composes with `grad`, `jacobian`, `jit` and itself: ``vmap(grad(f))`` gives
    per-example gradients, ``grad(lambda w: sum(vmap(f)(w)))`` a batched loss's gradient.

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.vmap(lambda x, w: qnp.sum(x * w), in_axes=(0, None))
    >>> f(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([1.0, 10.0])).tolist()
    [21.0, 43.0]
    """
    return VmappedFunction(f, in_axes, out_axes)


__all__ = ["VmappedFunction", "claimed_runner", "leaf_axes", "register_batched_gradient",
           "register_batched_runner", "vmap"]
