"""Exporting programs to Qiskit: gates and angle arithmetic checked against Qiskit's
Statevector, dynamic circuits round-tripped through from_qiskit (values and gradients) and
sampled by Aer, and the refusals."""

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.ir.errors import QdiffError
from qdiff.quantum.lang.gates import GATE_TABLE, GateSpec, gate_spec
from qdiff.quantum.qiskit.exporter import to_qiskit

qiskit = pytest.importorskip("qiskit")
from qiskit.quantum_info import Statevector  # noqa: E402


def _angles(w):
    """Every classical operation the export turns into parameter expressions."""
    return [w[0] + w[1], w[0] - w[2], w[1] * w[2], w[0] / (w[1] + 2.0), -w[2], w[0] ** 2,
            w[1] ** w[2], qnp.sin(w[0]), qnp.cos(w[1]), qnp.tan(w[2]), qnp.arcsin(w[0] / 2),
            qnp.arccos(w[1] / 2), qnp.arctan(w[2]), qnp.exp(w[0]), qnp.log(w[1]),
            qnp.abs(w[2] - 1.0), qnp.sqrt(w[1]), w.reshape(3, 1)[2, 0] * 1.5]


def _every_gate(w):
    q = qm.qubits(4)
    for k in range(4):
        qm.h(q[k])
    angles = _angles(w)
    rng = np.random.default_rng(5)
    matrix, _ = np.linalg.qr(rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4)))
    families = [("mcx", {"num_controls": 2}), ("mcz", {"num_controls": 2}),
                ("pauli_rot", {"pauli": "XYZ"}), ("unitary", {"matrix": matrix})]
    gates = [(name, {}) for name, spec in sorted(GATE_TABLE.items())
             if isinstance(spec, GateSpec)] + families
    used = 0
    for k, (name, static) in enumerate(gates):
        spec = gate_spec(name, **static)
        wires = [q[(k + j) % 4] for j in range(spec.num_qubits)]
        params = [angles[(used + j) % len(angles)] for j in range(spec.num_params)]
        used += spec.num_params
        qm.apply(name, params, wires, **static)
    return qm.expval("0.5*ZZII + XIYZ", q), qm.expval("YXZI - 0.25*IIXX", q)


# Qiskit builds the matrix of the PauliEvolutionGate with SciPy's sparse expm
@pytest.mark.filterwarnings("ignore::scipy.sparse.SparseEfficiencyWarning")
def test_every_gate_and_angle_operation_matches_qiskit_statevector():
    w = np.array([0.3, 0.7, -0.4])
    program = qdiff.trace(_every_gate, w)
    export = to_qiskit(program)
    assert {p.name for p in export.circuit.parameters} == {"x0[0]", "x0[1]", "x0[2]"}
    assert [o.kind for o in export.outputs] == ["expval", "expval"]
    state = Statevector(export.bind(w))
    expected = qm.run(program, w).values
    for observable, value in zip(export.observables, expected):
        assert state.expectation_value(observable).real == pytest.approx(value, abs=1e-10)


# ------------------------------------------------------------------------- round trips
def _loop_angles(w):
    q = qm.qubits(2)
    qm.h(q[0])
    qdiff.fori_loop(0, 3, lambda i: (qm.ry(w[0] * (i + 1), q[0]),
                                     qm.crx(w[1] / (i + 2), q[0], q[1])))
    return qm.expval("ZZ", q) + 0.5 * qm.expval("XI", q)


def _repeat_until_success(w):
    q = qm.qubits(2)
    qm.h(q[0])
    count = qdiff.Cell(0)

    def attempt():
        qm.reset(q[1])
        qm.ry(w[1], q[1])
        qm.cry(w[0] / 2, q[1], q[0])
        count.set(count.value + 1)  # feeds nothing exported: dropped

    qdiff.while_loop(lambda: qm.measure(q[1]) == 0, attempt)
    return qm.expval("ZI", q)


def _cond_on_bit(w):
    q = qm.qubits(2)
    qm.ry(w[0], q[0])
    bit = qm.measure(q[0])
    qdiff.cond(bit == 1, lambda: qm.rx(w[1], q[1]), lambda: qm.ry(qnp.cos(w[0]) * w[1], q[1]))
    return qm.expval("XZ", q)


