"""Lowering of ``quantum_block`` and of its derivative, ``quantum_block_vjp``: the adjoint
method as compiled code.

The block inlines its circuit (`rules.py` lowers each quantum equation). Its derivative runs
the circuit forward to the last state ψ, then walks the circuit's equations backwards with
λ = 0: a readout adds its cotangent times its observable applied to ψ to λ (``expval``:
ȳ O ψ; ``probs``: p̄_k ψ_i on the amplitudes i of outcome k), a gate of angle θ adds
``2 Im⟨λ|G|ψ⟩`` (G its generator, U = exp(-iθG)) to θ's cotangent and then undoes itself on
ψ and λ (U(θ)^† = U(-θ)). No state is stored: ψ is uncomputed, as in the simulator's sweep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...compiler.lowering import Scope, rule
from ...ir.core import Eqn, Program, Var
from ..lang.observables import parity
from ..lang.primitives import expval_p, gate_p, probs_p
from ..simulator.numba_adjoint import sign_tables
from .block import quantum_block_p, quantum_block_vjp_p
from .gate_code import plan_gate
from .kernels import IMPORT
from .rules import apply_gate, literal, num_qubits_of, pauli_terms, runtime_int


def _state_key(circuit: Any, angles: Sequence[Any]) -> tuple | None:
    # The last state of a `quantum_block` is kept in its scope (`Scope.kept`) under
    # (circuit, angle vars): the block's vjp in the same scope starts its backward sweep
    # from it instead of running the circuit again (half the gate calls of a compiled
    # gradient to compile and to run). Taken once: the sweep undoes the gates on it in place.
    if not all(isinstance(a, Var) for a in angles):
        return None
    return ("quantum_block_state", id(circuit), *angles)


@rule(quantum_block_p)
def _block(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    circuit = eqn.params["circuit"]
    program = circuit.program
    with_state = Program(program.inputs, program.eqns,
                         (*program.outputs, *circuit.final.outputs), name=program.name)
    *readouts, psi = scope.inline(with_state, args)
    key = _state_key(circuit, eqn.inputs)
    if key is not None:
        scope.kept[key] = psi
    return readouts


@rule(quantum_block_vjp_p)
def _block_vjp(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    scope.src.require(IMPORT)
    circuit = eqn.params["circuit"]
    program = circuit.program
    angles, cotangents = args[:len(program.inputs)], args[len(program.inputs):]
    forward = Scope(scope.src, scope.options, circuit.final, angles)
    key = _state_key(circuit, eqn.inputs[:len(program.inputs)])
    psi = scope.kept.pop(key, None) if key is not None else None
    if psi is None:
        (psi,) = forward.lower()
    lam = scope.fresh("lam")
    scope.line(f"{lam} = np.zeros_like({psi})")
    seed = dict(zip(program.outputs, cotangents))
    grads = {v: scope.fresh("g") for v in program.inputs}
    for name in grads.values():
        scope.line(f"{name} = 0.0")
    for item in reversed(program.eqns):
        if item.primitive is expval_p:
            _seed_expval(scope, item, psi, lam, seed[item.outputs[1]])
        elif item.primitive is probs_p:
            wires = scope.src.frozen(np.asarray(item.params["wires"], np.int64))
            scope.line(f"qk.accumulate_probs_adjoint({lam}, {psi}, {wires}, "
                       f"{seed[item.outputs[1]]})")
        elif item.primitive is gate_p:
            _undo_gate(scope, item, forward, psi, lam, grads)
    return list(grads.values())


def _tables(scope: Scope, n: int, xs: np.ndarray, zs: np.ndarray) -> tuple[np.ndarray, str, str]:
    """The sign tables of the simulator's cross and accumulate kernels for these Pauli
    terms: the order the terms sort to, the text of the arguments ``L, xs, zs`` and that
    of ``starts, signs``."""
    order, low, x, z, starts, signs = sign_tables(n, xs, zs)
    c = scope.src.frozen
    return order, f"{runtime_int(low)}, {c(x)}, {c(z)}", f"{c(starts)}, {c(signs)}"


def _chunks(n: int) -> str:
    # the kernels' chunks of 2^L amplitudes (`sign_tables`)
    return runtime_int((1 << n) >> min(10, n))


def _seed_expval(scope: Scope, eqn: Eqn, psi: str, lam: str, cotangent: str) -> None:
    """λ += ȳ O ψ."""
    n = num_qubits_of(eqn)
    xs, zs, fs = pauli_terms(eqn.params["terms"], eqn.params["wires"])
    order, masks, signs = _tables(scope, n, xs, zs)
    factors = np.ascontiguousarray(fs[order] * (1 - 2 * parity(xs[order] & zs[order])))
    scope.line(f"qk.pauli_accumulate({lam}, {_chunks(n)}, {psi}, {masks}, "
               f"{scope.src.frozen(factors)} * {cotangent}, {signs})")


def _undo_gate(scope: Scope, eqn: Eqn, forward: Scope, psi: str, lam: str,
               grads: dict[Var, str]) -> None:
    """θ̄ += 2 Im⟨λ|G|ψ⟩ for a gate whose angle is a block input, then ψ, λ ← U^†ψ, U^†λ."""
    n = num_qubits_of(eqn)
    plan = plan_gate(n, eqn.params["name"], eqn.params["wires"], eqn.params.get("static"))
    angle = forward.read(eqn.inputs[1]) if len(eqn.inputs) > 1 else None
    target = eqn.inputs[1] if len(eqn.inputs) > 1 else None
    if isinstance(target, Var) and target in grads:
        xs, zs, fs = plan.spec.generator.masks(list(plan.wires))
        order, masks, signs = _tables(scope, n, xs, zs)
        raw = scope.fresh("r")
        scope.line(f"{raw} = qk.pauli_cross({psi}, {_chunks(n)}, np.zeros({len(xs)}, "
                   f"np.complex128), {lam}, {masks}, {signs})")
        total = " + ".join(f"{literal(f)} * {raw}[{k}]" for k, f in enumerate(fs[order]))
        scope.line(f"{grads[target]} += 2.0 * ({total}).imag")
    apply_gate(scope, plan, [psi, lam], angle, inverse=True)
