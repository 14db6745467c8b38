"""Reverse computing: loops reversed by running their inverse, with no stored carries.

Oracles: the same gradient by stored carries and by strip-mined checkpoints (the inverse
only changes how the carries are recovered), central finite differences, and the Numba
back end against the interpreter.
"""

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.ir.errors import TypeCheckError
from qdiff.loops.inversion import NotInvertibleError
from qdiff.loops.memory import measure_checkpoint_memory

MODES = [dict(invertible=True), dict(inverse="explicit"), dict(), dict(checkpoint=2)]


def _loop(steps, step, undo, init, mode):
    """fori_loop in one of MODES (``inverse="explicit"`` passes ``undo``)."""
    if mode.get("inverse") == "explicit":
        mode = {**mode, "inverse": undo}
    return qdiff.fori_loop(0, steps, step, init, **mode)


def leapfrog(steps, **mode):
    """A pendulum by leapfrog (x += dt·v; v -= dt·k·sin x): symplectic, invertible."""
    def loss(k, dt, x0):
        def step(i, c):
            x, v = c
            x = x + dt * v
            v = v - dt * k * qnp.sin(x)
            return x, v

        def undo(i, c):
            x, v = c
            v = v + dt * k * qnp.sin(x)
            x = x - dt * v
            return x, v

        x, v = _loop(steps, step, undo, (x0, 0.0), mode)
        return x ** 2 + 0.5 * v ** 2 + x * v
    return loss


def additive(steps, **mode):
    """Vector carries updated by += and -= of each other, with an int counter alongside."""
    def loss(w, b):
        def step(i, c):
            x, y, n = c
            y = y + qnp.tanh(w * x + b[i % 3])        # reads x, not y
            x = x - 0.1 * qnp.sin(y) * qnp.sum(y)      # reads the new y, not x
            return x, y, n + 1

        def undo(i, c):
            x, y, n = c
            x = x + 0.1 * qnp.sin(y) * qnp.sum(y)
            y = y - qnp.tanh(w * x + b[i % 3])
            return x, y, n - 1

        x, y, n = _loop(steps, step, undo, (np.array([0.2, -0.1]), np.zeros(2),
                                            np.asarray(0)), mode)
        return qnp.sum(x * y) + qnp.sum(x ** 2) / n
    return loss


def scaling(steps, **mode):
    """c *= a, then c += g(i): a damped driven recurrence (divided by a when undone)."""
    def loss(a, b):
        def step(i, c):
            return c * a + b * qnp.cos(0.3 * i) / a

        def undo(i, c):
            return (c - b * qnp.cos(0.3 * i) / a) / a

        return _loop(steps, step, undo, 0.7, mode) ** 2
    return loss


def _grads(make, steps, args, argnums, mode, **kw):
    return np.array(qdiff.grad(make(steps, **mode), argnums=argnums, **kw)(*args), float)


def _central_difference(f, args, argnums, h=1e-6):
    out = []
    for k in argnums:
        plus, minus = list(args), list(args)
        plus[k], minus[k] = args[k] + h, args[k] - h
        out.append((float(f(*plus)) - float(f(*minus))) / (2 * h))
    return np.array(out)


CASES = [(leapfrog, 200, (1.3, 0.05, 0.4), (0, 1, 2)),
         (additive, 60, (0.8, np.array([0.1, -0.2, 0.3])), (0,)),
         (scaling, 80, (0.97, 0.2), (0, 1))]


@pytest.mark.parametrize("make, steps, args, argnums", CASES,
                         ids=["leapfrog", "additive", "scaling"])
def test_reverse_computing_equals_stored_carries_and_finite_differences(make, steps, args,
                                                                         argnums):
    by_mode = [_grads(make, steps, args, argnums, mode) for mode in MODES]
    for got in by_mode[1:]:
        np.testing.assert_allclose(got, by_mode[0], rtol=1e-11, atol=1e-13)
    fd = _central_difference(qdiff.program(make(steps)), args, argnums)
    np.testing.assert_allclose(by_mode[0], fd, rtol=1e-6, atol=1e-8)


def test_vector_argument_gradient_of_the_additive_recurrence():
    args = (0.8, np.array([0.1, -0.2, 0.3]))
    got = qdiff.grad(additive(60, invertible=True), argnums=1)(*args)
    want = qdiff.grad(additive(60), argnums=1)(*args)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)


