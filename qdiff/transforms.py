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
from .autodiff.arguments import (
    ArgNums,
    Function,
    argnum_tuple,
    as_closed_program,
    output_leaves,
    unflatten_outputs,
    wrt_flags,
    wrt_tree,
)
from .autodiff.derivative_calls import call_derivative
from .autodiff.forward import jvp_program
from .autodiff.nested_derivatives import (
    DerivativeLayer,
    JetFunction,
    chain_function,
    coerced_arguments,
    jvp_of,
    user_values,
    vjp_of,
)
from .autodiff.reverse import vjp_program
from .autodiff.tangents import is_differentiable
from .autodiff.whole_program import WholeProgramRule, known_options, rule_for
from .classical.soacs import map as soac_map
from .compiler.jit import BACKENDS
from .compiler.jit import jit as jit_function
from .ir import pytree
from .ir.core import Program
from .ir.errors import QdiffError
from .ir.interpreter import call_program, inline
from .ir.passes import fuse_elementwise, simplify
from .ir.program_function import ProgramFunction, holds_tracer
from .ir.tracer import current_builder, trace, value_type
from .ir.types import Tensor
from .loops import control_flow_rules  # noqa: F401  (rules of loop, while, cond)

# Whether transformations fuse elementwise chains before differentiating (when their
# ``fuse`` argument is None, the default).
FUSE_ELEMENTWISE = True


# ------------------------------------------------------------------------ programs and args
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
                         whole: Callable[[WholeProgramRule, Program, tuple], Any] | None = None,
                         layer: DerivativeLayer | None = None,
                         compiled_build: Callable[[Program], Program] | None = None) -> Any:
    """``build`` applied to ``f``'s program, as a Program (``f`` a Program) or a
    `TransformedFunction`; programs that a whole-program rule claims go to
    ``whole(rule, program, args)`` instead (``None``: this transformation has no such rule).
    ``layer`` describes the transformation for derivatives of such programs' derivatives
    (`qdiff.autodiff.nested_derivatives`)."""
    if isinstance(f, Program) and rule_for(f) is None:
        return build(f)
    return TransformedFunction(f, build, name, whole, layer, compiled_build)


def _adjoint_build(method: str, options: dict,
                   differentiate: Callable[[Program], Program]) -> Callable | None:
    """``differentiate`` when the derivative's settings are the defaults (the adjoint
    method, which a quantum program's compiled form has), else None: other methods and
    options are settings of the simulator's derivative."""
    return differentiate if method in ("auto", "adjoint") and not options else None


