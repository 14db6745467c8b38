"""Forward mode through the branching runner: exact derivatives of any order on the simulator.

The runner (`qdiff.quantum.execution.runner`) carries branches (weight, values) with
normalized states. `JetRunner` runs the same program with every float value, weight and
state a jet (`qdiff.autodiff.jets`): a value with its derivative parts along nilpotent
generators, so one run seeded with ``ε_0·a + ε_1·b`` gives ``f''(x)[a, b]`` exactly. Its
rules, per operation:

- gate ``U(θ) = exp(-iθG)``: ``U(θ₀ + δ)ψ = Σ_k δᵏ/k! (-iG)ᵏ U(θ₀)ψ`` (finite: δ is
  nilpotent); ``u`` goes through its rotations and global phase;
- measurement of a normalized state: ``p = ‖Πψ‖²``, weight ``w·p``, state ``Πψ/√p``
  (reset flips the wire back, postselection books the other outcome's ``w·p``);
- ``expval``: ``⟨ψ|O|ψ⟩``, ``probs``: ``|ψ_i|²`` summed per outcome, by the product rule;
- classical equations: their forward mode nested once per generator
  (`qdiff.autodiff.jet_equations`); a recorded derivative of another quantum program
  (`qdiff.autodiff.derivative_calls`): its chain, with this run's generators on its inputs;
- loops, branches and loops on measurements: the runner's own handlers (a loop on a
  measurement stops once its live mass is below ``tol``), and branches merge only when
  their values agree as jets (states up to a phase jet).

The value is ``Σ_b w_b·out_b`` (divided by the kept mass under postselection), a jet. A
branch whose probability is 0 at the point but whose second or higher derivatives are not
(a branch that opens exactly there) is an error: its normalized state has no value there.

>>> import qdiff
>>> from qdiff.autodiff.jets import Jet
>>> from qdiff.quantum.lang.examples import rotation   # <Z> after ry(θ): cos θ
>>> theta = Jet({0: np.asarray(0.3), 1: np.asarray(1.0), 2: np.asarray(1.0)})
>>> (value,), _ = run_on_jets(qdiff.trace(rotation, 0.3), [theta])
>>> bool(np.allclose([value.part(m) for m in range(4)],
...                  [np.cos(0.3), -np.sin(0.3), -np.sin(0.3), -np.cos(0.3)]))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...autodiff.derivative_calls import call_on_jets, derivative_call_p
from ...autodiff.jet_equations import equation_on_jets
from ...autodiff.jets import (
    Jet,
    as_jet,
    exp,
    inner,
    nilpotency,
    popcount,
    power,
    primal,
    real,
    simplified,
)
from ...ir.core import Eqn, Program
from ...ir.errors import QdiffError
from ..execution.options import DEFAULTS, RunOptions
from ..execution.run import warn_if_truncated
from ..execution.runner import HANDLERS, BranchRunner, Handler, Item, merge_groups
from ..lang import primitives as qp
from ..lang.fusion import gate_parts, unfuse_gates
from ..lang.gates import GateSpec, gate_spec
from ..lang.primitives import pauli_sum_of
from ..lang.sites import postselects


class BranchOpensError(QdiffError):
    """A branch of probability 0 at the point whose probability has nonzero higher
    derivatives: its state, and so the derivative of what it computes, is undefined there."""


class JetRunner(BranchRunner):
    """The branching runner over jets (see the module docstring): exact mode, unfused.

    >>> JetRunner(RunOptions(mode="sample", shots=10))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    qdiff.ir.errors.QdiffError: forward-mode derivatives ... mode='sample' would ignore shots...
    """

    def __init__(self, options: RunOptions = DEFAULTS):
        if options.mode != "exact":
            why = "would ignore shots" if options.mode == "sample" else "is not supported"
            raise QdiffError(
                "forward-mode derivatives of quantum programs (jvp, hessian, derivatives of "
                f"derivatives) are exact: mode={options.mode!r} {why}. Use mode='exact', or "
                "qm.gradient(..., cotangent=...) for sampled first derivatives")
        super().__init__(options.replace(fuse=False))
        self.fuse = False

    def apply(self, eqn: Eqn, handler: Handler | None, weight: Any,
              inputs: list[Any]) -> list[Item]:
        if eqn.primitive is derivative_call_p:
            return [(weight, call_on_jets(eqn, inputs))]
        if handler is None:
            return [(weight, equation_on_jets(eqn, inputs))]
        return JET_HANDLERS[eqn.primitive](self, eqn, weight, inputs)

    def merge(self, items: list[Item]) -> list[Item]:
        """Merge branches whose values agree as jets (states up to a phase jet)."""
        plain = [(float(primal(w)), [primal(v) for v in values]) for w, values in items]
        merged: list[Item] = []
        for group in merge_groups(plain):
            kept: list[list[int]] = []
            for index in group:
                for sub in kept:
                    if _same_jets(items[sub[0]][1], items[index][1]):
                        sub.append(index)
                        break
                else:
                    kept.append([index])
            for sub in kept:
                merged.append((sum((items[i][0] for i in sub[1:]), items[sub[0]][0]),
                               items[sub[0]][1]))
        return merged

    def project(self, state: Any, wire: int, outcome: int) -> tuple[Jet, Jet]:
        """``Πψ`` for ``outcome`` of measuring ``wire``, and its probability ``‖Πψ‖²``."""
        be = self.backend
        n = _num_qubits(primal(state))
        projected = as_jet(state).map(lambda s: be.project(be.copy(s), n, wire, outcome))
        return projected, as_jet(real(inner(projected, projected)))

    def outcome(self, weight: Any, state: Any, wire: int, outcome: int) -> tuple[Any, Any]:
        """The weight ``w·p`` and normalized state ``Πψ/√p`` of one outcome of measuring
        ``wire`` (None for the state when the outcome is pruned)."""
        projected, p = self.project(state, wire, outcome)
        new_weight = weight * p
        if float(primal(p)) <= 0 or float(primal(new_weight)) < self.prune:
            _check_not_opening(new_weight, self.tol, wire, outcome)
            self.dropped += max(float(primal(new_weight)), 0.0)
            return new_weight, None
        return new_weight, projected * power(p, -0.5)


def _check_not_opening(weight: Jet, tol: float, wire: int, outcome: int) -> None:
    higher = [float(np.max(np.abs(v))) for m, v in weight.parts.items() if popcount(m) >= 2]
    if higher and max(higher) > tol:
        raise BranchOpensError(
            f"measuring wire {wire}: outcome {outcome} has probability 0 at this point but its "
            f"second derivative is {max(higher):.3g}: the branch opens exactly here, so its "
            "state (and a derivative of order 2 or more of what it computes) is undefined; "
            "differentiate at a nearby point, or use first derivatives")


def _same_jets(a: list[Any], b: list[Any]) -> bool:
    for x, y in zip(a, b):
        if not isinstance(x, Jet) and not isinstance(y, Jet):
            continue  # equal by merge_groups
        x, y = as_jet(x), as_jet(y)
        if np.asarray(x.primal).dtype.kind == "c" and np.ndim(x.primal) == 1:
            # a state: y = c·x with the phase jet c = ⟨x, y⟩
            y_like = inner(x, y) * x
            difference = y - y_like
        else:
            difference = y - x
        if any(np.max(np.abs(v), initial=0.0) > 1e-12 for v in difference.parts.values()):
            return False
    return True


def _num_qubits(state: Any) -> int:
    return int(np.shape(state)[0]).bit_length() - 1


# ---------------------------------------------------------------------- handlers, one per op
def _gate(r: JetRunner, eqn: Eqn, w: Any, inputs: list[Any]) -> list[Item]:
    state, *angles = inputs
    psi = as_jet(state)
    for spec, wires, lo, hi in gate_parts(eqn):
        psi = _apply_gate(r, psi, spec, wires, angles[lo:hi])
    r.gate_passes += 1
    return [(w, [simplified(psi)])]


def _apply_gate(r: JetRunner, psi: Jet, spec: GateSpec, wires: tuple[int, ...],
                angles: Sequence[Any]) -> Jet:
    be = r.backend
    n = _num_qubits(psi.primal)
    if not any(isinstance(a, Jet) for a in angles):
        values = [float(a) for a in angles]
        return psi.map(lambda s: be.apply_gate(be.copy(s), n, spec, list(wires), values))
    if spec.generator is None:
        if not spec.occurrences:
            raise QdiffError(f"gate {spec.name} has no generator: its angles cannot be "
                             "differentiated")
        # u(θ, φ, λ) = e^{iα} rz(φ) ry(θ) rz(λ): its rotations, in application order
        for o in spec.occurrences:
            psi = _apply_gate(r, psi, gate_spec(o.gate), tuple(wires[k] for k in o.wires),
                              [angles[o.param_index]])
        assert spec.global_phase is not None
        return exp(1j * as_jet(spec.global_phase(*[as_jet(a) for a in angles]))) * psi
    (theta,) = angles
    theta0 = float(primal(theta))
    rotated = psi.map(lambda s: be.apply_gate(be.copy(s), n, spec, list(wires), [theta0]))
    # U(θ₀ + δ) = exp(-iδG) U(θ₀): Σ_k δᵏ/k! (-iG)ᵏ, a finite sum since δ is nilpotent
    delta = as_jet(theta) - theta0
    result, term, coefficient = rotated, rotated, as_jet(1.0)
    for k in range(1, nilpotency(delta) + 1):
        coefficient = coefficient * delta / k
        term = term.map(lambda s: -1j * be.apply_pauli_sum(s, n, spec.generator, list(wires)))
        result = result + coefficient * term
    return result


def _measure(r: JetRunner, eqn: Eqn, w: Any, inputs: list[Any]) -> list[Item]:
    return [(weight, [state, np.asarray(bit, np.int64)])
            for weight, state, bit in _outcomes(r, eqn, w, inputs[0], eqn.params["reset"])]


def _reset(r: JetRunner, eqn: Eqn, w: Any, inputs: list[Any]) -> list[Item]:
    return [(weight, [state]) for weight, state, _ in _outcomes(r, eqn, w, inputs[0], True)]


def _outcomes(r: JetRunner, eqn: Eqn, w: Any, state: Any,
              reset: bool) -> list[tuple[Any, Any, int]]:
    wire = eqn.params["wire"]
    found = []
    for outcome in (0, 1):
        weight, branch = r.outcome(w, state, wire, outcome)
        if branch is None:
            continue
        if reset and outcome == 1:
            branch = branch.map(_flip(r, wire))
        found.append((weight, simplified(branch), outcome))
    return found


def _flip(r: JetRunner, wire: int) -> Any:
    return lambda s: r.backend.apply_gate(s, _num_qubits(s), "x", [wire])


def _postselect(r: JetRunner, eqn: Eqn, w: Any, inputs: list[Any]) -> list[Item]:
    wire, value = eqn.params["wire"], eqn.params["value"]
    items = []
    for outcome in (0, 1):
        if outcome == value:
            weight, branch = r.outcome(w, inputs[0], wire, outcome)
            if branch is not None:
                items.append((weight, [simplified(branch)]))
        else:
            r.postselected_away = r.postselected_away + w * r.project(inputs[0], wire,
                                                                      outcome)[1]
    return items


def _readout(r: JetRunner, eqn: Eqn, w: Any, inputs: list[Any]) -> list[Item]:
    (state,) = inputs
    psi = as_jet(state)
    n = _num_qubits(psi.primal)
    name = eqn.primitive.name
    be = r.backend
    if name == "expval":
        obs, wires = pauli_sum_of(eqn.params["terms"]), list(eqn.params["wires"])
        value = real(inner(psi, psi, lambda a, b: be.inner_pauli_sum(a, b, n, obs, wires)))
    elif name == "probs":
        wires = list(eqn.params["wires"])
        value = real(inner(psi, psi, lambda a, b: _marginal(np.conj(a) * b, n, wires)))
    elif name == "statevector":
        dtype = eqn.params.get("dtype", "complex128")
        value = psi.map(lambda s: np.asarray(be.to_numpy(s), dtype))
    else:
        raise QdiffError(f"{name}: draws samples, which have no derivative; forward-mode "
                         "derivatives need exact readouts (expval, probs, state)")
    return [(w, [state, simplified(value)])]


def _marginal(values: np.ndarray, num_qubits: int, wires: list[int]) -> np.ndarray:
    """``values`` (one per basis state) summed per outcome of ``wires`` (bit j of an
    outcome is ``wires[j]``)."""
    index = np.arange(values.shape[0])
    outcome = np.zeros_like(index)
    for j, wire in enumerate(wires):
        outcome |= ((index >> wire) & 1) << j
    size = 1 << len(wires)
    return (np.bincount(outcome, weights=values.real, minlength=size)
            + 1j * np.bincount(outcome, weights=values.imag, minlength=size))


def _qextend(r: JetRunner, eqn: Eqn, w: Any, inputs: list[Any]) -> list[Item]:
    extend = eqn.primitive.impl("numpy")
    return [(w, [simplified(as_jet(inputs[0]).map(
        lambda s: extend(r.backend.to_numpy(s), **eqn.params)))])]


JET_HANDLERS: dict[Any, Handler] = {
    **HANDLERS, qp.gate_p: _gate, qp.measure_p: _measure, qp.reset_p: _reset,
    qp.postselect_p: _postselect, qp.expval_p: _readout, qp.probs_p: _readout,
    qp.statevector_p: _readout, qp.sample_p: _readout, qp.qextend_p: _qextend,
}


# ---------------------------------------------------------------------------------- a run
def run_on_jets(program: Program, inputs: Sequence[Any],
                options: RunOptions = DEFAULTS) -> tuple[list[Any], JetRunner]:
    """The flat outputs of ``program`` on flat ``inputs`` (jets or plain values) as jets:
    expectations over branches, conditioned on postselection; and the runner, which holds
    the mass it pruned or cut off."""
    program = unfuse_gates(program)
    runner = JetRunner(options)
    items = runner.run_program(program, [(1.0, list(inputs))])
    outputs: list[Any] = []
    for k, atom in enumerate(program.outputs):
        total: Any = np.zeros(atom.type.shape)
        for w, outs in items:
            value = outs[k]
            if not isinstance(value, Jet) and np.asarray(value).dtype.kind not in "fc":
                value = np.asarray(value, np.float64)
            total = as_jet(w) * value + total
        outputs.append(total)
    if postselects(program):
        mass = sum((w for w, _ in items), as_jet(0.0))
        if float(primal(mass)) <= runner.tol:
            raise QdiffError("postselection succeeds with probability 0: the value is undefined")
        outputs = [as_jet(o) * power(mass, -1.0) for o in outputs]
    return [simplified(as_jet(o)) for o in outputs], runner


def missing_mass(runner: JetRunner) -> float:
    """The probability a run pruned or cut off.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import rotation
    >>> missing_mass(run_on_jets(qdiff.trace(rotation, 0.3), [0.3])[1])
    0.0
    """
    return float(primal(runner.dropped)) + float(primal(runner.unterminated))


def report_jet_truncation(name: str, missing: float, options: RunOptions) -> None:
    """Warn (raise with ``strict``) when loops on measurements were cut off with more than
    ``tol`` still going on: forward-mode derivatives have no certified remainder.

    >>> report_jet_truncation("f", 0.5, RunOptions(strict=True))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    qdiff.quantum.execution.run.TruncationError: f: loops were cut off with probability 0.5 ...
    """
    warn_if_truncated(name, missing, None, options.tol,
                      "forward-mode derivatives have no certified remainder",
                      strict=options.strict)
