"""A derivative of a whole-program-rule program called inside classical code.

``grad(lambda x: g(x) * grad(f)(x))`` with a quantum ``f``: the inner ``grad(f)`` has no
derivative Program, so inside the trace of the lambda it is recorded as one equation, a
``derivative_call`` whose params hold the chain (the program, its rule, the derivative
layers). On concrete values the equation evaluates the chain on jets
(`qdiff.autodiff.nested_derivatives`). A program holding such an equation is itself
differentiated as a whole (this module registers the rule): it runs on jets, its classical
equations by their nested forward mode (`qdiff.autodiff.jet_equations`) and each call by
its chain with the outer generators on its inputs, so every derivative of it is exact.

>>> import qdiff, qdiff.numpy as qnp
>>> from qdiff import quantum as qm
>>> def f(t):
...     q = qm.qubits(1); qm.ry(t, q[0]); return qm.expval("Z", q)
>>> # d/dx [sin x · (-sin x)] = -2 sin x cos x
>>> d = qdiff.grad(lambda x: qnp.sin(x) * qdiff.grad(f)(x))(0.3)
>>> bool(np.isclose(d, -np.sin(0.6)))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir import pytree
from ..ir.core import Literal, Program
from ..ir.errors import QdiffError
from ..ir.primitives import register_primitive
from ..ir.tracer import bind, value_type
from ..ir.types import Tensor, Type
from .arguments import unflatten_outputs
from .jet_equations import equation_on_jets
from .jets import Jet, primal
from .nested_derivatives import (
    DerivativeLayer,
    argument_numbers,
    base_jet_function,
    chain_function,
    coerced_arguments,
    jvp_of,
    user_values,
    vjp_of,
    with_layer,
)
from .whole_program import WholeProgramRule, register_whole_program_rule, rules_in


@dataclass(frozen=True, eq=False)
class DerivativeChain:
    """Derivative ``layers`` (outermost first) of ``program``, differentiated as a whole by
    ``rule``, for arguments of tree ``in_tree``."""

    program: Program
    rule: WholeProgramRule
    layers: tuple[DerivativeLayer, ...]
    in_tree: tuple

    def __call__(self, leaves: Sequence[Any]) -> list[Any]:
        """The flat outputs of the chain on flat argument leaves (jets or plain values)."""
        f, evaluator = chain_function(self.program, self.rule, self.layers)
        out = f(pytree.unflatten(self.in_tree, list(leaves)))
        evaluator.report(f"a derivative of {self.program.name}")
        return pytree.flatten(out)[0]

    def __repr__(self) -> str:
        kinds = " of ".join(layer.kind for layer in self.layers)
        return f"<{kinds} of {self.program.name}>"


def _call_types(*in_types: Type, chain: DerivativeChain, out_types: tuple) -> tuple:
    return tuple(out_types)


derivative_call_p = register_primitive("derivative_call", _call_types, multiple_results=True,
                                       effectful=True)


@derivative_call_p.def_impl("numpy")
def _call_impl(*leaves: Any, chain: DerivativeChain, out_types: tuple) -> list[Any]:
    return [np.asarray(primal(v), t.np_dtype) for v, t in zip(chain(leaves), out_types)]


def _no_rule(*args: Any, **params: Any) -> Any:
    raise QdiffError(
        f"{params['chain']!r} has no derivative Program: a program that calls it is "
        "differentiated when called with concrete values, not traced")


derivative_call_p.jvp = _no_rule
derivative_call_p.vjp = _no_rule


def call_derivative(program: Program, rule: WholeProgramRule,
                    layers: Sequence[DerivativeLayer], args: tuple) -> Any:
    """Record (inside a trace) or evaluate the derivative ``layers`` of ``program`` at
    ``args``: the outputs, structured like the derivative's."""
    leaves, in_tree = pytree.flatten(tuple(args))
    chain = DerivativeChain(program, rule, tuple(layers), in_tree)
    out = _derivative_types(program, pytree.unflatten(in_tree, [value_type(v) for v in leaves]),
                            chain.layers)
    out_leaves, out_tree = pytree.flatten(out)
    results = bind(derivative_call_p, *leaves, chain=chain, out_types=tuple(out_leaves))
    return pytree.unflatten(out_tree, list(results))


def _derivative_types(program: Program, args: tuple, layers: Sequence[DerivativeLayer]) -> Any:
    """The output types of the derivative ``layers`` (outermost first) of ``program`` at
    arguments of types ``args``."""
    out = unflatten_outputs(program, [Tensor(t.shape, _result_dtype(t))
                                      for t in program.out_types])
    for layer in reversed(layers):
        out = _layer_types(out, args, layer)
    return out


def _result_dtype(t: Any) -> str:
    return "complex128" if np.dtype(t.np_dtype).kind == "c" else "float64"


def _layer_types(out: Any, args: tuple, layer: DerivativeLayer) -> Any:
    if layer.kind == "hessian":
        (a,), _ = argument_numbers(layer.argnums, len(args), "hessian")
        leaves, tree = pytree.flatten(args[a])
        return pytree.unflatten(tree, [pytree.unflatten(tree, [
            Tensor(row.shape + column.shape) for column in leaves]) for row in leaves])
    numbers, single = argument_numbers(layer.argnums, len(args), layer.kind)
    selected = args[numbers[0]] if single else tuple(args[a] for a in numbers)
    wrt, wrt_tree = pytree.flatten(selected)

    def blocks(o: Tensor) -> Any:
        return pytree.unflatten(wrt_tree, [Tensor(o.shape + w.shape, _result_dtype(o))
                                           for w in wrt])

    out_leaves, out_tree = pytree.flatten(out)
    if layer.kind == "jacobian":
        return pytree.unflatten(out_tree, [blocks(o) for o in out_leaves])
    if len(out_leaves) != 1 or out_leaves[0].shape != ():
        raise QdiffError(f"{layer.kind} needs a function returning one float scalar")
    return (out, blocks(out_leaves[0])) if layer.kind == "value_and_grad" else \
        blocks(out_leaves[0])