class TransformedFunction(ProgramFunction):
    """A derivative of a function or program: traced per argument signature and run.

    For a program differentiated by rewriting, ``.trace(*args)`` is the derivative Program
    (print it, save it with ``to_json``, transform it again). A program that a whole-program
    rule claims (`qdiff.autodiff.whole_program`: quantum programs, whose derivatives run on
    the simulator) is differentiated when called; it has no derivative Program, so tracing
    it (``.trace``) is an error that says so. Derivatives of it (``grad(grad(f))``,
    ``hessian(f)``, ``jacfwd(grad(f))``, ``jvp(grad(f), …)``) are evaluated when called with
    concrete values, by forward mode on jets (`qdiff.autodiff.nested_derivatives`).
    """

    def __init__(self, f: Function, build: Callable[[Program], Program], name: str,
                 whole: Callable[[WholeProgramRule, Program, tuple], Any] | None,
                 layer: DerivativeLayer | None = None,
                 compiled_build: Callable[[Program], Program] | None = None):
        label = f"{name}_{getattr(f, 'name', None) or getattr(f, '__name__', 'f')}"
        super().__init__(self._traced, label)
        self.source, self.build, self.kind, self.whole = f, build, name, whole
        self.layer = layer
        # per argument signature: whether the bottom of the chain is a program that a
        # whole-program rule evaluates on jets (a classical one is not traced again per call)
        self._on_jets: dict[Any, bool] = {}
        # for `qdiff.jit`: what a compiled derivative is remembered by, and how one is built
        # from a quantum program's differentiable form (None: the settings are the
        # simulator's)
        self.argnums = None if layer is None else layer.argnums
        self.compiled_build = compiled_build

    def _program(self, args: tuple) -> tuple[Program, list[Any]]:
        program, captured = as_closed_program(self.source, args)
        rule = rule_for(program)
        if rule is not None:
            raise QdiffError(
                f"{self.kind} of a {rule.name} program has no derivative Program: it is "
                "computed on the simulator when called with concrete values, so it cannot be "
                "traced. Derivatives of it, and of code that calls it, are computed when "
                "called with concrete values")
        return program, captured

    def recorded_call(self, args: tuple) -> Any:
        """Inside another trace, a derivative of a program that a whole-program rule
        evaluates on jets, recorded as one ``derivative_call`` equation
        (`qdiff.autodiff.derivative_calls`); None for anything else."""
        layers, bottom = self.derivative_chain()
        if not layers or isinstance(bottom, TransformedFunction):
            return None
        program, captured = as_closed_program(bottom, args)
        rule = rule_for(program)
        if rule is None or rule.taylor is None:
            return None
        _no_captures(captured, rule, self.kind)
        return call_derivative(program, rule, layers, args)

    def derivative_chain(self) -> tuple[list[DerivativeLayer], Function]:
        """The derivative layers from the outermost (this one) in, and the function at the
        bottom of the chain."""
        layers: list[DerivativeLayer] = []
        current: Any = self
        while isinstance(current, TransformedFunction) and current.layer is not None:
            layers.append(current.layer)
            current = current.source
        return layers, current

    def jet_chain(self, args: tuple, outer: bool = False
                  ) -> tuple[Program, WholeProgramRule, list[DerivativeLayer]] | None:
        """For a derivative of a derivative of a whole-program-rule program (or its Hessian;
        with ``outer``, for any derivative of one, under a jvp or vjp), which that rule
        evaluates on jets: the program, the rule and the derivative layers from the
        outermost in; None for anything else."""
        layers, bottom = self.derivative_chain()
        first_order = len(layers) == 1 and layers[0].kind != "hessian" and not outer
        if not layers or first_order or isinstance(bottom, TransformedFunction):
            return None
        leaves, tree = pytree.flatten(tuple(args))
        signature = (tree, tuple(value_type(leaf) for leaf in leaves))
        if self._on_jets.get(signature) is False:
            return None
        program, captured = as_closed_program(bottom, args)
        rule = rule_for(program)
        self._on_jets[signature] = rule is not None and rule.taylor is not None
        if rule is None or rule.taylor is None:
            return None
        _no_captures(captured, rule, self.kind)
        return program, rule, layers

    def nested_evaluation(self, args: tuple, outer: bool = False
                          ) -> tuple[JetFunction, tuple, Any] | None:
        """The jet function of the chain `jet_chain` finds, the arguments coerced, and the
        evaluator (whose ``report`` says what its runs left out); None for anything else."""
        chain = self.jet_chain(args, outer)
        if chain is None:
            return None
        program, rule, layers = chain
        f, evaluator = chain_function(program, rule, layers)
        return f, coerced_arguments(program, args), evaluator

    def _traced(self, *args: Any) -> Any:
        # values the function reads from enclosing traces are trailing, undifferentiated
        # arguments of its program (closure conversion)
        program, captured = self._program(args)
        return call_program(self.build(program), (*args, *pytree.closure_arguments(captured)))

    def trace(self, *example_args: Any) -> Program:
        """The derivative Program for arguments shaped like ``example_args``."""
        self._program(example_args)
        return super().trace(*example_args)

    def signature_source(self) -> Callable[..., Any] | None:
        source = self.source
        if isinstance(source, ProgramFunction):
            return source.signature_source()
        return None if isinstance(source, Program) else source

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = self.bind_arguments(args, kwargs)
        nested = None if holds_tracer(args) else self.nested_evaluation(args)
        if nested is not None:
            f, coerced, evaluator = nested
            result = user_values(f(coerced))
            evaluator.report(f"the derivative {self.name}")
            return result
        if holds_tracer(args):
            recorded = self.recorded_call(args)
            if recorded is not None:
                return recorded
        if not holds_tracer(args) and self.whole is not None:
            program, captured = as_closed_program(self.source, args)
            rule = rule_for(program)
            if rule is not None:
                _no_captures(captured, rule, self.kind)
                return self.whole(rule, program, args)
        if current_builder() is not None:
            # inside another trace: inline, so the function may read that trace's values
            return self._traced(*args)
        return super().__call__(*args)


