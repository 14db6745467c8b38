"""Gradients by parameter shift: evaluate the shifted programs, chain-rule the rest.

For every site (a gate angle that depends on the differentiated inputs, `parameter_shift`)
and every occurrence ``k`` of it, the shifted programs give the derivative of the value
with respect to the angle at that occurrence:

    D_k = Σ_μ y_μ [F(θ_k + x_μ) - F(θ_k - x_μ)]          (the gate's shift rule)

where ``F`` is the objective as a linear function of the run's distribution and states:
``c · E[outputs]`` when the outputs are affine in the expectations, and for programs that
never branch, the classical post-processing's linearization ``Σ_i c_i r_i`` over the
expectations ``r_i`` in execution order (``c_i`` from the classical reverse sweep). The
classical reverse sweep then takes ``D_k`` back to the inputs through the code that computed
the angle (shared parameters, loop indices, pre-processing), and adds the classical paths
from the inputs to the outputs. Postselected values ``F/P`` use the quotient rule with ``P``
shifted alike.

Sample mode estimates the sum over occurrences without enumerating them (Fang et al.'s
single-occurrence estimator): draw one occurrence ``I ~ p`` per site and sample, run the
shifted programs at it on one trajectory each, and weight by ``1/p(I)``; ``p`` has an
exactly known normalizer (`qdiff.loops.occurrences`), so loops that end on a measurement,
with no bound on their iterations, are differentiated without bias. A site that runs at most
``n`` times (static loop bounds, ``max_iter``) draws uniformly from ``1..n`` instead; a site
outside loops is differentiated on every sample. Each trajectory weights
its value by the angle's derivative on its own path, which keeps the estimator exact when the
angle depends on earlier outcomes.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def f(w):
...     q = qm.qubits(2)
...     qm.crx(w[0], q[0], q[1]); qm.ry(w[1] ** 2, q[0])
...     return qm.expval("ZZ", q) + qm.expval("XI", q)
>>> w = np.array([0.4, 0.9])
>>> shift = parameter_shift(qdiff.trace(f, w), [w], [np.ones(())], [0])
>>> adjoint = qdiff.grad(f)(w)
>>> bool(np.allclose(shift.grads[0], adjoint, atol=1e-10)), shift.num_derivative_programs
(True, 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...ir.core import Program
from ...ir.errors import QdiffError
from ...ir.pytree import split_flat
from ...loops.occurrences import OccurrenceDistribution, as_distribution, uniform
from ..execution.jobs import run_jobs
from ..execution.options import DEFAULTS, RunOptions
from ..execution.run import READOUT_REPLICATES
from ..execution.runner import BranchRunner
from ..lang.sites import (
    READOUTS,
    branches,
    check_readout_use,
    find_sites,
    postselects,
    static_bound,
)
from .adjoint import READOUT_KINDS, Record, RecordedRun
from .parameter_shift import Instrumented
from .parameter_shift import instrument as instrument_site


@dataclass
class ShiftResult:
    """Values and flat input gradients of a parameter-shift run, with its bookkeeping."""

    values: list[np.ndarray]
    grads: list[np.ndarray]
    runner: Any
    num_derivative_programs: int = 0
    num_evaluations: int = 0
    mass: float = 1.0
    postselected: bool = False
    value_stderr: list[np.ndarray] | None = None
    grad_stderr: list[np.ndarray] | None = None
    shots: int | None = None


def parameter_shift(program: Program, leaves: Sequence[Any], cotangents: Sequence[Any],
                    positions: Sequence[int], options: RunOptions = DEFAULTS,
                    readout_shots: int | None = None) -> ShiftResult:
    """Exact-mode parameter-shift VJP ``Σ_j c_j ∂E_j/∂inputs`` (see the module docstring).

    ``positions`` are the flat inputs to differentiate; the result's ``grads`` has one array
    per flat input (zeros elsewhere). Shifted programs run on ``options.executor`` when given.
    ``readout_shots`` (programs that never branch, `shot_parameter_shift`): every readout of
    the base and shifted runs is estimated from that many shots, seeded by ``options.seed``.
    """
    leaves = [np.asarray(v) for v in leaves]
    branching = branches(program)
    check_readout_use(program, branching)
    if readout_shots and branching:
        raise QdiffError("internal: shot-estimated readouts need a program that never branches")
    streams = _seed_sequence(options.seed).spawn(2) if readout_shots else [options.seed] * 2
    base = RecordedRun(program, leaves, options.replace(seed=streams[0]), readout_shots)
    _, value_seeds = base.output_seeds(cotangents)
    direct, sweep = base.classical_vjp(value_seeds)
    # the objective's weights: c per output, or c_i per expectation (never-branching runs)
    readout_weights = None if branching else _readout_weights(base, sweep)
    cts = [np.asarray(c, np.float64) for c in cotangents]
    objective0 = sum(float(np.vdot(c, v)) for c, v in zip(cts, base.raw_values))
    total = [np.array(g) for g in direct]
    result = ShiftResult(base.values, total, base.runner, mass=base.mass,
                         postselected=base.postselected)
    single_path_seeds: dict[int, float] = {}
    for occurrences in occurrence_plan(program, leaves, positions, base, branching, options):
        site, inst, groups = occurrences.site, occurrences.inst, occurrences.groups
        terms = site.rule.terms()
        jobs = [[*leaves, np.int64(k), np.float64(s)] for k in sorted(groups) for s, _ in terms]
        if readout_shots:  # each job's own seed, after its inputs (independent shots)
            jobs = [[*job, seed] for job, seed in zip(jobs, streams[1].spawn(len(jobs)))]
        outcomes = run_jobs(_shifted_outcome, inst.program, jobs, options.executor,
                            options=options.for_jobs(), readouts=not branching,
                            readout_shots=readout_shots)
        seeds: dict[int, float] = {}
        for n, k in enumerate(sorted(groups)):
            d_objective = d_mass = 0.0
            for (_, coefficient), outcome in zip(terms, outcomes[n * len(terms):]):
                raw, mass, readouts = outcome
                d_objective += coefficient * _objective(cts, raw, readout_weights, readouts)
                d_mass += coefficient * mass
            d = d_objective
            if base.postselected:  # the value is F/P: d(F/P) = (dF P - F dP)/P^2, ×P below
                d = d_objective - objective0 / base.mass * d_mass
            _seed_group(seeds if branching else single_path_seeds, groups[k], site.slot, d)
        if branching:
            _accumulate(total, occurrences.run.classical_vjp(seeds)[0])
        result.num_derivative_programs += len(groups)
        result.num_evaluations += len(jobs)
    if single_path_seeds:  # every site's chain rule in one classical sweep
        _accumulate(total, base.classical_vjp(single_path_seeds)[0])
    if base.postselected:
        result.grads = [g / base.mass for g in total]
    return result


@dataclass
class Occurrences:
    """A site, its instrumented program, its occurrences (the gate's records by occurrence)
    and the recorded run they come from."""

    site: Any
    inst: Instrumented
    groups: dict[int, list[Record]]
    run: RecordedRun

    def tangent(self, k: int) -> list[np.ndarray]:
        """``∂θ/∂inputs`` of the angle at occurrence ``k`` (one value on every path)."""
        seeds: dict[int, float] = {}
        _seed_group(seeds, self.groups[k], self.site.slot, 1.0)
        return self.run.classical_vjp(seeds)[0]


def occurrence_plan(program: Program, leaves: list[Any], positions: Sequence[int],
                    base: RecordedRun, branching: bool,
                    options: RunOptions) -> list[Occurrences]:
    """Every site of the differentiated inputs with its occurrences: on one path, the site's
    records in the base run in order; with branches, per path, from the counter of the
    site's instrumented program."""
    flags = [k in positions for k in range(len(leaves))]
    plans = []
    for site in find_sites(program, flags):
        inst = instrument_site(program, site)
        if branching:
            run = RecordedRun(inst.program, [*leaves, np.int64(-1), np.float64(0.0)], options)
            groups = _occurrence_groups(run, inst)
        else:
            run = base
            groups = {k: [r] for k, r in enumerate(base.records_of(site.eqn))}
        plans.append(Occurrences(site, inst, groups, run))
    return plans


def _accumulate(total: list[np.ndarray], grads: list[np.ndarray]) -> None:
    # an instrumented run has two more inputs (occurrence, shift): not the program's
    for j in range(len(total)):
        total[j] = total[j] + grads[j]


def _readout_weights(run: RecordedRun, sweep: Any) -> list[np.ndarray]:
    """The cotangent that reached each expectation record, in execution order (zeros for a
    readout nothing differentiated reads)."""
    weights = []
    for record in run.runner.records:
        if record.kind in READOUT_KINDS:
            ct = sweep.readouts.get(id(record))
            shape = np.shape(record.out_values[1])
            weights.append(np.zeros(shape) if ct is None else
                           np.broadcast_to(np.asarray(ct, np.float64), shape))
    return weights


def _objective(cts: list[np.ndarray], raw: list[np.ndarray],
               readout_weights: list[np.ndarray] | None,
               readouts: list[np.ndarray] | None) -> float:
    if readout_weights is None:
        return sum(float(np.vdot(c, v)) for c, v in zip(cts, raw))
    assert readouts is not None
    if len(readouts) != len(readout_weights):
        raise QdiffError("internal: a shifted run read a different number of expectations")
    return sum(float(np.vdot(c, r)) for c, r in zip(readout_weights, readouts))


def _occurrence_groups(run: RecordedRun, inst: Instrumented) -> dict[int, list[Record]]:
    """The shifted gate's records by occurrence (the counter each saw); refuses angles that
    differ between paths at one occurrence (their derivatives may differ too)."""
    producer = {n: r for r in run.runner.records for n in r.out_nodes if n is not None}
    groups: dict[int, list[Record]] = {}
    slot = inst.site.slot
    for record in run.records_of(inst.gate):
        node = record.in_nodes[1 + slot]
        moved = producer.get(node) if node is not None else None
        while moved is not None and moved.eqn is not inst.moved:  # through a convert
            moved = producer.get(moved.in_nodes[0])
        select = producer.get(moved.in_nodes[1]) if moved is not None else None
        test = producer.get(select.in_nodes[0]) if select is not None else None
        if test is None or test.eqn is not inst.test:
            raise QdiffError("internal: the shifted gate's counter was not recorded")
        groups.setdefault(int(test.in_values[0]), []).append(record)
    for k, records in groups.items():
        angles = [float(r.in_values[1 + slot]) for r in records]
        if max(angles) - min(angles) > 1e-9 * max(1.0, abs(angles[0])):
            raise QdiffError(
                f"parameter shift: {inst.site.describe()} runs with different angles on "
                f"different measurement paths at its occurrence {k} ({min(angles):.6g} vs "
                f"{max(angles):.6g}); exact mode needs one angle per occurrence. Use "
                "method='adjoint', or mode='sample', which weights each path by its own "
                "angle's derivative")
    return groups


def _seed_group(seeds: dict[int, float], records: list[Record], slot: int, d: float) -> None:
    # D_k is the derivative for the angle of every path at occurrence k together; the angle
    # (and its derivative) is one value, so the paths share D_k by weight
    total = sum(r.weight_in for r in records)
    for record in records:
        node = record.in_nodes[1 + slot]
        if node is not None:
            share = record.weight_in / total if total else 1.0 / len(records)
            seeds[node] = seeds.get(node, 0.0) + d * share


def _shifted_outcome(program: Program, values: list[Any], *, options: RunOptions,
                     readouts: bool, readout_shots: int | None = None
                     ) -> tuple[list[np.ndarray], float, list | None]:
    """One shifted program in exact mode: ``Σ_b w_b g_b`` per output (without the counter),
    the kept mass, and the expectations in execution order when asked (single path). With
    ``readout_shots``, the last of ``values`` is the job's seed and every readout is
    estimated from that many shots."""
    seed = options.seed
    if readout_shots:
        *values, seed = values
    runner = _ReadoutRunner(options.replace(mode="exact", seed=seed))
    runner.readout_shots = readout_shots
    items = runner.run_program(program, [(1.0, [np.asarray(v) for v in values])])
    raw = [sum((w * np.asarray(outs[k], np.float64) for w, outs in items),
               np.zeros(atom.type.shape)) for k, atom in enumerate(program.outputs[:-1])]
    return raw, float(sum(w for w, _ in items)), (runner.readouts if readouts else None)


class _ReadoutRunner(BranchRunner):
    """The branching runner, keeping the expectations it reads, in order."""

    def __init__(self, options: RunOptions):
        super().__init__(options)
        self.readouts: list[np.ndarray] = []

    def apply(self, eqn: Any, handler: Any, weight: float, inputs: list[Any]) -> list:
        outcomes = super().apply(eqn, handler, weight, inputs)
        if eqn.primitive.name in READOUTS:
            self.readouts.append(np.asarray(outcomes[0][1][1], np.float64))
        return outcomes


# ------------------------------------------------------- sample mode, no mid-circuit measurement
def shot_parameter_shift(program: Program, leaves: Sequence[Any], cotangents: Sequence[Any],
                         positions: Sequence[int], options: RunOptions) -> ShiftResult:
    """Sample-mode parameter shift of a program that never measures mid-circuit, as a device
    computes it: every readout of the base run and of each shifted program is estimated from
    ``options.shots`` shots (`shot_readouts`, seeded by ``options.seed``), the value is the
    base run's post-processing of its estimates, and the gradient the shift rule's
    combination of the shifted estimates, chain-ruled through the classical code
    (linearized at the base estimates). ``value_stderr`` and ``grad_stderr`` are the spread
    (standard deviation) of `READOUT_REPLICATES` further estimates with fresh shots, as
    `qdiff.quantum.run` reports for such programs; ``num_evaluations`` counts their runs too.
    Only ``grads`` of ``positions`` are returned (as sample mode does).

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def f(t):
    ...     q = qm.qubits(1); qm.ry(t, q[0]); return qm.expval("Z", q)
    >>> r = shot_parameter_shift(qdiff.trace(f, 0.4), [0.4], [np.ones(())], [0],
    ...                          RunOptions(mode="sample", shots=4000, seed=1))
    >>> bool(abs(r.grads[0] + np.sin(0.4)) < 5 * r.grad_stderr[0]), r.shots
    (True, 4000)
    """
    if branches(program):
        raise QdiffError("internal: shot-estimated readouts need a program that never branches")
    runs = [parameter_shift(program, leaves, cotangents, positions,
                            options.replace(seed=stream), readout_shots=options.shots)
            for stream in _seed_sequence(options.seed).spawn(1 + READOUT_REPLICATES)]
    first = runs[0]

    def spread(parts: list[list[np.ndarray]]) -> list[np.ndarray]:
        return [np.std(np.stack(column), axis=0, ddof=1) for column in zip(*parts)]

    grads = [[np.asarray(run.grads[k], np.float64) for k in positions] for run in runs]
    values = [[np.asarray(v, np.float64) for v in run.values] for run in runs]
    return ShiftResult(values[0], grads[0], first.runner,
                       num_derivative_programs=first.num_derivative_programs,
                       num_evaluations=sum(1 + run.num_evaluations for run in runs),
                       value_stderr=spread(values), grad_stderr=spread(grads),
                       shots=options.shots)


def _seed_sequence(seed: Any) -> np.random.SeedSequence:
    # a seed given by the user (None, an int) or one spawned for a replicate
    return seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)


