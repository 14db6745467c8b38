"""Constant folding and the other rules of `simplify`, on hand-built programs (tracing
already folds constants) and on derivative programs.

Oracles: NumPy evaluation of the same expressions, and the unsimplified programs.
"""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.ir import Eqn, Literal, Program, Tensor, Var, get_primitive
from qdiff.ir.passes import simplify
from qdiff.ir.passes.simplify import FOLD_MAX_ELEMENTS
from qdiff.ir.tracer import is_effectful

F64 = Tensor((), "float64")


def eqn(name, inputs, out_type, **params):
    out = Var(out_type)
    return Eqn(get_primitive(name), tuple(inputs), (out,), params), out


def names(program):
    return [e.primitive.name for e in program.eqns]


def foldable_left(program):
    """Equations a complete constant folding would have removed (recursively)."""
    found = []
    for e in program.eqns:
        if (all(isinstance(a, Literal) for a in e.inputs) and e.inputs
                and not is_effectful(e.primitive, e.params)
                and sum(v.type.size for v in e.outputs) <= FOLD_MAX_ELEMENTS):
            found.append(e.primitive.name)
        for _, sub in e.subprograms():
            found += foldable_left(sub)
    return found


def test_literal_chains_fold_to_one_literal():
    x = Var(Tensor((3,), "float64"))
    e1, a = eqn("add", [Literal(2.0), Literal(3.0)], F64)
    e2, b = eqn("log", [a], F64)
    e3, c = eqn("mul", [b, Literal(np.float64(2.0))], F64)
    e4, y = eqn("mul", [x, c], Tensor((3,), "float64"))
    program = Program((x,), (e1, e2, e3, e4), (y,)).verify()
    simple = simplify(program).verify()
    assert names(simple) == ["mul"]
    (literal,) = [a for a in simple.eqns[0].inputs if isinstance(a, Literal)]
    assert literal.value == pytest.approx(2 * np.log(5.0), rel=1e-15)
    v = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(simple(v), v * 2 * np.log(5.0), rtol=1e-15)
    np.testing.assert_array_equal(simple(v), program(v))


def test_folding_can_produce_an_output_and_keeps_dtypes():
    i32 = Tensor((2,), "int32")
    e1, a = eqn("mul", [Literal(np.array([3, 4], np.int32)), Literal(np.array([2, 5], np.int32))],
                i32)
    e2, b = eqn("convert", [a], Tensor((2,), "float32"), dtype="float32")
    e3, c = eqn("sqrt", [b], Tensor((2,), "float32"))
    program = Program((), (e1, e2, e3), (c,)).verify()
    simple = simplify(program).verify()
    assert simple.eqns == ()
    (out,) = simple.outputs
    assert isinstance(out, Literal) and out.type == Tensor((2,), "float32")
    np.testing.assert_array_equal(out.value, np.sqrt(np.array([6, 20], np.float32)))


def test_large_results_are_not_inlined():
    n = FOLD_MAX_ELEMENTS + 1
    x = Var(Tensor((n,), "float64"))
    e1, big = eqn("broadcast_in_dim", [Literal(0.5)], Tensor((n,), "float64"), shape=(n,),
                  broadcast_dimensions=())
    e2, y = eqn("add", [x, big], Tensor((n,), "float64"))
    e3, small = eqn("broadcast_in_dim", [Literal(0.5)], Tensor((4,), "float64"), shape=(4,),
                    broadcast_dimensions=())
    e4, s = eqn("reduce_sum", [small], F64, axes=(0,))
    e5, z = eqn("mul", [y, s], Tensor((n,), "float64"))
    program = Program((x,), (e1, e2, e3, e4, e5), (z,)).verify()
    simple = simplify(program).verify()
    assert names(simple) == ["broadcast_in_dim", "add", "mul"]
    assert simple.eqns[2].inputs[1].value == 2.0  # the small broadcast and its sum folded
    v = np.linspace(0, 1, n)
    np.testing.assert_allclose(simple(v), (v + 0.5) * 2.0, rtol=1e-15)


def test_multiple_result_equations_with_sub_programs_fold():
    body = qdiff.trace(lambda v: (qnp.sin(v), qnp.cos(v) * 2.0), 0.0)
    xs = np.array([0.0, 0.5, 1.0])
    outs = (Var(Tensor((3,), "float64")), Var(Tensor((3,), "float64")))
    mapped = Eqn(get_primitive("map"), (Literal(xs),), outs, {"body": body, "num_consts": 0})
    program = Program((), (mapped,), outs).verify()
    simple = simplify(program)
    assert simple.eqns == ()
    np.testing.assert_allclose(simple.outputs[0].value, np.sin(xs), rtol=1e-15)
    np.testing.assert_allclose(simple.outputs[1].value, 2 * np.cos(xs), rtol=1e-15)


def test_effectful_equations_are_never_folded():
    from qdiff import quantum as qm

    def f():
        q = qm.qubits(1)
        qm.ry(0.3, q[0])
        return qm.expval("Z", q)

    program = qdiff.trace(f)
    assert "qalloc" in names(program)  # no operands at all, yet it allocates
    assert simplify(program) == program