def _nested(f: Function, primals: tuple) -> tuple[JetFunction, tuple, Any] | None:
    """`TransformedFunction.nested_evaluation` of ``f`` under one more derivative (jvp or
    vjp) when ``f`` is a derivative called on concrete values, else None."""
    if not isinstance(f, TransformedFunction) or holds_tracer(primals):
        return None
    return f.nested_evaluation(primals, outer=True)


def _no_captures(captured: list[Any], rule: WholeProgramRule, what: str) -> None:
    if captured:
        raise QdiffError(
            f"{what} of a {rule.name} program that reads traced values of an enclosing "
            "transformation is not supported: pass those values as arguments")


def _classical_options(method: str, options: dict) -> None:
    """Quantum-only options must not be silently ignored on a classical program."""
    known = known_options()
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise QdiffError(f"unknown keyword argument(s) {', '.join(unknown)}; the options of "
                         f"derivatives are {', '.join(sorted({'fuse', 'method', *known}))}")
    if method != "auto" or options:
        given = ", ".join([f"method={method!r}"] * (method != "auto") + sorted(options))
        raise QdiffError(f"{given}: options of quantum gradients; this program has no quantum "
                         "operations (its gradient is the classical reverse mode)")


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
    numbers = argnum_tuple(argnums, program, what)
    flags = wrt_flags(program, numbers, what)
    backward = vjp_program(to_differentiate(program, fuse), flags, with_primal=has_value)
    tree = wrt_tree(program, argnums, numbers)
    seed = np.ones((), program.out_types[0].np_dtype)

    def gradient(*args: Any) -> Any:
        outs = inline(backward, [*pytree.flatten(tuple(args))[0], seed])
        grads = pytree.unflatten(tree, outs[1:] if has_value else outs)
        return (outs[0], grads) if has_value else grads

    return simplify(trace(gradient, *_example_args(program), name=f"{what}_{program.name}"))


def grad(f: Function, argnums: ArgNums = 0, fuse: bool | None = None, method: str = "auto",
         jit: bool = False, backend: str | None = None, **options: Any) -> Any:
    """The gradient of a scalar function with respect to argument(s) ``argnums``.

    >>> import qdiff, qdiff.numpy as qnp
    >>> g = qdiff.grad(lambda x, y: qnp.sum(x * y), argnums=(0, 1))
    >>> [a.tolist() for a in g(np.array([1.0, 2.0]), np.array([3.0, 4.0]))]
    [[3.0, 4.0], [1.0, 2.0]]
    """
    def differentiate(program: Program) -> Program:
        return grad_program(program, argnums, fuse=fuse)

    def build(program: Program) -> Program:
        _classical_options(method, options)
        return differentiate(program)

    def whole(rule: WholeProgramRule, program: Program, args: tuple) -> Any:
        return rule.gradient(program, args, argnums, method, options).grad

    layer = DerivativeLayer("grad", argnums, method, options)
    return _compiled(_function_or_program(f, build, "grad", whole, layer,
                                          _adjoint_build(method, options, differentiate)),
                     jit, backend)