# ------------------------------------------------------------------------------ sample mode
def sampled_parameter_shift(program: Program, leaves: Sequence[Any],
                            cotangents: Sequence[Any], positions: Sequence[int],
                            options: RunOptions = DEFAULTS) -> ShiftResult:
    """The randomized single-occurrence estimator (see the module docstring): ``shots``
    samples, each one base trajectory (the value and the classical paths) and, per site, the
    shifted trajectories of one drawn occurrence (``options.occurrences``: the distribution
    of the drawn occurrence). Standard errors come from the samples."""
    shots, seed = options.shots, options.seed
    sampled = options.replace(mode="sample")
    if shots < 2:
        raise QdiffError(f"sample mode needs at least 2 shots, got {shots}")
    leaves = [np.asarray(v) for v in leaves]
    branching = branches(program)
    check_readout_use(program, branching)
    if postselects(program):
        raise QdiffError("sample-mode parameter shift does not support postselection; use "
                         "mode='exact', or method='adjoint' in sample mode")
    distribution = as_distribution(options.occurrences)
    cts = [np.asarray(c, np.float64) for c in cotangents]
    flags = [k in positions for k in range(len(leaves))]
    sites = [instrument_site(program, site) for site in find_sites(program, flags)]
    # a site that runs at most n times draws its occurrence uniformly (at most n shifted
    # programs, weights n); only sites in unbounded loops need a distribution with a tail
    draws = [_site_distribution(program, inst, distribution) for inst in sites]
    rng = np.random.default_rng(seed)
    streams = np.random.SeedSequence(seed).spawn(shots)
    value_rows, grad_rows = [], []
    aborted = unterminated = 0.0
    for stream in streams:
        base_seed, *site_seeds = stream.spawn(1 + len(sites))
        base = RecordedRun(program, leaves, sampled.replace(seed=base_seed))
        _, value_seeds = base.output_seeds(cts)
        grad, sweep = base.classical_vjp(value_seeds)
        weights = None if branching else _readout_weights(base, sweep)
        aborted += base.runner.aborted
        unterminated += base.runner.unterminated
        for inst, site_seed, draw in zip(sites, site_seeds, draws):
            index = draw.sample(rng)  # 1-based occurrence
            scale = 1.0 / draw.pmf(index)
            for shift, coefficient in inst.site.rule.terms():
                # the shifted runs of one sample share their randomness (common random
                # numbers): F(θ+x) - F(θ-x) then varies less than between independent runs
                run = RecordedRun(inst.program, [*leaves, np.int64(index - 1),
                                                 np.float64(shift)],
                                  sampled.replace(seed=site_seed))
                tangent = _path_tangent(run, inst, index - 1)
                if tangent is None:  # this path ended before the drawn occurrence
                    continue
                value = _objective(cts, run.raw_values[:-1], weights,
                                   _readouts_of(run) if weights is not None else None)
                for j in positions:
                    grad[j] = grad[j] + (scale * coefficient * value) * tangent[j]
        value_rows.append(np.concatenate([np.ravel(v) for v in base.raw_values]))
        grad_rows.append(np.concatenate([np.ravel(grad[j]) for j in positions]))
    values, grads = np.stack(value_rows), np.stack(grad_rows)
    n = len(streams)
    per_sample = 1 + sum(inst.site.rule.num_evaluations for inst in sites)
    out_shapes = [t.shape for t in program.out_types]
    in_shapes = [np.shape(leaves[j]) for j in positions]
    result = ShiftResult(split_flat(values.mean(0), out_shapes),
                         split_flat(grads.mean(0), in_shapes), None,
                         num_derivative_programs=len(sites), num_evaluations=n * per_sample,
                         value_stderr=split_flat(values.std(0, ddof=1) / np.sqrt(n), out_shapes),
                         grad_stderr=split_flat(grads.std(0, ddof=1) / np.sqrt(n), in_shapes),
                         shots=n)
    result.runner = _Masses(aborted / n, unterminated / n)
    return result


def _site_distribution(program: Program, inst: Instrumented,
                       unbounded: OccurrenceDistribution) -> OccurrenceDistribution:
    bound = static_bound(program, inst.site)
    return unbounded if bound is None else uniform(max(bound, 1))


@dataclass
class _Masses:
    aborted: float
    unterminated: float
    dropped: float = 0.0


def _path_tangent(run: RecordedRun, inst: Instrumented, k: int) -> list[np.ndarray] | None:
    """``∂θ/∂inputs`` for the angle this trajectory gave the site at occurrence ``k``, or
    None when the trajectory never reached it."""
    groups = _occurrence_groups(run, inst)
    return Occurrences(inst.site, inst, groups, run).tangent(k) if k in groups else None


def _readouts_of(run: RecordedRun) -> list[np.ndarray]:
    return [np.asarray(r.out_values[1], np.float64) for r in run.runner.records
            if r.kind in READOUT_KINDS]
