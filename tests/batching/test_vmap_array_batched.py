"""`qdiff.vmap` of straight circuits on the array-module simulator
(``qm.batched_backend("numpy")``: the code the CuPy path runs, on NumPy): values and
per-member gradients equal to those of the Numba lane kernels and of a loop over the
members, for every gate form of the batched circuit class."""

from __future__ import annotations

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff import quantum as qm
from qdiff.gpu import array_module
from qdiff.ir.errors import QdiffError
from qdiff.quantum.execution.batched import batched_circuit, one_wire_runs
from qdiff.quantum.simulator import lane_kernels

rng = np.random.default_rng(7)
B = 4
TOL = {"rtol": 1e-12, "atol": 1e-12}


def every_form(w, x):
    """One-wire rotations, phases and fixed gates in runs, two-wire rotations, controlled
    rotations with the control below and above the target, fixed two-wire gates, a CNOT
    chain (one permutation table), an angle the batch shares (``x``), and readouts: a
    Z-only sum, a sum with X and Y terms, and probabilities."""
    q = qm.qubits(4)
    qm.h(q[3])
    for k in range(4):
        qm.ry(w[k], q[k]); qm.rz(w[k] * x, q[k])
    qm.rx(w[0] - w[1], q[1]); qm.phase(w[2], q[1]); qm.s(q[1]); qm.rx(0.4, q[1])
    qm.rzz(w[1], q[0], q[2]); qm.ryy(x, q[3], q[1]); qm.rxx(w[3] * 2, q[1], q[2])
    qm.crx(w[0], q[0], q[3]); qm.cry(w[1] + x, q[3], q[1]); qm.crz(w[2], q[1], q[2])
    qm.cz(q[2], q[0]); qm.ch(q[0], q[1]); qm.swap(q[1], q[3])
    qm.cx(q[0], q[1]); qm.cx(q[1], q[2]); qm.cx(q[2], q[3])
    qm.ry(w[3], q[2])
    z = qm.expval("0.5*ZIZI - 2*IIZZ + 0.1*IIII", q)
    xy = qm.expval("XIYZ + 0.7*IXXI", q)
    p = qm.probs([q[3], q[0]])
    return (z - 0.2) ** 2 + qnp.sin(xy) * x + qnp.sum(p * np.array([0.3, -0.2, 0.5, 0.1]))


def _loop(fn, w, x, shared):
    return [fn(w[b], x if shared else x[b]) for b in range(B)]


def _stack(rows):
    if isinstance(rows[0], tuple):
        return tuple(np.stack([np.asarray(r[k]) for r in rows]) for k in range(len(rows[0])))
    return np.stack([np.asarray(r) for r in rows])


def _assert_close(got, want):
    if isinstance(want, tuple):
        for g, r in zip(got, want, strict=True):
            _assert_close(g, r)
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), **TOL)


@pytest.fixture(scope="module")
def program():
    program = qdiff.program(every_form)
    circuit = batched_circuit(program.trace(np.zeros(4), 0.5))
    assert circuit is not None and (one_wire_runs(circuit)[2] >= 0).any()
    return program


@pytest.mark.parametrize("shared", [False, True])
def test_values_equal_the_lane_kernels_and_a_loop(program, shared):
    w, x = rng.uniform(-1, 1, (B, 4)), (0.4 if shared else rng.uniform(-1, 1, B))
    batched = qdiff.vmap(program, in_axes=(0, None if shared else 0))
    lanes = batched(w, x)
    with qm.batched_backend("numpy"):
        arrays = batched(w, x)
    _assert_close(arrays, lanes)
    _assert_close(arrays, _stack(_loop(program, w, x, shared)))


@pytest.mark.parametrize("shared", [False, True])
def test_gradients_equal_the_lane_kernels_and_a_loop(program, shared):
    w, x = rng.uniform(-1, 1, (B, 4)), (0.4 if shared else rng.uniform(-1, 1, B))
    both = qdiff.value_and_grad(program, argnums=(0, 1))
    batched = qdiff.vmap(both, in_axes=(0, None if shared else 0))
    lanes = batched(w, x)
    with qm.batched_backend("numpy"):
        arrays = batched(w, x)
    _assert_close(arrays, lanes)
    loop = _loop(both, w, x, shared)
    _assert_close(arrays[0], np.stack([v for v, _ in loop]))
    _assert_close(arrays[1], _stack([g for _, g in loop]))


def test_the_array_path_does_not_run_the_lane_kernels(program, monkeypatch):
    def refuse(*args):
        raise AssertionError("the lane kernels ran")

    monkeypatch.setattr(lane_kernels, "run_circuit", refuse)
    monkeypatch.setattr(lane_kernels, "adjoint_sweep", refuse)
    monkeypatch.setattr(lane_kernels, "adjoint_sweep_checkpointed", refuse)
    w, x = rng.uniform(-1, 1, (B, 4)), rng.uniform(-1, 1, B)
    with qm.batched_backend("numpy"):
        values = qdiff.vmap(program)(w, x)
        qdiff.vmap(qdiff.grad(program))(w, x)
        mapped = qdiff.map(lambda row: program(row, x[0]), w)   # rows as one batch too
    np.testing.assert_allclose(mapped[0], values[0], **TOL)
    with pytest.raises(AssertionError, match="lane kernels ran"):
        qdiff.vmap(program)(w, x)


def test_an_unknown_batched_backend_is_an_error_naming_the_choices():
    with pytest.raises(QdiffError, match="'cupy'"):
        with qm.batched_backend("cuda"):
            pass


def test_the_cupy_batched_backend_without_a_gpu_says_what_is_missing(monkeypatch):
    # a machine without CuPy, here or on a GPU machine alike
    monkeypatch.setattr(array_module, "_probe_cupy",
                        lambda: (None, "CuPy is not importable (ModuleNotFoundError)"))
    with pytest.raises(RuntimeError, match="needs CuPy and a CUDA device: CuPy is not"):
        with qm.batched_backend("cupy"):
            pass