def value_and_grad(f: Function, argnums: ArgNums = 0, fuse: bool | None = None,
                   method: str = "auto", jit: bool = False, backend: str | None = None,
                   **options: Any) -> Any:
    """``(f(*args), grad(f)(*args))`` in one program (one forward and one reverse sweep).

    >>> import qdiff, qdiff.numpy as qnp
    >>> value, g = qdiff.value_and_grad(lambda x: x ** 3)(2.0)
    >>> float(value), float(g)
    (8.0, 12.0)
    """
    def both(rule: WholeProgramRule, program: Program, args: tuple) -> Any:
        result = rule.gradient(program, args, argnums, method, options)
        return result.value, result.grad

    def differentiate(program: Program) -> Program:
        return grad_program(program, argnums, has_value=True, fuse=fuse)

    def build(program: Program) -> Program:
        _classical_options(method, options)
        return differentiate(program)

    layer = DerivativeLayer("value_and_grad", argnums, method, options)
    return _compiled(_function_or_program(f, build, "value_and_grad", both, layer,
                                          _adjoint_build(method, options, differentiate)),
                     jit, backend)


# ------------------------------------------------------------------------------- jvp and vjp
def jvp(f: Function, primals: Sequence[Any], tangents: Sequence[Any],
        fuse: bool | None = None, method: str = "auto", jit: bool = False,
        backend: str | None = None, **options: Any) -> tuple[Any, Any]:
    """Forward mode: ``(f(*primals), J·tangents)``, with tangents shaped like the primals.

    A quantum program's JVP is one run in forward mode on the simulator
    (`qdiff.quantum.gradients.forward_mode`); another ``method`` contracts its Jacobian
    (`qdiff.quantum.jacobian`) with the tangents. A JVP of a quantum program's derivative
    (``jvp(grad(f), …)``: a Hessian-vector product) is exact too.

    >>> import qdiff, qdiff.numpy as qnp
    >>> out, tangent = qdiff.jvp(qnp.sin, (0.0,), (2.0,))
    >>> float(out), float(tangent)
    (0.0, 2.0)
    """
    nested = _nested(f, tuple(primals))
    if nested is not None:
        chain, coerced, evaluator = nested
        value, tangent = jvp_of(chain, coerced, tuple(tangents))
        evaluator.report(f"the jvp of {f.name}")
        return user_values(value), user_values(tangent)
    program, captured = as_closed_program(f, tuple(primals))
    flat_primals, in_tree = pytree.flatten(tuple(primals))
    flat_tangents, tangent_tree = pytree.flatten(tuple(tangents))
    if tangent_tree != in_tree:
        raise QdiffError("jvp: the tangents must have the structure of the primals")
    flags = [is_differentiable(t) for t in program.in_types[:len(flat_primals)]]
    rule = rule_for(program)
    if rule is not None:
        _no_captures(captured, rule, "jvp")
        return rule.jvp(program, flat_primals, flat_tangents, flags, method, options)
    flat_primals += captured
    flags += [False] * len(captured)
    _classical_options(method, options)
    forward = jvp_program(to_differentiate(program, fuse), flags)
    supplied = [t for t, flag in zip(flat_tangents, flags) if flag]
    outs = _call_flat(forward, [*flat_primals, *supplied], _backend(jit, backend))
    n_out = len(program.outputs)
    out_tangents = iter(outs[n_out:])
    tangent_outs = [next(out_tangents) if is_differentiable(a.type) else None
                    for a in program.outputs]
    return unflatten_outputs(program, outs[:n_out]), unflatten_outputs(program, tangent_outs)


