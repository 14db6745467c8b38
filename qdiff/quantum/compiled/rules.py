"""Lowering rules of the quantum primitives: table entries of `qdiff.compiler`'s ``RULES``.

A state is a complex128 array of ``2^n`` amplitudes in generated code, updated in place
(states are linear in the IR: no equation reads a state another one consumed). ``qalloc``
allocates ``|0…0⟩``; ``gate`` calls the simulator's kernel for the gate's sparse form
(`gate_code.py`) on the whole register, one work item; ``expval`` sums the Pauli terms
with the simulator's expectation kernel; ``probs`` and ``statevector`` read the state.
These are what the branching runner does for a program without measurements, in compiled
code. Importing this module fills the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...compiler.lowering import Scope, rule
from ...compiler.source import scalar_literal
from ...ir.core import Eqn
from ...ir.errors import QdiffError
from ..lang.primitives import expval_p, gate_p, pauli_sum_of, probs_p, qalloc_p, statevector_p
from .gate_code import GatePlan, plan_gate
from .kernels import IMPORT


def num_qubits_of(eqn: Eqn) -> int:
    """The register size of the state a quantum equation reads.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def bell():
    ...     q = qm.qubits(2); qm.h(q[0]); return qm.probs(q)
    >>> num_qubits_of(qdiff.trace(bell).eqns[1])
    2
    """
    return eqn.inputs[0].type.num_qubits


@rule(qalloc_p)
def _qalloc(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    state = scope.fresh("psi")
    scope.line(f"{state} = np.zeros({1 << eqn.params['num_qubits']}, np.complex128)")
    scope.line(f"{state}[0] = 1.0")
    return [state]


@rule(gate_p)
def _gate(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    plan = plan_gate(num_qubits_of(eqn), eqn.params["name"], eqn.params["wires"],
                     eqn.params.get("static"))
    angle = args[1] if len(args) > 1 else None
    if angle is not None:
        message = (f"gate {plan.spec.name} on wires {plan.wires}: angle is not finite; check "
                   "the classical code that computes it")
        with scope.src.block(f"if not np.isfinite({angle})"):
            scope.line(scope.src.error(QdiffError, message))
    apply_gate(scope, plan, [args[0]], angle)
    return [args[0]]


def apply_gate(scope: Scope, plan: GatePlan, states: Sequence[str], angle: str | None,
               inverse: bool = False) -> None:
    """Write the kernel calls applying ``plan`` (its inverse with ``inverse``) to each of
    ``states`` (the data computed once)."""
    if inverse and not plan.parametric:
        plan = plan.inverse()
    scope.src.require(IMPORT)
    layout = plan.layout
    where = (f"{runtime_int(layout.num_groups)}, {scope.src.frozen(layout.positions)}, "
             f"{runtime_int(layout.cmask)}")
    data = plan.fixed
    if data is None:  # one helper call computes a parametric gate's data from its angle
        values = scope.fresh("m")
        spectrum = scope.src.frozen(np.asarray(plan.spectrum, np.float64))
        parts = scope.src.frozen(_snapped(np.stack([p.ravel() for p in plan.parts])))
        scope.line(f"{values} = qk.spectral_data({angle}, {-1.0 if inverse else 1.0}, "
                   f"{spectrum}, {parts})")
    else:
        values = scope.src.frozen(data)
    if plan.kernel == "pair":
        bit = 1 << layout.targets[0]
        if plan.swap:  # an anti-diagonal 2x2: U|0> = m10|1>, U|1> = m01|0>
            m = ["0j", literal(data[1]), literal(data[0]), "0j"]
        elif data is not None:
            m = [literal(v) for v in data.ravel()]
        else:
            m = [f"{values}[{k}]" for k in range(4)]
        for state in states:
            scope.line(f"qk.pair({state}, {where}, {runtime_int(bit)}, "
                       f"np.bool_({plan.swap}), {', '.join(m)})")
        return
    if plan.kernel == "permutation":
        perm = np.asarray(plan.form.perm, np.int64)
        for state in states:
            scope.line(f"qk.permutation({state}, {where}, {scope.src.frozen(plan.offsets)}, "
                       f"{scope.src.frozen(perm)}, {values})")
        return
    if plan.kernel == "diagonal":
        if data is not None and data.size == 0:
            return  # every entry is 1
        for state in states:
            scope.line(f"qk.diagonal({state}, {where}, {scope.src.frozen(plan.offsets)}, "
                       f"{values})")
        return
    side = 1 << len(layout.targets)
    matrix = values if data is not None else f"{values}.reshape(({side}, {side}))"
    for state in states:
        if plan.kernel == "dense2":
            b0, b1 = (1 << t for t in layout.targets)
            scope.line(f"qk.dense2({state}, {where}, {runtime_int(b0)}, {runtime_int(b1)}, "
                       f"{matrix})")
        else:
            scope.line(f"qk.densek({state}, {where}, {scope.src.frozen(plan.offsets)}, "
                       f"{matrix})")


def _snapped(parts: np.ndarray) -> np.ndarray:
    """The parts with the rounding the projectors' products leave (below 1e-15) set to
    zero: their entries are halves and quarters."""
    out = parts.copy()
    out.real[np.abs(out.real) < 1e-15] = 0.0
    out.imag[np.abs(out.imag) < 1e-15] = 0.0
    return out


def runtime_int(value: int) -> str:
    """An int64 argument of a kernel call in generated code, typed as int64, not as the
    literal: Numba compiles a callee once per distinct literal argument, so literal wire
    masks and sizes would compile the simulator's kernels once per gate position.

    >>> runtime_int(8)
    'np.int64(8)'
    """
    return f"np.int64({int(value)})"


def literal(value: complex) -> str:
    """A complex128 literal of generated code.

    >>> literal(0.5j)
    'complex(0.0, 0.5)'
    """
    return scalar_literal(complex(value), "complex128")


def pauli_terms(terms: tuple, wires: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x masks, z masks, factors)`` of an ``expval`` equation's observable on its wires.

    >>> [a.tolist() for a in pauli_terms(((1.0, "XY"),), (0, 2))]
    [[5], [4], [1j]]
    """
    return pauli_sum_of(terms).masks(list(wires))


@rule(expval_p)
def _expval(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    scope.src.require(IMPORT)
    xs, zs, fs = pauli_terms(eqn.params["terms"], eqn.params["wires"])
    raw = scope.fresh("r")
    size = 1 << num_qubits_of(eqn)
    scope.line(f"{raw} = qk.pauli_sums({args[0]}, {runtime_int(size)}, "
               f"np.zeros({len(xs)}, np.complex128), {scope.src.frozen(xs)}, "
               f"{scope.src.frozen(zs)})")
    value = scope.fresh("y")
    scope.line(f"{value} = 0.0")
    for k, f in enumerate(fs):
        scope.line(f"{value} += ({literal(f)} * {raw}[{k}]).real")
    return [args[0], value]


@rule(probs_p)
def _probs(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    scope.src.require(IMPORT)
    wires = scope.src.frozen(np.asarray(eqn.params["wires"], np.int64))
    out = scope.fresh("p")
    scope.line(f"{out} = qk.marginal_probs({args[0]}, {wires})")
    return [args[0], out]


@rule(statevector_p)
def _statevector(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    out = scope.fresh("sv")
    dtype = np.dtype(eqn.params.get("dtype", "complex128")).name
    scope.line(f"{out} = {args[0]}.astype(np.{dtype})")
    return [args[0], out]
