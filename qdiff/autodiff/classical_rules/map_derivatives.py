"""Derivative rules of `map`, including mixed mode.

Forward: the tangent map runs the JVP of the lambda on ``(x_i, ẋ_i)``.

Reverse (tapeless): ``ys = map f xs`` ⇒ ``x̄s = map (λ x_i ȳ_i → ←f(x_i, ȳ_i)) xs ȳs``: the
adjoint lambda re-executes the primal lambda and reverses it. Where that is cheap to avoid,
the forward sweep keeps values instead (`kept_values`: the results of the lambda's costly
operations, transcendentals and divisions, when the lambda is scalar straight-line code and
they take at most `MAX_KEPT_BYTES`): its map also returns them, one per element, and the
adjoint lambda reads them instead of computing them again. A costly result that is one of
the lambda's outputs is already one of the map's: the adjoint reads that, in mixed mode
too (a softmax's ``exp(v - max)``, summed by the forward sweep, is not computed again).
Where nothing but the adjoint map reads the forward map's results (``grad``: the value is
dead), `vjp_program` fuses the two maps (`qdiff.ir.passes.fuse_maps`), so no array is stored.
A free variable c read inside the lambda gets one contribution per iteration; they come
back as a stacked array summed by a reduction, ``c̄ += Σ_i c̄_i`` (Futhark's "FreeNonAcc"
case).

Mixed mode: when the lambda's differentiated inputs are at most `MIXED_MODE_MAX_INPUTS`
scalars, the adjoint lambda instead runs forward mode once per input,
``x̄_j = Σ_o <ȳ_o, ∂y_o/∂x_j>`` (two JVPs for a complex input, along 1 and i), which
never reverses the lambda's own control flow. The map's ``ad_mode`` param picks: "auto"
(that test), "mixed" or "reverse" (forced).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import numpy as qnp
from ...classical.elementwise import select_p
from ...classical.soacs import map_p
from ...ir.core import Program, Var
from ...ir.interpreter import inline
from ...ir.passes.fuse_maps import straight_line_on_scalars
from ...ir.tracer import bind, trace, value_type
from ...ir.types import Tensor
from ..forward import jvp_program
from ..reverse import vjp_program
from ..tangents import instantiate, interleave_order, is_differentiable, reorder_inputs

MIXED_MODE_MAX_INPUTS = 4


def _map_jvp(values: list, tangents: list, *, body: Program, num_consts: int,
             ad_mode: str = "auto") -> tuple[list, list]:
    flags = [t is not None for t in tangents]
    jbody = jvp_program(body, flags)
    n_x = len(values) - num_consts
    t_consts = sum(flags[:num_consts])
    t_xs = sum(flags[num_consts:])
    jbody = reorder_inputs(jbody, interleave_order([num_consts, n_x], [t_consts, t_xs]))
    supplied = [t for t in tangents if t is not None]
    outs = bind(map_p, *values[:num_consts], *supplied[:t_consts], *values[num_consts:],
                *supplied[t_consts:], body=jbody, num_consts=num_consts + t_consts,
                **_mode(ad_mode))
    n_out = len(body.outputs)
    primal, rest = outs[:n_out], iter(outs[n_out:])
    return primal, [next(rest) if is_differentiable(t) else None for t in body.out_types]


def _mode(ad_mode: str) -> dict:
    return {} if ad_mode == "auto" else {"ad_mode": ad_mode}


def use_mixed_mode(body: Program, active: list[bool], ad_mode: str = "auto") -> bool:
    """Whether the reverse rule of a map should run forward mode inside the lambda."""
    if ad_mode != "auto":
        return ad_mode == "mixed"
    chosen = [t for t, flag in zip(body.in_types, active) if flag]
    return len(chosen) <= MIXED_MODE_MAX_INPUTS and all(
        isinstance(t, Tensor) and t.shape == () for t in chosen)


def _mixed_adjoint(body: Program, active: list[bool]) -> Program:
    """``(inputs, ȳ) -> x̄_j for each active input j``, by one JVP per active input."""
    ct_types = [t for t in body.out_types if is_differentiable(t)]
    n = len(body.inputs)
    chosen = [k for k, flag in enumerate(active) if flag]

    def adjoint(*args: Any) -> tuple:
        inputs, cts = list(args[:n]), list(args[n:])
        result = []
        for k in chosen:
            dtype = body.in_types[k].np_dtype
            along_real = _projected(body, k, inputs, cts, np.ones((), dtype))
            if dtype.kind != "c":
                result.append(along_real)
                continue
            # a complex input has two real directions: x̄ = Re<ȳ, J·1> + i Re<ȳ, J·i>
            along_imag = _projected(body, k, inputs, cts, np.asarray(1j, dtype))
            result.append(qnp.real(along_real) + 1j * qnp.real(along_imag))
        return tuple(result)

    return trace(adjoint, *body.in_types, *ct_types, name="mixed adjoint")


def _projected(body: Program, k: int, inputs: list, cts: list, unit: np.ndarray) -> Any:
    """``Σ_o conj(∂y_o/∂x_k · unit) · ȳ_o``: one JVP of the lambda along ``unit``; its real
    part is the real inner product ``<ȳ, J·unit>``."""
    only = [j == k for j in range(len(body.inputs))]
    outs = inline(jvp_program(body, only), [*inputs, unit])[len(body.outputs):]
    total = None
    for ct, partial in zip(cts, outs):
        weight = qnp.conj(partial) if _complex(partial) else partial
        # the branch a `where` did not take contributes nothing, even against an infinite
        # or NaN cotangent (its zero partial times ȳ is NaN only then), as in reverse mode;
        # only then is the product replaced, so its derivatives stay those of weight·ȳ
        product = qnp.multiply(weight, ct)
        if _selects(body):
            blocked = qnp.logical_and(qnp.equal(weight, 0), qnp.isnan(product))
            product = qnp.where(blocked, 0, product)
        term = qnp.sum(product)
        total = term if total is None else total + term
    return total


def _selects(program: Program) -> bool:
    """Whether ``program`` (its sub-programs included) has a `select`: only a branch not
    taken gives a partial that is zero whatever the cotangent."""
    return any(eqn.primitive is select_p or any(
        _selects(sub) for value in eqn.params.values()
        for sub in (value if isinstance(value, (tuple, list)) else (value,))
        if isinstance(sub, Program)) for eqn in program.eqns)


def _complex(value: Any) -> bool:
    return value_type(value).np_dtype.kind == "c"


def _map_adjoint(cts: list, values: list, outs: list, active: list, adjoint: Program,
                 num_consts: int, body: Program, kept: Sequence[Any] = ()) -> list:
    """The map of ``adjoint`` over the elements, their ``kept`` values and cotangents;
    one cotangent per operand (the per-element ones of a constant summed)."""
    diff_outs = [k for k, t in enumerate(body.out_types) if is_differentiable(t)]
    if all(cts[k] is None for k in diff_outs):
        return [None] * len(values)
    out_cts = [instantiate(cts[k], value_type(outs[k])) for k in diff_outs]
    stacked = bind(map_p, *values[:num_consts], *values[num_consts:], *kept, *out_cts,
                   body=adjoint, num_consts=num_consts)
    per_input = iter(stacked)
    result: list[Any] = []
    for k, flag in enumerate(active):
        if not flag:
            result.append(None)
            continue
        ct = next(per_input)
        # a free variable read in every iteration: sum the per-iteration contributions
        result.append(qnp.sum(ct, axis=0) if k < num_consts else ct)
    return result


# Values of these primitives are kept by a map's forward sweep for its adjoint (`_map_keeping`)
# instead of computed again: each costs tens of cycles, a stored value one load.
COSTLY = frozenset({"exp", "log", "log1p", "expm1", "sin", "cos", "tan", "asin", "acos",
                    "atan", "sinh", "cosh", "tanh", "sqrt", "pow", "div", "atan2"})
# Above this many bytes of kept values a map's adjoint re-executes its lambda instead.
MAX_KEPT_BYTES = 64 * 2 ** 20


def kept_values(body: Program, count: int) -> list[Var]:
    """The values of ``body`` (a map's lambda over ``count`` elements) that its forward
    sweep keeps for the adjoint: the results of its `COSTLY` equations, when the lambda is
    straight-line code on scalars and those that are not its outputs (the map returns
    those anyway) take at most `MAX_KEPT_BYTES`; otherwise none (the adjoint re-executes
    the lambda, tapeless).

    >>> import qdiff, qdiff.numpy as qnp
    >>> body = qdiff.trace(lambda x: qnp.tanh(qnp.exp(x) * 2.0), 0.0)
    >>> [v.type.short() for v in kept_values(body, 10)], kept_values(body, 10 ** 8)
    (['f64[]', 'f64[]'], [])
    """
    if not straight_line_on_scalars(body):
        return []
    outputs = {id(a) for a in body.outputs}
    kept = [v for e in body.eqns if e.primitive.name in COSTLY for v in e.outputs]
    size = count * sum(v.type.np_dtype.itemsize for v in kept if id(v) not in outputs)
    return kept if size <= MAX_KEPT_BYTES else []


def _map_keeping(values: list, active: list, *, body: Program, num_consts: int,
                 ad_mode: str = "auto") -> tuple[list, Any] | None:
    """The forward sweep of a map that also returns the `kept_values` of its lambda that
    are not its outputs, and the reverse sweep that reads them and the outputs kept (None:
    the adjoint re-executes the lambda). In mixed mode (chosen, not forced) only costly
    outputs are kept, and the adjoint runs in reverse mode to read them."""
    count = value_type(values[num_consts]).shape[0]
    kept = kept_values(body, count)
    position = {id(a): k for k, a in reversed(list(enumerate(body.outputs)))}
    if use_mixed_mode(body, active, ad_mode):
        # a small lambda's inner values stay computed again (no arrays stored for them)
        kept = [] if ad_mode == "mixed" else [v for v in kept if id(v) in position]
    adjoint = vjp_program(body, active, with_primal=False, known=kept)
    # an output whose value the adjoint does not read (a square's) is not passed to it:
    # the map's nest would have to store it
    read = _read_inputs(adjoint)
    n = len(body.inputs)
    needed = [v for k, v in enumerate(kept) if id(v) not in position or k + n in read]
    if not needed:
        return None
    if len(needed) < len(kept):
        kept = needed
        adjoint = vjp_program(body, active, with_primal=False, known=kept)
    extra = [v for v in kept if id(v) not in position]
    keeping = Program(body.inputs, body.eqns, [*body.outputs, *extra], name=body.name)
    outs = bind(map_p, *values, body=keeping, num_consts=num_consts, **_mode(ad_mode))
    primal, returned = outs[:len(body.outputs)], iter(outs[len(body.outputs):])
    stored = [primal[position[id(v)]] if id(v) in position else next(returned) for v in kept]

    def backward(cts: list) -> list:
        return _map_adjoint(cts, values, primal, active, adjoint, num_consts, body, stored)

    return primal, backward


def _read_inputs(program: Program) -> set[int]:
    """The positions of ``program``'s inputs that its equations or outputs read."""
    read = {id(a) for e in program.all_eqns() for a in e.inputs} | {id(a) for a in program.outputs}
    return {k for k, v in enumerate(program.inputs) if id(v) in read}


def _map_vjp(cts: list, values: list, outs: list, active: list, *, body: Program,
             num_consts: int, ad_mode: str = "auto") -> list:
    if use_mixed_mode(body, active, ad_mode):
        adjoint = _mixed_adjoint(body, active)
    else:
        adjoint = vjp_program(body, active, with_primal=False)
    return _map_adjoint(cts, values, outs, active, adjoint, num_consts, body)


map_p.jvp = _map_jvp
map_p.vjp = _map_vjp
map_p.vjp_keeping = _map_keeping
