"""The differentiation API: `jvp`, `vjp`, `grad`, `value_and_grad`, `jacobian`, `hessian`.

Each accepts a `Program`, a `qdiff.program` function or a plain Python function. Given a
Program, `grad`, `value_and_grad`, `jacobian` and `hessian` return a new Program (print it,
save it with ``to_json``, run it); given a function, they return a `ProgramFunction` that
traces per argument signature (its ``.trace(*args)`` is the derivative Program).
Transformations compose: ``grad(grad(f))``, ``jvp`` of a ``vjp``.

Before differentiating, the program goes through `fuse_elementwise`: each chain of
elementwise operations becomes one `map`, whose derivative is again one map (one pass over
the elements, not one per operation). ``fuse=False`` on any transformation, or
``FUSE_ELEMENTWISE = False`` here for all of them, differentiates the program as traced.

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
from .autodiff.forward import jvp_program
from .autodiff.reverse import vjp_program
from .autodiff.tangents import is_differentiable
from .classical.soacs import map as soac_map
from .ir import pytree
from .ir.core import Program
from .ir.errors import QdiffError
from .ir.interpreter import call_program, inline
from .ir.passes import fuse_elementwise, simplify
from .ir.tracer import Tracer, trace
from .ir.types import Tensor
from .loops import control_flow_rules  # noqa: F401  (rules of loop, while, cond)

Function = Program | ProgramFunction | Callable[..., Any]
ArgNums = int | Sequence[int]

# Whether transformations fuse elementwise chains before differentiating (when their
# ``fuse`` argument is None, the default).
FUSE_ELEMENTWISE = True


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


def to_differentiate(program: Program, fuse: bool | None = None) -> Program:
    """The program the transformations differentiate: ``program`` with its elementwise
    chains fused into maps, unless ``fuse`` (default `FUSE_ELEMENTWISE`) is False.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.exp(qnp.sin(x)), np.zeros(3))
    >>> [e.primitive.name for e in to_differentiate(p).eqns]
    ['map']
    >>> [e.primitive.name for e in to_differentiate(p, fuse=False).eqns]
    ['sin', 'exp']
    """
    enabled = FUSE_ELEMENTWISE if fuse is None else fuse
    return fuse_elementwise(program) if enabled else program


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
    shown = ", ".join(t.short() for t in outs)
    if len(outs) != 1 or not isinstance(outs[0], Tensor) or outs[0].shape != () \
            or not is_differentiable(outs[0]):
        raise QdiffError(f"{what} needs a function returning one float scalar, got ({shown}); "
                         "use jacobian or vjp for other outputs")
    if outs[0].np_dtype.kind == "c":
        raise QdiffError(f"{what} needs a real-valued function, got ({shown}); for a complex "
                         "output use jacobian(..., holomorphic=True), jvp or vjp")


def _function_or_program(f: Function, build: Callable[[Program], Program], name: str,
                         quantum: Callable[[Program, tuple], Any] | None = None) -> Any:
    """``build`` applied to ``f``'s program; programs with quantum operations go to
    ``quantum(program, args)`` instead (their derivatives run on the branching simulator)."""
    if isinstance(f, Program):
        if quantum is not None and _is_quantum(f):
            return lambda *args: quantum(f, args)
        return build(f)

    def transformed(*args: Any) -> Any:
        return call_program(build(as_program(f, args)), args)

    label = f"{name}_{getattr(f, '__name__', 'f')}"
    if quantum is None:
        return ProgramFunction(transformed, name=label)
    return _QuantumAware(transformed, label, lambda args: as_program(f, args), quantum)


class _QuantumAware(ProgramFunction):
    """A transformed function that runs the quantum derivative when ``f`` is quantum."""

    def __init__(self, fn: Callable, name: str, source: Callable[[tuple], Program],
                 quantum: Callable[[Program, tuple], Any]):
        super().__init__(fn, name)
        self.source, self.quantum = source, quantum

    def __call__(self, *args: Any) -> Any:
        if not any(isinstance(leaf, Tracer) for leaf in pytree.flatten(tuple(args))[0]):
            program = self.source(args)
            if _is_quantum(program):
                return self.quantum(program, args)
        return super().__call__(*args)


def _is_quantum(program: Program) -> bool:
    from .quantum.execution.runner import needs_runner

    return needs_runner(program)


def _classical_options(method: str, options: dict) -> None:
    """Quantum-only options must not be silently ignored on a classical program."""
    if method != "auto" or options:
        given = ", ".join([f"method={method!r}"] * (method != "auto") + sorted(options))
        raise QdiffError(f"{given}: options of quantum gradients; this program has no quantum "
                         "operations (its gradient is the classical reverse mode)")


def _quantum_gradient(argnums: ArgNums, method: str, options: dict) -> Callable:
    def run(program: Program, args: tuple) -> Any:
        from .quantum.gradients.gradient import gradient

        return gradient(program, *args, argnums=argnums, method=method, **options)

    return run


# --------------------------------------------------------------------------------- gradients
def grad_program(program: Program, argnums: ArgNums = 0, has_value: bool = False,
                 fuse: bool | None = None) -> Program:
    """The gradient of a scalar-valued ``program`` as a Program taking the same arguments.

    Returns the gradient with the structure of the argument (a tuple of them when
    ``argnums`` is a tuple); with ``has_value``, the pair ``(value, gradient)``. ``fuse``:
    see `to_differentiate`.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: qnp.sum(qnp.exp(qnp.sin(x))), np.zeros(3))
    >>> g = grad_program(p)
    >>> [e.primitive.name for e in g.eqns], g(np.zeros(3)).tolist()
    (['map'], [1.0, 1.0, 1.0])
    """
    what = "value_and_grad" if has_value else "grad"
    _scalar_output(program, what)
    numbers = _argnum_tuple(argnums, program, what)
    flags = _wrt_flags(program, numbers, what)
    backward = vjp_program(to_differentiate(program, fuse), flags, with_primal=has_value)
    tree = _wrt_tree(program, argnums, numbers)
    seed = np.ones((), program.out_types[0].np_dtype)

    def gradient(*args: Any) -> Any:
        outs = inline(backward, [*pytree.flatten(tuple(args))[0], seed])
        grads = pytree.unflatten(tree, outs[1:] if has_value else outs)
        return (outs[0], grads) if has_value else grads

    return simplify(trace(gradient, *_example_args(program), name=f"{what}_{program.name}"))


def grad(f: Function, argnums: ArgNums = 0, fuse: bool | None = None, method: str = "auto",
         **options: Any) -> Any:
    """The gradient of a scalar function with respect to argument(s) ``argnums``.

    >>> import qdiff, qdiff.numpy as qnp
    >>> g = qdiff.grad(lambda x, y: qnp.sum(x * y), argnums=(0, 1))
    >>> [a.tolist() for a in g(np.array([1.0, 2.0]), np.array([3.0, 4.0]))]
    [[3.0, 4.0], [1.0, 2.0]]
    """
    quantum = _quantum_gradient(argnums, method, options)
    def build(program: Program) -> Program:
        _classical_options(method, options)
        return grad_program(program, argnums, fuse=fuse)

    return _function_or_program(f, build, "grad", lambda p, args: quantum(p, args).grad)


def value_and_grad(f: Function, argnums: ArgNums = 0, fuse: bool | None = None,
                   method: str = "auto", **options: Any) -> Any:
    """``(f(*args), grad(f)(*args))`` in one program (one forward and one reverse sweep).

    >>> import qdiff, qdiff.numpy as qnp
    >>> value, g = qdiff.value_and_grad(lambda x: x ** 3)(2.0)
    >>> float(value), float(g)
    (8.0, 12.0)
    """
    quantum = _quantum_gradient(argnums, method, options)

    def both(program: Program, args: tuple) -> Any:
        result = quantum(program, args)
        return result.value, result.grad

    def build(program: Program) -> Program:
        _classical_options(method, options)
        return grad_program(program, argnums, has_value=True, fuse=fuse)

    return _function_or_program(f, build, "value_and_grad", both)


# ------------------------------------------------------------------------------- jvp and vjp
def jvp(f: Function, primals: Sequence[Any], tangents: Sequence[Any],
        fuse: bool | None = None, method: str = "auto", **options: Any) -> tuple[Any, Any]:
    """Forward mode: ``(f(*primals), J·tangents)``, with tangents shaped like the primals.

    A quantum program's JVP contracts its Jacobian (`qdiff.quantum.jacobian`, by
    ``method``, default adjoint) with the tangents.

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
    if _is_quantum(program):
        return _quantum_jvp(program, flat_primals, flat_tangents, flags, method, options)
    _classical_options(method, options)
    forward = jvp_program(to_differentiate(program, fuse), flags)
    supplied = [t for t, flag in zip(flat_tangents, flags) if flag]
    outs = _call_flat(forward, [*flat_primals, *supplied])
    n_out = len(program.outputs)
    out_tangents = iter(outs[n_out:])
    tangent_outs = [next(out_tangents) if is_differentiable(a.type) else None
                    for a in program.outputs]
    return _unflatten_outputs(program, outs[:n_out]), _unflatten_outputs(program, tangent_outs)