# ------------------------------------------------- programs that call derivatives, as wholes
class _CallingEvaluator:
    """A program that calls derivatives, run on jets: classical equations by their nested
    forward mode, each call by its chain."""

    def __init__(self, program: Program, method: str, options: dict):
        if method != "auto" or options:
            given = ", ".join([f"method={method!r}"] * (method != "auto") + sorted(options))
            raise QdiffError(f"{given}: give the options to the inner derivative "
                             "(grad(f, ...)); the code around it takes none")
        for eqn in program.eqns:
            if any(_calls(sub) for _, sub in eqn.subprograms()):
                raise QdiffError(
                    f"a derivative of a {_rule_name(program)} program called inside "
                    f"{eqn.primitive.name} is not supported: call it outside loops and "
                    "branches")
        self.program = program

    def __call__(self, leaves: list[Any]) -> list[Any]:
        env = dict(zip(self.program.inputs, leaves))
        for eqn in self.program.eqns:
            values = [a.value if isinstance(a, Literal) else env[a] for a in eqn.inputs]
            if eqn.primitive is derivative_call_p:
                outs = call_on_jets(eqn, values)
            else:
                outs = equation_on_jets(eqn, values)
            env.update(zip(eqn.outputs, outs))
        return [a.value if isinstance(a, Literal) else env[a] for a in self.program.outputs]

    def report(self, what: str) -> None:
        """The chains report what their runs left out, run by run."""


def _as_type(value: Any, t: Tensor) -> Any:
    if isinstance(value, Jet):
        return value
    return np.asarray(value, t.np_dtype)


def _calls(program: Program) -> bool:
    return any(e.primitive is derivative_call_p for e in program.all_eqns())


def _rule_name(program: Program) -> str:
    found = [e.params["chain"].rule.name for e in program.all_eqns()
             if e.primitive is derivative_call_p]
    return found[0] if found else "whole-program"


def evaluator_for(program: Program, method: str, options: dict) -> Any:
    """The jet evaluator of a program that calls derivatives: that of the other rule its
    primitives fall under (quantum operations run on the quantum forward mode, which runs
    the calls too), else one for classical code around the calls."""
    for rule in rules_in(program):
        if rule is not CALLING_RULE:
            if rule.taylor is None:
                raise QdiffError(f"a {rule.name} program that calls a derivative has no "
                                 "forward mode to differentiate it with")
            return rule.taylor(program, method, options)
    return _CallingEvaluator(program, method, options)


def _value_and_grad(program: Program, args: tuple, argnums: Any, method: str,
                    options: dict) -> Any:
    evaluator = evaluator_for(program, method, options)
    value, gradient = with_layer(base_jet_function(program, evaluator), DerivativeLayer(
        "value_and_grad", argnums))(coerced_arguments(program, args))
    evaluator.report(f"the gradient of {program.name}")
    return _ValueAndGrad(user_values(value), user_values(gradient))


@dataclass
class _ValueAndGrad:
    value: Any
    grad: Any


def _jacobian(program: Program, args: tuple, argnums: Any, method: str, options: dict) -> Any:
    evaluator = evaluator_for(program, method, options)
    jac = with_layer(base_jet_function(program, evaluator), DerivativeLayer(
        "jacobian", argnums))(coerced_arguments(program, args))
    evaluator.report(f"the jacobian of {program.name}")
    return user_values(jac)


def _vjp(program: Program, primals: tuple, flags: list[bool], method: str,
         options: dict) -> Any:
    return vjp_of(base_jet_function(program, evaluator_for(program, method, options)),
                  coerced_arguments(program, primals))


def _jvp(program: Program, flat_primals: list[Any], flat_tangents: list[Any],
         flags: list[bool], method: str, options: dict) -> Any:
    base = evaluator_for(program, method, options)
    primals = coerced_arguments(program, tuple(flat_primals))
    value, tangent = jvp_of(lambda leaves: list(base(list(leaves))), primals,
                            [t if flag else np.zeros_like(np.asarray(x, np.float64))
                             for x, t, flag in zip(primals, flat_tangents, flags)])
    base.report(f"the jvp of {program.name}")
    return (unflatten_outputs(program, [user_values(v) for v in value]),
            unflatten_outputs(program, [user_values(t) for t in tangent]))


CALLING_RULE = WholeProgramRule(
    "derivative-calling", gradient=_value_and_grad, jacobian=_jacobian, vjp=_vjp, jvp=_jvp,
    taylor=evaluator_for)
register_whole_program_rule([derivative_call_p], CALLING_RULE)


def calls_derivatives(program: Program) -> bool:
    """Whether ``program`` calls a derivative of a whole-program-rule program.

    >>> import qdiff
    >>> calls_derivatives(qdiff.trace(lambda x: x * 2.0, 1.0))
    False
    """
    return CALLING_RULE in rules_in(program)


def call_on_jets(eqn: Any, values: Sequence[Any]) -> list[Any]:
    """The outputs of a recorded ``derivative_call`` equation on jets (its chain, with the
    generators its inputs carry)."""
    return [_as_type(v, t) for v, t in zip(eqn.params["chain"](values),
                                           eqn.params["out_types"])]
