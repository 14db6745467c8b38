"""Exact second (and higher) derivatives of quantum programs: forward mode on jets.

`qdiff.hessian`, `grad(grad(f))`, `jacfwd`/`jacrev` of `grad`, `jvp`/`vjp` of a derivative
and `qdiff.jvp` itself run the program on jets (`qdiff.quantum.gradients.forward_mode`).
Oracles: closed forms, central differences of the exact (adjoint) gradient, forward against
reverse mode. What cannot be differentiated is an error that names it.
"""

import numpy as np
import pytest
from oracles import central_difference_jacobian
from quantum_programs_lib import (
    coin_loop,
    entangled_postselected,
    registers_and_a_branch,
    until_one,
    von_neumann,
)

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.quantum.gradients.forward_mode import BranchOpensError
from qdiff.quantum.lang.examples import rotation


def hessian_by_differences(f, x):
    return central_difference_jacobian(qdiff.grad(f), x)


rotated = qdiff.program(rotation)  # <Z> after ry(x): cos x


@qdiff.program
def product(w):
    q = qm.qubits(2)
    qm.ry(w[0], q[0])
    qm.ry(w[1], q[1])
    return qm.expval("ZZ", q)                      # cos a cos b


@qdiff.program
def hybrid(w):
    q = qm.qubits(2)
    angle = qdiff.fori_loop(0, 3, lambda i, s: qnp.sin(s * w[0]) + w[1], 0.2)
    qm.ry(qnp.tanh(w[0]), q[0])
    qm.cx(q[0], q[1])
    qm.crx(w[1] ** 2, q[0], q[1])
    qm.u(w[0], angle, 0.3, q[1])
    qm.pauli_rot(w[2], "XY", [q[0], q[1]])
    return (qm.expval("ZZ + 0.5*XI", q) - 0.5) ** 2


W = np.array([0.3, -0.4, 0.8])


def test_issue_reproduction_second_derivative_of_z_after_ry_is_minus_cos():
    x = 0.3
    assert np.isclose(qdiff.hessian(rotated)(np.array(x)), -np.cos(x), atol=1e-14)
    assert np.isclose(qdiff.grad(qdiff.grad(rotated))(x), -np.cos(x), atol=1e-14)
    assert np.isclose(qdiff.jacfwd(qdiff.grad(rotated))(x), -np.cos(x), atol=1e-14)
    value, tangent = qdiff.jvp(rotated, (x,), (2.0,))
    assert np.isclose(value, np.cos(x)) and np.isclose(tangent, -2 * np.sin(x), atol=1e-14)
    assert np.isclose(qdiff.grad(qdiff.grad(qdiff.grad(rotated)))(x), np.sin(x), atol=1e-14)


def test_hessian_of_two_rotations_matches_the_closed_form():
    a, b = 0.7, -1.1
    expected = np.array([[-np.cos(a) * np.cos(b), np.sin(a) * np.sin(b)],
                         [np.sin(a) * np.sin(b), -np.cos(a) * np.cos(b)]])
    np.testing.assert_allclose(qdiff.hessian(product)(np.array([a, b])), expected, atol=1e-13)


def test_hessian_with_classical_pre_and_post_processing_matches_differences_of_the_gradient():
    hessian = qdiff.hessian(hybrid)(W)
    np.testing.assert_allclose(hessian, hessian.T, atol=1e-12)
    np.testing.assert_allclose(hessian, hessian_by_differences(hybrid, W), atol=1e-7)


def test_jacfwd_jacrev_and_grad_of_grad_agree_with_the_hessian():
    hessian = qdiff.hessian(hybrid)(W)
    np.testing.assert_allclose(qdiff.jacfwd(qdiff.grad(hybrid))(W), hessian, atol=1e-12)
    np.testing.assert_allclose(qdiff.jacrev(qdiff.grad(hybrid))(W), hessian, atol=1e-12)
    value, gradient = qdiff.jacobian(qdiff.value_and_grad(hybrid))(W)
    np.testing.assert_allclose(value, qdiff.grad(hybrid)(W), atol=1e-12)
    np.testing.assert_allclose(gradient, hessian, atol=1e-12)
    t = np.array([0.5, -1.0, 2.0])
    _, hvp = qdiff.jvp(qdiff.grad(hybrid), (W,), (t,))
    np.testing.assert_allclose(hvp, hessian @ t, atol=1e-12)