def vjp(f: Function, *primals: Any, fuse: bool | None = None, method: str = "auto",
        **options: Any) -> tuple[Any, Callable[[Any], tuple]]:
    """Reverse mode: ``(f(*primals), vjp_fn)`` with ``vjp_fn(cotangent)`` returning one
    cotangent per argument (shaped like it; None for non-float arguments). A quantum
    program's ``vjp_fn`` runs one reverse sweep of one recorded run per cotangent with the
    adjoint method, or the derivative ``method`` (and its options) of `qdiff.quantum.gradient`.

    >>> import qdiff, qdiff.numpy as qnp
    >>> out, back = qdiff.vjp(lambda x: x * x, np.array([1.0, 2.0]))
    >>> back(np.array([1.0, 1.0]))[0].tolist()
    [2.0, 4.0]
    """
    program = as_program(f, primals)
    flat_primals, in_tree = pytree.flatten(tuple(primals))
    flags = [is_differentiable(t) for t in program.in_types]
    if _is_quantum(program):
        return _quantum_vjp(program, primals, flags, method, options)
    _classical_options(method, options)
    backward = vjp_program(to_differentiate(program, fuse), flags)
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


def _quantum_vjp(program: Program, primals: tuple, flags: list[bool], method: str,
                 options: dict) -> tuple[Any, Callable[[Any], tuple]]:
    from .quantum.gradients.adjoint import RecordedRun
    from .quantum.gradients.gradient import gradient

    flat_primals, in_tree = pytree.flatten(tuple(primals))
    argnums = tuple(range(len(primals)))
    if method in ("auto", "adjoint") and not options:
        run = RecordedRun(program, flat_primals)
        value = _unflatten_outputs(program, run.values)

        def flat_vjp(cotangent: Any) -> list[Any]:
            return run.vjp(_output_leaves(program, cotangent))
    else:
        value = None

        def flat_vjp(cotangent: Any) -> list[Any]:
            result = gradient(program, *primals, argnums=argnums, method=method,
                              cotangent=tuple(_output_leaves(program, cotangent)), **options)
            return pytree.flatten(result.grad)[0]

    def quantum_vjp(cotangent: Any) -> tuple:
        flat = flat_vjp(cotangent)
        return tuple(pytree.unflatten(in_tree, [g if flag else None
                                                for g, flag in zip(flat, flags)]))

    if value is None:
        from .quantum.execution.runner import run as run_quantum

        value = run_quantum(program, *primals).values
    return value, quantum_vjp


