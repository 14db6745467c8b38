"""Gate applications as data, and what is computed from them alone: fusion of one-qubit
runs, the dense matrix of a gate sequence, random circuits for tests and benchmarks.

>>> [op.wires for op in fuse_single_qubit_layers([GateOp("h", (0,)), GateOp("x", (0,))])]
[(0,)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np

from ..lang.gates import ALIASES, GATE_TABLE, GateFamily, GateSpec, gate_spec

__all__ = ["GateOp", "fuse_single_qubit_layers", "fused_matrix", "random_circuit"]


class GateOp(NamedTuple):
    """One gate application: a table name / :class:`GateSpec` / matrix, its wires, its params.

    >>> GateOp("rx", (0,), (0.5,)).wires
    (0,)
    """

    gate: str | GateSpec | np.ndarray
    wires: tuple[int, ...]
    params: tuple[float, ...] = ()


def _op_matrix(op: GateOp) -> np.ndarray:
    if isinstance(op.gate, np.ndarray):
        return np.asarray(op.gate, dtype=np.complex128)
    return gate_spec(op.gate).matrix(*op.params)


def fuse_single_qubit_layers(ops: Iterable[GateOp]) -> list[GateOp]:
    """Merge runs of 1-qubit gates on the same wire into one 2x2 matrix per run.

    A run ends when a multi-qubit gate touches its wire; gates on other wires commute with it,
    so they may be emitted later. Fused gates are emitted as matrices (diagonal products stay
    diagonal, which the back ends detect). Returns a new list; the circuit's unitary is
    unchanged.

    >>> ops = [GateOp("ry", (0,), (0.3,)), GateOp("rz", (0,), (0.2,)), GateOp("cx", (0, 1))]
    >>> [len(op.wires) for op in fuse_single_qubit_layers(ops)]
    [1, 2]
    """
    pending: dict[int, np.ndarray] = {}
    out: list[GateOp] = []
    for op in ops:
        op = GateOp(op.gate, tuple(int(w) for w in op.wires), tuple(op.params))
        if len(op.wires) == 1:
            w = op.wires[0]
            m = _op_matrix(op)
            if m.shape != (2, 2):
                raise ValueError(f"1-wire gate {op.gate!r} has a matrix of shape {m.shape}")
            pending[w] = m @ pending[w] if w in pending else m
            continue
        for w in op.wires:
            if w in pending:
                out.append(GateOp(pending.pop(w), (w,)))
        out.append(op)
    for w in sorted(pending):
        out.append(GateOp(pending[w], (w,)))
    return out


def _apply_local(mat: np.ndarray, k: int, u: np.ndarray, local: Sequence[int]) -> np.ndarray:
    # u (bit j of its index = local wire local[j]) applied to the row index of mat [2^k, C]
    a = len(local)
    t = mat.reshape((2,) * k + (-1,))  # axis i is bit k-1-i
    ut = u.reshape((2,) * (2 * a))
    res = np.tensordot(ut, t, axes=([a + a - 1 - j for j in range(a)],
                                     [k - 1 - local[j] for j in range(a)]))
    res = np.moveaxis(res, [a - 1 - j for j in range(a)], [k - 1 - local[j] for j in range(a)])
    return res.reshape(mat.shape)


def fused_matrix(wires: Sequence[int], ops: Iterable[GateOp]) -> np.ndarray:
    """The ``2^k x 2^k`` matrix of a gate sequence whose wires all lie in ``wires``.

    Bit ``j`` of the matrix index is ``wires[j]`` (the gate-matrix convention), and the ops
    are applied in order, so the result is ``U_last ... U_first``.

    >>> m = fused_matrix([0, 1], [GateOp("h", (0,)), GateOp("cx", (0, 1))])
    >>> (m @ np.eye(4)[0] * np.sqrt(2)).real.round(12).tolist()  # |00> -> Bell state
    [1.0, 0.0, 0.0, 1.0]
    """
    ws = tuple(int(w) for w in wires)
    local = {w: j for j, w in enumerate(ws)}
    k = len(ws)
    m = np.eye(1 << k, dtype=np.complex128)
    for op in ops:
        op = GateOp(*op)
        try:
            lw = [local[int(w)] for w in op.wires]
        except KeyError:
            raise ValueError(f"fused gate on wires {ws}: a gate acts on {tuple(op.wires)}, "
                             "outside them") from None
        m = _apply_local(m, k, _op_matrix(op), lw)
    return m


def random_circuit(num_qubits: int, num_gates: int, rng: np.random.Generator | int | None = None,
                   gates: Sequence[str] | None = None) -> list[GateOp]:
    """Random gates from the whole table on random distinct wires (for tests and benchmarks).

    Families get random static arguments: ``mcx``/``mcz`` a random number of controls,
    ``pauli_rot`` a random word of up to 4 letters, ``unitary`` a random 1-3 qubit unitary.
    Parameters are uniform in ``[-2π, 2π)``.

    >>> ops = random_circuit(3, 5, rng=0); len(ops), all(len(op.wires) <= 3 for op in ops)
    (5, True)
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    names = sorted(GATE_TABLE) if gates is None else list(gates)
    ops: list[GateOp] = []
    while len(ops) < num_gates:
        name = names[int(gen.integers(len(names)))]
        entry = GATE_TABLE[ALIASES.get(name, name)]
        if isinstance(entry, GateFamily):
            width = int(gen.integers(1, min(num_qubits, 4) + 1))
            if name in ("mcx", "mcz"):
                spec = gate_spec(name, num_controls=width - 1)
            elif name == "pauli_rot":
                spec = gate_spec(name, pauli="".join(gen.choice(list("IXYZ"), size=width)))
            else:
                width = min(width, 3)
                z = gen.normal(size=(1 << width, 1 << width)) + 1j * gen.normal(
                    size=(1 << width, 1 << width))
                q, r = np.linalg.qr(z)
                spec = gate_spec("unitary", matrix=q * (np.diagonal(r) / np.abs(np.diagonal(r))))
        else:
            spec = entry
        if spec.num_qubits > num_qubits:
            continue
        wires = tuple(int(w) for w in gen.permutation(num_qubits)[: spec.num_qubits])
        params = tuple(float(p) for p in gen.uniform(-2 * np.pi, 2 * np.pi, spec.num_params))
        ops.append(GateOp(spec if isinstance(entry, GateFamily) else name, wires, params))
    return ops
