"""A run of one branch hands its output arrays back without copying them (the probabilities
of 20 qubits are 8 MB), so that a state read before later gates must be its own copy."""

import numpy as np

import qdiff
import qdiff.quantum as qm


@qdiff.program
def state_then_more_gates():
    q = qm.qubits(10)
    qm.h(q[0])
    before = qm.state(q)
    qm.x(q[1])
    qm.ry(0.3, q[4])
    return before, qm.state(q), qm.probs(q)


def test_a_state_read_before_later_gates_keeps_its_value():
    for backend in ("numpy", "numba"):
        before, after, probs = qm.run(state_then_more_gates, backend=backend).values
        want = np.zeros(1 << 10, complex)
        want[[0, 1]] = 2 ** -0.5
        np.testing.assert_allclose(before, want, atol=1e-12)
        assert not np.shares_memory(before, after)
        np.testing.assert_allclose(probs, np.abs(after) ** 2, atol=1e-12)
        np.testing.assert_allclose(after[[2, 3, 18, 19]], 2 ** -0.5 * np.array(
            [np.cos(0.15), np.cos(0.15), np.sin(0.15), np.sin(0.15)]), atol=1e-12)