def _quantum_jvp(program: Program, flat_primals: list[Any], flat_tangents: list[Any],
                 flags: list[bool], method: str, options: dict) -> tuple[Any, Any]:
    # J·t, one row of the Jacobian per output element (the reverse sweep per row)
    from .quantum.gradients.gradient import jacobian_rows

    value, rows = jacobian_rows(program, flat_primals, method=method, **options)
    tangents = [np.asarray(t, np.float64) if flag else None
                for t, flag in zip(flat_tangents, flags)]
    outs = []
    for k, out_type in enumerate(program.out_types):
        out = np.zeros(out_type.shape)
        for index in np.ndindex(out_type.shape):
            out[index] = sum(float(np.vdot(row, t)) for row, t in zip(rows[k][index], tangents)
                             if t is not None and row is not None)
        outs.append(out)
    return _unflatten_outputs(program, value), _unflatten_outputs(program, outs)


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
def jacobian_program(program: Program, argnums: ArgNums = 0, mode: str = "reverse",
                     holomorphic: bool = False, fuse: bool | None = None) -> Program:
    """The Jacobian of ``program`` as a Program taking the same arguments.

    The result has the structure of the output, each output leaf replaced by the Jacobians
    of that leaf with respect to the differentiated arguments (structured like them, a
    tuple of them when ``argnums`` is a tuple); the block of output leaf k and argument
    leaf j has shape ``out_k.shape + in_j.shape``, as in JAX. ``mode="reverse"`` maps a VJP
    over the rows of the identity (one per output element); ``mode="forward"`` maps a JVP
    over its columns (one per input element).

    Complex values: forward mode takes real arguments, reverse mode real outputs (its rows
    are gradients, ``∂f/∂x + i ∂f/∂y`` for an argument ``x + iy``); with ``holomorphic=True``
    arguments and outputs are all complex and both modes give the complex derivative
    ``∂f/∂z`` of a holomorphic function.

    >>> import qdiff, qdiff.numpy as qnp
    >>> p = qdiff.trace(lambda x: {"sq": x * x, "sum": qnp.sum(x)}, np.zeros(2))
    >>> jac = jacobian_program(p)(np.array([1.0, 3.0]))
    >>> jac["sq"].tolist(), jac["sum"].tolist()
    ([[2.0, 0.0], [0.0, 6.0]], [1.0, 1.0])
    """
    if mode not in ("reverse", "forward"):
        raise QdiffError(f"jacobian: mode must be 'reverse' or 'forward', got {mode!r}")
    out_types = list(program.out_types)
    if not out_types:
        raise QdiffError("jacobian needs a function with at least one output")
    for k, t in enumerate(out_types):
        if not is_differentiable(t):
            raise QdiffError(f"jacobian: output {k} is {t.short()}; only float and complex "
                             "outputs have Jacobians")
    numbers = _argnum_tuple(argnums, program, "jacobian")
    flags = _wrt_flags(program, numbers, "jacobian")
    wrt_types = [t for t, flag in zip(program.in_types, flags) if flag]
    _check_complex(out_types, wrt_types, mode, holomorphic)
    primal = to_differentiate(program, fuse)
    tree = _wrt_tree(program, argnums, numbers)
    out_dtype = np.result_type(*(t.np_dtype for t in out_types))
    in_dtype = np.result_type(*(t.np_dtype for t in wrt_types))
    eye_out = np.eye(sum(t.size for t in out_types), dtype=out_dtype)
    eye_in = np.eye(sum(t.size for t in wrt_types), dtype=in_dtype)

    def jac(*args: Any) -> Any:
        leaves = pytree.flatten(tuple(args))[0]
        if mode == "reverse":
            backward = vjp_program(primal, flags, with_primal=False)

            def row(ct: Any) -> Any:
                cts = inline(backward, [*leaves, *_split(ct, out_types)])
                return _flat_concat(cts, in_dtype)

            matrix = soac_map(row, eye_out)                      # (outputs, inputs)
            if holomorphic:  # a row is conj(∂f_i/∂z)
                matrix = qnp.conj(matrix)
        else:
            forward = jvp_program(primal, flags)

            def column(t: Any) -> Any:
                outs = inline(forward, [*leaves, *_split(t, wrt_types)])
                return _flat_concat(outs[len(out_types):], out_dtype)

            matrix = qnp.transpose(soac_map(column, eye_in))     # (outputs, inputs)
        per_output, start = [], 0
        for t in out_types:
            rows = matrix[start:start + t.size]
            per_output.append(pytree.unflatten(tree, _split_columns(rows, wrt_types, t)))
            start += t.size
        return _unflatten_outputs(program, per_output)

    return simplify(trace(jac, *_example_args(program), name=f"jacobian_{program.name}"))