def test_ten_thousand_leapfrog_steps_agree_with_checkpointing_to_1e9():
    # rounding drift of the inverse over 1e4 undone steps stays far below 1e-9
    args = (1.3, 0.01, 0.4)
    inverse = qdiff.grad(leapfrog(10_000, invertible=True), argnums=(0, 1, 2), jit=True)(*args)
    stored = qdiff.grad(leapfrog(10_000, checkpoint=2), argnums=(0, 1, 2), jit=True)(*args)
    np.testing.assert_allclose(inverse, stored, rtol=1e-9)


@pytest.mark.parametrize("mode", MODES[:2], ids=["invertible", "inverse"])
def test_reverse_computing_stores_no_carries(mode):
    g = qdiff.grad(leapfrog(500, **mode), argnums=(0, 1))
    with measure_checkpoint_memory() as memory:
        g(1.3, 0.05, 0.4)
    assert memory.elements == 0
    names = [e.primitive.name for e in g.trace(1.3, 0.05, 0.4).all_eqns()]
    assert "checkpoint_buffer" not in names and names.count("loop") >= 2
    with measure_checkpoint_memory() as memory:  # the same loop without an inverse stores
        qdiff.grad(leapfrog(500), argnums=(0, 1))(1.3, 0.05, 0.4)
    assert memory.elements == 2 * 500


def test_compiled_reverse_computing_equals_the_interpreter():
    for make, steps, args, argnums in CASES:
        g = qdiff.grad(make(steps, invertible=True), argnums=argnums)
        np.testing.assert_allclose(np.array(qdiff.jit(g)(*args), float),
                                   np.array(g(*args), float), rtol=1e-10, atol=1e-14)


def test_traced_bounds_and_second_derivatives_through_an_inverted_loop():
    def loss(a, n, inverse):
        body = lambda i, c: c * a + qnp.sin(0.1 * i)  # noqa: E731
        return qdiff.fori_loop(0, n, body, 0.3, invertible=inverse) ** 2
    n = np.asarray(40)
    got = qdiff.grad(lambda a, n: loss(a, n, True))(0.9, n)
    want = qdiff.grad(lambda a, n: loss(a, n, False))(0.9, n)
    np.testing.assert_allclose(got, want, rtol=1e-11)
    h_got = qdiff.hessian(lambda a: loss(a, 40, True))(0.9)
    h_want = qdiff.hessian(lambda a: loss(a, 40, False))(0.9)
    np.testing.assert_allclose(h_got, h_want, rtol=1e-10)


def test_a_program_with_an_inverse_round_trips_through_json():
    program = qdiff.trace(leapfrog(5, invertible=True), 1.3, 0.05, 0.4)
    assert "inverse(" in str(program)
    assert qdiff.Program.from_json(program.to_json()) == program


def test_forward_mode_through_an_inverted_loop():
    f = leapfrog(50, invertible=True)
    _, tangent = qdiff.jvp(f, (1.3, 0.05, 0.4), (1.0, 0.0, 0.0))
    want = qdiff.grad(leapfrog(50), argnums=0)(1.3, 0.05, 0.4)
    np.testing.assert_allclose(tangent, want, rtol=1e-12)


UPDATE_FORMS = {
    "x + g": lambda x, g, a: x + g, "g + x": lambda x, g, a: g + x,
    "x - g": lambda x, g, a: x - g, "g - x": lambda x, g, a: g - x,
    "x * a": lambda x, g, a: x * a, "a * x": lambda x, g, a: a * x,
    "x / a": lambda x, g, a: x / a,
}


@pytest.mark.parametrize("form", UPDATE_FORMS)
def test_each_reversible_update_form_is_inverted(form):
    update = UPDATE_FORMS[form]

    def loss(a, invertible):
        def step(i, c):
            x, y = c
            y = y + qnp.cos(x + 0.1 * i)                 # reads x
            return update(x, 0.2 * a * qnp.sin(y), a), y    # g reads the new y
        x, y = qdiff.fori_loop(0, 30, step, (0.3, -0.2), invertible=invertible)
        return x * y + x ** 2

    got = qdiff.grad(lambda a: loss(a, True))(1.02)
    want = qdiff.grad(lambda a: loss(a, False))(1.02)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-13)
    forward = qdiff.program(lambda a: loss(a, True))
    np.testing.assert_allclose(forward(1.02), qdiff.program(lambda a: loss(a, False))(1.02))


