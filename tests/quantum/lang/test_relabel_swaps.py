"""Swap gates as relabellings of wires (`qdiff.quantum.lang.relabel`): the rewritten
program has no plain swaps left where nothing reads the layout, and computes what the
original computes: states against Qiskit's `Statevector`, readouts, measurements, loops
and gradients against the unfused run (``fuse=False``, which keeps every swap)."""

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.quantum_info import Statevector

import qdiff
from qdiff import quantum as qm
from qdiff.ir.control_flow import while_loop
from qdiff.ir.tracer import Cell
from qdiff.quantum.lang.relabel import relabel_swaps
from tests.oracles import central_difference


def _swaps(program):
    return sum(e.primitive.name == "gate" and e.params["name"] == "swap"
               for e in program.all_eqns())


def _random_layers(seed, n=5, depth=30):
    """(name, wires, angle) triples mixing swaps with rotations, entanglers and diagonals."""
    rng = np.random.default_rng(seed)
    gates = []
    for _ in range(depth):
        kind = rng.choice(["swap", "ry", "rz", "h", "cx", "rzz", "iswap", "cz"])
        wires = tuple(int(w) for w in rng.permutation(n)[:{"swap": 2, "cx": 2, "rzz": 2,
                                                          "iswap": 2, "cz": 2}.get(kind, 1)])
        gates.append((str(kind), wires, float(rng.uniform(-np.pi, np.pi))))
    return gates


def _apply(gates, q, angles=None):
    for k, (name, wires, angle) in enumerate(gates):
        theta = angle if angles is None else angles[k % len(angles)] * angle
        qm.apply(name, [theta] if name in ("ry", "rz", "rzz") else [], [q[w] for w in wires])


def _qiskit_state(gates, n):
    circuit = QuantumCircuit(n)
    for name, wires, angle in gates:
        if name in ("ry", "rz", "rzz"):
            getattr(circuit, name)(angle, *wires)
        else:
            getattr(circuit, name)(*wires)
    return Statevector(circuit).data  # qiskit's qubit 0 is the lowest bit, as in qdiff


@pytest.mark.parametrize("seed", range(4))
def test_relabelled_swaps_give_the_same_states_and_readouts(seed):
    n, gates = 5, _random_layers(seed)

    def circuit():
        q = qm.qubits(n)
        _apply(gates, q)
        return qm.probs([q[3], q[0]]), qm.expval("0.5*ZXIYZ + XIZZI", q), qm.state(q)

    program = qdiff.trace(circuit)
    relabelled = relabel_swaps(program)
    plain = sum(name == "swap" for name, _, _ in gates)
    # only the swaps settled before the state readout remain (at most n - 1)
    assert _swaps(relabelled) <= min(plain, n - 1)
    for got, want in zip(relabelled(), program()):
        np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(program()[2], _qiskit_state(gates, n), atol=1e-12)
    fused = qm.run(circuit).values
    for got, want in zip(fused, qm.run(circuit, fuse=False).values):
        np.testing.assert_allclose(got, want, atol=1e-12)


def test_swaps_before_readouts_cost_no_pass():
    def layers(swaps):
        def circuit():
            q = qm.qubits(12)
            for w in q:
                qm.h(w)
            for w in range(6):
                qm.rzz(0.3 * w, q[w], q[w + 6])
            if swaps:
                for w in range(6):
                    qm.swap(q[w], q[11 - w])
            return qm.probs(q)
        return circuit

    swapped, plain = qm.run(layers(True)), qm.run(layers(False))
    assert swapped.gate_passes == plain.gate_passes
    np.testing.assert_allclose(swapped.values, qm.run(layers(True), fuse=False).values,
                               atol=1e-14)
    assert _swaps(relabel_swaps(qdiff.trace(layers(True)))) == 0


def test_measurements_and_loops_follow_the_relabelled_wires():
    """A measured wire after a swap is the swapped one; a loop body carrying the state
    gets it in the program's layout, and relabels its own swaps."""
    def rounds(theta):
        q = qm.qubits(3)
        qm.ry(theta, q[0])
        qm.swap(q[0], q[2])
        first = qm.measure(q[2])
        count = Cell(0.0)

        def body():
            qm.ry(theta * 0.7, q[1])
            qm.swap(q[1], q[2])
            count.set(count.value + 1.0)

        while_loop(lambda: qm.measure(q[2]) == 0, body)
        return count.value + 2.0 * first + qm.expval("ZII", q)

    for theta in (0.4, 1.3):
        relabelled = qm.run(rounds, theta)
        plain = qm.run(rounds, theta, fuse=False)
        assert float(relabelled.values) == pytest.approx(float(plain.values), abs=1e-12)
        gradient = float(qm.gradient(rounds, theta).grad)
        assert gradient == pytest.approx(float(qm.gradient(rounds, theta, fuse=False).grad),
                                         abs=1e-10)
        difference = central_difference(lambda t: qm.run(rounds, float(t)).values,
                                        np.asarray(theta))
        assert gradient == pytest.approx(float(difference), abs=1e-6)


def test_gradients_through_relabelled_wires_equal_the_unfused_ones():
    gates = _random_layers(7, n=4, depth=24)

    def energy(angles):
        q = qm.qubits(4)
        _apply(gates, q, angles)
        return qm.expval("ZZII + 0.3*IXYZ", q)

    angles = np.linspace(0.3, 1.1, 5)
    got = qdiff.grad(energy)(angles)
    np.testing.assert_allclose(got, qm.gradient(energy, angles, fuse=False).grad, atol=1e-12)
    np.testing.assert_allclose(got, central_difference(
        lambda a: qm.run(energy, a, fuse=False).values, angles), atol=1e-6)