def _nested(w):
    q = qm.qubits(3)

    def layer(i):
        qm.ry(w[0] + 0.3 * i, q[0])
        bit = qm.measure(q[0], reset=True)

        def fix():
            qdiff.while_loop(lambda: qm.measure(q[2]) == 0,
                             lambda: qm.rx(w[1] * (i + 1), q[2]))
            qm.reset(q[2])

        qdiff.cond(bit, fix, lambda: qm.crz(qnp.exp(w[1]), q[1], q[2]))
        qm.cry(w[0], q[2], q[1])
        qm.h(q[2])

    qdiff.fori_loop(0, 2, layer)
    return qm.expval("IZX", q)


def _switch_on_two_bits(w):
    q = qm.qubits(3)
    qm.ry(w[0], q[0])
    qm.ry(w[1], q[1])
    b0, b1 = qm.measure(q[0]), qm.measure(q[1])
    index = qnp.asarray(b0).astype("int64") + 2 * qnp.asarray(b1).astype("int64")
    qdiff.switch(index, [lambda: qm.x(q[2]), lambda: qm.h(q[2]),
                         lambda: qm.ry(w[0] * w[1], q[2])])
    return qm.expval("IIZ", q)


def _two_bit_test(w):
    q = qm.qubits(2)
    qm.h(q[1])
    qdiff.while_loop(lambda: qnp.logical_and(qm.measure(q[0]) == 0, qm.measure(q[1]) == 1),
                     lambda: (qm.ry(w[0], q[0]), qm.rx(w[1], q[1])))  # an expr condition
    return qm.expval("ZI", q) - qm.expval("IZ", q) / 3


ROUND_TRIPS = {
    "fori_loop": (_loop_angles, ["h", "for_loop"]),
    "while": (_repeat_until_success, ["h", "measure", "while_loop"]),
    "cond": (_cond_on_bit, ["ry", "measure", "if_else"]),
    "nested": (_nested, ["for_loop"]),
    "switch": (_switch_on_two_bits, ["ry", "ry", "measure", "measure", "switch_case"]),
    "two_bit_while": (_two_bit_test, ["h", "measure", "measure", "while_loop"]),
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIPS))
def test_round_trip_through_from_qiskit_keeps_values_and_gradients(name):
    function, layout = ROUND_TRIPS[name]
    w = np.array([0.8, 1.1])
    program = qdiff.trace(function, w)
    export = to_qiskit(program)
    assert [i.operation.name for i in export.circuit.data] == layout
    assert export.notes == []
    back = qm.from_qiskit(export.circuit, export.observables[0])
    x = export.parameter_values(w)
    assert x.tolist() == w.tolist()  # x0[0], x0[1]: the circuit's parameter order
    assert float(back(x)) == pytest.approx(float(qm.run(program, w).values), abs=1e-10)
    assert np.allclose(qdiff.grad(back)(x), qdiff.grad(program)(w), atol=1e-8)


def test_loop_index_expressions_and_unrolled_bodies():
    def indexed(w):
        q = qm.qubits(1)
        qdiff.fori_loop(0, 3, lambda i: qm.ry(w[i] * (i + 1), q[0]))  # w[i]: unrolled
        return qm.expval("Z", q)

    w = np.array([0.2, -0.5, 0.9])
    export = to_qiskit(qdiff.trace(indexed, w))
    assert [i.operation.name for i in export.circuit.data] == ["ry"] * 3
    assert "unrolled (3 iterations)" in export.notes[0]
    assert "dynamic_slice" in export.notes[0]
    expected = np.cos(w[0] + 2 * w[1] + 3 * w[2])
    state = Statevector(export.bind(w))
    assert state.expectation_value(export.observables[0]).real == pytest.approx(expected)
    # the kept loop: the body's angle is an expression in the loop parameter
    _, loop = to_qiskit(qdiff.trace(_loop_angles, w[:2])).circuit.data
    indexset, parameter, body = loop.operation.params
    assert list(indexset) == [0, 1, 2]
    assert parameter in body.data[0].operation.params[0].parameters


