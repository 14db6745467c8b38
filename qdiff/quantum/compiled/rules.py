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
    apply_gate(scope, plan, args[0], angle)
    return [args[0]]


def apply_gate(scope: Scope, plan: GatePlan, state: str, angle: str | None,
               inverse: bool = False) -> None:
    """Write the kernel call applying ``plan`` (its inverse with ``inverse``) to ``state``."""
    if inverse and not plan.parametric:
        plan = plan.inverse()
    scope.src.require(IMPORT)
    layout = plan.layout
    head = f"{state}, {layout.num_groups}, {scope.src.frozen(layout.positions)}, {layout.cmask}"
    data = plan.fixed if not plan.parametric else None
    entries = None if data is not None else _entries(scope, plan, angle, inverse)
    if plan.kernel == "pair":
        bit = 1 << layout.targets[0]
        if plan.swap:  # an anti-diagonal 2x2: U|0> = m10|1>, U|1> = m01|0>
            m = ["0j", literal(data[1]), literal(data[0]), "0j"]
        elif data is not None:
            m = [literal(v) for v in data.ravel()]
        else:
            m = entries
        scope.line(f"qk.pair({head}, {bit}, {plan.swap}, {', '.join(m)})")
        return
    if plan.kernel == "permutation":
        perm = np.asarray(plan.form.perm, np.int64)
        scope.line(f"qk.permutation({head}, {scope.src.frozen(plan.offsets)}, "
                   f"{scope.src.frozen(perm)}, {scope.src.frozen(data)})")
        return
    values = scope.src.frozen(data) if data is not None else _array(scope, plan, entries)
    if plan.kernel == "diagonal":
        if data is not None and data.size == 0:
            return  # every entry is 1
        scope.line(f"qk.diagonal({head}, {scope.src.frozen(plan.offsets)}, {values})")
    elif plan.kernel == "dense2":
        b0, b1 = (1 << t for t in layout.targets)
        scope.line(f"qk.dense2({head}, {b0}, {b1}, {values})")
    else:
        scope.line(f"qk.densek({head}, {scope.src.frozen(plan.offsets)}, {values})")


def _entries(scope: Scope, plan: GatePlan, angle: str | None, inverse: bool) -> list[str]:
    """Expressions of the data's entries at ``angle`` (at ``-angle`` for the inverse):
    Σ_j e^{-iθλ_j} parts[j] entry by entry."""
    phases = []
    for lam in plan.spectrum:
        if lam == 0.0:
            phases.append(None)
            continue
        a = scope.fresh("ang")
        e = scope.fresh("e")
        scope.line(f"{a} = {lam!r} * {angle}")
        sign = "" if inverse else "-"
        scope.line(f"{e} = complex(np.cos({a}), {sign}np.sin({a}))")
        phases.append(e)
    out = []
    for index in np.ndindex(plan.parts[0].shape):
        terms = []
        for phase, part in zip(phases, plan.parts):
            c = complex(part[index])
            c = complex(_snap(c.real), _snap(c.imag))
            if c == 0:
                continue
            if phase is None:
                terms.append(literal(c))
            else:
                terms.append(phase if c == 1 else f"{literal(c)} * {phase}")
        out.append("(" + " + ".join(terms) + ")" if terms else "0j")
    return out


def _snap(x: float) -> float:
    # rounding left by the projectors' products: entries are halves and quarters
    return 0.0 if abs(x) < 1e-15 else x


def _array(scope: Scope, plan: GatePlan, entries: Sequence[str]) -> str:
    shape = plan.parts[0].shape
    name = scope.fresh("m")
    scope.line(f"{name} = np.empty({shape!r}, np.complex128)")
    for index, text in zip(np.ndindex(shape), entries):
        scope.line(f"{name}[{', '.join(map(str, index))}] = {text}")
    return name


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
    scope.line(f"{raw} = qk.pauli_sums({args[0]}, {size}, np.zeros({len(xs)}, np.complex128), "
               f"{scope.src.frozen(xs)}, {scope.src.frozen(zs)})")
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
