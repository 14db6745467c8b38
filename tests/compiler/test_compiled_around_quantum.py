"""Programs whose quantum part does not compile whole (mid-circuit measurements, loops on
them, postselection): `qdiff.jit` compiles their classical code around the simulator.

Each program is checked against its uncompiled run (`qm.run`, `qm.gradient`: the branching
simulator with the interpreter) to 1e-12, its gradient also against central differences of
the uncompiled value, and the plan against what ran where.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.compiler import NotCompilableError
from qdiff.compiler.lowering import RULES
from qdiff.ir.control_flow import while_loop
from qdiff.ir.primitives import get_primitive
from qdiff.ir.tracer import Cell
from qdiff.quantum.lang.examples import repeat_until_one
from tests.oracles import central_difference


@qdiff.program
def processed_rounds(w):
    """Classical pre-processing of the angle, a loop until a measurement reads 1, and
    classical post-processing of the number of rounds."""
    angle = qnp.tanh(w) * 1.5 + 0.2
    rounds = repeat_until_one(angle)
    return qnp.sqrt(rounds + 1.0) * 2.0 - rounds * 0.1


@qdiff.program
def postselected(w):
    q = qm.qubits(2)
    qm.ry(w * 1.3, q[0]); qm.cx(q[0], q[1]); qm.rx(qnp.sin(w), q[1])
    qm.postselect(q[1], 1)
    return qm.expval("ZI", q) * 3.0 + w ** 2


@qdiff.program
def fed_forward(w):
    """A mid-circuit measurement feeds a classical computation that feeds a later angle."""
    q = qm.qubits(2)
    qm.ry(w, q[0]); qm.h(q[1])
    bit = qm.measure(q[0])
    angle = qnp.cos(w * bit + 0.5) * 2.0 + w
    qm.ry(angle, q[1]); qm.cx(q[1], q[0])
    return qm.expval("ZZ", q) + bit * 0.25


@qdiff.program
def drifting_angle(w):
    """A loop on a measurement whose body computes its angle classically each round (the
    simulator runs the body per round and branch: its classical equations compile too)."""
    q = qm.qubits(1)
    angle = Cell(w)

    def body():
        qm.ry(qnp.tanh(angle.value) * 1.3 + qnp.sin(angle.value) * 0.5, q[0])
        angle.set(angle.value * 0.9 + 0.1)

    while_loop(lambda: qm.measure(q[0]) == 0, body)
    return angle.value * 2.0


PROGRAMS = {"repeat_until_one": repeat_until_one, "processed_rounds": processed_rounds,
            "postselected": postselected, "fed_forward": fed_forward,
            "drifting_angle": drifting_angle}


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_and_gradients_equal_the_uncompiled_run(name):
    f = PROGRAMS[name]
    for w in (0.7, -1.1):
        value = float(qdiff.jit(f)(w))
        gradient = float(qdiff.grad(f, jit=True)(w))
        assert value == pytest.approx(float(qm.run(f, w).values), rel=1e-12, abs=1e-12)
        assert gradient == pytest.approx(float(qm.gradient(f, w).grad), rel=1e-12, abs=1e-12)
        difference = central_difference(lambda v: qm.run(f, float(v)).values, np.asarray(w))
        assert gradient == pytest.approx(float(difference), rel=1e-6, abs=1e-6)


def test_the_plan_says_what_runs_where(caplog):
    with caplog.at_level(logging.DEBUG, logger="qdiff.compiler"):
        compiled = qdiff.jit(processed_rounds)
        compiled(0.7)
    assert compiled.plan == [
        "compiled: processed_rounds_part0 (3 classical equations, Numba)",
        "simulator: qalloc", "simulator: while",
        "  while cond: simulator: measure", "  while cond: simulator: bit_to_int",
        "  while cond: compiled: cond_part2 (1 classical equations, Numba)",
        "  while body: simulator: gate",
        "  while body: compiled: body_part1 (1 classical equations, Numba)",
        "compiled: processed_rounds_part3 (7 classical equations, Numba)"]
    assert "processed_rounds: compiled around its quantum part (measure" in caplog.text
    assert compiled.source.startswith("# compiled: processed_rounds_part0")
    gradient = qdiff.grad(processed_rounds, jit=True)
    gradient(0.7)
    assert gradient.plan[-1].startswith("simulator: the grad")


def test_angles_computed_between_gates_join_one_segment():
    def interleaved(w):
        q = qm.qubits(2)
        qm.ry(w * 2.0, q[0])
        bit = qm.measure(q[0])
        qm.rz(qnp.sin(w) + 1.0, q[1]); qm.rx(qnp.exp(w), q[1])
        return qm.expval("ZZ", q) * 2.0 + bit

    compiled = qdiff.jit(interleaved)
    assert float(compiled(0.4)) == pytest.approx(float(qm.run(interleaved, 0.4).values),
                                                 rel=1e-12)
    segments = [line for line in compiled.plan if line.startswith("compiled:")]
    # every angle in one segment before the measurement, the output's arithmetic in a second
    assert len(segments) == 2
    assert compiled.plan.index(segments[0]) < compiled.plan.index("simulator: measure")


def test_plain_calls_take_the_compiled_around_path_with_the_same_numbers():
    reference = float(qm.run(postselected, 0.3).values)
    qdiff.jit(postselected)(0.3)
    assert float(postselected(0.3)) == pytest.approx(reference, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("name", ["processed_rounds", "drifting_angle"])
def test_remainders_are_reported_as_the_simulator_reports_them(name):
    """The certificate reads the loop's structure (its round counter, its exit test)
    through the segments compiled in and around the loop."""
    program = qdiff.trace(PROGRAMS[name], 0.7)
    form = qdiff.jit(PROGRAMS[name]).compiled(0.7).hybrid.program
    compiled, reference = qm.run(form, 0.7), qm.run(program, 0.7)
    assert compiled.values == pytest.approx(reference.values, rel=1e-12)
    assert compiled.remainder_bound == pytest.approx(reference.remainder_bound, rel=1e-9)
    assert compiled.remainder_reason == reference.remainder_reason
    assert (compiled.remainder_reason is None) == (name == "processed_rounds")
    assert compiled.unterminated_mass == pytest.approx(reference.unterminated_mass, rel=1e-9)


def test_a_classical_primitive_without_a_rule_is_named(monkeypatch, caplog):
    monkeypatch.delitem(RULES, get_primitive("tanh"))
    with pytest.raises(NotCompilableError, match="tanh"):
        qdiff.jit(processed_rounds)(0.7)
    with caplog.at_level(logging.INFO, logger="qdiff.compiler"):
        compiled = qdiff.jit(processed_rounds, fallback="interpret")
        value = compiled(0.7)
    assert "interpreted: tanh" in compiled.plan and "tanh" in caplog.text
    assert float(value) == pytest.approx(float(qm.run(processed_rounds, 0.7).values),
                                         rel=1e-12)
