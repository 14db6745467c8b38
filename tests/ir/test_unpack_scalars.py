"""The unpack pass and primitive: many scalar reads of an array as one equation."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parents[1] / "classical"))
from derivative_checks import check_derivatives  # noqa: E402

import qdiff
import qdiff.numpy as qnp
from qdiff.ir.passes import unpack_scalars
from qdiff.ir.verifier import verify


def _reads(w):
    return qnp.sin(w[0, 1]) * w[1, 0] + w[0, 1] ** 2 - 3.0 * w[1, 1]


def test_pass_merges_element_reads_and_keeps_values():
    w = np.array([[0.3, -1.2], [0.7, 2.0]])
    program = qdiff.trace(_reads, w)
    unpacked = unpack_scalars(program)
    verify(unpacked)
    names = [e.primitive.name for e in unpacked.eqns]
    assert names.count("unpack") == 1 and "slice" not in names
    assert unpack_scalars(program) is unpacked  # cached
    assert float(unpacked(w)) == float(program(w))


def test_unpack_derivatives_forward_and_reverse():
    # the traced reverse rule (gather transpose) and forward rule, against differences
    unpacked = unpack_scalars(qdiff.trace(_reads, np.ones((2, 2))))
    check_derivatives(unpacked, np.array([[0.3, -1.2], [0.7, 2.0]]))


def test_unpacked_programs_export_to_qiskit():
    import pytest

    pytest.importorskip("qiskit")
    from qdiff import quantum as qm

    def f(w):
        q = qm.qubits(2)
        qm.ry(w[0, 1], q[0])
        qm.cx(q[0], q[1])
        qm.rx(w[1, 0] * 2, q[1])
        return qm.expval("ZZ", q)

    w = np.array([[0.1, 0.4], [-0.3, 0.2]])
    export = qm.to_qiskit(unpack_scalars(qdiff.trace(f, w)))
    back = qm.from_qiskit(export.circuit, export.observables[0])
    assert float(back(export.parameter_values(w))) == pytest.approx(float(qm.run(f, w).values))
