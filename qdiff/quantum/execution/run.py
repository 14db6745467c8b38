"""`qdiff.quantum.run`: a quantum program's values, exact, sampled, on density matrices or on
an external executor (Qiskit's samplers register ``mode="qiskit"``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...compiler.claimed import compiled_version
from ...ir.core import Program
from ...ir.errors import QdiffError
from ...ir.interpreter import argument_leaves
from ...ir.passes.unpack_scalars import unpack_scalars
from ...ir.program_function import ProgramFunction
from ...ir.tracer import trace
from ...ir.types import QState
from ..certificate.tail import certify_values, tighten
from ..lang.sites import branches
from .density_runner import run_density
from .keyed_arguments import positional
from .options import DEFAULTS, RunOptions
from .runner import (
    BranchRunner,
    QuantumResult,
    _as_number,
    _structure,
    enumerated_result,
    is_sample,
    mix_samples,
)
from .shot_batch import NotBatchable, batch_covers, sample_batched


@dataclass(frozen=True)
class ExternalMode:
    """An executor outside the simulator, as `run` and `qdiff.quantum.gradient` call it.

    ``run(program, values, options)`` returns the values with their standard errors,
    shots and unterminated mass; ``shift_gradient(program, leaves, cotangents, positions,
    options)`` the parameter-shift gradient from its samples (`RunOptions` carries the
    sampler, shots, seed and tolerances).
    """

    run: Callable[..., Any]
    shift_gradient: Callable[..., Any]


# Modes that run programs elsewhere, by name. The executor's package registers itself on
# import (`qdiff.quantum.qiskit.execution`: "qiskit"), so execution never imports it.
EXTERNAL_MODES: dict[str, ExternalMode] = {}


class TruncationWarning(UserWarning):
    """A number computed with loops cut off may be further from the exact one than ``tol``."""


class TruncationError(QdiffError, RuntimeError):
    """``strict=True``: a number computed with loops cut off may be further from the exact
    one than ``tol``, so none is returned."""


def warn_if_truncated(what: str, left_out: float, bound: Any, tol: float,
                      reason: str | None = None, strict: bool = False) -> None:
    """Warn (raise `TruncationError` when ``strict``) when ``left_out`` probability (pruned
    or cut off) exceeds ``tol`` and nothing certifies that the number is still within
    ``tol`` (``bound``: its certified remainder).

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     warn_if_truncated("f(0.01)", 0.08, float("inf"), 1e-12, "no exit probability")
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    f(0.01): loops were cut off with probability 0.08 still going on, and no bound ...
    """
    largest = float(np.max(bound)) if bound is not None and np.size(bound) else math.inf
    if left_out <= tol or largest <= tol:
        return
    size = (f"it may be off by up to {largest:.3g} (certified)" if math.isfinite(largest)
            else f"and no bound certifies how far off it is ({reason or 'no certificate'})")
    message = (f"{what}: loops were cut off with probability {left_out:.3g} still going "
               f"on, {size}; qm.run and qm.gradient report remainder_bound, and "
               "remainder_tol= (or a smaller tol, a larger max_loop_iterations) sums further")
    if strict:
        raise TruncationError(message)
    warnings.warn(message, TruncationWarning, stacklevel=3)


def modes(*own: str) -> list[str]:
    """The run modes by name: exact and sample, ``own`` and the registered executors."""
    return ["exact", "sample", *own, *EXTERNAL_MODES]


def register_mode(name: str, mode: ExternalMode) -> None:
    """Make ``mode=name`` run programs (`run`) and gradients (`gradient`) with ``mode``."""
    EXTERNAL_MODES[name] = mode


def run(program: Any, *args: Any, options: RunOptions | None = None,
        **settings: Any) -> QuantumResult:
    """Run a quantum program and return its values with what the semantics dropped.

    The settings are those of `RunOptions` (``mode``, ``shots``, ``seed``, ``backend``,
    ``tol``, ``max_loop_iterations``, ``fuse``, ``sampler``, ``estimator``,
    ``exit_probability``, ``remainder_tol``), given as keywords or as one ``options=``;
    each is checked against its valid range.

    ``mode="exact"`` enumerates measurement branches (loops cut off below ``tol``); ``"sample"``
    draws ``shots`` trajectories with ``seed`` and reports standard errors (all shots as one
    batch where `shot_batch` covers the program, else one by one); ``"density"``
    runs the program on density matrices (at most 10 qubits, see `density_runner`), an
    independent check of ``"exact"``; ``"qiskit"`` exports the program (`to_qiskit`) and
    estimates its values from ``shots`` shots per circuit on a Qiskit ``sampler`` (Aer's or
    the reference one by default; loops on measurements that the sampler cannot run are
    run on the host, see `qiskit_execution`) or, for circuits without measurements, an
    ``estimator`` (precision 1/sqrt(shots)). ``seed`` also seeds the draws of ``qm.sample``.
    ``fuse`` (default on) runs the program after gate fusion (`fusion.py`): fewer passes
    over the state, the same values, in blocks as wide as the back end finds best for the
    register; ``fuse=k`` forces blocks of up to k wires, ``fuse=False`` runs the gates one
    by one. ``exit_probability`` promises a lower bound on every round's exit probability of
    a loop on a measurement that is not memoryless, so that its tail can be certified
    (``remainder_bound``; the promise is checked on every round the run saw).
    ``remainder_tol`` sums further (a smaller ``tol``) until every value's certified
    remainder is at most ``remainder_tol``.

    >>> from qdiff import quantum as qm
    >>> from qdiff.quantum.lang.examples import repeat_until_one  # rounds until a 1 is read
    >>> result = qm.run(repeat_until_one, 1.0)          # exact: 1 / sin²(1/2)
    >>> bool(abs(result.values - 1 / np.sin(0.5) ** 2) <= result.remainder_bound < 1e-9)
    True
    """
    options = RunOptions.of(options, **settings)
    args, _ = positional(program, args)  # an imported circuit's {Parameter: value}
    if isinstance(program, ProgramFunction):
        program = program.trace(*args)
    elif not isinstance(program, Program):
        program = trace(program, *args)
    result = run_leaves(program, argument_leaves(program, args), options)
    if options.strict:
        warn_if_truncated(f"{program.name}(...)", result.dropped_mass
                          + result.unterminated_mass, result.remainder_bound, options.tol,
                          result.remainder_reason, strict=True)
    return result


def call_quantum_program(program: Program, values: list[Any], backend: str = "numpy") -> Any:
    """What calling a quantum Program returns: its values alone (exact mode), with a
    `TruncationWarning` when they may be further than ``tol`` from the exact ones. A
    program `qdiff.jit` compiled in this process runs compiled (the same values)."""
    compiled = compiled_version(program)
    if compiled is not None:
        return compiled.call_leaves(values)
    result = run_leaves(program, values, DEFAULTS)
    warn_if_truncated(f"{program.name}(...)", result.dropped_mass + result.unterminated_mass,
                      result.remainder_bound, DEFAULTS.tol, result.remainder_reason)
    return result.values


def run_leaves(program: Program, leaves: Sequence[Any],
               options: RunOptions = DEFAULTS) -> QuantumResult:
    """`run` of a traced ``program`` on its flat inputs (what calling a quantum Program
    does, whatever structure its arguments have)."""
    values = [np.asarray(v) for v in leaves]
    mode = options.mode
    if mode not in modes("density"):
        raise QdiffError(f"mode must be one of {', '.join(modes('density'))}, got {mode!r}")
    for index, atom in enumerate(program.outputs):
        if isinstance(atom.type, QState):
            raise QdiffError(
                f"output {index} is a quantum state; return qm.state(register) instead")
    if mode != "exact" and (options.exit_probability is not None
                            or options.remainder_tol is not None):
        raise QdiffError("exit_probability= and remainder_tol= certify exact-mode values "
                         "(mode='exact')")
    if mode in EXTERNAL_MODES:
        sampled = EXTERNAL_MODES[mode].run(program, values, options)
        return QuantumResult(_structure(program, sampled.values), mode,
                             unterminated_mass=sampled.unterminated_mass,
                             stderr=_structure(program, sampled.stderr), shots=sampled.shots)
    if options.sampler is not None or options.estimator is not None:
        raise QdiffError("sampler= and estimator= run programs on Qiskit: mode='qiskit'")
    if mode == "density":
        return run_density(program, values, options)
    program = unpack_scalars(program)  # one equation for all the elements read from an array
    if mode == "exact":
        def attempt(cut: float) -> tuple[Any, float, str | None]:
            runner = BranchRunner(options if cut == options.tol else options.replace(tol=cut))
            result = _exact(runner, program, values)
            bounds, result.remainder_reason = certify_values(program, values, runner,
                                                             options.exit_probability)
            result.remainder_bound = _structure(program, [np.float64(b) for b in bounds])
            return (result, runner), max(bounds, default=0.0), result.remainder_reason

        result, runner = tighten(attempt, options.tol, options.remainder_tol)
    elif branches(program) and batch_covers(program):
        try:  # the shots as one batch (`shot_batch`); the trajectories one by one otherwise
            return sample_batched(program, values, options)
        except NotBatchable:
            return sample_trajectories(program, values, options)
    elif branches(program):
        return sample_trajectories(program, values, options)
    else:
        runner = BranchRunner(options)
        result = _sample_readouts(runner, program, values, options.shots)
    result.gate_passes, result.passes_saved = runner.gate_passes, runner.passes_saved
    return result


def _exact(runner: BranchRunner, program: Program, values: list[Any]) -> QuantumResult:
    if _sums_outputs(program):  # a long loop's exits need not wait for its end
        runner.exits_to_end(program)
    return enumerated_result(runner, program, runner.run_program(program, [(1.0, values)]),
                             "exact")



_SUMS_OUTPUTS: dict[int, tuple[Program, bool]] = {}


def _sums_outputs(program: Program) -> bool:
    """Whether the exact value of every output of ``program`` is a weighted sum of real
    numbers over its branches (no drawn samples, no complex outputs): then its loops' exits
    may be summed early (`BranchRunner.exits_to_end`). Cached per program: a variational
    loop runs one program many times, and walking its equations cost 0.1-0.2 ms a call."""
    hit = _SUMS_OUTPUTS.get(id(program))
    if hit is None or hit[0] is not program:
        if len(_SUMS_OUTPUTS) > 1024:
            _SUMS_OUTPUTS.clear()
        hit = (program, all(getattr(a.type, "np_dtype", np.dtype(float)).kind != "c"
                            for a in program.outputs)
               and not any(e.primitive.name == "sample" for e in program.all_eqns()))
        _SUMS_OUTPUTS[id(program)] = hit
    return hit[1]


# independent repetitions of a shot-estimated run whose spread is its standard error
READOUT_REPLICATES = 16


def _sample_readouts(runner: BranchRunner, program: Program, values: list[Any],
                     shots: int) -> QuantumResult:
    """Sample mode for a program that never measures mid-circuit: one run whose readouts
    are estimated from ``shots`` shots each (`shot_readouts`), its classical
    post-processing applied to the estimates, as on a device. ``stderr`` is the spread
    (standard deviation) of `READOUT_REPLICATES` further runs of the same estimator."""
    runner.readout_shots = shots
    runs = []
    for _ in range(1 + READOUT_REPLICATES):
        ((_, outs),) = runner.run_program(program, [(1.0, values)])
        runs.append([_as_number(o) for o in outs])
    errors = [np.std(np.stack([run[k] for run in runs]), axis=0, ddof=1)
              for k in range(len(runs[0]))]
    return QuantumResult(
        values=_structure(program, runs[0]), mode="sample",
        stderr=_structure(program, errors), shots=shots,
        unterminated_mass=runner.unterminated / len(runs),
        aborted_mass=runner.aborted / len(runs))


def sample_trajectories(program: Program, values: list[Any],
                        options: RunOptions) -> QuantumResult:
    """Sample mode, one trajectory at a time on the branching runner: what `run` does
    where the batch runner (`shot_batch`) does not cover the program."""
    runner = BranchRunner(options)
    result = _sample(runner, program, values, options.shots)
    result.gate_passes, result.passes_saved = runner.gate_passes, runner.passes_saved
    return result


def _sample(runner: BranchRunner, program: Program, values: list[Any], shots: int) -> QuantumResult:
    trajectories = []
    for _ in range(shots):
        for weight, outs in runner.run_program(program, [(1.0, values)]):
            if weight > 0:
                trajectories.append([o if is_sample(runner, o) else _as_number(o) for o in outs])
    accepted = len(trajectories)
    if accepted == 0:
        raise QdiffError("no trajectory was accepted (postselection rejected every shot)")
    columns = [[t[k] for t in trajectories] for k in range(len(trajectories[0]))]
    drawn = [all(is_sample(runner, v) for v in c) for c in columns]
    stacked = [np.stack(c) for c in columns]
    means = [mix_samples(c, np.ones(accepted), runner.rng) if d else s.mean(axis=0)
             for c, d, s in zip(columns, drawn, stacked)]
    errors = [None if d else s.std(axis=0, ddof=1) / np.sqrt(accepted) if accepted > 1
              else np.full_like(m, np.inf) for d, s, m in zip(drawn, stacked, means)]
    return QuantumResult(
        values=_structure(program, means), mode="sample", stderr=_structure(program, errors),
        shots=accepted, unterminated_mass=runner.unterminated / shots,
        aborted_mass=runner.aborted / shots, postselection_probability=accepted / shots,
        trajectories=[_structure(program, t) for t in trajectories])


