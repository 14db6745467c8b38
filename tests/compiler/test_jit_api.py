"""`qdiff.jit` as users meet it: options, errors, fallback, caching, the CLI."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.cli import main as cli_main
from qdiff.compiler import CompiledProgram, NotCompilableError
from qdiff.compiler.lowering import RULES
from qdiff.ir.errors import LoopLimitError, QdiffError
from qdiff.ir.primitives import get_primitive


def _recurrence(a):
    return qdiff.fori_loop(0, 200, lambda i, x: qnp.sin(x) * a + 0.1, 0.5)


def test_second_call_does_not_recompile():
    f = qdiff.jit(qdiff.grad(_recurrence))
    first = f(0.9)
    compiled = f.last
    kernel = compiled._steps[0].function
    assert f(0.8) != first
    assert f.last is compiled
    assert len(kernel.signatures) == 1
    f(np.float32(0.9))  # another dtype is another signature
    assert f.last is not compiled


def test_source_is_inspectable():
    f = qdiff.jit(_recurrence)
    with pytest.raises(QdiffError, match="not been compiled yet"):
        _ = f.source
    f(0.9)
    assert "def kernel(" in f.source and "for " in f.source


def test_reversed_loop_reads_stored_carries_as_scalars():
    """No one-element array is allocated per iteration when reverse mode stores or reads
    a scalar carry."""
    source = qdiff.jit(qdiff.grad(_recurrence)).compiled(0.9).source
    assert "np.full((1,)" not in source and ".copy()" not in source.split("for ", 1)[1]


def test_out_of_bounds_dynamic_index_is_the_interpreters_error():
    f = lambda x, i: x[i]  # noqa: E731
    program = qdiff.trace(f, np.zeros(3), 0)
    with pytest.raises(QdiffError, match="out of bounds"):
        program(np.zeros(3), 5)
    with pytest.raises(QdiffError, match="out of bounds"):
        CompiledProgram(program)(np.zeros(3), 5)


def test_endless_while_loop_stops_with_loop_limit_error():
    f = qdiff.jit(lambda x: qdiff.while_loop(lambda v: v > 0.0, lambda v: v + 1.0, x,
                                              max_iter=50))
    with pytest.raises(LoopLimitError, match="max_iter=50"):
        f(1.0)


def _measuring(theta):
    # a mid-circuit measurement: the program branches, so it runs on the simulator
    q = qm.qubits(2)
    qm.ry(theta * 2.0, q[0])
    bit = qm.measure(q[0])
    qdiff.cond(bit == 1, lambda: qm.x(q[1]), lambda: None)
    return qm.expval("IZ", q)


def test_measured_program_compiles_around_its_quantum_part_and_says_where(caplog):
    with caplog.at_level(logging.DEBUG, logger="qdiff.compiler"):
        f = qdiff.jit(_measuring)
        value = f(0.3)
    assert float(value) == pytest.approx(np.cos(0.6), abs=1e-12)  # 1 - 2 sin²(0.3)
    assert "compiled around its quantum part" in caplog.text and "measure" in caplog.text
    assert f.plan[1].startswith("compiled:") and "simulator: measure" in f.plan
    assert "# simulator: measure" in f.source and "def kernel(" in f.source
    gradient = qdiff.grad(_measuring, jit=True)(0.3)
    assert float(gradient) == pytest.approx(-2 * np.sin(0.6), abs=1e-10)


def test_fallback_interprets_with_a_logged_reason(caplog, monkeypatch):
    monkeypatch.delitem(RULES, get_primitive("tanh"))  # a primitive without a compiled form
    f = lambda x: qnp.sum(qnp.tanh(qnp.sin(x)) * 2.0)  # noqa: E731
    x = np.array([0.3, -1.2])
    with pytest.raises(NotCompilableError, match="tanh"):
        qdiff.jit(f)(x)
    with caplog.at_level(logging.INFO, logger="qdiff.compiler"):
        compiled = qdiff.jit(f, fallback="interpret")
        value = compiled(x)
    assert float(value) == pytest.approx(float(np.sum(np.tanh(np.sin(x)) * 2.0)), abs=1e-12)
    assert "tanh" in caplog.text and "interpreter" in caplog.text
    assert "interpreted: tanh" in compiled.plan


def test_bad_options_are_named():
    with pytest.raises(QdiffError, match="backend must be one of"):
        qdiff.jit(_recurrence, backend="cuda")
    with pytest.raises(QdiffError, match="fallback must be one of"):
        qdiff.jit(_recurrence, fallback="maybe")
    with pytest.raises(QdiffError, match="backend must be one of"):
        qdiff.grad(_recurrence, backend="tpu")


def test_jit_options_on_every_transformation():
    x = np.array([0.3, -1.2, 2.0])
    f = lambda v: qnp.sum(qnp.sin(v) ** 2 * v)  # noqa: E731
    for transform in (qdiff.grad, qdiff.value_and_grad, qdiff.jacobian, qdiff.hessian):
        compiled, reference = transform(f, jit=True)(x), transform(f)(x)
        pairs = zip(compiled, reference) if isinstance(reference, tuple) else [(compiled,
                                                                                 reference)]
        for a, b in pairs:
            np.testing.assert_allclose(a, b, rtol=1e-12)
    out, tangent = qdiff.jvp(f, (x,), (np.ones(3),), backend="numba")
    assert float(tangent) == pytest.approx(float(np.sum(qdiff.grad(f)(x))), rel=1e-12)


def test_parallel_loop_nests_agree():
    x = np.random.default_rng(1).normal(size=(64, 33))
    f = lambda m: (qnp.sum(qnp.exp(m) * m, axis=1), qdiff.map(lambda r: qnp.max(r) * 2.0, m))  # noqa: E731
    for got, want in zip(qdiff.jit(f, parallel=True)(x), f(x)):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_parallel_hist_uses_per_thread_partial_histograms_and_agrees():
    # 6000 updates into 7 bins: every bin collides hundreds of times across threads
    rng = np.random.default_rng(2)
    index = rng.integers(-2, 9, size=6000)  # a few out of range, ignored
    whole = rng.integers(-5, 6, size=6000).astype(float)  # integer sums are exact in any order
    near_one = 1.0 + rng.uniform(-1e-3, 1e-3, size=6000)
    counts = rng.integers(0, 1000, size=6000)

    def histograms(index, v, p, k):
        return (qdiff.hist(qnp.zeros(7), "add", 0.0, index, v),
                qdiff.hist(qnp.ones(7), "mul", 1.0, index, p),
                qdiff.hist(qnp.zeros(7, dtype=np.int64), "max", 0, index, k),
                qdiff.hist(qnp.zeros(7), lambda a, b: a + b * b, 0.0, index, v),
                qdiff.hist(qnp.zeros((7, 2)), "add", qnp.zeros(2), index,
                           qnp.stack([v, 2.0 * v], axis=1)))

    args = (index, whole, near_one, counts)
    compiled = qdiff.jit(histograms, parallel=True)
    got = compiled(*args)
    # the operator a + b² is no monoid, so regrouping its updates could change the result:
    # it keeps the serial loop
    assert len(re.findall(r"part\d+ = np.empty", compiled.source)) == 4
    for g, w in zip(got, histograms(*args)):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    # a serial compile takes the single loop
    serial = qdiff.jit(histograms)
    serial(*args)
    assert not re.findall(r"part\d+ = np.empty", serial.source)


def test_cache_survives_a_new_process(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, qdiff, qdiff.numpy as qnp
        f = qdiff.jit(qdiff.grad(lambda x: qnp.sum(qnp.tanh(x) * x)))
        f(np.ones(4))
        print(f.last._steps[0].function.stats.cache_hits and "hit" or "miss")
    """)
    env = {**os.environ, "QDIFF_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, check=True).stdout.split()[-1] for _ in range(2)]
    assert runs == ["miss", "hit"]


def test_cli_shows_compiled_source(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text(qdiff.trace(lambda x: qnp.sum(qnp.exp(x)), np.zeros(2)).to_json())
    assert cli_main(["show", str(path), "--compiled"]) == 0
    assert "np.exp(" in capsys.readouterr().out


def test_a_trace_error_is_reported_as_itself():
    """A mistake in the user's function is its own error, not "cannot compile"."""
    f = qdiff.jit(lambda x: x + np.ones(3))
    with pytest.raises(QdiffError, match="broadcast") as caught:
        f(np.ones(4))
    assert not isinstance(caught.value, NotCompilableError)


def test_a_branch_lowered_before_the_constants_does_not_shadow_one():
    """The branch index of a `cond` was named like the constant arguments (k0, k1, ...):
    lowered early, it shadowed the constant of the same name."""
    def f(x):
        y = qdiff.cond(x[0] > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
        for c in range(8):
            y = y * np.arange(1.0, 4.0) ** (c + 1) + x
        return y

    x = np.array([0.5, 0.2, 0.1])
    np.testing.assert_allclose(qdiff.jit(f)(x), f(x), rtol=1e-12)
