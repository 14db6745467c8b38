"""Compiled programs that once failed to compile or gave wrong numbers, each against the
interpreter."""

from __future__ import annotations

import numpy as np

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from tests.backends import assert_agree


def test_power_with_an_array_constant_exponent_compiles():
    x = np.array([0.5, 1.5, 2.0])
    program = qdiff.trace(lambda v: qnp.power(v, np.array([-0.7, 2.0, 0.2])), x)
    assert_agree(CompiledProgram(program)(x), program(x), "pow with an array exponent")


def test_a_loop_that_swaps_its_array_carries_is_a_swap_not_a_copy():
    # the carries were assigned one by one: (c1, c2) = (c2, c1) became c1 = c2; c2 = c1
    def swap(a, x, y):
        return qdiff.fori_loop(0, 3, lambda i, c: (c[1], c[0] + a), (x, y))

    args = (0.5, np.ones(2), np.full(2, 2.0))
    program = qdiff.trace(swap, *args)
    assert_agree(CompiledProgram(program)(*args), program(*args), "swapped array carries")
    while_swap = qdiff.trace(lambda x, y: qdiff.while_loop(
        lambda c: c[2] < 3, lambda c: (c[1], c[0] * 2.0, c[2] + 1), (x, y, 0))[:2], *args[1:])
    assert_agree(CompiledProgram(while_swap)(*args[1:]), while_swap(*args[1:]),
                 "swapped while carries")


def test_gradient_of_a_loop_updating_vector_carries_in_place_matches_the_interpreter():
    # the reverse sweep's carries come back permuted from in-place adjoint updates
    def loss(w, b):
        def step(i, c):
            x, y, n = c
            y = y + qnp.tanh(w * x + b[i % 3])
            x = x - 0.1 * qnp.sin(y) * qnp.sum(y)
            return x, y, n + 1
        x, y, n = qdiff.fori_loop(0, 60, step, (np.array([0.2, -0.1]), np.zeros(2),
                                                np.asarray(0)))
        return qnp.sum(x * y) + qnp.sum(x ** 2) / n

    args = (0.8, np.array([0.1, -0.2, 0.3]))
    program = qdiff.grad(loss).trace(*args)
    assert_agree(CompiledProgram(program)(*args), program(*args), "in-place carry adjoints")


def test_one_array_passed_as_two_carries_is_two_arrays():
    # both carries were the same array, so each in-place update changed the other too
    def twice(x):
        y = x * 1.5
        return qdiff.fori_loop(0, 3, lambda i, c: (c[0] * 2.0, c[1] + 1.0), (y, y))

    x = np.array([0.5, -1.0, 2.0])
    program = qdiff.trace(twice, x)
    assert_agree(CompiledProgram(program)(x), program(x), "one array as two carries")


def test_jit_of_grad_called_first_traces_an_array_argument_indexed_by_the_loop_index():
    # qdiff.jit(qdiff.grad(f)) called before any call of qdiff.grad(f), with f reading
    # b[i % 3] of an undifferentiated array argument, raised TracerConversionError
    def loss(x, b):
        return qdiff.fori_loop(0, 5, lambda i, c: qnp.sin(c) * b[i % 3] + c * b[(i + 1) % 3], x)

    def plain(x, b):
        for i in range(5):
            x = np.sin(x) * b[i % 3] + x * b[(i + 1) % 3]
        return x

    b, x, h = np.array([0.5, 1.1, 0.7]), 0.3, 1e-6
    central = (plain(x + h, b) - plain(x - h, b)) / (2 * h)
    for first in ("jit", "grad"):
        gradient = qdiff.grad(loss)
        calls = [qdiff.jit(gradient), gradient]
        results = [call(x, b) for call in (calls if first == "jit" else calls[::-1])]
        assert_agree(results[0], results[1], f"{first} first")
        np.testing.assert_allclose(results[0], central, rtol=1e-8)
    arrays = np.array([0.3, -0.4])  # an array carry too
    vector_loss = lambda x, b: qnp.sum(loss(x, b))  # noqa: E731
    assert_agree(qdiff.jit(qdiff.grad(vector_loss))(arrays, b),
                 [(plain(a + h, b) - plain(a - h, b)) / (2 * h) for a in arrays], "array carry",
                 rtol=1e-8)


def test_a_nest_written_early_does_not_overwrite_an_array_a_delayed_nest_still_reads():
    # v's last reader in program order is sin(v) * r, whose nest was written first (a
    # matrix product needed it), so it stored its result in v's array; the nest of
    # v[None] * m, earlier in the program but written later, then read sin(v) * r for v
    def f(a, b, m, w, r):
        v = qnp.einsum("ij,jk->ik", a, b)
        u = v[None, :, :] * m
        y = qnp.sin(v) * r[None, :]
        return u, qnp.einsum("ij,jk->ik", y, w)

    rng = np.random.default_rng(0)
    args = (rng.normal(size=(5, 80)), rng.normal(size=(80, 6)), rng.normal(size=(3, 5, 6)),
            rng.normal(size=(6, 70)), rng.normal(size=6))
    program = qdiff.trace(f, *args)
    for k, (got, want) in enumerate(zip(CompiledProgram(program)(*args), program(*args))):
        assert_agree(got, want, f"output {k}")


def test_a_loop_whose_carry_starts_as_its_constant_does_not_update_the_constant():
    # the carry took the array of its initial value, dead after the loop, in place; the
    # body's constant was that same array, so each step read the updated carry for it
    def f(b):
        y = qnp.abs(b)
        return qdiff.fori_loop(0, 3, lambda k, c: qnp.sin(c) * 0.5 + y, y)

    b = np.linspace(-1.0, 2.0, 6)
    program = qdiff.trace(f, b)
    assert_agree(CompiledProgram(program)(b), program(b), "loop carry equal to its constant")

    def g(b):
        y = qnp.abs(b)
        return qdiff.while_loop(lambda c: c[1] < 3,
                                lambda c: (qnp.sin(c[0]) * 0.5 + y, c[1] + 1), (y, 0))[0]

    program = qdiff.trace(g, b)
    assert_agree(CompiledProgram(program)(b), program(b), "while carry equal to its constant")


def test_a_loop_nest_over_an_empty_batch_compiles():
    # merge_runs found no loop axis for a zero-size axis: lowering raised TypeError
    def f(x, m):
        return qnp.sum((x[:, None, :] - m[None]) ** 2)

    x, m = np.zeros((0, 3)), np.ones((2, 3))
    program = qdiff.trace(f, x, m)
    assert CompiledProgram(program)(x, m) == 0.0
    gradient = qdiff.grad(f, argnums=(0, 1))
    for got, want in zip(qdiff.jit(gradient)(x, m), gradient(x, m)):
        assert got.shape == want.shape
        assert_agree(got, want, "empty batch")