@qdiff.program
def keyed(a, b, n):
    q = qm.qubits(2)
    qm.ry(a * n, q[0])
    qm.rx(b["x"][0] * b["y"], q[1])
    qm.crz(b["x"][1], q[1], q[0])
    qm.h(q[0])
    return qm.expval("ZZ + 0.3*XI", q)


def test_hessian_of_a_structured_argument_has_the_structure_of_jacfwd_of_grad():
    b = {"x": np.array([0.7, -0.2]), "y": np.array(1.3)}
    hessian = qdiff.hessian(keyed, argnums=1)(0.4, b, 2)
    again = qdiff.jacfwd(qdiff.grad(keyed, argnums=1), argnums=1)(0.4, b, 2)
    for row in ("x", "y"):
        for column in ("x", "y"):
            assert np.shape(hessian[row][column]) == np.shape(b[row]) + np.shape(b[column])
            np.testing.assert_allclose(hessian[row][column], again[row][column], atol=1e-12)
    np.testing.assert_allclose(hessian["x"]["y"], hessian["y"]["x"], atol=1e-12)
    np.testing.assert_allclose(hessian["x"]["x"], hessian["x"]["x"].T, atol=1e-12)


def test_third_derivatives_compose_with_the_hessian():
    assert np.isclose(qdiff.grad(qdiff.hessian(rotated))(0.3), np.sin(0.3), atol=1e-13)


@qdiff.program
def measured(w):
    q = qm.qubits(2)
    qm.ry(w[0], q[0])
    bit = qm.measure(q[0])
    # the branches read their own expectation nonlinearly: the normalized states matter
    qdiff.cond(bit, lambda: qm.ry(w[1], q[1]), lambda: qm.rx(2 * w[1], q[1]))
    return qm.expval("IZ", q) ** 2


def test_mid_circuit_measurement_with_cond_matches_the_closed_form():
    a, b = 0.9, 0.4
    # E = cos²(a/2) cos²(2b) + sin²(a/2) cos²(b)
    c, s = (1 + np.cos(a)) / 2, (1 - np.cos(a)) / 2
    e_aa = -np.cos(a) / 2 * np.cos(2 * b) ** 2 + np.cos(a) / 2 * np.cos(b) ** 2
    e_ab = np.sin(a) / 2 * 2 * np.sin(4 * b) - np.sin(a) / 2 * np.sin(2 * b)
    e_bb = -8 * c * np.cos(4 * b) - 2 * s * np.cos(2 * b)
    expected = np.array([[e_aa, e_ab], [e_ab, e_bb]])
    np.testing.assert_allclose(qdiff.hessian(measured)(np.array([a, b])), expected, atol=1e-12)


@qdiff.program
def repeated_layers(t):
    q = qm.qubits(1)
    qdiff.fori_loop(0, 3, lambda i: qm.ry(t, q[0]))
    return qm.expval("Z", q)                       # cos 3t


def test_bounded_loop_of_gates_second_derivative_is_minus_nine_cos_three_t():
    t = 0.25
    assert np.isclose(qdiff.grad(qdiff.grad(repeated_layers))(t), -9 * np.cos(3 * t),
                      atol=1e-13)


@qdiff.program
def repeat_until_one(theta):
    q = qm.qubits(1)
    count = qdiff.Cell(0)

    def body():
        qm.ry(theta, q[0])
        count.set(count.value + 1)

    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body)
    return count.value


def test_repeat_until_success_iterations_have_closed_form_derivatives():
    theta = 0.7
    h = theta / 2
    first = -np.cos(h) / np.sin(h) ** 3
    second = 0.5 * (1 / np.sin(h) ** 2 + 3 * np.cos(h) ** 2 / np.sin(h) ** 4)
    _, slope = qdiff.jvp(repeat_until_one, (theta,), (1.0,))
    assert np.isclose(slope, first, rtol=1e-8)
    assert np.isclose(qdiff.grad(qdiff.grad(repeat_until_one))(theta), second, rtol=1e-6)
    assert np.isclose(qdiff.hessian(repeat_until_one)(np.array(theta)), second, rtol=1e-6)