def vjp(f: Function, *primals: Any, fuse: bool | None = None, method: str = "auto",
        jit: bool = False, backend: str | None = None,
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
    nested = _nested(f, tuple(primals))
    if nested is not None:
        chain, coerced, evaluator = nested
        result = vjp_of(chain, coerced)
        evaluator.report(f"the vjp of {f.name}")
        return result
    program, captured = as_closed_program(f, primals)
    flat_primals, in_tree = pytree.flatten(tuple(primals))
    flags = [is_differentiable(t) for t in program.in_types[:len(flat_primals)]]
    rule = rule_for(program)
    if rule is not None:
        _no_captures(captured, rule, "vjp")
        return rule.vjp(program, primals, flags, method, options)
    flat_primals += captured
    flags += [False] * len(captured)
    _classical_options(method, options)
    backward = vjp_program(to_differentiate(program, fuse), flags)
    n_out = len(program.outputs)
    ct_slots = [k for k, a in enumerate(program.outputs) if is_differentiable(a.type)]
    chosen = _backend(jit, backend)
    value = unflatten_outputs(program, _call_flat(program, flat_primals, chosen))

    def vjp_fn(cotangent: Any) -> tuple:
        leaves = output_leaves(program, cotangent)
        outs = _call_flat(backward, [*flat_primals, *(leaves[k] for k in ct_slots)], chosen)
        cts = iter(outs[n_out:])
        flat = [next(cts) if flag else None for flag in flags[:len(flags) - len(captured)]]
        return tuple(pytree.unflatten(in_tree, flat))

    return value, vjp_fn


def _backend(jit: bool, backend: str | None) -> str | None:
    """The back end that ``jit=True`` / ``backend=`` ask for (None: the default)."""
    if backend is not None and backend not in BACKENDS:
        raise QdiffError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"got {backend!r}")
    return backend or ("numba" if jit else None)


def _compiled(transformed: Any, jit: bool, backend: str | None) -> Any:
    """``transformed`` compiled when ``jit=True`` or a compiling ``backend`` is asked for
    (see `qdiff.jit`)."""
    chosen = _backend(jit, backend)
    if chosen in (None, "numpy"):
        return transformed
    return jit_function(transformed, backend=chosen)


def _call_flat(program: Program, leaves: list[Any], backend: str | None = None) -> list[Any]:
    bare = Program(program.inputs, program.eqns, program.outputs, name=program.name)
    result = call_program(bare, leaves, backend=backend)
    return list(result) if len(program.outputs) != 1 else [result]


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
    numbers = argnum_tuple(argnums, program, "jacobian")
    flags = wrt_flags(program, numbers, "jacobian")
    wrt_types = [t for t, flag in zip(program.in_types, flags) if flag]
    _check_complex(out_types, wrt_types, mode, holomorphic)
    primal = to_differentiate(program, fuse)
    tree = wrt_tree(program, argnums, numbers)
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
        return unflatten_outputs(program, per_output)

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
             jit: bool = False, backend: str | None = None, **options: Any) -> Any:
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
    def whole(rule: WholeProgramRule, program: Program, args: tuple) -> Any:
        return rule.jacobian(program, args, argnums, method, options)

    def differentiate(program: Program) -> Program:
        return jacobian_program(program, argnums, mode, holomorphic, fuse)

    def build(program: Program) -> Program:
        _classical_options(method, options)
        return differentiate(program)

    layer = DerivativeLayer("jacobian", argnums, method, options, holomorphic)
    return _compiled(_function_or_program(f, build, "jacobian", whole, layer,
                                          _adjoint_build(method, options, differentiate)),
                     jit, backend)


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


def hessian(f: Function, argnums: int = 0, fuse: bool | None = None, jit: bool = False,
            backend: str | None = None) -> Any:
    """The Hessian of a scalar function: forward mode over reverse mode (for a quantum
    program, forward mode over forward mode on the simulator, exact).

    >>> import qdiff, qdiff.numpy as qnp
    >>> qdiff.hessian(lambda x: x[0] ** 2 * x[1])(np.array([1.0, 3.0])).tolist()
    [[6.0, 2.0], [2.0, 0.0]]
    """
    if not isinstance(argnums, (int, np.integer)):
        raise QdiffError("hessian: argnums must be one int (one argument)")

    def build(program: Program) -> Program:
        gradient = grad_program(program, argnums, fuse=fuse)
        return jacobian_program(gradient, argnums, mode="forward", fuse=fuse)

    return _compiled(_function_or_program(f, build, "hessian", layer=DerivativeLayer(
        "hessian", argnums)), jit, backend)