def _check_complex(out_types: list[Tensor], wrt_types: list[Tensor], mode: str,
                   holomorphic: bool) -> None:
    def complex_(t: Tensor) -> bool:
        return t.np_dtype.kind == "c"

    if holomorphic:
        real = [t.short() for t in (*out_types, *wrt_types) if not complex_(t)]
        if real:
            raise QdiffError("jacobian(holomorphic=True) needs complex arguments and outputs, "
                             f"got {', '.join(real)}")
    elif mode == "forward" and any(complex_(t) for t in wrt_types):
        raise QdiffError("jacobian: forward mode needs real arguments (a complex argument "
                         "has two real directions); use mode='reverse' for a real output, "
                         "or holomorphic=True")
    elif mode == "reverse" and any(complex_(t) for t in out_types):
        raise QdiffError("jacobian: reverse mode needs real outputs (a complex output has "
                         "two real components); use mode='forward' for real arguments, "
                         "or holomorphic=True")


def _cast(value: Any, dtype: np.dtype) -> Any:
    if value.dtype == dtype:
        return value
    if value.dtype.kind == "c" and dtype.kind != "c":
        value = qnp.real(value)
    return qnp.astype(value, dtype)


def _flat_concat(parts: Sequence[Any], dtype: np.dtype) -> Any:
    return qnp.concatenate([_cast(qnp.reshape(p, (-1,)), dtype) for p in parts])


