"""Every quantum primitive has an entry in every table that must cover it.

The tables are keyed by `Primitive` objects: a new quantum primitive that a runner, the
density-matrix runner, the output-growth analysis or the Qiskit export does not handle
fails here, not as a quiet fallback at run time.
"""

from qdiff.ir.control_flow import cond_p, loop_p, while_p
from qdiff.ir.primitives import Primitive, get_primitive
from qdiff.quantum.certificate.output_growth import GROWTH_RULES
from qdiff.quantum.execution.density_runner import DENSITY_HANDLERS
from qdiff.quantum.execution.runner import HANDLERS
from qdiff.quantum.lang.frontend import GATES
from qdiff.quantum.lang.gates import GATE_TABLE, GateSpec
from qdiff.quantum.lang.primitives import QUANTUM_PRIMITIVES, bit_to_int_p
from qdiff.quantum.qiskit import exporter

QUANTUM = {get_primitive(name) for name in QUANTUM_PRIMITIVES}
# bit_to_int reads a measured bit: a classical operation, run by the reference interpreter
ON_STATES = QUANTUM - {bit_to_int_p}
CONTROL = {loop_p, while_p, cond_p}


def test_tables_are_keyed_by_primitives():
    for table in (HANDLERS, DENSITY_HANDLERS, GROWTH_RULES, exporter._CONTROL):
        assert all(isinstance(key, Primitive) for key in table)


def test_both_runners_handle_every_operation_on_states_and_the_control_flow():
    assert set(HANDLERS) == ON_STATES | CONTROL
    assert set(DENSITY_HANDLERS) == ON_STATES | CONTROL


def test_output_growth_has_a_rule_for_every_quantum_primitive():
    assert QUANTUM <= set(GROWTH_RULES)


def test_the_export_handles_every_control_flow_primitive():
    assert set(exporter._CONTROL) == CONTROL


def test_front_end_has_a_function_for_every_gate_of_the_table():
    fixed = {name for name, spec in GATE_TABLE.items() if isinstance(spec, GateSpec)}
    assert set(GATES) == fixed
    assert len(QUANTUM) == len(QUANTUM_PRIMITIVES)  # no name registered twice
