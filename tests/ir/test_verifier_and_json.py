"""The verifier's and the JSON reader's errors name what is wrong."""

import json

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.ir import Eqn, Literal, Program, QState, Tensor, Var, get_primitive


def _simple():
    return qdiff.trace(lambda x, y: qnp.sin(x) + y, np.zeros(2), np.zeros(2))


def test_qstate_used_twice_is_rejected():
    state = Var(QState(2))
    twice = Program((state,), (), (state, state))
    with pytest.raises(qdiff.VerificationError, match="qstate\\[2\\].*linear"):
        twice.verify()
    once = Program((state,), (), (state,))
    assert once.verify() is once


def test_qstate_passed_twice_into_one_equation_is_rejected():
    state, pred = Var(QState(1)), Var(Tensor((), "bool"))
    a, b = Var(QState(1)), Var(QState(1))
    branch = Program((a, b), (), (a,))
    out = Var(QState(1))
    cond = Eqn(get_primitive("cond"), (pred, state, state), (out,),
               {"branches": (branch, branch)})
    with pytest.raises(qdiff.VerificationError, match="eqn 0 \\(cond\\) input 2"):
        Program((pred, state), (cond,), (out,)).verify()


def test_use_before_definition_and_redefinition():
    x, y, z = Var(Tensor((), "float64")), Var(Tensor((), "float64")), Var(Tensor((), "float64"))
    add = get_primitive("add")
    early = Program((x,), (Eqn(add, (x, z), (y,)), Eqn(add, (x, x), (z,))), (y,))
    with pytest.raises(qdiff.VerificationError, match="eqn 0 \\(add\\) input 1 uses .* before"):
        early.verify()
    twice = Program((x,), (Eqn(add, (x, x), (x,)),), (x,))
    with pytest.raises(qdiff.VerificationError, match="redefines"):
        twice.verify()


def test_declared_output_type_must_match_type_rule():
    x, y = Var(Tensor((3,), "float64")), Var(Tensor((4,), "float64"))
    bad = Program((x,), (Eqn(get_primitive("sin"), (x,), (y,)),), (y,))
    with pytest.raises(qdiff.VerificationError, match="f64\\[4\\].*type rule gives.*f64\\[3\\]"):
        bad.verify()


def test_sub_program_errors_name_their_path():
    p = qdiff.trace(lambda x: qdiff.fori_loop(0, 2, lambda i, c: qnp.sin(c), x), 1.0)
    body = p.eqns[0].params["body"]
    body.eqns[0].outputs[0].type = Tensor((2,), "float64")  # corrupt it
    with pytest.raises(qdiff.VerificationError, match="eqn 0 \\(loop\\) > body"):
        p.verify()


def test_json_unknown_primitive():
    doc = json.loads(_simple().to_json())
    doc["program"]["eqns"][0]["primitive"] = "frobnicate"
    with pytest.raises(qdiff.SerializationError, match="unknown primitive 'frobnicate'"):
        Program.from_json(json.dumps(doc))


def test_json_wrong_version_and_format():
    doc = json.loads(_simple().to_json())
    doc["version"] = 99
    with pytest.raises(qdiff.SerializationError, match="version 99"):
        Program.from_json(json.dumps(doc))
    with pytest.raises(qdiff.SerializationError, match="not a qdiff program"):
        Program.from_json(json.dumps({"hello": 1}))
    with pytest.raises(qdiff.SerializationError, match="not a JSON document"):
        Program.from_json("{nope")


def test_json_broken_reference():
    doc = json.loads(_simple().to_json())
    doc["program"]["eqns"][1]["inputs"][0] = 17
    with pytest.raises(qdiff.SerializationError, match="eqn 1 \\(add\\) input 0 refers to var 17"):
        Program.from_json(json.dumps(doc))


def test_json_keeps_literals_exactly():
    values = np.array([np.pi, -0.0, np.inf, np.nan, 1e-300])
    p = qdiff.trace(lambda x: x * values + (1 + 2j), np.zeros(5, complex))
    restored = Program.from_json(p.to_json())
    assert restored == p
    np.testing.assert_array_equal(restored(np.ones(5)), p(np.ones(5)))


def test_literal_and_var_reprs():
    assert "f64[3]" in repr(Var(Tensor((3,), "float64")))
    assert Literal(np.float32(2.0)).type == Tensor((), "float32")


def test_show_and_demo_commands(tmp_path, capsys):
    from qdiff.cli import main

    path = tmp_path / "p.json"
    path.write_text(_simple().to_json())
    assert main(["show", str(path)]) == 0
    assert "sin" in capsys.readouterr().out
    assert main(["demo"]) == 0
    assert "= while" in capsys.readouterr().out
    assert main(["info"]) == 0
    assert "numba" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "qdiff.program", "version": 0}')
    assert main(["show", str(bad)]) == 1
    assert "version 0" in capsys.readouterr().err
