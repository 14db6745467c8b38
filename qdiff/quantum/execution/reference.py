"""The quantum primitives on the reference interpreter and on a simulator back end.

The language layer (`qdiff.quantum.lang`) declares what the quantum primitives mean (types,
wires, angles); this module gives them their plain implementations on the NumPy back end,
for the reference interpreter, and applies gate equations on any back end for the runners.
Importing `qdiff.quantum` registers them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.core import Eqn, Program
from ...ir.errors import QdiffError
from ..lang.fusion import FusionStats, fuse_gates, fused_gate_p, fused_gate_parts
from ..lang.primitives import (
    expval_p,
    gate_p,
    pauli_sum_of,
    probs_p,
    qalloc_p,
    sample_p,
    statevector_p,
)
from ..lang.relabel import relabel_swaps
from ..simulator import GateOp, get_backend


def _backend() -> Any:
    return get_backend("numpy")


qalloc_p.def_impl("numpy")(lambda *, num_qubits, dtype: _backend().zero_state(num_qubits, dtype))


@gate_p.def_impl("numpy")
def _gate_impl(state: np.ndarray, *angles: Any, **params: Any) -> np.ndarray:
    return apply_gate_eqn(_backend(), np.array(state), angles, **params)


def check_finite_angles(eqn: Eqn, angles: Sequence[Any]) -> None:
    """Refuse a gate whose angle is NaN or infinite: no number it would give is meaningful,
    and a NaN state would otherwise meet measurements as probability 0 (a finite, wrong value).

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import rotation
    >>> check_finite_angles(qdiff.trace(rotation, 0.1).eqns[1], [float("nan")])
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    qdiff.ir.errors.QdiffError: gate ry on wires (0,): angle nan is not finite; ...
    """
    # gate angles are real scalars: one float conversion each, on every gate of every run
    if all(map(math.isfinite, map(float, angles))):
        return
    value = next(float(a) for a in angles if not math.isfinite(float(a)))
    name = eqn.params.get("name", "fused_gate")
    raise QdiffError(f"gate {name} on wires {tuple(eqn.params['wires'])}: angle {value} is "
                     "not finite; check the classical code that computes it")


def apply_gate_eqn(backend: Any, state: Any, angles: Any, *, name: str,
                   wires: tuple[int, ...], static: dict | None = None) -> Any:
    """Apply a ``gate`` equation's gate to ``state`` (in place) on a simulator back end."""
    num_qubits = int(state.shape[0]).bit_length() - 1
    return backend.apply_gate(state, num_qubits, name, list(wires),
                              [float(a) for a in angles], **(static or {}))


@expval_p.def_impl("numpy")
def _expval_impl(state: np.ndarray, *, terms: tuple, wires: tuple[int, ...]) -> list[Any]:
    num_qubits = int(state.shape[0]).bit_length() - 1
    norm = _backend().norm_squared(state)
    value = _backend().expval_pauli_sum(state, num_qubits, pauli_sum_of(terms), list(wires))
    return [state, np.asarray(value / norm if norm > 0 else 0.0)]


@probs_p.def_impl("numpy")
def _probs_impl(state: np.ndarray, *, wires: tuple[int, ...]) -> list[Any]:
    num_qubits = int(state.shape[0]).bit_length() - 1
    p = np.asarray(_backend().probs(state, num_qubits, list(wires)))
    total = p.sum()
    return [state, p / total if total > 0 else p]


@statevector_p.def_impl("numpy")
def _statevector_impl(state: np.ndarray, *, dtype: str = "complex128") -> list[Any]:
    norm = np.sqrt(_backend().norm_squared(state))
    return [state, np.asarray(state / norm if norm > 0 else state, dtype)]


def draw_bits(probs: Any, shots: int, rng: np.random.Generator | None) -> np.ndarray:
    """``shots`` draws from outcome probabilities ``probs`` of k wires, as an int64 array of
    shape (shots, k): column j is bit j of the drawn outcome (``wires[j]`` in ``probs``).

    >>> draw_bits(np.array([0.0, 0.0, 1.0, 0.0]), 2, np.random.default_rng(0)).tolist()
    [[0, 1], [0, 1]]
    """
    p = np.asarray(probs, np.float64)
    k = int(p.size).bit_length() - 1
    index = _backend().sample(p, int(shots), rng)
    return ((index[:, None] >> np.arange(k)) & 1).astype(np.int64)


