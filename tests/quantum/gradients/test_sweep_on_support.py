"""The reverse sweep on the part of the state that is not zero: a run of gates from a fresh
``|0...0>`` (or from ``|0>_new ⊗ ψ``, a second register) leaves ψ zero past amplitude 2^m,
m one past the highest wire reached so far, so the sweep undoes those blocks on the first
2^m amplitudes of ψ and of every λ. The gradients (and Jacobians: a stack of λ) equal those
of the sweep over the whole state, on the Numba block kernel (complex128 and complex64) and
the NumPy gate-by-gate sweep, with every parametrized gate kind on wires climbing the
register; central differences are the independent check."""

import numpy as np
import pytest
from oracles import central_difference

import qdiff
from qdiff import quantum as qm
from qdiff.quantum import gradient
from qdiff.quantum.gradients import adjoint
from qdiff.quantum.simulator import get_backend

ONE_WIRE = [qm.rx, qm.ry, qm.rz, qm.phase]
TWO_WIRES = [qm.crx, qm.cry, qm.crz, qm.cphase, qm.rxx, qm.ryy, qm.rzz, qm.rzx]


def climbing(n, seed, dtype="complex128"):
    """A staircase over the wires, each step a one-wire rotation, a two-wire rotation with
    the control or first wire below or above the new wire, a fixed gate, and every few
    steps a ``u`` and a ``pauli_rot`` (the ansatz's blocks reach their high wires late).
    Returns (program, angles)."""
    rng = np.random.default_rng(seed)
    plan = []
    for w in range(1, n):
        lower = int(rng.integers(0, w))
        plan.append((int(rng.integers(len(ONE_WIRE))), int(rng.integers(len(TWO_WIRES))),
                     w, lower, bool(rng.integers(2))))
    count = 2 * len(plan) + 4 * (len(plan) // 4) + 1

    def program(x):
        q = qm.qubits(n, dtype=dtype)
        qm.ry(x[0], q[0])
        k = 1
        for step, (one, two, w, lower, swap) in enumerate(plan):
            ONE_WIRE[one](x[k], q[w])
            a, b = (q[w], q[lower]) if swap else (q[lower], q[w])
            TWO_WIRES[two](x[k + 1], a, b)
            qm.cx(q[lower], q[w]) if step % 2 else qm.h(q[w])
            k += 2
            if step % 4 == 3:
                qm.u(x[k], x[k + 1], x[k + 2], q[lower])
                qm.pauli_rot(x[k + 3], "XZ", [q[lower], q[w]])
                k += 4
        qm.ry(0.3, q[0])  # a last block back on the low wires
        return qm.expval([(0.7, "Z" * 2 + "I" * (n - 2)), (-0.4, "X" + "Y" * (n - 1))], q)

    angles = np.random.default_rng(seed + 100).uniform(-np.pi, np.pi, count)
    return qdiff.program(program), angles


def full_sweep(monkeypatch):
    """The sweep over the whole state: no run's start known to be zero past 2^m."""
    monkeypatch.setattr(adjoint, "_start_support", lambda sweep, node: None)


def registers_seen(monkeypatch, backend_name):
    """The qubits of each register the sweep's blocks run on (a spy on adjoint_block)."""
    seen = []
    cls = type(get_backend(backend_name))
    original = cls.adjoint_block

    def spy(self, psi, lam, num_qubits, *rest, **kw):
        seen.append(num_qubits)
        return original(self, psi, lam, num_qubits, *rest, **kw)

    monkeypatch.setattr(cls, "adjoint_block", spy)
    return seen


@pytest.mark.parametrize("backend, n, dtype, atol", [
    ("numba", 16, "complex128", 1e-11), ("numba", 16, "complex64", 2e-5),
    ("numpy", 10, "complex128", 1e-11)])
def test_sweep_on_the_nonzero_part_gives_the_full_sweeps_gradient(monkeypatch, backend, n,
                                                                  dtype, atol):
    program, x = climbing(n, seed=n, dtype=dtype)
    seen = registers_seen(monkeypatch, backend)
    on_part = gradient(program, x, backend=backend)
    assert min(seen) < n and seen.count(n) < len(seen)  # some blocks ran on a part
    seen.clear()
    full_sweep(monkeypatch)
    whole = gradient(program, x, backend=backend)
    assert set(seen) == {n}
    assert abs(on_part.value - whole.value) < atol
    np.testing.assert_allclose(on_part.grad, whole.grad, atol=atol, rtol=0)


def test_sweep_on_the_nonzero_part_agrees_with_central_differences():
    program, x = climbing(10, seed=3)
    g = gradient(program, x, backend="numpy").grad
    np.testing.assert_allclose(g, central_difference(lambda v: qm.run(
        program, v, backend="numpy").values, x), atol=1e-7, rtol=0)


def second_register(first, second):
    """A ladder over a register of ``first`` qubits, then a second register of ``second``
    qubits and gates on the first one's wires 0-2 only: ψ is zero past 2^first, not past
    2^3, in every block of the run after the second register is added."""

    def program(x):
        a = qm.qubits(first)
        for w in range(first):
            qm.ry(x[w], a[w])
            if w:
                qm.cx(a[w - 1], a[w])
        b = qm.qubits(second)
        qm.rx(x[first], a[0])
        qm.crz(x[first + 1], a[0], a[1])
        qm.ry(x[first + 2], a[2])
        n = first + second
        return qm.expval([(0.7, "Z" * 2 + "I" * (n - 2)), (-0.4, "X" + "Y" * (n - 1))],
                         [*a, *b])

    x = np.random.default_rng(first).uniform(-np.pi, np.pi, first + 3)
    return qdiff.program(program), x


@pytest.mark.parametrize("backend, first", [("numba", 14), ("numpy", 8)])
def test_a_second_register_starts_its_part_at_the_first_ones_wires(monkeypatch, backend,
                                                                   first):
    program, x = second_register(first, 2)
    seen = registers_seen(monkeypatch, backend)
    on_part = gradient(program, x, backend=backend)
    assert min(seen) < first + 2
    full_sweep(monkeypatch)
    whole = gradient(program, x, backend=backend)
    np.testing.assert_allclose(on_part.grad, whole.grad, atol=1e-11, rtol=0)
    np.testing.assert_allclose(on_part.grad, central_difference(
        lambda v: qm.run(program, v, backend=backend).values, x), atol=1e-7, rtol=0)


def test_jacobian_rows_undone_together_on_the_nonzero_part(monkeypatch):
    # several outputs: the sweep undoes a stack of λ, cut to the part with ψ
    n = 14

    def expvals(v):
        q = qm.qubits(n)
        for w in range(n):
            qm.ry(v[w], q[w])
            if w:
                qm.crx(v[n + w], q[w - 1], q[w])
        return qdiff.numpy.stack([qm.expval("Z" + "I" * (n - 1), q),
                                  qm.expval("I" * (n - 1) + "X", q),
                                  qm.expval("Y" * n, q)])

    f = qdiff.program(expvals)
    v = np.random.default_rng(1).uniform(-np.pi, np.pi, 2 * n)
    seen = registers_seen(monkeypatch, "numba")
    on_part = qdiff.jacobian(f)(v)
    assert min(seen) < n
    full_sweep(monkeypatch)
    whole = qdiff.jacobian(f)(v)
    np.testing.assert_allclose(on_part, whole, atol=1e-11, rtol=0)
