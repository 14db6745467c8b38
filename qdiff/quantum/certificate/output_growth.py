"""How large a program's outputs can get: ``|output| ≤ A + B·n`` on every run.

``n`` is the number of iterations of the program's unbounded loop on that run (there is at
most one: `tail_certificate`); ``B`` is nonzero for outputs that count iterations. The bound
is an abstract interpretation over the IR, one rule per primitive in `GROWTH_RULES`:

    expval[Σ c_k P_k] ≤ Σ|c_k|,   probs, bits ≤ 1,   x + y ≤ (A_x + A_y) + (B_x + B_y) n,
    x·y ≤ A_x A_y + (A_x B_y + B_x A_y) n   (when B_x B_y = 0),
    counter c ← c + δ of the loop ≤ A_init + |δ| n.

An operation without a rule gives no bound (``None``), and the certificate says which one.

>>> import qdiff
>>> from qdiff.quantum.lang.examples import repeat_until_one   # the rounds until a 1 is read
>>> program = qdiff.trace(lambda t: 2.0 * repeat_until_one(t) - 1.0, 0.7)
>>> growth(program, [np.asarray(0.7)]).bounds                # |2 n - 1| <= 1 + 2 n
[(1.0, 2.0)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import classical  # noqa: F401  (registers the primitives the rules name)
from ...autodiff import stop_gradient  # noqa: F401  (registers stop_gradient)
from ...compiler.segment_call import compiled_segment_p, segments_inlined
from ...ir.control_flow import cond_p, loop_p, while_p
from ...ir.core import Eqn, Literal, Program, Var, producers
from ...ir.primitives import Primitive, get_primitive
from ...ir.types import QState
from ..lang import fusion  # noqa: F401  (registers fused_gate)
from ..lang.primitives import QUANTUM_PRIMITIVES

Bound = tuple[float, float] | None  # (A, B): |value| ≤ A + B·n elementwise; None: unknown
STATE: Bound = (0.0, 0.0)  # quantum states carry no number


@dataclass
class Growth:
    """Per program output, ``(A, B)`` with ``|output| ≤ A + B·n``, or None with the reason."""

    bounds: list[Bound]
    reason: str | None = None


def growth(program: Program, values: Sequence[Any]) -> Growth:
    """Bounds of ``program``'s outputs for the inputs ``values``; ``n`` counts the rounds of
    its loop on a measurement at the top level (a second one has no bound)."""
    loop = next((e for e in program.eqns if e.primitive.name == "while"
                 and e.params["max_iter"] is None), None)
    interp = _Interpreter(loop)
    inputs = [_constant(v) for v in values]
    bounds = interp.run(program, inputs)
    return Growth(bounds, interp.reason)


def _constant(value: Any) -> Bound:
    array = np.asarray(value)
    if array.dtype.kind == "c" and array.ndim == 1:
        return STATE
    return (float(np.max(np.abs(array))) if array.size else 0.0, 0.0)


class _Interpreter:
    def __init__(self, loop: Eqn | None):
        self.loop = loop
        self.reason: str | None = None

    def run(self, program: Program, inputs: list[Bound]) -> list[Bound]:
        env: dict[Var, Bound] = dict(zip(program.inputs, inputs))

        def read(atom: Any) -> Bound:
            if isinstance(atom, Literal):
                return _constant(atom.value)
            return env.get(atom)

        for eqn in program.eqns:
            ins = [STATE if isinstance(a.type, QState) else read(a) for a in eqn.inputs]
            outs = self.apply(eqn, ins)
            for var, bound in zip(eqn.outputs, outs):
                env[var] = STATE if isinstance(var.type, QState) else bound
        return [STATE if isinstance(a.type, QState) else read(a) for a in program.outputs]

    def apply(self, eqn: Eqn, ins: list[Bound]) -> list[Bound]:
        name = eqn.primitive.name
        if eqn.primitive in _CONTROL:
            return _CONTROL[eqn.primitive](self, eqn, ins)
        rule = GROWTH_RULES.get(eqn.primitive)
        # a quantum operation's numbers never depend on its operands' sizes (an angle's)
        if rule is None or (None in ins and name not in QUANTUM_PRIMITIVES):
            if rule is None and self.reason is None:
                self.reason = f"no growth rule for '{name}'"
            return [None] * len(eqn.outputs)
        result = rule(eqn, ins)
        return result if isinstance(result, list) else [result]


def _sum(bounds: Sequence[Bound]) -> Bound:
    return (sum(b[0] for b in bounds), sum(b[1] for b in bounds))


def _join(bounds: Sequence[Bound]) -> Bound:
    if any(b is None for b in bounds):
        return None
    return (max(b[0] for b in bounds), max(b[1] for b in bounds))


def _product(x: Bound, y: Bound) -> Bound:
    assert x is not None and y is not None
    if x[1] and y[1]:
        return None  # grows like n²: beyond the certificate's geometric sums
    return (x[0] * y[0], x[0] * y[1] + x[1] * y[0])


def _size(eqn: Eqn, k: int = 0) -> int:
    return int(np.prod(eqn.inputs[k].type.shape))


def _out_size(eqn: Eqn) -> int:
    return int(np.prod(eqn.outputs[0].type.shape))


def _expval(eqn: Eqn, ins: list[Bound]) -> list[Bound]:
    return [STATE, (float(sum(abs(c) for c, _ in eqn.params["terms"])), 0.0)]


def _power(eqn: Eqn, ins: list[Bound]) -> Bound:
    base, exponent = ins
    literal = eqn.inputs[1]
    if not isinstance(literal, Literal) or base[1]:
        return None
    k = float(np.max(np.asarray(literal.value)))
    return (base[0] ** k, 0.0) if k >= 0 else None


def _divide(eqn: Eqn, ins: list[Bound]) -> Bound:
    divisor = eqn.inputs[1]
    if not isinstance(divisor, Literal):
        return None
    smallest = float(np.min(np.abs(np.asarray(divisor.value))))
    return None if smallest == 0 else (ins[0][0] / smallest, ins[0][1] / smallest)


def _einsum(eqn: Eqn, ins: list[Bound]) -> Bound:
    if len(ins) != 2:
        return None
    bound = _product(ins[0], ins[1])
    # each output element sums at most (all elements)/(output elements) products
    terms = max(1, _size(eqn, 0) * _size(eqn, 1) // max(1, _out_size(eqn)))
    return None if bound is None else (bound[0] * terms, bound[1] * terms)


def _same(eqn: Eqn, ins: list[Bound]) -> list[Bound]:
    return [ins[0]] * len(eqn.outputs)


def _unit(eqn: Eqn, ins: list[Bound]) -> list[Bound]:
    return [STATE if isinstance(v.type, QState) else (1.0, 0.0) for v in eqn.outputs]


def _reduce_sum(eqn: Eqn, ins: list[Bound]) -> Bound:
    terms = max(1, _size(eqn) // max(1, _out_size(eqn)))
    return (ins[0][0] * terms, ins[0][1] * terms)


_RULES_BY_NAME: dict[str, Callable[[Eqn, list[Bound]], Bound | list[Bound]]] = {
    # quantum: states carry no number, readouts are bounded by the observable
    **{name: _unit for name in ("measure", "probs", "statevector", "sample", "gate", "reset",
                                "postselect", "qalloc", "qextend", "fused_gate")},
    "expval": _expval,
    "bit_to_int": _same,
    # linear and structural
    "add": lambda e, i: _sum(i), "sub": lambda e, i: _sum(i),
    **{name: _same for name in ("neg", "convert", "reshape", "transpose", "broadcast_in_dim",
                                "slice", "rev", "real", "imag", "conj", "abs", "gather",
                                "dynamic_slice", "stop_gradient", "unpack", "floor", "ceil",
                                "round")},
    "concatenate": lambda e, i: _join(i),
    "reduce_sum": _reduce_sum,
    "reduce_max": _same, "reduce_min": _same,
    "select": lambda e, i: _join(i[1:]),
    "max": lambda e, i: _join(i), "min": lambda e, i: _join(i),
    "mul": lambda e, i: _product(i[0], i[1]),
    "div": _divide,
    "pow": _power,
    "einsum": _einsum,
    # bounded whatever the operand
    **{name: lambda e, i: (1.0, 0.0) for name in (
        "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "not", "sign", "sin", "cos",
        "tanh")},
    "exp": lambda e, i: None if i[0][1] else (float(np.exp(i[0][0])), 0.0),
    "sqrt": lambda e, i: (float(np.sqrt(i[0][0])), float(np.sqrt(i[0][1]))),
}


# ------------------------------------------------------------------------------ control flow
def _cond(interp: _Interpreter, eqn: Eqn, ins: list[Bound]) -> list[Bound]:
    results = [interp.run(branch, ins[1:]) for branch in eqn.params["branches"]]
    return [_join(column) for column in zip(*results)]


def _loop(interp: _Interpreter, eqn: Eqn, ins: list[Bound]) -> list[Bound]:
    # a bounded loop: its carries after each of its (static) iterations
    start, stop = (a.value if isinstance(a, Literal) else None for a in eqn.inputs[:2])
    if start is None or stop is None or int(stop) - int(start) > 10_000:
        interp.reason = interp.reason or "a loop whose trip count is not a constant"
        return [None] * len(eqn.outputs)
    k = eqn.params["num_consts"]
    index = (float(max(abs(int(start)), abs(int(stop)))), 0.0)
    carry = ins[2 + k:]
    for _ in range(int(start), int(stop)):
        carry = interp.run(eqn.params["body"], [index, *ins[2:2 + k], *carry])
    return carry


def _while(interp: _Interpreter, eqn: Eqn, ins: list[Bound]) -> list[Bound]:
    p = eqn.params
    nc, nb = p["num_cond_consts"], p["num_body_consts"]
    cond_consts, body_consts, carry = ins[:nc], ins[nc:nc + nb], ins[nc + nb:]
    if eqn is not interp.loop:  # n counts the rounds of `interp.loop` only
        if p["max_iter"] is None or p["max_iter"] > 10_000:
            interp.reason = interp.reason or (
                "a second loop on a measurement" if p["max_iter"] is None
                else "a bounded loop of more than 10000 rounds")
            return [None] * len(eqn.outputs)
        for _ in range(p["max_iter"] + 1):  # while^(T): at most T rounds
            tested = interp.run(p["cond"], [*cond_consts, *carry])[1:]
            body = interp.run(p["body"], [*body_consts, *tested])
            carry = [_join([c, t, b]) for c, t, b in zip(carry, tested, body)]
        return carry
    # the unbounded loop: counters grow by |δ| a round; every other carry must settle
    steps = _counter_steps(eqn)
    counters = {j: (c[0], abs(steps[j])) for j, c in enumerate(carry)
                if j in steps and c is not None}
    fixed = [c if j not in counters else counters[j] for j, c in enumerate(carry)]
    for _ in range(4):
        tested = interp.run(p["cond"], [*cond_consts, *fixed])[1:]
        body = interp.run(p["body"], [*body_consts, *tested])
        joined = [counters[j] if j in counters else _join([c, t, b])
                  for j, (c, t, b) in enumerate(zip(fixed, tested, body))]
        if joined == fixed:
            return fixed
        fixed = joined
    interp.reason = interp.reason or "a loop-carried value that keeps growing"
    return [None] * len(eqn.outputs)


def _counter_steps(eqn: Eqn) -> dict[int, float]:
    """Carries the body only increments by a constant: ``c ← c + δ`` (a round counter)."""
    body = eqn.params["body"]
    nb = eqn.params["num_body_consts"]
    made_by = producers(segments_inlined(body.eqns))
    steps = {}
    for j, out in enumerate(body.outputs):
        carry_in = body.inputs[nb + j]
        eqn_ = made_by.get(out) if isinstance(out, Var) else None
        while eqn_ is not None and eqn_.primitive.name == "convert":
            inner = eqn_.inputs[0]
            eqn_ = made_by.get(inner) if isinstance(inner, Var) else None
        if eqn_ is None or eqn_.primitive.name != "add":
            continue
        a, b = eqn_.inputs
        for mine, other in ((a, b), (b, a)):
            if mine is carry_in and isinstance(other, Literal):
                steps[j] = float(np.max(np.abs(np.asarray(other.value))))
    return steps


def _segment(interp: _Interpreter, eqn: Eqn, ins: list[Bound]) -> list[Bound]:
    # a compiled segment of classical equations (`qdiff.jit` compiling around the quantum
    # part): bounded as its equations are
    return interp.run(eqn.params["segment"].program, ins)


# by primitive: a name that names no primitive fails here, at import, not as a missing rule
GROWTH_RULES: dict[Primitive, Callable[[Eqn, list[Bound]], Bound | list[Bound]]] = {
    get_primitive(name): rule for name, rule in _RULES_BY_NAME.items()}
_CONTROL = {cond_p: _cond, loop_p: _loop, while_p: _while, compiled_segment_p: _segment}