# each of the four branches entering the extractor's loop is cut off below tol: together
# slightly more than tol, which the warning reports (no certificate for second derivatives)
@pytest.mark.filterwarnings("ignore::qdiff.quantum.TruncationWarning")
def test_reset_loop_and_merged_branches_have_closed_form_second_derivatives():
    theta = 0.9
    h = theta / 2
    # E[count] of the coin loop is tan²(θ/2): d²/dθ² = (sec⁴ + 2 tan² sec²)(θ/2) / 2
    second = 0.5 * (1 / np.cos(h) ** 4 + 2 * np.tan(h) ** 2 / np.cos(h) ** 2)
    assert np.isclose(qdiff.grad(qdiff.grad(coin_loop))(theta), second, rtol=1e-7)
    # the von Neumann extractor is fair whatever θ: its branches merge every round
    assert abs(qdiff.grad(qdiff.grad(von_neumann))(theta)) < 1e-7


def test_loop_on_a_measurement_with_max_iter_matches_second_differences_of_its_closed_form():
    def mean(theta, rounds=3):  # exits after k rounds with (1-p)^(k-1) p; the rest aborts
        p = np.sin(theta / 2) ** 2
        return sum(k * (1 - p) ** (k - 1) * p for k in range(1, rounds + 1))

    theta, step = 0.8, 1e-4
    expected = (mean(theta + step) - 2 * mean(theta) + mean(theta - step)) / step ** 2
    bounded = qdiff.program(lambda t: until_one(t, max_iter=3))
    assert np.isclose(qdiff.grad(qdiff.grad(bounded))(theta), expected, rtol=1e-6)


def test_second_derivative_of_a_loop_cut_off_early_warns_and_strict_refuses():
    cut = qdiff.grad(repeat_until_one, max_loop_iterations=5)
    with pytest.warns(qm.TruncationWarning, match="no certified remainder"):
        qdiff.grad(cut)(0.7)
    strict = qdiff.grad(repeat_until_one, max_loop_iterations=5, strict=True)
    with pytest.raises(qm.TruncationError):
        qdiff.grad(strict)(0.7)


two_registers = qdiff.program(registers_and_a_branch)


def test_several_registers_hessian_matches_differences_of_the_gradient():
    x = np.array([0.4, -0.7])
    np.testing.assert_allclose(qdiff.hessian(two_registers)(x),
                               hessian_by_differences(two_registers, x), atol=1e-7)




postselected = qdiff.program(entangled_postselected)


def test_postselected_value_hessian_matches_differences_of_the_gradient():
    w = np.array([1.1, 0.6])

    def shifted(v):
        return qm.gradient(postselected, v, method="parameter-shift").grad

    hessian = qdiff.hessian(postselected)(w)
    np.testing.assert_allclose(hessian, central_difference_jacobian(shifted, w), atol=1e-7)
    _, slope = qdiff.jvp(postselected, (w,), (np.array([1.0, 0.0]),))
    assert np.isclose(slope, shifted(w)[0], atol=1e-12)


@qdiff.program
def readouts(w):
    q = qm.qubits(2)
    qm.ry(w[0], q[0])
    qm.cx(q[0], q[1])
    qm.rx(w[1], q[1])
    bit = qm.measure(q[0], reset=True)
    qm.ry(w[0] * bit + w[1], q[0])
    return qm.expval("ZZ", q), qm.probs(q)


def test_forward_mode_agrees_with_reverse_mode():
    w, t = np.array([0.3, 0.8]), np.array([1.5, -0.5])
    value, tangent = qdiff.jvp(readouts, (w,), (t,))
    _, back = qdiff.vjp(readouts, w)
    c = (np.float64(0.7), np.array([0.1, -0.2, 0.4, 0.3]))
    (cotangent,) = back(c)
    lhs = float(np.dot(cotangent, t))
    rhs = float(c[0] * tangent[0] + np.dot(c[1], tangent[1]))
    assert np.isclose(lhs, rhs, atol=1e-13)
    jac = qdiff.jacobian(readouts)(w)
    np.testing.assert_allclose(tangent[0], jac[0] @ t, atol=1e-13)
    np.testing.assert_allclose(tangent[1], jac[1] @ t, atol=1e-13)


