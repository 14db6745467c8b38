"""The differentiation API: `jvp`, `vjp`, `grad`, `value_and_grad`, `jacobian`, `hessian`.

Each accepts a `Program`, a `qdiff.program` function or a plain Python function. Given a
Program, `grad`, `value_and_grad`, `jacobian` and `hessian` return a new Program (print it,
save it with ``to_json``, run it); given a function, they return a `ProgramFunction` that
traces per argument signature (its ``.trace(*args)`` is the derivative Program).
Transformations compose: ``grad(grad(f))``, ``jvp`` of a ``vjp``.

>>> import qdiff, qdiff.numpy as qnp
>>> df = qdiff.grad(lambda x: qnp.sum(qnp.sin(x)))
>>> df(np.array([0.0, np.pi])).tolist()
[1.0, -1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from . import numpy as qnp
from .api import ProgramFunction
from .autodiff import control_flow_rules  # noqa: F401  (rules of loop, while, cond)
from .autodiff.forward import jvp_program
from .autodiff.reverse import vjp_program
from .autodiff.tangents import is_differentiable
from .classical.soacs import map as soac_map
from .ir import pytree
from .ir.core import Program
from .ir.errors import QdiffError
from .ir.interpreter import call_program, inline
from .ir.passes import simplify
from .ir.tracer import trace
from .ir.types import Tensor

Function = Program | ProgramFunction | Callable[..., Any]
ArgNums = int | Sequence[int]


# ------------------------------------------------------------------------ programs and args
def as_program(f: Function, args: Sequence[Any]) -> Program:
    """``f`` as a Program traced at ``args`` (a Program is returned as is)."""
    if isinstance(f, Program):
        return f
    if isinstance(f, ProgramFunction):
        return f.trace(*args)
    if not callable(f):
        raise QdiffError(f"cannot differentiate {f!r}: pass a Program or a function")
    return trace(f, *args)


def _arg_trees(program: Program) -> list[tuple]:
    if program.in_tree is None:
        return [pytree.LEAF] * len(program.inputs)
    return list(program.in_tree[1])


def _leaf_ranges(program: Program) -> list[range]:
    ranges, start = [], 0
    for tree in _arg_trees(program):
        count = pytree.num_leaves(tree)
        ranges.append(range(start, start + count))
        start += count
    return ranges


def _argnum_tuple(argnums: ArgNums, program: Program, what: str) -> tuple[int, ...]:
    numbers = (argnums,) if isinstance(argnums, (int, np.integer)) else tuple(argnums)
    count = len(_arg_trees(program))
    for k in numbers:
        if not -count <= k < count:
            raise QdiffError(f"{what}: argnums {k} is out of range for {count} arguments")
    return tuple(int(k) % count for k in numbers)


def _wrt_flags(program: Program, argnums: tuple[int, ...], what: str) -> list[bool]:
    flags = [False] * len(program.inputs)
    for k in argnums:
        for leaf in _leaf_ranges(program)[k]:
            t = program.inputs[leaf].type
            if not is_differentiable(t):
                raise QdiffError(
                    f"{what}: argument {k} holds a {t.short()} value; only float and complex "
                    "arguments can be differentiated (pass argnums to pick others)")
            flags[leaf] = True
    return flags


def _wrt_tree(program: Program, argnums: ArgNums, numbers: tuple[int, ...]) -> tuple:
    trees = [_arg_trees(program)[k] for k in numbers]
    return trees[0] if isinstance(argnums, (int, np.integer)) else ("tuple", tuple(trees))


def _example_args(program: Program) -> list[Any]:
    if program.in_tree is None:
        return list(program.in_types)
    return list(pytree.unflatten(program.in_tree, list(program.in_types)))


def _scalar_output(program: Program, what: str) -> None:
    outs = program.out_types
    if len(outs) != 1 or not isinstance(outs[0], Tensor) or outs[0].shape != () \
            or not is_differentiable(outs[0]):
        shown = ", ".join(t.short() for t in outs)
        raise QdiffError(f"{what} needs a function returning one float scalar, got ({shown}); "
                         "use jacobian or vjp for other outputs")


def _function_or_program(f: Function, build: Callable[[Program], Program], name: str) -> Any:
    if isinstance(f, Program):
        return build(f)

    def transformed(*args: Any) -> Any:
        return call_program(build(as_program(f, args)), args)

    return ProgramFunction(transformed, name=f"{name}_{getattr(f, '__name__', 'f')}")


# --------------------------------------------------------------------------------- gradients
def grad_program(program: Program, argnums: ArgNums = 0, has_value: bool = False) -> Program:
    """The gradient of a scalar-valued ``program`` as a Program taking the same arguments.

    Returns the gradient with the structure of the argument (a tuple of them when
    ``argnums`` is a tuple); with ``has_value``, the pair ``(value, gradient)``.
    """
    what = "value_and_grad" if has_value else "grad"
    _scalar_output(program, what)
    numbers = _argnum_tuple(argnums, program, what)
    flags = _wrt_flags(program, numbers, what)
    backward = vjp_program(program, flags, with_primal=has_value)
    tree = _wrt_tree(program, argnums, numbers)
    seed = np.ones((), program.out_types[0].np_dtype)

    def gradient(*args: Any) -> Any:
        outs = inline(backward, [*pytree.flatten(tuple(args))[0], seed])
        grads = pytree.unflatten(tree, outs[1:] if has_value else outs)
        return (outs[0], grads) if has_value else grads

    return simplify(trace(gradient, *_example_args(program), name=f"{what}_{program.name}"))


def grad(f: Function, argnums: ArgNums = 0) -> Any:
    """The gradient of a scalar function with respect to argument(s) ``argnums``.

    >>> import qdiff, qdiff.numpy as qnp
    >>> g = qdiff.grad(lambda x, y: qnp.sum(x * y), argnums=(0, 1))
    >>> [a.tolist() for a in g(np.array([1.0, 2.0]), np.array([3.0, 4.0]))]
    [[3.0, 4.0], [1.0, 2.0]]
    """
    return _function_or_program(f, lambda p: grad_program(p, argnums), "grad")


def value_and_grad(f: Function, argnums: ArgNums = 0) -> Any:
    """``(f(*args), grad(f)(*args))`` in one program (one forward and one reverse sweep).

    >>> import qdiff, qdiff.numpy as qnp
    >>> value, g = qdiff.value_and_grad(lambda x: x ** 3)(2.0)
    >>> float(value), float(g)
    (8.0, 12.0)
    """
    return _function_or_program(f, lambda p: grad_program(p, argnums, has_value=True),
                                "value_and_grad")


# ------------------------------------------------------------------------------- jvp and vjp
def jvp(f: Function, primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    """Forward mode: ``(f(*primals), J·tangents)``, with tangents shaped like the primals.

    >>> import qdiff, qdiff.numpy as qnp
    >>> out, tangent = qdiff.jvp(qnp.sin, (0.0,), (2.0,))
    >>> float(out), float(tangent)
    (0.0, 2.0)
    """
    program = as_program(f, tuple(primals))
    flat_primals, in_tree = pytree.flatten(tuple(primals))
    flat_tangents, tangent_tree = pytree.flatten(tuple(tangents))
    if tangent_tree != in_tree:
        raise QdiffError("jvp: the tangents must have the structure of the primals")
    flags = [is_differentiable(t) for t in program.in_types]
    forward = jvp_program(program, flags)
    supplied = [t for t, flag in zip(flat_tangents, flags) if flag]
    outs = _call_flat(forward, [*flat_primals, *supplied])
    n_out = len(program.outputs)
    out_tangents = iter(outs[n_out:])
    tangent_outs = [next(out_tangents) if is_differentiable(a.type) else None
                    for a in program.outputs]
    return _unflatten_outputs(program, outs[:n_out]), _unflatten_outputs(program, tangent_outs)


def vjp(f: Function, *primals: Any) -> tuple[Any, Callable[[Any], tuple]]:
    """Reverse mode: ``(f(*primals), vjp_fn)`` with ``vjp_fn(cotangent)`` returning one
    cotangent per argument (shaped like it; None for non-float arguments).

    >>> import qdiff, qdiff.numpy as qnp
    >>> out, back = qdiff.vjp(lambda x: x * x, np.array([1.0, 2.0]))
    >>> back(np.array([1.0, 1.0]))[0].tolist()
    [2.0, 4.0]
    """
    program = as_program(f, primals)
    flat_primals, in_tree = pytree.flatten(tuple(primals))
    flags = [is_differentiable(t) for t in program.in_types]
    backward = vjp_program(program, flags)
    n_out = len(program.outputs)
    ct_slots = [k for k, a in enumerate(program.outputs) if is_differentiable(a.type)]
    value = _unflatten_outputs(program, _call_flat(program, flat_primals))

    def vjp_fn(cotangent: Any) -> tuple:
        leaves = _output_leaves(program, cotangent)
        outs = _call_flat(backward, [*flat_primals, *(leaves[k] for k in ct_slots)])
        cts = iter(outs[n_out:])
        flat = [next(cts) if flag else None for flag in flags]
        return tuple(pytree.unflatten(in_tree, flat))

    return value, vjp_fn


def _call_flat(program: Program, leaves: list[Any]) -> list[Any]:
    bare = Program(program.inputs, program.eqns, program.outputs, name=program.name)
    result = call_program(bare, leaves)
    return list(result) if len(program.outputs) != 1 else [result]


def _unflatten_outputs(program: Program, leaves: list[Any]) -> Any:
    if program.out_tree is None:
        return leaves[0] if len(leaves) == 1 else tuple(leaves)
    return pytree.unflatten(program.out_tree, leaves)


def _output_leaves(program: Program, value: Any) -> list[Any]:
    if program.out_tree is None:
        return list(value) if len(program.outputs) > 1 else [value]
    leaves, tree = pytree.flatten(value)
    if tree != program.out_tree:
        raise QdiffError("vjp: the cotangent must have the structure of the function's output")
    return leaves


# --------------------------------------------------------------------------------- jacobians
def jacobian_program(program: Program, argnums: ArgNums = 0, mode: str = "reverse") -> Program:
    """The Jacobian of a one-output ``program`` as a Program: for each differentiated
    argument leaf, an array of shape ``output.shape + leaf.shape``.

    ``mode="reverse"`` maps a VJP over the rows of the identity (one per output element);
    ``mode="forward"`` maps a JVP over its columns (one per input element).
    """
    if mode not in ("reverse", "forward"):
        raise QdiffError(f"jacobian: mode must be 'reverse' or 'forward', got {mode!r}")
    if len(program.outputs) != 1 or not is_differentiable(program.out_types[0]):
        raise QdiffError("jacobian needs a function returning one float array, got "
                         f"({', '.join(t.short() for t in program.out_types)})")
    numbers = _argnum_tuple(argnums, program, "jacobian")
    flags = _wrt_flags(program, numbers, "jacobian")
    out_type = program.out_types[0]
    wrt = [k for k, flag in enumerate(flags) if flag]
    wrt_types = [program.in_types[k] for k in wrt]
    sizes = [t.size for t in wrt_types]
    tree = _wrt_tree(program, argnums, numbers)
    eye_out = np.eye(out_type.size, dtype=out_type.np_dtype)
    eye_in = np.eye(sum(sizes), dtype=out_type.np_dtype)

    def jac(*args: Any) -> Any:
        leaves = pytree.flatten(tuple(args))[0]
        if mode == "reverse":
            backward = vjp_program(program, flags, with_primal=False)

            def row(ct: Any) -> Any:
                cts = inline(backward, [*leaves, qnp.reshape(ct, out_type.shape)])
                return qnp.concatenate([qnp.reshape(c, (-1,)) for c in cts])

            matrix = soac_map(row, eye_out)                      # (outputs, inputs)
        else:
            forward = jvp_program(program, flags)

            def column(t: Any) -> Any:
                parts = _split(t, wrt_types)
                outs = inline(forward, [*leaves, *parts])
                return qnp.reshape(outs[1], (-1,))

            matrix = qnp.transpose(soac_map(column, eye_in))     # (outputs, inputs)
        blocks = _split_columns(matrix, wrt_types, out_type.shape)
        return pytree.unflatten(tree, blocks)

    return simplify(trace(jac, *_example_args(program), name=f"jacobian_{program.name}"))


def _split(vector: Any, types: list[Tensor]) -> list[Any]:
    parts, start = [], 0
    for t in types:
        parts.append(qnp.reshape(vector[start:start + t.size], t.shape))
        start += t.size
    return parts


def _split_columns(matrix: Any, types: list[Tensor], out_shape: tuple[int, ...]) -> list[Any]:
    blocks, start = [], 0
    for t in types:
        blocks.append(qnp.reshape(matrix[:, start:start + t.size], (*out_shape, *t.shape)))
        start += t.size
    return blocks


def jacobian(f: Function, argnums: ArgNums = 0, mode: str = "reverse") -> Any:
    """The Jacobian of ``f``: shape ``output.shape + argument.shape``.

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.jacobian(lambda x: x * x)(np.array([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    """
    return _function_or_program(f, lambda p: jacobian_program(p, argnums, mode), "jacobian")


def jacfwd(f: Function, argnums: ArgNums = 0) -> Any:
    """The Jacobian by forward mode (one JVP per input element).

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.jacfwd(lambda x: x[::-1])(np.array([1.0, 2.0])).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    return jacobian(f, argnums, mode="forward")


def jacrev(f: Function, argnums: ArgNums = 0) -> Any:
    """The Jacobian by reverse mode (one VJP per output element).

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.jacrev(lambda x: qnp.sum(x) * x)(np.array([1.0, 2.0])).tolist()
    [[4.0, 1.0], [2.0, 5.0]]
    """
    return jacobian(f, argnums, mode="reverse")


def hessian(f: Function, argnums: int = 0) -> Any:
    """The Hessian of a scalar function: forward mode over reverse mode.

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 3.0])).tolist()
    [[6.0, 2.0], [2.0, 0.0]]
    """
    if not isinstance(argnums, (int, np.integer)):
        raise QdiffError("hessian: argnums must be one int (one argument)")

    def build(program: Program) -> Program:
        return jacobian_program(grad_program(program, argnums), argnums, mode="forward")

    return _function_or_program(f, build, "hessian")