@sample_p.def_impl("numpy")
def _sample_impl(state: np.ndarray, *, wires: tuple[int, ...], shots: int) -> list[Any]:
    # the reference interpreter has no run seed: qm.run(..., seed=) gives reproducible draws
    num_qubits = int(state.shape[0]).bit_length() - 1
    p = np.asarray(_backend().probs(state, num_qubits, list(wires)))
    return [state, draw_bits(p, shots, np.random.default_rng())]


def apply_fused_gate_eqn(backend: Any, state: Any, angles: Sequence[Any], *,
                         wires: tuple[int, ...], parts: tuple) -> Any:
    """Apply a ``fused_gate`` equation to ``state`` (in place) on a simulator back end.

    The parts' matrices are computed from ``angles`` here, then the back end's
    ``apply_fused`` applies the whole sequence in one pass.

    >>> be = get_backend("numpy")
    >>> parts = (("h", (0,), None, 0), ("cx", (0, 1), None, 0))
    >>> psi = apply_fused_gate_eqn(be, be.zero_state(2), [], wires=(0, 1), parts=parts)
    >>> be.probs(psi, 2).round(3).tolist()
    [0.5, 0.0, 0.0, 0.5]
    """
    num_qubits = int(state.shape[0]).bit_length() - 1
    return backend.apply_fused(state, num_qubits, wires, fused_gate_ops(wires, parts, angles))


def fused_gate_ops(wires: tuple[int, ...], parts: tuple, angles: Sequence[Any]) -> list[GateOp]:
    """The parts of a ``fused_gate`` equation as gate operations on the register's wires.

    >>> [(op.gate.name, op.wires) for op in fused_gate_ops(
    ...     (3, 5), (("h", (0,), None, 0), ("cx", (1, 0), None, 0)), [])]
    [('h', (3,)), ('cx', (5, 3))]
    """
    values = [float(a) for a in angles]
    return [GateOp(spec, ws, tuple(values[lo:hi]))
            for spec, ws, lo, hi in fused_gate_parts(wires, parts)]


@fused_gate_p.def_impl("numpy")
def _fused_gate_impl(state: np.ndarray, *angles: Any, wires: tuple[int, ...],
                     parts: tuple) -> np.ndarray:
    return apply_fused_gate_eqn(get_backend("numpy"), np.array(state), angles, wires=wires,
                                parts=parts)


# ------------------------------------------------------------ fusion, cached per back end
_FUSED: dict[tuple[int, str, int | None], tuple[Program, Program, FusionStats]] = {}


def fused_program(program: Program, backend: Any = "auto",
                  max_qubits: int | None = None) -> tuple[Program, FusionStats]:
    """``fuse_gates(program, max_qubits or backend.fusion_width)``, cached per program, back
    end and width.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def bell():
    ...     q = qm.qubits(2); qm.h(q[0]); qm.cx(q[0], q[1]); return qm.probs(q)
    >>> program = qdiff.trace(bell)
    >>> fused_program(program, "numpy")[0] is fused_program(program, "numpy")[0]
    True
    """
    be = get_backend(backend)
    key = (id(program), be.name, max_qubits)
    hit = _FUSED.get(key)
    if hit is not None and hit[0] is program:
        return hit[1], hit[2]
    # swaps first become relabellings of the wires after them: no pass over the state
    fused, stats = fuse_gates(relabel_swaps(program),
                              be.fusion_width if max_qubits is None else max_qubits,
                              report=True)
    if len(_FUSED) > 4096:
        _FUSED.clear()
    _FUSED[key] = (program, fused, stats)

    def done(p: Program) -> None:  # the runner meets the sub-programs again: already fused
        _FUSED[(id(p), be.name, max_qubits)] = (p, p, stats)
        for eqn in p.eqns:
            for _, sub in eqn.subprograms():
                done(sub)

    done(fused)
    return fused, stats