def test_vjp_of_a_gradient_is_the_hessian_times_the_cotangent():
    value, back = qdiff.vjp(qdiff.grad(hybrid), W)
    ct = np.array([1.0, 2.0, -1.0])
    np.testing.assert_allclose(back(ct)[0], qdiff.hessian(hybrid)(W).T @ ct, atol=1e-12)
    np.testing.assert_allclose(value, qdiff.grad(hybrid)(W), atol=1e-12)


def scaled_slope(x):
    return qnp.sin(x) * qdiff.grad(rotated)(x)     # -sin² x


def test_a_quantum_gradient_inside_classical_code_is_differentiated_exactly():
    x = 0.3
    assert np.isclose(qdiff.grad(scaled_slope)(x), -np.sin(2 * x), atol=1e-14)
    assert np.isclose(qdiff.grad(qdiff.grad(scaled_slope))(x), -2 * np.cos(2 * x), atol=1e-13)
    assert np.isclose(qdiff.jvp(scaled_slope, (x,), (2.0,))[1], -2 * np.sin(2 * x), atol=1e-14)
    assert "derivative_call" in str(qdiff.trace(scaled_slope, x))


def test_a_loss_on_the_gradient_and_the_value_of_a_circuit_matches_central_differences():
    def loss(w):
        return qnp.sum(qdiff.grad(hybrid)(w) ** 2) + hybrid(w)

    def concrete(w):
        return float(np.sum(qdiff.grad(hybrid)(w) ** 2) + hybrid(w))

    expected = central_difference_jacobian(concrete, W)
    np.testing.assert_allclose(qdiff.grad(loss)(W), expected, atol=1e-7)


def test_a_derivative_of_code_that_calls_a_quantum_gradient_can_be_called_again_in_code():
    def inner(y):
        return qnp.cos(y) * qdiff.grad(rotated)(y)      # -sin(2y) / 2

    def outer(x):
        return qdiff.grad(inner)(x) * x                 # -x cos 2x

    x = 0.3
    assert np.isclose(qdiff.grad(outer)(x), -np.cos(2 * x) + 2 * x * np.sin(2 * x),
                      atol=1e-13)


# ------------------------------------------------------------------ refused, with the reason
def test_a_quantum_gradient_called_inside_a_classical_loop_is_refused():
    def looped(x):
        return qdiff.fori_loop(0, 2, lambda i, s: s + qdiff.grad(rotated)(x), 0.0)

    with pytest.raises(qdiff.QdiffError, match="called inside loop is not supported"):
        qdiff.grad(looped)(0.3)


def test_sampled_second_derivatives_are_refused_not_estimated():
    with pytest.raises(qdiff.QdiffError, match="mode='sample' would ignore shots"):
        qdiff.grad(qdiff.grad(rotated, mode="sample", shots=100, seed=1))(0.3)


def test_a_method_for_a_second_derivative_is_refused():
    with pytest.raises(qdiff.QdiffError, match="computed by forward mode"):
        qdiff.grad(qdiff.grad(rotated, method="parameter-shift"))(0.3)


def test_settings_forward_mode_would_ignore_are_refused():
    with pytest.raises(qdiff.QdiffError, match="remainder_tol=: settings of first derivatives"):
        qdiff.hessian(qdiff.grad(rotated, remainder_tol=1e-6))(0.3)
    with pytest.raises(qdiff.QdiffError, match="exit_probability="):
        qdiff.jvp(repeat_until_one, (0.7,), (1.0,), exit_probability=0.1)


@qdiff.program
def opening(t):
    q = qm.qubits(1)
    qm.ry(t, q[0])
    return qm.measure(q[0]) * 1.0


def test_branch_that_opens_at_the_point_is_an_error_not_a_dropped_branch():
    # P(1) = sin²(t/2): 0 at t = 0, with second derivative 1/2 there
    assert np.isclose(qdiff.grad(qdiff.grad(opening))(0.4), np.cos(0.4) / 2, atol=1e-12)
    with pytest.raises(BranchOpensError, match="opens exactly here"):
        qdiff.grad(qdiff.grad(opening))(0.0)
