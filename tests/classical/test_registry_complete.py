"""The primitive registry is complete and consistent: every classical and control-flow
primitive has a JVP and a VJP rule, the ``elementwise`` flags agree with what is registered
as elementwise (and with what elementwise means), and each package registers its rules
when it is imported."""

import numpy as np
import pytest

import qdiff  # noqa: F401  (registers the primitives and their rules)
from qdiff.autodiff.classical_rules import elementwise as elementwise_rules
from qdiff.classical import elementwise
from qdiff.ir.primitives import all_primitives, elementwise_primitives
from qdiff.ir.types import Tensor

# Primitives of these packages are differentiated by the classical engines; quantum
# primitives get their rules from qdiff.quantum.
COVERED = ("qdiff.classical", "qdiff.ir", "qdiff.autodiff", "qdiff.loops")


def _covered(primitive) -> bool:
    module = primitive.type_rule.__module__ or ""
    return module.startswith(COVERED)


def _missing_rules(primitives) -> list[str]:
    return sorted(name for name, p in primitives.items() if p.jvp is None or p.vjp is None)


def test_every_covered_primitive_has_both_rules():
    covered = {name: p for name, p in all_primitives().items() if _covered(p)}
    assert len(covered) > 60
    assert _missing_rules(covered) == []
    # the control-flow primitives are among them (their rules live in qdiff.loops)
    assert {"loop", "while", "cond"} <= set(covered)


def test_elementwise_flags_agree_with_the_elementwise_table():
    flagged = elementwise_primitives()
    assert flagged == elementwise.ELEMENTWISE_PRIMITIVES
    table = {*elementwise.UNARY, *elementwise.BINARY, "select", "convert"}
    assert {p.name for p in flagged} == table
    # nothing registered elsewhere claims to be elementwise
    defined_here = {p for p in all_primitives().values()
                    if p.type_rule.__module__ == elementwise.__name__}
    assert flagged == defined_here
    for p in flagged:
        assert not (p.multiple_results or p.effectful or p.subprogram_params), p.name


def test_every_elementwise_table_entry_has_a_derivative_entry():
    assert set(elementwise_rules.UNARY_DERIVATIVES) == set(elementwise.UNARY)
    assert set(elementwise_rules.BINARY_DERIVATIVES) == set(elementwise.BINARY)


def _operand(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    if kind == elementwise.LOGICAL:
        return np.resize(np.array([True, False, True]), shape)
    return np.resize(np.array([0.5, 0.25, 0.75]), shape) + 0.1 * len(shape)


@pytest.mark.parametrize("name", sorted({*elementwise.UNARY, *elementwise.BINARY}))
def test_flagged_primitives_act_on_each_element_alone(name):
    # an array pass equals the element-by-element one, and a rank-0 operand broadcasts
    primitive = elementwise.PRIMITIVES[name]
    assert primitive.elementwise
    _, kind = {**elementwise.UNARY, **elementwise.BINARY}[name]
    arity = 1 if name in elementwise.UNARY else 2
    arrays = [_operand(kind, (3,)) for _ in range(arity)]
    whole = primitive.impl("numpy")(*arrays)
    rows = [primitive.impl("numpy")(*(a[i] for a in arrays)) for i in range(3)]
    np.testing.assert_array_equal(whole, np.stack(rows))
    scalar = Tensor((), arrays[0].dtype.name)
    vector = Tensor((3,), arrays[0].dtype.name)
    out = primitive.type_rule(*([vector] + [scalar] * (arity - 1)))
    assert out[0].shape == (3,)


def test_rules_are_registered_by_the_layer_that_defines_them():
    # classical primitives get theirs from qdiff.autodiff, control flow from qdiff.loops
    control_flow = {"loop", "while", "cond"}
    checked = 0
    for name, p in all_primitives().items():
        if name in control_flow:
            layer = "qdiff.loops."
        elif p.type_rule.__module__.startswith("qdiff.classical."):
            layer = "qdiff.autodiff."
        else:
            continue
        checked += 1
        for rule in (p.jvp, p.vjp):
            assert rule.__module__.startswith(layer), (name, rule.__module__)
    assert checked > 60
