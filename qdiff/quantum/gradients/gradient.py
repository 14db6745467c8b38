"""Derivatives of programs with quantum operations: what `qdiff.grad` and friends run for them.

A quantum program's value is its exact-mode value (expectations over measurement branches,
conditioned on postselection). Methods:

- ``"adjoint"`` (``"auto"`` picks it): the adjoint method over the branch DAG
  (`qdiff.quantum.gradients.adjoint`): one recorded forward run, one reverse sweep per cotangent.
- ``"parameter-shift"``: the hardware-compatible method: every occurrence of every gate
  angle that depends on the inputs is shifted by its gate's shift rule, in shifted programs
  (`qdiff.quantum.gradients.parameter_shift`, `qdiff.quantum.gradients.shift_gradient`); in
  sample mode, loops that end on a measurement are differentiated by the unbiased
  single-occurrence estimator.
- ``"finite-diff"``: central differences of exact-mode values, a check and a fallback.

Classical code around and inside the quantum part (angles computed from the inputs, loop
indices, a loss computed from expectations) is chain-ruled in the same sweep, so a hybrid
program needs no special treatment.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> @qdiff.program
... def energy(w):
...     q = qm.qubits(2)
...     qm.ry(2 * w[0], q[0]); qm.cx(q[0], q[1]); qm.rx(w[1] ** 2, q[1])
...     return (qm.expval("ZZ", q) - 0.5) ** 2
>>> g = gradient(energy, np.array([0.3, 0.4]))
>>> fd = gradient(energy, np.array([0.3, 0.4]), method="finite-diff")
>>> bool(np.allclose(g.grad, fd.grad, atol=1e-7))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...autodiff.arguments import argnum_tuple, as_program, wrt_flags, wrt_tree
from ...autodiff.tangents import is_differentiable
from ...ir import pytree
from ...ir.core import Program
from ...ir.errors import QdiffError
from ...ir.interpreter import argument_leaves
from ..certificate.tail import certify, tighten
from ..execution.jobs import run_jobs
from ..execution.keyed_arguments import keyed_like, positional
from ..execution.options import DEFAULTS, RunOptions
from ..execution.run import EXTERNAL_MODES, modes, warn_if_truncated
from ..execution.runner import BranchRunner, MassAccount, _structure, enumerated_outputs
from ..lang.fusion import unfuse_gates
from ..lang.sites import branches, postselects
from .adjoint import RecordedRun
from .batched_shift import batched_parameter_shift
from .shift_gradient import (
    ShiftResult,
    parameter_shift,
    sampled_parameter_shift,
    shot_parameter_shift,
)


@dataclass
class QuantumGradient(MassAccount):
    """A value, its derivative, and what the exact semantics had to leave out.

    ``grad`` has the structure of the differentiated argument(s); ``dropped_mass`` and
    ``unterminated_mass`` are the probability mass the enumeration pruned or cut off (the
    derivative is that of the enumerated part), ``aborted_mass`` what bounded loops aborted
    (part of the semantics). For the exact adjoint method, ``remainder_bound`` (the structure
    of ``grad``) and ``value_remainder_bound`` are certified bounds on how far the derivative
    and the value ``c · values`` are from the exact ones (`tail_certificate`): infinite, with
    ``remainder_reason``, when the program is outside what the certificate covers.
    """

    value: Any
    grad: Any
    method: str
    value_stderr: Any = None
    grad_stderr: Any = None
    num_derivative_programs: int | None = None
    num_evaluations: int | None = None
    value_remainder_bound: float | None = None
    exit_probability: float | None = None


def as_quantum_program(f: Any, args: Sequence[Any]) -> Program:
    """The Program of ``f`` (a Program, a `qdiff.program` or a Python function) for
    ``args``, with fused gates written out (differentiation reads every gate)."""
    return unfuse_gates(as_program(f, tuple(args)))


def _check_method(method: str) -> str:
    # RunOptions checked the name; "auto" is the adjoint method
    return "adjoint" if method == "auto" else method


def _selection(program: Program, argnums: Any) -> tuple[list[int], Any]:
    """Flat input positions of the differentiated arguments, and how to rebuild them."""
    numbers = argnum_tuple(argnums, program, "grad")
    flags = wrt_flags(program, numbers, "grad")
    positions = [k for k, flag in enumerate(flags) if flag]
    return positions, wrt_tree(program, argnums, numbers)


def _flat_cotangent(program: Program, cotangent: Any) -> list[np.ndarray]:
    if cotangent is None:
        types = program.out_types
        if len(types) != 1 or getattr(types[0], "shape", None) != ():
            shown = ", ".join(t.short() for t in types)
            raise QdiffError(f"grad needs a program returning one scalar, got ({shown}); "
                             "pass cotangent= or use jacobian")
        return [np.ones(())]
    leaves, _ = pytree.flatten(cotangent if isinstance(cotangent, tuple) else (cotangent,))
    cts = [np.asarray(c, np.float64) for c in leaves]
    if len(cts) != len(program.outputs):
        raise QdiffError(f"the cotangent has {len(cts)} part(s); the program has "
                         f"{len(program.outputs)} output(s)")
    for k, (c, t) in enumerate(zip(cts, program.out_types)):
        if c.shape != t.shape:
            raise QdiffError(f"cotangent {k} has shape {c.shape}; output {k} is {t.short()}")
    return cts


def gradient(f: Any, *args: Any, argnums: Any = 0, cotangent: Any = None,
             options: RunOptions | None = None, **settings: Any) -> QuantumGradient:
    """The value of a quantum program and its gradient (or VJP with ``cotangent``).

    The settings are those of `RunOptions` (keywords, or one ``options=``), each checked
    against its valid range; the ones that matter here:

    ``method``: ``"adjoint"`` | ``"parameter-shift"`` | ``"finite-diff"`` | ``"auto"``;
    ``tol`` cuts loops on measurements off once the mass still going on is below it (and
    prunes branches below ``tol²``); ``step`` is the finite-difference step. The exact
    adjoint method returns certified bounds on what the cut-off misses
    (``remainder_bound``, see `tail_certificate`); ``exit_probability`` promises a lower
    bound on every round's exit probability of a loop that is not memoryless, so that it
    can be certified too (the promise is checked on every round the run saw).
    ``remainder_tol`` sums further (a smaller ``tol``) until every certified bound on the
    derivative is at most ``remainder_tol``. Independent
    evaluations (shifted programs) run on ``executor`` when given: any
    `concurrent.futures.Executor`, such as a process pool or a Dask
    ``Client.get_executor()``. See the module docstring.

    ``mode="sample"`` estimates value and gradient from ``shots`` seeded samples, with
    standard errors in ``value_stderr`` and ``grad_stderr``. A program that never measures
    mid-circuit is differentiated by parameter shift (``"auto"``), each readout of each
    shifted program estimated from ``shots`` shots (`shot_parameter_shift`); the adjoint
    method would ignore shots there and is refused. Otherwise the adjoint method sweeps each
    trajectory (``∂g + g ∂log p``, pathwise plus score; postselected values are ratios of two
    such means, with delta-method errors). Parameter shift draws one occurrence per site
    from ``occurrences`` (`qdiff.loops.occurrences`: default ``zeta(0.5)``, or
    ``("geometric", q)``) and weights its shifted trajectories by ``1/p``: unbiased for
    loops with no bound on their iterations.

    ``mode="qiskit"`` runs parameter shift on a Qiskit ``sampler`` (`qiskit_execution`):
    every shifted circuit of the gradient in one sampler call, ``shots`` shots each, with
    standard errors; or on an ``estimator`` (circuits without measurements), one weighted
    observable per circuit.

    ``strict=True`` raises `TruncationError` where the result would report loops cut off
    with more than ``tol`` still going on and no certified bound within ``tol``.
    """
    options = RunOptions.of(options, **settings)
    args, rekey = positional(f, args)  # an imported circuit's {Parameter: value}
    result = _gradient(f, args, argnums, cotangent, options)
    if rekey is not None:  # the gradient and what has its structure, keyed like the input
        for name in ("grad", "grad_stderr", "remainder_bound"):
            setattr(result, name, keyed_like(rekey, getattr(result, name), argnums))
    if options.strict:
        report_truncation(getattr(f, "name", None) or getattr(f, "__name__", "f"), result,
                          options)
    return result


def report_truncation(name: str, result: QuantumGradient, options: RunOptions) -> None:
    """Warn (raise when ``options.strict``) when ``result`` was computed with loops cut off
    further than ``options.tol`` from their end and nothing certifies it within ``tol``."""
    bound = None
    if result.remainder_bound is not None:  # the structure of the gradient, and the value's
        bound = max([float(np.max(np.asarray(b), initial=0.0))
                     for b in pytree.flatten(result.remainder_bound)[0]]
                    + [result.value_remainder_bound or 0.0])
    warn_if_truncated(f"the derivative of {name}", result.dropped_mass
                      + result.unterminated_mass, bound, options.tol, result.remainder_reason,
                      strict=options.strict)


def _gradient(f: Any, args: tuple, argnums: Any, cotangent: Any,
              options: RunOptions) -> QuantumGradient:
    given, mode = options.method, options.mode
    method = _check_method(given)
    options = options.replace(method=method)
    program = as_quantum_program(f, args)
    leaves = argument_leaves(program, args)
    positions, tree = _selection(program, argnums)
    cts = _flat_cotangent(program, cotangent)
    if options.occurrences is not None and not (method == "parameter-shift" and mode == "sample"):
        raise QdiffError("occurrences= is the occurrence distribution of sample-mode "
                         "parameter shift (method='parameter-shift', mode='sample')")
    if (options.exit_probability is not None or options.remainder_tol is not None) and (
            method != "adjoint" or mode != "exact"):
        raise QdiffError("exit_probability= and remainder_tol= certify exact adjoint "
                         "gradients (method='adjoint', mode='exact')")
    if mode in EXTERNAL_MODES:
        if given not in ("auto", "parameter-shift"):
            raise QdiffError(f"mode={mode!r} differentiates with method='parameter-shift'")
        return _shift_result(program, positions, tree, EXTERNAL_MODES[mode].shift_gradient(
            program, leaves, cts, positions, options))
    if options.sampler is not None or options.estimator is not None:
        raise QdiffError("sampler= and estimator= run the gradient on Qiskit: mode='qiskit'")
    if mode == "sample" and not branches(program):
        # every trajectory is the same run: only readouts estimated from shots sample it
        if given not in ("auto", "parameter-shift"):
            raise QdiffError(
                f"method={given!r} with mode='sample' would ignore shots: {program.name} "
                "never measures mid-circuit, so all its trajectories are the same run. Use "
                "method='parameter-shift' (or 'auto'), which estimates the readouts of the "
                "shifted programs from shots, or mode='exact'")
        return _shift_result(program, positions, tree, shot_parameter_shift(
            program, leaves, cts, positions, options))
    if mode == "sample":
        if method == "parameter-shift":
            # every sample as one batch where it covers the program (`batched_shift`)
            batched = batched_parameter_shift(program, leaves, cts, positions, options)
            return _shift_result(program, positions, tree, batched or sampled_parameter_shift(
                program, leaves, cts, positions, options))
        if method != "adjoint":
            raise QdiffError("sample mode differentiates with method='adjoint' or "
                             "'parameter-shift'")
        return _sampled(program, leaves, cts, positions, tree, options)
    if mode != "exact":
        raise QdiffError(f"mode must be one of {', '.join(modes())}, got {mode!r}")

    def attempt(cut: float) -> tuple[Any, float, str | None]:
        flat, value, extra = _exact_vjp(program, leaves, cts, positions,
                                        options.replace(tol=cut))
        if not isinstance(extra, ShiftResult) and "run" in extra:
            certificate = certify(program, leaves, extra.pop("run"), cts, positions,
                                  options.exit_probability)
            extra.update(remainder_bound=pytree.unflatten(tree, certificate.grads),
                         value_remainder_bound=certificate.value,
                         remainder_reason=certificate.reason,
                         exit_probability=certificate.exit_probability)
            largest = max((float(np.max(g, initial=0.0)) for g in certificate.grads),
                          default=0.0)
            return (flat, value, extra), largest, certificate.reason
        return (flat, value, extra), 0.0, None

    flat, value, extra = tighten(attempt, options.tol, options.remainder_tol)
    if isinstance(extra, ShiftResult):
        return _shift_result(program, positions, tree, extra)
    grads = [flat[k] for k in positions]
    info = extra.pop("runner")
    return QuantumGradient(
        value=_structure(program, list(value)), grad=pytree.unflatten(tree, grads),
        method=method, dropped_mass=info.dropped, unterminated_mass=info.unterminated,
        aborted_mass=info.aborted, **extra)


def _exact_vjp(program: Program, leaves: list[Any], cts: list[np.ndarray],
               positions: list[int], options: RunOptions) -> tuple[list, list, Any]:
    """Flat input cotangents and flat values of one exact-mode VJP by ``options.method``,
    with what the method reports (its `ShiftResult`, or a dict of `QuantumGradient`
    fields)."""
    method = _check_method(options.method)
    if method == "parameter-shift":
        result = parameter_shift(program, leaves, cts, positions, options)
        return result.grads, result.values, result
    if method == "adjoint":
        run = RecordedRun(program, leaves, options, checkpoints=True)
        return run.vjp(cts), run.values, dict(
            runner=run.runner, run=run, num_branches=run.num_branches,
            postselection_probability=run.mass if run.postselected else 1.0)
    flat, value, info = _finite_differences(program, leaves, cts, positions, options)
    return flat, value, dict(runner=info)


def _shift_result(program: Program, positions: list[int], tree: Any,
                  result: ShiftResult) -> QuantumGradient:
    sampled = result.shots is not None
    grads = result.grads if sampled else [result.grads[k] for k in positions]
    runner = result.runner
    return QuantumGradient(
        value=_structure(program, list(result.values)), grad=pytree.unflatten(tree, grads),
        method="parameter-shift", dropped_mass=runner.dropped,
        unterminated_mass=runner.unterminated, aborted_mass=runner.aborted,
        postselection_probability=result.mass if result.postselected else 1.0,
        value_stderr=(_structure(program, result.value_stderr) if sampled else None),
        grad_stderr=(pytree.unflatten(tree, result.grad_stderr) if sampled else None),
        shots=result.shots, num_derivative_programs=result.num_derivative_programs,
        num_evaluations=result.num_evaluations)


def _sampled(program: Program, leaves: list[Any], cts: list[np.ndarray], positions: list[int],
             tree: Any, options: RunOptions) -> QuantumGradient:
    shots = options.shots
    if shots < 2:
        raise QdiffError(f"sample mode needs at least 2 shots, got {shots}")
    seeds = np.random.SeedSequence(options.seed).spawn(shots)
    conditioned = postselects(program)  # otherwise P = 1 exactly and ∂P = 0
    rows = []  # per shot: F (weighted outputs), P (kept), dF, dP (flattened selected leaves)
    aborted = unterminated = 0.0
    for shot_seed in seeds:
        run = RecordedRun(program, leaves, options.replace(mode="sample", seed=shot_seed),
                          checkpoints=True)
        value = np.concatenate([np.ravel(v) for v in run.raw_values])
        score = sum(float(np.vdot(c, v)) for c, v in zip(cts, run.raw_values))
        flat = run.vjp(cts, conditioned=False)
        d_value = np.concatenate([np.ravel(flat[k]) for k in positions])
        d_mass = np.concatenate([np.ravel(g) for k, g in enumerate(run.mass_vjp())
                                 if k in positions]) if conditioned else np.zeros_like(d_value)
        rows.append((value, score, run.mass, d_value, d_mass))
        aborted += run.runner.aborted
        unterminated += run.runner.unterminated
    values = np.stack([r[0] for r in rows])
    scores = np.array([r[1] for r in rows])
    masses = np.array([r[2] for r in rows])
    d_values = np.stack([r[3] for r in rows])
    d_masses = np.stack([r[4] for r in rows])
    p = masses.mean()
    if p == 0:
        raise QdiffError("no trajectory was accepted (postselection rejected every shot)")
    f, df, dp, fv = scores.mean(), d_values.mean(0), d_masses.mean(0), values.mean(0)
    grad = (df * p - f * dp) / p ** 2
    # delta method: the influence of each shot on the ratio estimates
    influence = ((d_values - df) / p - (d_masses - dp) * f / p ** 2
                 - np.outer(scores - f, dp) / p ** 2
                 + np.outer(masses - p, (2 * f * dp - df * p) / p ** 3))
    value_influence = (values - fv) / p - np.outer(masses - p, fv) / p ** 2
    n = len(rows)
    grad_err = influence.std(0, ddof=1) / np.sqrt(n)
    value_err = value_influence.std(0, ddof=1) / np.sqrt(n)
    out_values = _split_like(fv / p, program)
    out_errors = _split_like(value_err, program)
    return QuantumGradient(
        value=_structure(program, out_values), grad=_unflatten_selected(grad, leaves, positions,
                                                                         tree),
        method="adjoint", aborted_mass=aborted / n, unterminated_mass=unterminated / n,
        postselection_probability=p, value_stderr=_structure(program, out_errors),
        grad_stderr=_unflatten_selected(grad_err, leaves, positions, tree), shots=n)


def _split_like(flat: np.ndarray, program: Program) -> list[np.ndarray]:
    return pytree.split_flat(flat, [t.shape for t in program.out_types])


def _unflatten_selected(flat: np.ndarray, leaves: list[Any], positions: list[int],
                        tree: Any) -> Any:
    return pytree.unflatten(tree, pytree.split_flat(flat, [np.shape(leaves[k])
                                                           for k in positions]))


def _finite_differences(program: Program, leaves: list[Any], cts: list[np.ndarray],
                        positions: list[int], options: RunOptions
                        ) -> tuple[list[Any], list[Any], BranchRunner]:
    base, runner = _exact_outputs(program, leaves, options)
    step = options.step
    jobs, slots = [], []
    for k in positions:
        x = np.asarray(leaves[k], np.float64)
        for index in np.ndindex(x.shape):
            for sign in (1.0, -1.0):
                moved = x.copy()
                moved[index] += sign * step
                jobs.append([*leaves[:k], moved, *leaves[k + 1:]])
            slots.append((k, index))
    scores = run_jobs(_weighted_value, program, jobs, options.executor, cts=cts,
                      options=options.for_jobs())
    flat: list[Any] = [None] * len(leaves)
    for k in positions:
        flat[k] = np.zeros(np.shape(leaves[k]))
    for n, (k, index) in enumerate(slots):
        flat[k][index] = (scores[2 * n] - scores[2 * n + 1]) / (2 * step)
    return flat, base, runner


def _exact_outputs(program: Program, values: list[Any],
                   options: RunOptions) -> tuple[list[np.ndarray], BranchRunner]:
    runner = BranchRunner(options.replace(mode="exact"))
    items = runner.run_program(program, [(1.0, [np.asarray(v) for v in values])])
    outs, _ = enumerated_outputs(runner, program, items)
    return [np.asarray(o, np.float64) for o in outs], runner


def _weighted_value(program: Program, values: list[Any], *, cts: list[np.ndarray],
                    options: RunOptions) -> float:
    """``Σ_j c_j · E_j(values)``: one job of the finite differences."""
    outs, _ = _exact_outputs(program, values, options)
    return sum(float(np.vdot(c, o)) for c, o in zip(cts, outs))


def jacobian(f: Any, *args: Any, argnums: Any = 0, options: RunOptions | None = None,
             **settings: Any) -> Any:
    """The Jacobian of every output with respect to ``argnums``, one row per output element.
    With the adjoint method the rows share one forward run, and one reverse sweep takes a
    batch of rows (the gates undo ψ once for all of them).
    Output ``k`` gives an array of shape ``out_shape + in_shape``.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def probs(t):
    ...     q = qm.qubits(1)
    ...     qm.ry(t, q[0])
    ...     return qm.probs(q)
    >>> jacobian(probs, 0.5).round(6).tolist() == np.round([-np.sin(0.5) / 2, np.sin(0.5) / 2],
    ...                                                    6).tolist()
    True
    """
    program = as_quantum_program(f, args)
    leaves = argument_leaves(program, args)
    positions, tree = _selection(program, argnums)
    _, rows = jacobian_rows(program, leaves, positions, RunOptions.of(options, **settings))
    outputs = []
    for k, out_type in enumerate(program.out_types):
        elements = list(np.ndindex(out_type.shape))
        blocks = [np.stack([rows[k][index][p] for index in elements])
                  .reshape(out_type.shape + np.shape(leaves[p])) if elements
                  else np.zeros(out_type.shape + np.shape(leaves[p])) for p in positions]
        outputs.append(pytree.unflatten(tree, blocks))
    return _structure(program, outputs)


def jacobian_rows(program: Program, leaves: Sequence[Any], positions: Sequence[int] | None = None,
                  options: RunOptions = DEFAULTS) -> tuple[list[np.ndarray], list[dict]]:
    """The flat output values, and per output ``k`` and element ``index``,
    ``rows[k][index]``: the flat gradients of that element (one array per input; zeros for
    inputs outside ``positions``, default all differentiable ones)."""
    method = _check_method(options.method)
    if options.mode != "exact":  # every row below is an exact VJP
        raise QdiffError(
            f"quantum Jacobians and JVPs are exact; mode={options.mode!r} would ignore "
            f"shots. Use qm.gradient(..., mode={options.mode!r}, cotangent=row) for sampled "
            "rows, or mode='exact'")
    if positions is None:
        positions = [k for k, t in enumerate(program.in_types) if is_differentiable(t)]
    values: list[Any] = []
    unit_rows = []  # (output, element, cotangents): one row per output element
    for k, out_type in enumerate(program.out_types):
        for index in np.ndindex(out_type.shape):
            cts = [np.zeros(t.shape) for t in program.out_types]
            cts[k][index] = 1.0
            unit_rows.append((k, index, cts))
    if method == "adjoint":
        run = RecordedRun(program, leaves, options, checkpoints=True)
        values = run.values
        flats = run.vjp_rows([cts for _, _, cts in unit_rows])
    else:
        flats = []
        for _, _, cts in unit_rows:  # every row's run computes the values: keep the first
            flat, found, _ = _exact_vjp(program, list(leaves), cts, list(positions), options)
            values = values or list(found)
            flats.append(flat)
    rows: list[dict] = [{} for _ in program.out_types]
    for (k, index, _), flat in zip(unit_rows, flats):
        rows[k][index] = flat
    if not values:  # no output element to differentiate: no row ran
        values, _ = _exact_outputs(program, list(leaves), options)
    return list(values), rows