# ------------------------------------------------------------------------------ refusals
def _refusal(body, init=(0.5, 0.25)):
    with pytest.raises(NotInvertibleError) as info:
        qdiff.trace(lambda a: qdiff.fori_loop(0, 3, lambda i, c: body(i, c, a), init,
                                              invertible=True), 1.5)
    return str(info.value)


def test_refusal_of_an_update_that_reads_its_own_carry():
    message = _refusal(lambda i, c, a: (c[0] + a * qnp.sin(c[0]), c[1]))
    assert "carry 0's update" in message and "reads carry 0 itself" in message


def test_refusal_of_a_carry_overwritten_by_a_non_update():
    message = _refusal(lambda i, c, a: (c[0], qnp.sin(c[1])))
    assert "carry 1 becomes sin(carry[1])" in message


def test_refusal_of_updates_that_read_each_others_old_values():
    message = _refusal(lambda i, c, a: (c[0] + c[1], c[1] + c[0]))
    assert "no order of them can be undone" in message


def test_refusal_of_scaling_by_a_carry_or_by_zero_or_of_an_integer():
    assert "depends on carries" in _refusal(lambda i, c, a: (c[0] * c[1], c[1]))
    assert "multiplies by zero" in _refusal(lambda i, c, a: (c[0] * 0.0, c[1]))
    assert "integer carry" in _refusal(lambda i, c, a: (c[0] * 2, c[1]),
                                       init=(np.asarray(1), 0.5))


def test_inverse_needs_an_explicit_array_carry():
    counter = qdiff.Cell(0.0)

    def body(i):
        counter.set(counter.value + 1.0)

    with pytest.raises(TypeCheckError, match="explicit carry of arrays"):
        qdiff.trace(lambda x: qdiff.fori_loop(0, 3, body, invertible=True), 1.0)


def test_inverse_returning_another_structure_is_refused():
    with pytest.raises(TypeCheckError, match="fori_loop inverse returns"):
        qdiff.trace(lambda x: qdiff.fori_loop(0, 3, lambda i, c: (c[0] + x, c[1]), (x, x),
                                              inverse=lambda i, c: c[0] - x), 1.0)


# --------------------------------------------------------------------------- while loops
def damped_until(kind):
    """x steps by 0.1 until it passes 5 (a data-dependent count); y *= a, y += b·sin x."""
    def loss(a, b):
        modes = {"invertible": dict(invertible=True), "stored": {},
                 "inverse": dict(inverse=lambda c: (c[0] - 0.1,
                                                    (c[1] - b * qnp.sin(c[0] - 0.1)) / a))}
        x, y = qdiff.while_loop(lambda c: c[0] < 5.0,
                                lambda c: (c[0] + 0.1, c[1] * a + b * qnp.sin(c[0])),
                                (0.0, 0.5), **modes[kind])
        return y ** 2
    return loss


def test_while_loop_reverse_computing_equals_stored_carries_and_finite_differences():
    args = (0.97, 0.3)
    want = qdiff.grad(damped_until("stored"), argnums=(0, 1))(*args)
    for kind in ("invertible", "inverse"):
        g = qdiff.grad(damped_until(kind), argnums=(0, 1))
        with measure_checkpoint_memory() as memory:
            got = g(*args)
        assert memory.elements == 0
        np.testing.assert_allclose(got, want, rtol=1e-11)
    np.testing.assert_allclose(
        want, _central_difference(qdiff.program(damped_until("stored")), args, (0, 1)),
        rtol=1e-6)
    compiled = qdiff.jit(qdiff.grad(damped_until("invertible"), argnums=(0, 1)))(*args)
    np.testing.assert_allclose(compiled, want, rtol=1e-10)


def test_while_loop_refusal_names_the_while_loop():
    with pytest.raises(NotInvertibleError, match=r"while_loop\(invertible=True\).*carry 0"):
        qdiff.trace(lambda a: qdiff.while_loop(lambda c: c < 5.0, lambda c: c + qnp.exp(c) * a,
                                               0.1, invertible=True), 1.0)


@pytest.mark.slow
def test_benchmark_script_runs_and_its_gradients_agree():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "reverse_computing.py"
    done = subprocess.run([sys.executable, str(script), "--steps", "2000",
                           "--interpreter-steps", "100", "--width", "2"],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert len(rows) == 8
    for row in rows:
        assert float(row[-1]) < 1e-10
        if row[2:4] == ["reverse", "computing"]:
            assert row[4] == "0"
