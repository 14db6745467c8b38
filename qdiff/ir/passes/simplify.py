"""Simplification: constant folding, identities, common subexpressions and dead code.

Derivative programs are generated mechanically; this pass makes them readable and cheaper.
Rules, applied in one forward walk (sub-programs are simplified too):

- constant folding: an equation without effects whose operands are all literals is
  evaluated with its primitive's NumPy implementation and its results become literals,
  unless they hold more than `FOLD_MAX_ELEMENTS` elements (a folded array is embedded in
  the program and its JSON; tracing folds Python-level constants the same way, but
  transformations build programs equation by equation);
- identities: ``x * 1``, ``x + 0``, ``x - 0``, ``x / 1`` and ``x ** 1`` (literal all-ones /
  all-zeros operands, the result having x's type),
  reductions over no axes, and reshapes, transposes, conversions and broadcasts that keep
  the type, become ``x``; a reshape of a broadcast scalar is a broadcast of the scalar;
- uniform literals: an elementwise operand that is a literal array of one repeated value
  shrinks to a rank-0 literal (elementwise primitives broadcast it);
- maps: a small literal const moves into the lambda; a mapped scalar input that is a
  uniform literal, or a broadcast scalar, enters the lambda as a literal or a const
  instead of an array;
- common subexpressions: equations repeating an earlier one (same primitive, operands
  and params) reuse its outputs;
- dead code: equations whose outputs nobody reads are dropped unless they have effects.

>>> import qdiff, qdiff.numpy as qnp
>>> p = qdiff.trace(lambda x: (qnp.sin(x) * 1.0 + qnp.sin(x), qnp.cos(x))[0], np.zeros(2))
>>> [e.primitive.name for e in simplify(p).eqns]
['sin', 'add']
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core import Atom, Eqn, Literal, Program, Var
from ..primitives import Primitive
from ..tracer import is_effectful
from ..types import Tensor

_IDENTITY = {"mul": 1, "add": 0}          # x op unit = unit op x = x
_RIGHT_IDENTITY = {"sub": 0, "div": 1, "pow": 1}  # x op unit = x
_NO_AXES = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min")

# Constant folding never embeds a literal with more elements than this.
FOLD_MAX_ELEMENTS = 64


def simplify(program: Program) -> Program:
    """A smaller program computing the same outputs.

    >>> from qdiff.ir import Eqn, Literal, Program, Tensor, Var, get_primitive
    >>> x, t, y = Var(Tensor((), "float64")), Var(Tensor((), "float64")), Var(Tensor((), "float64"))
    >>> p = Program((x,), (Eqn(get_primitive("exp"), (Literal(0.0),), (t,)),
    ...                    Eqn(get_primitive("mul"), (t, x), (y,))), (y,))
    >>> print(simplify(p))  # exp 0.0 folds to 1.0, then x * 1.0 is x
    program program(a: f64[]) -> f64[] {
      return a
    }
    """
    renamed: dict[Var, Atom] = {}
    seen: dict[Any, tuple[Var, ...]] = {}
    made: dict[Var, Eqn] = {}
    eqns: list[Eqn] = []

    def read(atom: Atom) -> Atom:
        return renamed.get(atom, atom) if isinstance(atom, Var) else atom

    for eqn in program.eqns:
        inputs = tuple(read(a) for a in eqn.inputs)
        params = {k: (_simplify_param(v) if k in eqn.primitive.subprogram_params else v)
                  for k, v in eqn.params.items()}
        folded = _fold(eqn, inputs, params)
        if folded is not None:
            renamed.update(zip(eqn.outputs, folded))
            continue
        same = _identity_operand(eqn, inputs, params)
        if same is not None:
            renamed[eqn.outputs[0]] = same
            continue
        primitive, inputs, params = _rewrite(eqn, inputs, params, made)
        key = _key(primitive, inputs, params)
        if key is not None and key in seen:
            renamed.update(zip(eqn.outputs, seen[key]))
            continue
        if key is not None:
            seen[key] = eqn.outputs
        new = Eqn(primitive, inputs, eqn.outputs, params)
        made.update((v, new) for v in eqn.outputs)
        eqns.append(new)
    outputs = tuple(read(a) for a in program.outputs)
    return Program(program.inputs, tuple(live_eqns(eqns, outputs)), outputs, name=program.name,
                   in_tree=program.in_tree, out_tree=program.out_tree)


def _simplify_param(value: Any) -> Any:
    if isinstance(value, Program):
        return simplify(value)
    return tuple(simplify(p) for p in value)


# ------------------------------------------------------------------------- constant folding
def _fold(eqn: Eqn, inputs: tuple[Atom, ...], params: dict) -> list[Literal] | None:
    """The outputs of ``eqn`` as literals, when its operands are all literals."""
    if not all(isinstance(a, Literal) for a in inputs) or is_effectful(eqn.primitive, params):
        return None
    out_types = [v.type for v in eqn.outputs]
    if not all(isinstance(t, Tensor) for t in out_types) \
            or sum(t.size for t in out_types) > FOLD_MAX_ELEMENTS:
        return None
    try:
        with np.errstate(all="ignore"):
            result = eqn.primitive.impl("numpy")(*(a.value for a in inputs), **params)
        values = list(result) if eqn.primitive.multiple_results else [result]
        return [Literal(np.asarray(v), t) for v, t in zip(values, out_types, strict=True)]
    except Exception:  # noqa: BLE001 (an error is left to happen when the program runs)
        return None


# ------------------------------------------------------------------------------- identities
def _identity_operand(eqn: Eqn, inputs: tuple[Atom, ...], params: dict) -> Atom | None:
    out_type = eqn.outputs[0].type if eqn.outputs else None
    name = eqn.primitive.name
    if _may_keep_type(name, params):
        return inputs[0] if inputs[0].type == out_type else None
    if name in _RIGHT_IDENTITY:
        x, unit = inputs
        if _all_equal(unit, _RIGHT_IDENTITY[name]) and x.type == out_type:
            return x
        return None
    if name not in _IDENTITY:
        return None
    for k, atom in enumerate(inputs):
        other = inputs[1 - k]
        if _all_equal(atom, _IDENTITY[name]) and other.type == out_type:
            return other
    return None


def _all_equal(atom: Atom, value: int) -> bool:
    return isinstance(atom, Literal) and bool(np.all(atom.value == value))


def _may_keep_type(name: str, params: dict) -> bool:
    """Whether the unary ``name[params]`` is the identity when its type is unchanged."""
    if name in _NO_AXES:
        return tuple(params["axes"]) == ()
    if name == "transpose":
        return tuple(params["perm"]) == tuple(range(len(params["perm"])))
    if name == "broadcast_in_dim":
        return tuple(params["broadcast_dimensions"]) == tuple(range(len(params["shape"])))
    return name in ("reshape", "convert")


# ---------------------------------------------------------------------------------- rewrites
def _rewrite(eqn: Eqn, inputs: tuple[Atom, ...], params: dict,
             made: dict[Var, Eqn]) -> tuple[Primitive, tuple[Atom, ...], dict]:
    """Local rewrites that keep an equation but make it cheaper (see the module docstring)."""
    name = eqn.primitive.name
    if name == "reshape":
        source = made.get(inputs[0]) if isinstance(inputs[0], Var) else None
        if _is_scalar_broadcast(source):
            return source.primitive, source.inputs, {"shape": tuple(params["shape"]),
                                                     "broadcast_dimensions": ()}
    elif name == "map":
        return (eqn.primitive, *_map_inputs(inputs, params, made))
    elif eqn.primitive.elementwise:
        out_shape = eqn.outputs[0].type.shape
        if out_shape and any(not isinstance(a, Literal) and a.type.shape == out_shape
                             for a in inputs):
            inputs = tuple(_shrink(a) if isinstance(a, Literal) else a for a in inputs)
    return eqn.primitive, inputs, params


def _uniform(atom: Literal) -> bool:
    flat = atom.value.reshape(-1)
    return flat.size > 0 and bool(np.all(flat == flat[0]))


def _shrink(atom: Literal) -> Literal:
    if atom.type.shape == () or not _uniform(atom):
        return atom
    return Literal(atom.value.reshape(-1)[0], Tensor((), atom.type.dtype))


def _is_scalar_broadcast(eqn: Eqn | None) -> bool:
    return (eqn is not None and eqn.primitive.name == "broadcast_in_dim"
            and eqn.inputs[0].type.shape == ())


def _map_inputs(inputs: tuple[Atom, ...], params: dict,
                made: dict[Var, Eqn]) -> tuple[tuple[Atom, ...], dict]:
    """Literal consts and mapped inputs that repeat one scalar move into the lambda."""
    body, k = params["body"], params["num_consts"]
    consts, xs, body_xs = inputs[:k], inputs[k:], body.inputs[k:]
    literals = {var: atom for atom, var in zip(consts, body.inputs[:k])
                if isinstance(atom, Literal) and atom.value.size <= FOLD_MAX_ELEMENTS}
    scalars: dict[int, Atom] = {}
    for j, (atom, var) in enumerate(zip(xs, body_xs)):
        if var.type.shape != ():
            continue
        if isinstance(atom, Literal) and _uniform(atom):
            scalars[j] = _shrink(atom)
        elif isinstance(atom, Var) and _is_scalar_broadcast(made.get(atom)):
            scalars[j] = made[atom].inputs[0]
    if len(scalars) == len(xs):  # one mapped array must stay: it gives the length
        scalars.pop(0)
    if not scalars and not literals:
        return inputs, params
    literals.update((body_xs[j], a) for j, a in scalars.items() if isinstance(a, Literal))
    new_consts = [j for j, a in scalars.items() if isinstance(a, Var)]
    kept_consts = [c for c, var in enumerate(body.inputs[:k]) if var not in literals]
    body_inputs = (*(body.inputs[c] for c in kept_consts), *(body_xs[j] for j in new_consts),
                   *(v for j, v in enumerate(body_xs) if j not in scalars))
    new_body = simplify(_substitute(body, body_inputs, literals))
    new_inputs = (*(consts[c] for c in kept_consts), *(scalars[j] for j in new_consts),
                  *(a for j, a in enumerate(xs) if j not in scalars))
    num_consts = len(kept_consts) + len(new_consts)
    return new_inputs, {**params, "body": new_body, "num_consts": num_consts}


def _substitute(program: Program, inputs: tuple[Var, ...], literals: dict[Var, Literal]) -> Program:
    def sub(atom: Atom) -> Atom:
        return literals.get(atom, atom) if isinstance(atom, Var) else atom

    eqns = tuple(Eqn(e.primitive, tuple(sub(a) for a in e.inputs), e.outputs, e.params)
                 for e in program.eqns)
    return Program(inputs, eqns, tuple(sub(a) for a in program.outputs), name=program.name)


# ------------------------------------------------------------------ common subexpressions
def _atom_key(atom: Atom) -> Any:
    if isinstance(atom, Var):
        return ("var", id(atom))
    if atom.value.size > 64:
        return None
    return ("literal", atom.type, atom.value.tobytes())


def _key(primitive: Primitive, inputs: tuple[Atom, ...], params: dict) -> Any:
    if primitive.subprogram_params or is_effectful(primitive, params):
        return None
    if any(isinstance(v, np.ndarray) for v in params.values()):
        return None
    atoms = tuple(_atom_key(a) for a in inputs)
    if any(a is None for a in atoms):
        return None
    key = (primitive.name, atoms, tuple(sorted(params.items())))
    try:
        hash(key)
    except TypeError:  # an unhashable param
        return None
    return key


# ------------------------------------------------------------------------------- dead code
def live_eqns(eqns: list[Eqn], outputs: tuple[Atom, ...]) -> list[Eqn]:
    """The equations of ``eqns`` that ``outputs`` need, and those with effects, in order."""
    needed = {a for a in outputs if isinstance(a, Var)}
    kept: list[Eqn] = []
    for eqn in reversed(eqns):
        if any(v in needed for v in eqn.outputs) or is_effectful(eqn.primitive, eqn.params):
            kept.append(eqn)
            needed.update(a for a in eqn.inputs if isinstance(a, Var))
    return kept[::-1]