def test_outputs_are_described():
    def readouts(w):
        q = qm.qubits(2)
        qm.rx(w[0], q[0])
        bit = qm.measure(q[0])
        qm.cx(q[0], q[1])
        return qm.probs([q[1]]), 2.0 * w[0], qnp.asarray(bit).astype("int64") * 3

    w = np.array([0.7])
    program = qdiff.trace(readouts, w)
    export = to_qiskit(program)
    probs, doubled, measured = export.outputs
    assert probs.kind == "probs" and probs.register.name == "probs0" and probs.wires == (1,)
    assert doubled.kind == "classical"
    (parameter,) = export.parameters
    assert doubled.value[()].assign(parameter, 0.7).numeric() == pytest.approx(1.4)
    assert measured.kind == "measured" and measured.value.tolist() == [0, 3]
    # the distribution of all clbits (m[0], probs0[0]): the probs register is the marginal
    dist = np.asarray(qm.from_qiskit(export.circuit)(export.parameter_values(w)))
    assert dist.reshape(2, 2).sum(axis=1) == pytest.approx(qm.run(program, w).values[0])


# ------------------------------------------------------------------------------------ Aer
def test_dynamic_circuit_sampled_by_aer_matches_the_exact_distribution():
    aer = pytest.importorskip("qiskit_aer")

    def dynamic(w):
        q = qm.qubits(2)

        def layer(i):
            qm.rx(qnp.sin(w[0]) * (i + 1), q[0])
            qdiff.while_loop(lambda: qm.measure(q[1]) == 0, lambda: qm.ry(w[1] + i, q[1]))
            bit = qm.measure(q[1], reset=True)
            qdiff.cond(bit, lambda: qm.cx(q[1], q[0]), lambda: qm.crz(w[0], q[0], q[1]))

        qdiff.fori_loop(1, 3, layer)
        qm.h(q[1])
        return qm.probs([q[0], q[1]])

    w = np.array([0.6, 0.5])
    program = qdiff.trace(dynamic, w)
    export = to_qiskit(program)
    exact = np.asarray(qm.run(program, w).values)
    shots = 4000
    counts = aer.AerSimulator(seed_simulator=11).run(export.bind(w), shots=shots) \
        .result().get_counts()
    observed = np.zeros(4)
    for key, n in counts.items():
        observed[int(key.split()[0], 2)] += n / shots  # registers print last first: probs0
    stderr = np.sqrt(np.maximum(exact * (1 - exact), 1e-12) / shots)
    assert np.all(np.abs(observed - exact) <= 4.5 * stderr + 1e-12)


# --------------------------------------------------------------------------------- errors
def _one_qubit(body):
    def program(w):
        q = qm.qubits(1)
        out = body(w, q)
        return qm.expval("Z", q) if out is None else out
    return qdiff.trace(program, np.zeros(1))


def test_refusals_name_the_problem():
    with pytest.raises(QdiffError, match=r"'postselect' at eqn \d: postselection has no Qiskit"):
        to_qiskit(_one_qubit(lambda w, q: (qm.ry(w[0], q[0]), qm.postselect(q[0], 1))[-1]))
    with pytest.raises(QdiffError, match="angle 0 of gate 'rx' at eqn 3 .* 'floor' at eqn 2 "
                                         "has no Qiskit parameter-expression form"):
        to_qiskit(_one_qubit(lambda w, q: qm.rx(qnp.floor(w[0]), q[0])))
    with pytest.raises(QdiffError, match="'while' loop at eqn 1 has max_iter=5"):
        to_qiskit(_one_qubit(lambda w, q: qdiff.while_loop(
            lambda: qm.measure(q[0]) == 0, lambda: qm.ry(w[0], q[0]), max_iter=5)))
    with pytest.raises(QdiffError, match="'sample' at eqn 1"):
        to_qiskit(_one_qubit(lambda w, q: qm.sample([q[0]], shots=3)))

    def counted(w, q):  # the counter is exported: it needs a classical variable
        count = qdiff.Cell(0)
        qdiff.while_loop(lambda: qm.measure(q[0]) == 0,
                         lambda: (qm.ry(w[0], q[0]), count.set(count.value + 1)))
        return count.value

    with pytest.raises(QdiffError, match="program output 0 .* carry 1 of the while loop at "
                                         "eqn 1 changes from one iteration to the next"):
        to_qiskit(_one_qubit(counted))
    with pytest.raises(QdiffError, match="gate 'rx' .* depends on a measured bit"):
        to_qiskit(_one_qubit(lambda w, q: qm.rx(
            qnp.asarray(qm.measure(q[0])).astype("float64"), q[0])))
    with pytest.raises(QdiffError, match="read before later quantum operations"):
        def early(w, q):
            value = qm.expval("Z", q)
            qm.x(q[0])
            return value
        to_qiskit(_one_qubit(early))
