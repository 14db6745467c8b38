"""The reference interpreter: runs a program on NumPy, one primitive implementation at a time.

`eval_program` walks a program with any per-equation `apply` function; evaluation passes the
primitive's implementation, and inlining (calling a program while tracing another) passes
`bind`. Control-flow implementations call back into `evaluate` for their sub-programs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from . import pytree
from .core import Literal, Program, Var
from .errors import QdiffError
from .primitives import Primitive
from .tracer import Tracer, bind
from .types import Tensor

Apply = Callable[[Primitive, list[Any], dict], Any]


def eval_program(program: Program, args: Sequence[Any], apply: Apply) -> list[Any]:
    """Walk ``program`` on ``args`` (flat), applying each equation with ``apply``."""
    if len(args) != len(program.inputs):
        raise QdiffError(
            f"program {program.name!r} takes {len(program.inputs)} inputs, got {len(args)}")
    env: dict[Var, Any] = dict(zip(program.inputs, args))

    def read(atom: Any) -> Any:
        return atom.value if isinstance(atom, Literal) else env[atom]

    for eqn in program.eqns:
        result = apply(eqn.primitive, [read(a) for a in eqn.inputs], dict(eqn.params))
        outputs = result if eqn.primitive.multiple_results else (result,)
        env.update(zip(eqn.outputs, outputs))
    return [read(a) for a in program.outputs]


def evaluate(program: Program, *args: Any, backend: str = "numpy") -> list[Any]:
    """Run ``program`` on flat concrete ``args`` and return the flat list of outputs.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.exp(x), 0.0)
    >>> [float(v) for v in evaluate(p, np.float64(0.0))]
    [1.0]
    """

    def apply(primitive: Primitive, values: list[Any], params: dict) -> Any:
        return primitive.impl(backend)(*values, **params)

    return eval_program(program, args, apply)


def inline(program: Program, args: Sequence[Any]) -> list[Any]:
    """Replay ``program`` into the program being traced now (calling a program inside a trace)."""
    return eval_program(program, args, lambda p, values, params: bind(p, *values, **params))


# Programs that need another interpreter than `evaluate` (quantum programs, whose
# measurements branch) are claimed by a runner registered by their front end.
_RUNNERS: list[tuple[Callable[[Program], bool], Callable[..., Any]]] = []


def register_runner(claims: Callable[[Program], bool], run: Callable[..., Any]) -> None:
    """Route calls of programs for which ``claims(program)`` holds to ``run(program, args,
    backend)``, which returns the flat outputs or their structured value."""
    _RUNNERS.append((claims, run))


def argument_leaves(program: Program, args: Sequence[Any]) -> list[Any]:
    """The flat inputs of ``program`` for the arguments it is called with, or a clear error
    when they are not structured like the arguments it was traced for.

    >>> import qdiff
    >>> p = qdiff.trace(lambda x, y: x * y, 1.0, 2.0)
    >>> argument_leaves(p, (3.0,))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    qdiff.ir.errors.QdiffError: program '<lambda>' takes 2 argument(s) ... (f64[], f64[]); got 1 ...
    """
    inputs = ", ".join(v.type.short() for v in program.inputs)
    if program.in_tree is not None:
        leaves, in_tree = pytree.flatten(tuple(args))
        if in_tree != program.in_tree:
            raise QdiffError(
                f"program {program.name!r} takes {len(program.in_tree[1])} argument(s) "
                f"structured as {_describe_tree(program.in_tree)} ({inputs}); got "
                f"{len(args)} structured as {_describe_tree(in_tree)}")
    else:
        leaves = list(args)
    if len(leaves) != len(program.inputs):
        raise QdiffError(f"program {program.name!r} takes {len(program.inputs)} array "
                         f"input(s) ({inputs}); got {len(leaves)}")
    return leaves


# Back ends other than the interpreter that run whole classical programs (the compiler
# registers "numba"), and the one calls use when they name none.
_EXECUTORS: dict[str, Callable[[Program, list[Any]], list[Any]]] = {}
_DEFAULT_BACKEND = ["numpy"]


def register_executor(backend: str, run: Callable[[Program, list[Any]], list[Any]]) -> None:
    """Run classical programs called with ``backend=backend`` through ``run(program,
    flat_values) -> flat_outputs``."""
    _EXECUTORS[backend] = run


@contextmanager
def default_backend(backend: str) -> Iterator[None]:
    """Run program calls that name no back end on ``backend`` inside the block.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: x + 1.0, 0.0)
    >>> with default_backend("numpy"):
    ...     float(p(1.0))
    2.0
    """
    if backend != "numpy" and backend not in _EXECUTORS:
        raise QdiffError(f"unknown back end {backend!r}; known: numpy, {', '.join(_EXECUTORS)}")
    _DEFAULT_BACKEND.append(backend)
    try:
        yield
    finally:
        _DEFAULT_BACKEND.pop()


def runner_for(program: Program) -> Callable[..., Any] | None:
    """The runner that claims ``program`` (see `register_runner`), or None."""
    return next((run for claims, run in _RUNNERS if claims(program)), None)


def call_program(program: Program, args: Sequence[Any], backend: str | None = None) -> Any:
    """Call ``program`` like the Python function it was traced from, on ``backend``
    (default: the interpreter, or the back end set by `default_backend`)."""
    chosen = backend or _DEFAULT_BACKEND[-1]
    leaves = argument_leaves(program, args)
    if any(isinstance(leaf, Tracer) for leaf in leaves):
        outputs = inline(program, leaves)
    else:
        values = [coerce_argument(program, i, leaf) for i, leaf in enumerate(leaves)]
        for claims, run in _RUNNERS:
            if claims(program):
                return run(program, values, backend or "numpy")
        run = _EXECUTORS.get(chosen)
        flat = run(program, values) if run else evaluate(program, *values, backend=chosen)
        outputs = [to_user(v) for v in flat]
    if program.out_tree is None:
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    return pytree.unflatten(program.out_tree, outputs)


def _call(self: Program, *args: Any, backend: str | None = None) -> Any:
    """Run the program on ``args`` (arrays or tracers, nested like the traced function's
    arguments) on ``backend``."""
    return call_program(self, args, backend=backend)


Program.__call__ = _call  # type: ignore[method-assign]


def coerce_argument(program: Program, index: int, value: Any) -> Any:
    """Argument ``index`` as the array the program was traced for (its shape checked, its
    dtype converted where that loses nothing)."""
    expected = program.inputs[index].type
    if not isinstance(expected, Tensor):
        return value
    array = np.asarray(value)
    if array.shape != expected.shape:
        raise QdiffError(
            f"argument {index} of program {program.name!r} has shape {array.shape}, but the "
            f"program was traced for {expected.short()}; trace it again for this shape")
    if array.dtype != expected.np_dtype:
        if not np.can_cast(array.dtype, expected.np_dtype, casting="same_kind"):
            raise QdiffError(
                f"argument {index} of program {program.name!r} has dtype {array.dtype}, "
                f"which does not convert safely to {expected.dtype}")
        array = array.astype(expected.np_dtype)
    return array


def to_user(value: Any) -> Any:
    """A result as the caller sees it: 0-d arrays as NumPy scalars."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value[()]
    return value


def _describe_tree(treedef: tuple) -> str:
    return repr(pytree.unflatten(treedef, ["*"] * pytree.num_leaves(treedef)))
