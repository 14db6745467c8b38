"""The batching transformation of a program, an interpreter over the ``batch`` rules.

Every value of a batched program is either unbatched (one value shared by all members) or
carries the batch axis first: member ``b`` of a batched value ``x`` is ``x[b]``. A rule
(`def_batch`) receives an equation's operands with their flags and returns its outputs
with theirs; an equation with no batched operand is copied unchanged, so work that does
not depend on the batch is done once.

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x, w: qnp.sum(qnp.sin(x) * w), np.zeros(3), 2.0)
>>> batched = batch_program(p, [True, False], size=4)
>>> [t.short() for t in batched.in_types], batched.out_types[0].short()
(['f64[4,3]', 'f64[]'], 'f64[4]')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..classical.elementwise import select_p
from ..classical.shape import broadcast_in_dim_p, transpose_p
from ..classical.soacs import map as soac_map
from ..ir.core import Literal, Program, Var
from ..ir.errors import QdiffError
from ..ir.primitives import Primitive
from ..ir.tracer import as_operand, bind, record, trace, value_type
from ..ir.types import Tensor, Type

BatchRule = Callable[..., tuple[list[Any], list[bool]]]


def def_batch(primitive: Primitive, rule: BatchRule) -> None:
    """Register ``rule(values, batched, size, **params) -> (outputs, batched flags)``."""
    primitive.batch = rule


def leading_axes_rule(primitive: Primitive) -> BatchRule:
    """The rule of a one-operand primitive that treats leading axes as independent
    members already (`cholesky` on a stack of matrices, `stop_gradient`): applied as is."""
    def rule(values: list[Any], batched: list[bool], size: int,
             **params: Any) -> tuple[list[Any], list[bool]]:
        return [bind(primitive, *values, **params)], [True]

    return rule


def batched_type(t: Type, size: int) -> Type:
    """The type of ``size`` members of type ``t`` stacked on a leading axis.

    >>> batched_type(Tensor((3,), "float64"), 4).short()
    'f64[4,3]'
    """
    if not isinstance(t, Tensor):
        raise QdiffError(f"vmap cannot batch a {t.short()} value (only arrays have a batch axis)")
    return t.with_shape((size, *t.shape))


def member_shape(value: Any, batched: bool) -> tuple[int, ...]:
    """The shape of one member of ``value``."""
    shape = value_type(value).shape
    return shape[1:] if batched else shape


def materialize(value: Any, batched: bool, size: int) -> Any:
    """``value`` with a batch axis: as is when it has one, else repeated ``size`` times
    (recorded, never folded into a literal).

    >>> import numpy as np
    >>> materialize(np.array([1.0, 2.0]), False, 2).tolist()
    [[1.0, 2.0], [1.0, 2.0]]
    """
    if batched:
        return value
    value = as_operand(value)
    t = value_type(value)
    return record(broadcast_in_dim_p, value, shape=(size, *t.shape),
                  broadcast_dimensions=tuple(range(1, t.ndim + 1)))


def move_axis(value: Any, source: int, destination: int) -> Any:
    """``value`` with axis ``source`` moved to ``destination`` (a transpose; none when equal).

    >>> import numpy as np
    >>> move_axis(np.zeros((2, 3, 4)), 2, 0).shape
    (4, 2, 3)
    """
    ndim = value_type(value).ndim
    source, destination = source % ndim, destination % ndim
    if source == destination:
        return value
    perm = [a for a in range(ndim) if a != source]
    perm.insert(destination, source)
    return bind(transpose_p, value, perm=tuple(perm))


def where_members(pred: Any, on_true: Any, on_false: Any) -> Any:
    """Member by member, ``on_true[b] if pred[b] else on_false[b]``: ``pred`` is a batched
    bool scalar, the others batched values of one type."""
    shape = value_type(on_true).shape
    if len(shape) > 1:
        pred = bind(broadcast_in_dim_p, pred, shape=shape, broadcast_dimensions=(0,))
    return bind(select_p, pred, on_true, on_false)


def batch_eval(program: Program, values: Sequence[Any], batched: Sequence[bool],
               size: int) -> tuple[list[Any], list[bool]]:
    """Replay ``program`` into the current trace on batched ``values``; returns the outputs
    and which of them carry the batch axis."""
    env: dict[Var, tuple[Any, bool]] = {
        v: (x, bool(b)) for v, x, b in zip(program.inputs, values, batched)}

    def read(atom: Any) -> tuple[Any, bool]:
        return (atom.value, False) if isinstance(atom, Literal) else env[atom]

    for eqn in program.eqns:
        operands = [read(a) for a in eqn.inputs]
        args, flags = [x for x, _ in operands], [b for _, b in operands]
        if not any(flags):
            result = bind(eqn.primitive, *args, **eqn.params)
            outs = result if eqn.primitive.multiple_results else [result]
            out_flags = [False] * len(eqn.outputs)
        else:
            rule = eqn.primitive.batch
            if rule is None:
                raise QdiffError(f"vmap: primitive {eqn.primitive.name!r} has no batching rule")
            outs, out_flags = rule(args, flags, size, **eqn.params)
        env.update((v, (x, bool(b))) for v, x, b in zip(eqn.outputs, outs, out_flags))
    found = [read(a) for a in program.outputs]
    return [x for x, _ in found], [b for _, b in found]


def batch_subprogram(program: Program, batched: Sequence[bool], size: int,
                     force: Sequence[bool] | None = None) -> tuple[Program, list[bool]]:
    """``program`` batched for inputs flagged ``batched``, and which outputs come out
    batched on their own; outputs flagged in ``force`` are given the batch axis in any
    case (a loop's carry, say), the others are left as they come.

    The returned program's outputs are batched where either flag holds.

    >>> import qdiff
    >>> p = qdiff.trace(lambda x, c: (x * 2.0, c + 1.0), 0.0, 0.0)
    >>> batched, natural = batch_subprogram(p, [True, False], 3)
    >>> natural, [t.short() for t in batched.out_types]
    ([True, False], ['f64[3]', 'f64[]'])
    """
    natural: list[bool] = []
    types = [batched_type(t, size) if b else t for t, b in zip(program.in_types, batched)]

    def run(*args: Any) -> tuple:
        outs, flags = batch_eval(program, args, batched, size)
        natural[:] = flags
        wanted = force if force is not None else flags
        return tuple(materialize(x, b, size) if w else x
                     for x, b, w in zip(outs, flags, wanted))

    result = trace(run, *types, name=program.name)
    return result, natural


def batch_program(program: Program, batched: Sequence[bool], size: int) -> Program:
    """The batched form of ``program``: inputs flagged ``batched`` take ``size`` members
    stacked on a leading axis, and every output is returned with that axis first.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: x * x, 0.0)
    >>> batch_program(p, [True], 3)(np.array([1.0, 2.0, 3.0])).tolist()
    [1.0, 4.0, 9.0]
    """
    if len(batched) != len(program.inputs):
        raise QdiffError(f"{len(batched)} batch flags for the {len(program.inputs)} inputs of "
                         f"program {program.name!r}")
    result, _ = batch_subprogram(program, batched, size, force=[True] * len(program.outputs))
    return with_trees(result, program)


def with_trees(batched: Program, program: Program) -> Program:
    """``batched`` called and returning like ``program`` (the same argument and result
    structure, leaves batched)."""
    return Program(batched.inputs, batched.eqns, batched.outputs, name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)


def batched_fixed_point(bodies: Sequence[tuple[Program, Sequence[bool], int]],
                        carry: Sequence[bool], size: int) -> list[bool]:
    """Which loop carries are batched: those entering batched, and those a body makes
    batched from batched consts or carries (grown until nothing changes). Each body is
    ``(program, flags of the inputs before the carry, outputs before the carry)``."""
    flags = [bool(b) for b in carry]
    while True:
        grown = list(flags)
        for body, lead, skip in bodies:
            _, natural = batch_subprogram(body, [*lead, *flags], size)
            grown = [g or n for g, n in zip(grown, natural[skip:])]
        if grown == flags:
            return flags
        flags = grown


def per_member(primitive: Primitive, values: Sequence[Any], batched: Sequence[bool],
               size: int, **params: Any) -> tuple[list[Any], list[bool]]:
    """The rule of last resort: ``primitive`` applied to each member in turn, as a `map`
    over the batch axis of the batched operands (unbatched ones are read by every member)."""
    rows = [x for x, b in zip(values, batched) if b]

    def member(*row: Any) -> Any:
        taken = iter(row)
        args = [next(taken) if b else x for x, b in zip(values, batched)]
        out = bind(primitive, *args, **params)
        return tuple(out) if primitive.multiple_results else out

    outs = soac_map(member, *rows)
    outs = list(outs) if primitive.multiple_results else [outs]
    return outs, [True] * len(outs)