def _split(vector: Any, types: list[Tensor]) -> list[Any]:
    parts, start = [], 0
    for t in types:
        parts.append(_cast(qnp.reshape(vector[start:start + t.size], t.shape), t.np_dtype))
        start += t.size
    return parts


def _split_columns(matrix: Any, types: list[Tensor], out: Tensor) -> list[Any]:
    blocks, start = [], 0
    for t in types:
        block = qnp.reshape(matrix[:, start:start + t.size], (*out.shape, *t.shape))
        blocks.append(_cast(block, np.result_type(out.np_dtype, t.np_dtype)))
        start += t.size
    return blocks


def jacobian(f: Function, argnums: ArgNums = 0, mode: str = "reverse",
             holomorphic: bool = False, fuse: bool | None = None, method: str = "auto",
             **options: Any) -> Any:
    """The Jacobian of ``f``: shape ``output.shape + argument.shape``; for outputs and
    arguments that are tuples, lists or dicts, that structure of Jacobians (see
    `jacobian_program`).

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.jacobian(lambda x: x * x)(np.array([1.0, 2.0])).tolist()
    [[2.0, 0.0], [0.0, 4.0]]
    >>> d = qdiff.jacobian(lambda x, y: (x * y, y), argnums=(0, 1))(2.0, 3.0)
    >>> [[float(v) for v in row] for row in d]
    [[3.0, 2.0], [0.0, 1.0]]
    """
    def quantum(program: Program, args: tuple) -> Any:
        from .quantum.gradients.gradient import jacobian as quantum_jacobian

        return quantum_jacobian(program, *args, argnums=argnums, method=method, **options)

    def build(program: Program) -> Program:
        _classical_options(method, options)
        return jacobian_program(program, argnums, mode, holomorphic, fuse)

    return _function_or_program(f, build, "jacobian", quantum)


def jacfwd(f: Function, argnums: ArgNums = 0, holomorphic: bool = False,
           fuse: bool | None = None) -> Any:
    """The Jacobian by forward mode (one JVP per input element).

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.jacfwd(lambda x: x[::-1])(np.array([1.0, 2.0])).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    return jacobian(f, argnums, mode="forward", holomorphic=holomorphic, fuse=fuse)


def jacrev(f: Function, argnums: ArgNums = 0, holomorphic: bool = False,
           fuse: bool | None = None) -> Any:
    """The Jacobian by reverse mode (one VJP per output element).

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.jacrev(lambda x: qnp.sum(x) * x)(np.array([1.0, 2.0])).tolist()
    [[4.0, 1.0], [2.0, 5.0]]
    """
    return jacobian(f, argnums, mode="reverse", holomorphic=holomorphic, fuse=fuse)


def hessian(f: Function, argnums: int = 0, fuse: bool | None = None) -> Any:
    """The Hessian of a scalar function: forward mode over reverse mode.

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 3.0])).tolist()
    [[6.0, 2.0], [2.0, 0.0]]
    """
    if not isinstance(argnums, (int, np.integer)):
        raise QdiffError("hessian: argnums must be one int (one argument)")

    def build(program: Program) -> Program:
        gradient = grad_program(program, argnums, fuse=fuse)
        return jacobian_program(gradient, argnums, mode="forward", fuse=fuse)

    return _function_or_program(f, build, "hessian")
