"""The randomized single-occurrence parameter-shift estimator on a batch of shots.

`shift_gradient.sampled_parameter_shift` draws, per sample, one base trajectory and, per
site, one occurrence ``I ~ p`` and the shifted trajectories at it, weighted by ``1/p(I)``.
Here every sample of the estimator runs at once on the batch runner
(`qdiff.quantum.execution.shot_batch`): the base trajectories are one batch, and per site
and shift the shifted trajectories are one batch of the site's instrumented program whose
occurrence input has one row per sample (both shifts of a site read the generator from
the same seed, as the trajectory estimator's shifted runs share their randomness). A
sample's shifted trajectory counts when it reached the drawn occurrence (the instrumented
program's counter says how often the site ran).

Covered (`batched_parameter_shift` returns None otherwise, and the trajectory estimator
runs): programs the batch runner covers, without postselection, whose outputs depend on the
differentiated inputs only through gates (no classical path to add), and whose sites'
angles are computed from the inputs by classical code outside the measurement paths (loop
and branch constants, not carries or measured values), so that ``∂θ/∂inputs`` is one
vector for every occurrence on every path; it is computed once by forward mode. Same
estimator, same distribution of the samples; the draws differ from the trajectory
estimator's for a given seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...autodiff.activity import active_outputs
from ...autodiff.forward import jvp_program
from ...ir.core import Eqn, Literal, Program, Var
from ...ir.pytree import split_flat
from ...ir.types import Tensor
from ...loops.occurrences import as_distribution
from ..execution.options import RunOptions
from ..execution.shot_batch import (
    NotBatchable,
    Rows,
    ShotBatchRunner,
    batch_covers,
    chunk_size,
    per_row,
)
from ..lang.sites import find_sites, postselects
from .parameter_shift import instrument as instrument_site
from .shift_gradient import ShiftResult, _Masses, _site_distribution


def batched_parameter_shift(program: Program, leaves: Sequence[Any],
                            cotangents: Sequence[Any], positions: Sequence[int],
                            options: RunOptions) -> ShiftResult | None:
    """The randomized estimator's value and gradient from ``options.shots`` samples run as
    batches (see the module docstring), or None where the batch does not cover it.

    >>> import qdiff
    >>> from qdiff.quantum.lang.examples import repeat_until_one  # E = 1/sin²(θ/2)
    >>> program = qdiff.trace(repeat_until_one, 1.0)
    >>> r = batched_parameter_shift(program, [np.asarray(1.0)], [np.ones(())], [0],
    ...                             RunOptions(mode="sample", shots=20000, seed=0))
    >>> exact = -np.cos(0.5) / np.sin(0.5) ** 3
    >>> bool(abs(r.grads[0] - exact) < 4 * r.grad_stderr[0]), r.shots
    (True, 20000)
    """
    leaves = [np.asarray(v) for v in leaves]
    flags = [k in positions for k in range(len(leaves))]
    if (postselects(program) or not batch_covers(program)
            or any(active_outputs(program, flags))):
        return None
    sites = []
    for site in find_sites(program, flags):
        inst = instrument_site(program, site)
        tangent = angle_tangent(program, site, leaves, positions)
        if tangent is None or not batch_covers(inst.program):
            return None
        sites.append((inst, tangent))
    try:
        return _estimate(program, leaves, cotangents, positions, options, sites)
    except NotBatchable:
        return None


def _estimate(program: Program, leaves: list[np.ndarray], cotangents: Sequence[Any],
              positions: Sequence[int], options: RunOptions,
              sites: list[tuple[Any, np.ndarray]]) -> ShiftResult:
    shots = options.shots
    cts = [np.asarray(c, np.float64) for c in cotangents]
    distribution = as_distribution(options.occurrences)
    draws = [_site_distribution(program, inst, distribution) for inst, _ in sites]
    seeds = np.random.SeedSequence(options.seed).spawn(2 + len(sites))
    rng = np.random.default_rng(seeds[0])
    width = sum(int(np.size(leaves[j])) for j in positions)
    base = ShotBatchRunner(options.replace(seed=seeds[1]))
    values = _outputs(base, program, leaves, shots)
    grads = np.zeros((shots, width))
    for (inst, tangent), draw, seed in zip(sites, draws, seeds[2:]):
        index = np.array([draw.sample(rng) for _ in range(shots)], np.int64)  # 1-based
        pmf = {int(i): draw.pmf(int(i)) for i in np.unique(index)}
        scale = 1.0 / np.array([pmf[int(i)] for i in index])
        for shift, coefficient in inst.site.rule.terms():
            runner = ShotBatchRunner(options.replace(seed=seed))
            outs = _outputs(runner, inst.program,
                            [*leaves, Rows(index - 1), np.float64(shift)], shots)
            reached = outs[-1].reshape(shots) > index - 1  # the site ran I times or more
            objective = sum(np.sum(o.reshape(shots, -1) * c.reshape(1, -1), axis=1)
                            for o, c in zip(outs[:-1], cts))
            grads += (scale * coefficient * objective * reached)[:, None] * tangent[None, :]
    rows = np.concatenate([v.reshape(shots, -1) for v in values], axis=1)
    out_shapes = [t.shape for t in program.out_types]
    in_shapes = [np.shape(leaves[j]) for j in positions]
    result = ShiftResult(
        split_flat(rows.mean(0), out_shapes), split_flat(grads.mean(0), in_shapes), None,
        num_derivative_programs=len(sites),
        num_evaluations=shots * (1 + sum(inst.site.rule.num_evaluations for inst, _ in sites)),
        value_stderr=split_flat(rows.std(0, ddof=1) / np.sqrt(shots), out_shapes),
        grad_stderr=split_flat(grads.std(0, ddof=1) / np.sqrt(shots), in_shapes),
        shots=shots)
    result.runner = _Masses(base.aborted / shots, base.unterminated / shots)
    return result


def _outputs(runner: ShotBatchRunner, program: Program, inputs: list[Any],
             shots: int) -> list[np.ndarray]:
    """Every output of ``program`` per shot (``shots`` rows, zeros for a shot that was
    dropped: its trajectory adds nothing, as in the trajectory estimator), in chunks;
    ``inputs`` are shared, or `Rows` with one row per shot."""
    step = chunk_size(program, shots)
    columns: list[list[np.ndarray]] = [[] for _ in program.outputs]
    for start in range(0, shots, step):
        count = min(step, shots - start)
        chunk = [Rows(v.array[start:start + count]) if isinstance(v, Rows) else v
                 for v in inputs]
        runner.first_shot = start
        outs, kept = runner.run_program(program, chunk, count)
        for column, atom, value in zip(columns, program.outputs, outs):
            rows = np.asarray(per_row(value, count if kept is None else len(kept)), np.float64)
            full = np.zeros((count, *atom.type.shape))
            full[slice(None) if kept is None else kept] = rows
            column.append(full)
    return [np.concatenate(c) for c in columns]


def angle_tangent(program: Program, site: Any, leaves: list[np.ndarray],
                  positions: Sequence[int]) -> np.ndarray | None:
    """``∂θ/∂inputs[positions]`` (flattened) of ``site``'s angle when classical code outside
    the measurement paths computes it from the inputs (one value at every occurrence), by
    forward mode on the hoisted computation; None otherwise."""
    hoisted = _hoist(program, site)
    if hoisted is None:
        return None
    eqns, angle = hoisted
    active = sorted(positions)
    flags = [k in positions for k in range(len(leaves))]
    forward = jvp_program(Program(program.inputs, eqns, (angle,), name="angle"), flags, [True])
    columns = []
    for j in positions:
        for e in range(int(np.size(leaves[j]))):
            tangents = [np.zeros(np.shape(leaves[k])) for k in active]
            tangents[active.index(j)].reshape(-1)[e] = 1.0
            _, derivative = forward(*leaves, *tangents)
            columns.append(float(derivative))
    return np.array(columns)


def _hoist(program: Program, site: Any) -> tuple[list[Eqn], Any] | None:
    """The classical equations that compute ``site``'s angle, lifted to the top level (a
    sub-program's constant inputs replaced by the operands they come from), and the
    angle's atom; None when the angle depends on a carry, an index or a measured value."""
    levels = [program]  # the programs on the site's path, outermost first
    owners: list[tuple[Eqn, str, int]] = []
    for index, key, b in site.steps:
        eqn = levels[-1].eqns[index]
        owners.append((eqn, key, b))
        sub = eqn.params[key]
        levels.append(sub[b] if b >= 0 else sub)
    hoisted: list[Eqn] = []
    mapped: dict[tuple[int, Var], Any] = {}

    def lift(atom: Any, depth: int) -> Any:
        if isinstance(atom, Literal):
            return atom
        if (depth, atom) in mapped:
            return mapped[(depth, atom)]
        level = levels[depth]
        if atom in level.inputs:
            if depth == 0:
                return atom
            operand = _constant_operand(*owners[depth - 1], level.inputs.index(atom))
            if operand is None:
                return None
            result = lift(owners[depth - 1][0].inputs[operand], depth - 1)
        else:
            producer = next((e for e in level.eqns if atom in e.outputs), None)
            if producer is None or any(True for _ in producer.subprograms()):
                return None
            if any(not isinstance(a.type, Tensor)
                   for a in (*producer.inputs, *producer.outputs) if isinstance(a, Var)):
                return None  # states and measured bits: the quantum path
            inputs = [lift(a, depth) for a in producer.inputs]
            if any(a is None for a in inputs):
                return None
            hoisted.append(Eqn(producer.primitive, inputs, producer.outputs, producer.params))
            result = atom
        mapped[(depth, atom)] = result
        return result

    angle = lift(site.eqn.inputs[1 + site.slot], len(levels) - 1)
    return None if angle is None else (hoisted, angle)


def _constant_operand(eqn: Eqn, key: str, branch: int, position: int) -> int | None:
    """The operand of ``eqn`` that input ``position`` of its ``key`` sub-program reads when
    it is the same on every iteration (a constant), else None (a carry or the index)."""
    p, name = eqn.params, eqn.primitive.name
    if name == "cond":
        return 1 + position
    if name == "loop":
        k = p["num_consts"]
        return 1 + position if 1 <= position <= k else None
    if name == "while":
        cc, bc = p["num_cond_consts"], p["num_body_consts"]
        if key == "cond":
            return position if position < cc else None
        return cc + position if position < bc else None
    return None
