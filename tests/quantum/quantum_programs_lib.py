"""Quantum programs that several test modules run: loops on measurements with closed forms, the
postselection example, and the hardware-efficient ansatz of the benchmarks."""

import importlib.util
from pathlib import Path

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm


def coin_loop(theta):
    """q := |0>; ry(θ); while M[q]=1: (q := |0>; ry(θ)); returns the iteration count.

    Its mean is tan²(θ/2)."""
    q = qm.qubits(1)
    qm.ry(theta, q[0])
    count = qdiff.Cell(0)

    def body():
        qm.reset(q[0])
        qm.ry(theta, q[0])
        count.set(count.value + 1)

    qdiff.while_loop(lambda: qm.measure(q[0]) == 1, body)
    return count.value


def until_one(theta, max_iter=None):
    """q := |0>; while M[q]=0: ry(θ); returns the iteration count (its mean is 1/sin²(θ/2)).

    With ``max_iter`` the loop aborts after that many iterations: it exits after k of them
    with probability (1-p)^(k-1) p, p = sin²(θ/2), and aborts with (1-p)^max_iter."""
    q = qm.qubits(1)
    count = qdiff.Cell(0)

    def body():
        qm.ry(theta, q[0])
        count.set(count.value + 1)

    qdiff.while_loop(lambda: qm.measure(q[0]) == 0, body, max_iter=max_iter)
    return count.value


def von_neumann(theta):
    """Flip two coins of bias sin²(θ/2) until they differ; output the first (fair: 1/2)."""
    q = qm.qubits(2)
    first, second = qdiff.Cell(0), qdiff.Cell(0)

    def flip():
        for wire in q:
            qm.reset(wire)
            qm.ry(theta, wire)
        first.set(qnp.asarray(qm.measure(q[0])))
        second.set(qnp.asarray(qm.measure(q[1])))

    flip()
    qdiff.while_loop(lambda: first.value == second.value, flip)
    return first.value


def postselected(x):
    """A Bell pair, rx(x) on q1, postselect q1 = 1: <Z q0> = -cos(x), with probability 1/2."""
    q = qm.qubits(2)
    qm.h(q[0])
    qm.cx(q[0], q[1])
    qm.rx(x, q[1])
    qm.postselect(q[1], 1)
    return qm.expval("ZI", q)


def registers_and_a_branch(x):
    """Two registers (1 and 2 qubits), a measurement on the second and a branch on its
    outcome acting on the first."""
    a = qm.qubits(1)
    b = qm.qubits(2)
    qm.ry(x[0], a[0])
    qm.rx(2 * x[1], b[1])
    qm.cx(b[1], b[0])
    bit = qm.measure(b[0])
    qdiff.cond(bit, lambda: qm.ry(x[0] * x[1], a[0]), lambda: None)
    return qm.expval("Z", a) + 0.5 * qm.expval("ZZ", b)


def entangled_postselected(w):
    """ry(w0) on q0, cx, rx(w1) on q1, postselect q1 = 1: <Z q0>, whose postselection
    probability depends on both angles."""
    q = qm.qubits(2)
    qm.ry(w[0], q[0])
    qm.cx(q[0], q[1])
    qm.rx(w[1], q[1])
    qm.postselect(q[1], 1)
    return qm.expval("ZI", q)


def _benchmarks_common():
    """benchmarks/common.py, loaded from its file: benchmarks/ is a folder of scripts, not a
    package."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "common.py"
    spec = importlib.util.spec_from_file_location("benchmarks_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# hea_program(n, layers, observable): the program the benchmarks time, so that the tests
# check it too
hea_program = _benchmarks_common().hea_program
hea_angles = _benchmarks_common().hea_angles
