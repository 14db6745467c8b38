"""Structured control flow shared by classical and quantum code: `loop`, `while`, `cond`.

Each is a primitive whose params hold closed sub-programs, and a combinator that traces
Python callables into them (`fori_loop`, `while_loop`, `cond`, `switch`). Values a body
reads from enclosing scopes become its consts; cells it writes (quantum registers) become
part of the carry automatically.

Program layouts:
- ``loop[body, num_consts](start, stop, *consts, *carry) -> carry``,
  ``body(i, *consts, *carry) -> carry``, for i = start .. stop-1. An optional
  ``inverse(i, *consts, *carry_out) -> carry_in`` (same inputs as the body) undoes step i;
  reverse mode then recomputes the carries backwards instead of storing them.
- ``while[cond, body, num_cond_consts, num_body_consts, max_iter](*cc, *bc, *carry) -> carry``,
  ``cond(*cc, *carry) -> (pred, *carry)`` (the test may update the carry, as a measurement
  does), ``body(*bc, *carry) -> carry``. With ``max_iter=T`` the loop aborts when the test
  still holds after T iterations. An optional ``inverse(*bc, *carry_out) -> carry_in``
  undoes the body, as for ``loop``.
- ``cond[branches](index, *operands) -> outs``; a bool index picks ``branches[1]`` when true;
  an int index is clamped to the branch range.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from . import pytree
from .errors import LoopLimitError, TypeCheckError
from .interpreter import evaluate
from .primitives import register_primitive
from .tracer import (
    TracedBody,
    Tracer,
    as_operand,
    bind,
    cell_outer_values,
    cells_written,
    close_bodies,
    close_body,
    trace_body,
    update_cells,
    user_location,
    value_type,
)
from .type_rules import check_signature, int_scalar
from .types import Bit, Tensor, Type

_NO_CARRY = object()


# ---------------------------------------------------------------------------------------- loop
def _check_checkpoint(checkpoint: Any) -> None:
    if checkpoint is not None and (not isinstance(checkpoint, int) or checkpoint < 1):
        raise TypeCheckError(f"checkpoint must be None or a positive int, got {checkpoint!r}")


def _loop_rule(start: Type, stop: Type, *args: Type, body: Any, num_consts: int,
               checkpoint: int | None = None, inverse: Any = None) -> tuple[Type, ...]:
    _check_checkpoint(checkpoint)
    index = int_scalar(start, "loop start")
    if int_scalar(stop, "loop stop") != index:
        raise TypeCheckError(f"loop bounds differ in type: {start.short()} and {stop.short()}")
    carry = args[num_consts:]
    check_signature(body, (index, *args), "loop body", carry)
    if inverse is not None:
        check_signature(inverse, (index, *args), "loop inverse", carry)
    return tuple(carry)


loop_p = register_primitive("loop", _loop_rule, multiple_results=True,
                            subprogram_params=("body", "inverse"))

# Derives the inverse of a loop body it proves invertible, or raises an error naming the
# update it cannot invert: ``derive(body, num_consts, leading) -> inverse`` (``leading``
# counts the inputs before the consts: 1 for a loop's index, 0 for a while body). Filled
# on import by `qdiff.loops.inversion` (the pass lives a layer above the IR).
LOOP_INVERTERS: list[Callable[[Any, int, int], Any]] = []


@loop_p.def_impl("numpy")
def _loop_impl(start: Any, stop: Any, *args: Any, body: Any, num_consts: int,
               checkpoint: int | None = None, inverse: Any = None) -> list[Any]:
    consts, carry = list(args[:num_consts]), list(args[num_consts:])
    dtype = np.asarray(start).dtype
    for i in range(int(start), int(stop)):
        carry = evaluate(body, np.asarray(i, dtype), *consts, *carry)
    return carry


def fori_loop(lower: Any, upper: Any, body_fun: Callable[..., Any],
              init_val: Any = _NO_CARRY, checkpoint: int | None = None,
              inverse: Callable[..., Any] | None = None, invertible: bool = False) -> Any:
    """A counted loop that stays a loop in the program: ``for i in range(lower, upper)``.

    ``body_fun(i, carry) -> carry`` with an explicit carry (any tree of arrays), or
    ``body_fun(i)`` when the loop only updates registers or cells, which are carried
    automatically. Bounds may be traced integers. ``checkpoint=k`` makes reverse mode
    keep about k·N^(1/k) carries instead of N (strip-mining, at most k+1 forward runs).
    ``inverse=inv`` with ``inv(i, carry_out) -> carry_in`` undoing step i, or
    ``invertible=True`` to have it derived from ``+=``/``-=``/``*=``/``/=`` updates
    (`qdiff.loops.inversion`), makes reverse mode recompute the carries backwards from the
    final one instead of storing any (reverse computing).

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: c * x + i, 1.0), 2.0)
    >>> float(f(2.0))  # ((1*2+0)*2+1)*2+2
    12.0
    """
    explicit = init_val is not _NO_CARRY
    leaves, carry_tree = pytree.flatten(init_val if explicit else None)
    leaves = [as_operand(v) for v in leaves]
    carry_types = [value_type(v) for v in leaves]
    index_type = Tensor((), "int64")

    def body_flat(i: Any, *carry: Any) -> Any:
        if explicit:
            return body_fun(i, pytree.unflatten(carry_tree, list(carry)))
        body_fun(i)
        return None

    body = trace_body(body_flat, [index_type, *carry_types], scope="body")
    _check_carry(body, carry_tree, carry_types, "fori_loop body")
    cells = cells_written([body])
    options: dict[str, Any] = {} if checkpoint is None else {"checkpoint": checkpoint}
    (program, undo), consts = _close_with_inverse(body, inverse, invertible, explicit, cells,
                                                  carry_tree, carry_types, "fori_loop", 1)
    if undo is not None:
        options["inverse"] = undo
    start, stop = (_as_index(b, "fori_loop bound") for b in (lower, upper))
    outs = bind(loop_p, start, stop, *consts, *leaves, *cell_outer_values(cells),
                body=program, num_consts=len(consts), **options)
    update_cells(cells, outs[len(leaves):])
    return pytree.unflatten(carry_tree, outs[:len(leaves)]) if explicit else None


def _close_with_inverse(body: TracedBody, inverse: Callable[..., Any] | None,
                        invertible: bool, explicit: bool, cells: Sequence[Any],
                        carry_tree: tuple, carry_types: Sequence[Type], what: str,
                        leading: int) -> tuple[tuple[Any, Any], list[Any]]:
    """Close a loop body, with the inverse given (traced over the same consts) or derived
    (``invertible``): ``((body, inverse or None), consts)``."""
    if inverse is None and not invertible:
        program, consts = close_body(body, leading=leading, carry_cells=cells)
        return (program, None), consts
    if not explicit or cells or not all(isinstance(t, Tensor) for t in carry_types):
        raise TypeCheckError(
            f"{what} inverse=/invertible=True needs a loop over an explicit carry of arrays "
            "(quantum registers and cells are uncomputed by the adjoint method already) "
            f"(at {user_location()})")
    if inverse is None:
        program, consts = close_body(body, leading=leading)
        if not LOOP_INVERTERS:
            raise TypeCheckError("invertible=True needs the inversion pass: import qdiff")
        return (program, LOOP_INVERTERS[0](program, len(consts), leading)), consts

    def inverse_flat(*args: Any) -> Any:
        return inverse(*args[:leading], pytree.unflatten(carry_tree, list(args[leading:])))

    index = [Tensor((), "int64")] * leading
    undo = trace_body(inverse_flat, [*index, *carry_types], scope="inverse",
                      allow_cell_writes=False)
    _check_carry(undo, carry_tree, carry_types, f"{what} inverse")
    (program, undo_program), consts = close_bodies([body, undo], leading=leading)
    return (program, undo_program), consts


# --------------------------------------------------------------------------------------- while
def _predicate(t: Type, what: str) -> None:
    if isinstance(t, Bit):
        return
    if not (isinstance(t, Tensor) and t.shape == () and t.dtype == "bool"):
        raise TypeCheckError(f"{what} must be a bool scalar or a measured bit, got {t.short()}")


def _while_rule(*args: Type, cond: Any, body: Any, num_cond_consts: int,
                num_body_consts: int, max_iter: int | None,
                checkpoint: int | None = None, inverse: Any = None) -> tuple[Type, ...]:
    _check_checkpoint(checkpoint)
    cc = args[:num_cond_consts]
    bc = args[num_cond_consts:num_cond_consts + num_body_consts]
    carry = args[num_cond_consts + num_body_consts:]
    if not cond.out_types:
        raise TypeCheckError("while cond must return the predicate and the carry")
    _predicate(cond.out_types[0], "while predicate")
    check_signature(cond, (*cc, *carry), "while cond", (cond.out_types[0], *carry))
    check_signature(body, (*bc, *carry), "while body", carry)
    if inverse is not None:
        check_signature(inverse, (*bc, *carry), "while inverse", carry)
    if max_iter is not None and (not isinstance(max_iter, int) or max_iter < 0):
        raise TypeCheckError(f"max_iter must be None or a non-negative int, got {max_iter!r}")
    return tuple(carry)


while_p = register_primitive("while", _while_rule, multiple_results=True,
                             subprogram_params=("cond", "body", "inverse"))


# A classical while loop without max_iter stops with an error after this many iterations
# instead of hanging; reverse mode sizes its buffers by the same number (loops.reversal).
UNBOUNDED_WHILE_LIMIT = 2 ** 20


@while_p.def_impl("numpy")
def _while_impl(*args: Any, cond: Any, body: Any, num_cond_consts: int, num_body_consts: int,
                max_iter: int | None, checkpoint: int | None = None,
                inverse: Any = None) -> list[Any]:
    cc = list(args[:num_cond_consts])
    bc = list(args[num_cond_consts:num_cond_consts + num_body_consts])
    carry = list(args[num_cond_consts + num_body_consts:])
    iterations = 0
    limit = UNBOUNDED_WHILE_LIMIT if max_iter is None else max_iter
    while True:
        pred, *carry = evaluate(cond, *cc, *carry)
        if not bool(pred):
            return carry
        if iterations >= limit:
            raise LoopLimitError(
                f"while loop still running after max_iter={max_iter} iterations"
                if max_iter is not None else
                f"while loop still running after {limit} iterations with no max_iter: it may "
                "never end; pass max_iter= to bound it (or allow more rounds)")
        carry = evaluate(body, *bc, *carry)
        iterations += 1


def while_loop(cond_fun: Callable[..., Any], body_fun: Callable[..., Any],
               init_val: Any = _NO_CARRY, max_iter: int | None = None,
               checkpoint: int | None = None, inverse: Callable[..., Any] | None = None,
               invertible: bool = False) -> Any:
    """A loop with a data-dependent trip count: ``while cond_fun(carry): carry = body_fun(carry)``.

    With no ``init_val``, both functions take no arguments and the carry is the registers
    and cells they update: the test may itself be a measurement. ``max_iter=T`` bounds the
    loop: a run whose test still holds after T iterations aborts (an error for classical
    code; dropped probability mass for quantum programs). Reverse mode keeps the carries
    of the iterations in buffers sized by ``max_iter`` (``qdiff.loops.reversal``), split
    into ``checkpoint`` levels; ``inverse=undo`` (``undo(carry_out) -> carry_in``) or
    ``invertible=True`` makes it store none, as for `fori_loop`.

    >>> import qdiff, qdiff.numpy as qnp
    >>> halve = qdiff.trace(lambda x: qdiff.while_loop(lambda v: v > 1.0, lambda v: v / 2, x), 1.0)
    >>> float(halve(10.0))
    0.625
    """
    explicit = init_val is not _NO_CARRY
    leaves, carry_tree = pytree.flatten(init_val if explicit else None)
    leaves = [as_operand(v) for v in leaves]
    carry_types = [value_type(v) for v in leaves]

    def unflat(carry: Sequence[Any]) -> list[Any]:
        return [pytree.unflatten(carry_tree, list(carry))] if explicit else []

    def cond_flat(*carry: Any) -> Any:
        return (_as_predicate(cond_fun(*unflat(carry))), *carry)

    def body_flat(*carry: Any) -> Any:
        result = body_fun(*unflat(carry))
        return result if explicit else None

    cond_body = trace_body(cond_flat, carry_types, scope="cond")
    body = trace_body(body_flat, carry_types, scope="body")
    _check_carry(body, carry_tree, carry_types, "while_loop body")
    cells = cells_written([cond_body, body])
    cond_program, cond_consts = close_body(cond_body, leading=0, carry_cells=cells)
    (body_program, undo), body_consts = _close_with_inverse(
        body, inverse, invertible, explicit, cells, carry_tree, carry_types, "while_loop", 0)
    options: dict[str, Any] = {} if checkpoint is None else {"checkpoint": checkpoint}
    if undo is not None:
        options["inverse"] = undo
    outs = bind(while_p, *cond_consts, *body_consts, *leaves, *cell_outer_values(cells),
                cond=cond_program, body=body_program, num_cond_consts=len(cond_consts),
                num_body_consts=len(body_consts), max_iter=max_iter, **options)
    update_cells(cells, outs[len(leaves):])
    return pytree.unflatten(carry_tree, outs[:len(leaves)]) if explicit else None


# ---------------------------------------------------------------------------------------- cond
def _cond_rule(index: Type, *operands: Type, branches: tuple) -> tuple[Type, ...]:
    if not branches:
        raise TypeCheckError("cond needs at least one branch")
    if isinstance(index, Bit) or (isinstance(index, Tensor) and index.dtype == "bool"):
        _predicate(index, "cond predicate")
        if len(branches) != 2:
            raise TypeCheckError(
                f"a bool predicate selects between 2 branches, not {len(branches)}")
    else:
        int_scalar(index, "cond index")
    outs = branches[0].out_types
    for k, branch in enumerate(branches):
        check_signature(branch, operands, f"branch {k}", outs)
    return tuple(outs)


cond_p = register_primitive("cond", _cond_rule, multiple_results=True,
                            subprogram_params=("branches",))


@cond_p.def_impl("numpy")
def _cond_impl(index: Any, *operands: Any, branches: tuple) -> list[Any]:
    k = int(np.clip(int(index), 0, len(branches) - 1))
    return evaluate(branches[k], *operands)


def switch(index: Any, branches: Sequence[Callable[..., Any]], *operands: Any) -> Any:
    """Run ``branches[index](*operands)``; the index is clamped into range.

    Every branch must return the same structure and types. Registers and cells written by
    any branch are carried out of all of them.

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.trace(lambda k, x: qdiff.switch(k, [qnp.sin, qnp.cos, qnp.exp], x), 0, 0.0)
    >>> [float(f(k, 0.0)) for k in (0, 1, 2)]
    [0.0, 1.0, 1.0]
    """
    return _branch(as_operand(index), list(branches), operands, "switch")


def cond(pred: Any, true_fun: Callable[..., Any], false_fun: Callable[..., Any],
         *operands: Any) -> Any:
    """``true_fun(*operands) if pred else false_fun(*operands)``, with both branches traced.

    ``pred`` is a traced bool scalar or a measured bit. A concrete Python bool simply runs
    the chosen branch.

    >>> import qdiff, qdiff.numpy as qnp
    >>> f = qdiff.trace(lambda x: qdiff.cond(x > 0, lambda v: v, lambda v: -v, x), 1.0)
    >>> float(f(-3.0))
    3.0
    """
    if isinstance(pred, (bool, np.bool_)):
        return (true_fun if pred else false_fun)(*operands)
    return _branch(_as_predicate(pred), [false_fun, true_fun], operands, "cond")


def _branch(index: Any, funs: list[Callable[..., Any]], operands: Sequence[Any], what: str) -> Any:
    leaves, in_tree = pytree.flatten(tuple(operands))
    leaves = [as_operand(v) for v in leaves]
    types = [value_type(v) for v in leaves]
    bodies = [trace_body(fn, types, in_tree=in_tree, scope="branch") for fn in funs]
    first = bodies[0]
    for k, body in enumerate(bodies[1:], start=1):
        if body.out_tree != first.out_tree or body.out_types != first.out_types:
            raise TypeCheckError(
                f"{what}: branch {k} returns {_describe(body)} but branch 0 returns "
                f"{_describe(first)}; all branches must return the same structure and types "
                f"(at {user_location()})")
    cells = cells_written(bodies)
    programs, consts = close_bodies(bodies, leading=0, carry_cells=cells)
    # consts come first in every branch, then the operands: reorder to (index, consts, ops)
    outs = bind(cond_p, index, *consts, *leaves, *cell_outer_values(cells),
                branches=tuple(programs))
    n_out = len(first.outputs)
    update_cells(cells, outs[n_out:])
    return pytree.unflatten(first.out_tree, outs[:n_out])


# ------------------------------------------------------------------------------------- helpers
def _as_index(value: Any, what: str) -> Any:
    value = as_operand(value)
    t = value_type(value)
    if not (isinstance(t, Tensor) and t.shape == () and t.np_dtype.kind in "iu"):
        raise TypeCheckError(f"{what} must be an integer scalar, got {t.short()}")
    return as_operand(value, np.int64)


def _as_predicate(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)):
        return np.asarray(value)
    if isinstance(value, Tracer):
        return value
    array = np.asarray(value)
    if array.shape != () or array.dtype != bool:
        raise TypeCheckError(f"a predicate must be a bool scalar, got {array.dtype}{array.shape}")
    return array


def _check_carry(body: TracedBody, carry_tree: tuple, carry_types: list[Type], what: str) -> None:
    if body.out_tree != carry_tree:
        raise TypeCheckError(
            f"{what} returns a carry structured as "
            f"{pytree.unflatten(body.out_tree, ['*'] * len(body.outputs))!r}, but the carry "
            f"entered as {pytree.unflatten(carry_tree, ['*'] * len(carry_types))!r} "
            f"(at {user_location()})")
    for k, (got, want) in enumerate(zip(body.out_types, carry_types)):
        if got != want:
            raise TypeCheckError(
                f"{what} returns {got.short()} for carry element {k}, which entered the loop "
                f"as {want.short()}; a carry keeps its shape and dtype (at {user_location()})")


def _describe(body: TracedBody) -> str:
    shown = pytree.unflatten(body.out_tree, [t.short() for t in body.out_types])
    return repr(shown).replace("'", "")


# ------------------------------------------------------------------------------- layouts
# For passes that follow values into sub-programs: how each structural equation's operands
# map onto its sub-programs' inputs, and which sub-program outputs loop back into the carry.
def sub_programs(eqn: Any) -> Iterator[tuple[str, int, Any, list[int | None]]]:
    """``(param, branch, program, operand of each sub-program input)`` for a ``loop``,
    ``while`` or ``cond`` equation (branch -1 for non-branch params); ``None`` marks an input
    that is no operand (a loop's index). Other equations yield nothing.

    >>> import qdiff
    >>> p = qdiff.trace(lambda x: qdiff.fori_loop(0, 2, lambda i, c: c * x, 1.0), 2.0)
    >>> [(key, operands) for key, _, _, operands in sub_programs(p.eqns[0])]
    [('body', [None, 2, 3])]
    """
    name, p = eqn.primitive.name, eqn.params
    if name == "loop":
        yield "body", -1, p["body"], [None, *range(2, len(eqn.inputs))]
    elif name == "while":
        cc, bc = p["num_cond_consts"], p["num_body_consts"]
        carry = list(range(cc + bc, len(eqn.inputs)))
        yield "cond", -1, p["cond"], [*range(cc), *carry]
        yield "body", -1, p["body"], [*range(cc, cc + bc), *carry]
    elif name == "cond":
        for b, branch in enumerate(p["branches"]):
            yield "branches", b, branch, list(range(1, len(eqn.inputs)))


def carried_outputs(eqn: Any, key: str, program: Any = None) -> list[tuple[int, int]]:
    """``(sub-program output, operand)`` pairs of a loop's ``key`` sub-program that feed
    the next iteration's carry (none for ``cond``)."""
    name = eqn.primitive.name
    if name not in ("loop", "while"):
        return []
    first = len(eqn.inputs) - len(eqn.outputs)
    skip = 1 if (name == "while" and key == "cond") else 0  # the predicate comes first
    return [(skip + m, first + m) for m in range(len(eqn.outputs))]