def test_identities_and_uniform_literals():
    t3 = Tensor((3,), "float64")
    x = Var(t3)
    eqns = []

    def add(name, inputs, out_type=t3, **params):
        e, out = eqn(name, inputs, out_type, **params)
        eqns.append(e)
        return out

    a = add("pow", [x, Literal(1.0)])
    b = add("sub", [a, Literal(np.zeros(3))])
    c = add("div", [b, Literal(1.0)])
    d = add("reduce_sum", [c], axes=())
    e = add("reshape", [d], shape=(3,))
    f = add("convert", [e], dtype="float64")
    g = add("transpose", [f], perm=(0,))
    h = add("mul", [g, Literal(np.full(3, 2.5))])   # a uniform array: becomes 2.5
    k = add("add", [h, Literal(np.array([1.0, 2.0, 3.0]))])  # not uniform: stays
    program = Program((x,), tuple(eqns), (k,)).verify()
    simple = simplify(program).verify()
    assert names(simple) == ["mul", "add"]
    assert simple.eqns[0].inputs[0] is x and simple.eqns[0].inputs[1].type == Tensor((), "float64")
    assert simple.eqns[1].inputs[1].type == t3
    v = np.array([0.5, -1.0, 4.0])
    np.testing.assert_allclose(simple(v), v * 2.5 + [1.0, 2.0, 3.0], rtol=1e-15)


def test_a_uniform_literal_that_sets_the_shape_is_kept():
    e, y = eqn("mul", [Literal(np.full(3, 2.0)), Literal(4.0)], Tensor((3,), "float64"))
    x = Var(F64)
    e2, z = eqn("add", [y, x], Tensor((3,), "float64"))
    program = Program((x,), (e, e2), (z,)).verify()
    simple = simplify(program).verify()  # folds mul (3 elements), keeps add's (3,) operand
    assert names(simple) == ["add"] and simple.eqns[0].inputs[0].type == Tensor((3,), "float64")
    np.testing.assert_allclose(simple(1.5), np.full(3, 9.5))


def test_map_inputs_that_repeat_a_scalar_move_into_the_lambda():
    body = qdiff.trace(lambda c, a, b: qnp.sin(a) * b + c, 0.0, 0.0, 0.0)
    s, xs = Var(F64), Var(Tensor((4,), "float64"))
    bcast, sb = eqn("broadcast_in_dim", [s], Tensor((4,), "float64"), shape=(4,),
                    broadcast_dimensions=())
    out = Var(Tensor((4,), "float64"))
    mapped = Eqn(get_primitive("map"), (Literal(0.5), xs, sb), (out,),
                 {"body": body, "num_consts": 1})
    program = Program((s, xs), (bcast, mapped), (out,)).verify()
    simple = simplify(program).verify()
    assert names(simple) == ["map"]
    (m,) = simple.eqns
    assert m.params["num_consts"] == 1 and m.inputs == (s, xs)  # s is a const now
    assert any(isinstance(a, Literal) and a.value == 0.5
               for e in m.params["body"].eqns for a in e.inputs)
    v = np.array([0.1, 0.2, -3.0, 4.0])
    np.testing.assert_allclose(simple(1.5, v), np.sin(v) * 1.5 + 0.5, rtol=1e-15)

    ones = Literal(np.ones(4))
    mapped = Eqn(get_primitive("map"), (Literal(0.5), xs, ones), (out,),
                 {"body": body, "num_consts": 1})
    simple = simplify(Program((s, xs), (mapped,), (out,))).verify()
    assert simple.eqns[0].inputs == (xs,)
    assert "mul" not in names(simple.eqns[0].params["body"])  # sin(a) * 1.0 is sin(a)
    np.testing.assert_allclose(simple(1.5, v), np.sin(v) + 0.5, rtol=1e-15)


@pytest.mark.parametrize("fuse", [True, False])
def test_derivative_programs_are_fully_folded_and_correct(fuse):
    def f(x, w):
        s = qdiff.fori_loop(0, 5, lambda i, s: qnp.tanh(w * s + x[i % 3]), 0.0)
        return qnp.sum(qnp.exp(qnp.sin(x) * w) * 2.0) + s ** 2

    x, w = np.array([0.3, -0.1, 0.8]), 0.7
    program = qdiff.trace(f, x, w)
    built = [qdiff.grad(program, argnums=(0, 1), fuse=fuse),
             qdiff.jvp_program(program), qdiff.vjp_program(program),
             qdiff.jacobian(program, fuse=fuse), qdiff.hessian(program, fuse=fuse)]
    for derivative in built:
        derivative.verify()
        assert foldable_left(derivative) == []
    gx, gw = built[0](x, w)

    def f_np(x, w):
        s = 0.0
        for i in range(5):
            s = np.tanh(w * s + x[i % 3])
        return np.sum(np.exp(np.sin(x) * w) * 2.0) + s ** 2

    eps = 1e-6
    for k in range(3):
        d = np.zeros(3)
        d[k] = eps
        assert gx[k] == pytest.approx((f_np(x + d, w) - f_np(x - d, w)) / (2 * eps), rel=1e-6)
    assert gw == pytest.approx((f_np(x, w + eps) - f_np(x, w - eps)) / (2 * eps), rel=1e-6)
    np.testing.assert_allclose(built[3](x, w), gx, rtol=1e-12)


def test_printed_gradient_program_is_short():
    program = qdiff.trace(lambda x, y: qnp.sum(qnp.exp(qnp.sin(x) * y) + x), np.zeros(3), 1.0)
    text = str(qdiff.grad(program, argnums=(0, 1)))
    assert text.count("\n") < 20
    assert "[1., 1., 1.]" not in text  # the seed enters the lambda as a scalar, or folds away
