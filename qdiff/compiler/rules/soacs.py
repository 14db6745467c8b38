"""Second-order array combinators as loops with their lambdas inlined.

- ``map``: ``for i: ys[i] = body(consts, xs[i])`` (a ``prange`` when parallel; each index
  writes its own rows). Elementwise lambdas never get here: they join loop nests.
- ``reduce``: ``acc = neutral; for i: acc = op(consts, acc, xs[i])``.
- ``scan``: the same, writing ``ys[i] = acc``.
- ``hist``: ``for i: if 0 <= idx[i] < len(dest): dest[idx[i]] = op(dest[idx[i]], vs[i])``,
  in place on a dead destination; under ``parallel=True``, for a known monoid
  (`partial_histograms`), each thread fills its own histogram from a block of the updates
  and each bin folds them in order.
- ``scatter``: ``dest[idx[i]] = vs[i]`` in order, so the last write wins.
"""

from __future__ import annotations

from collections.abc import Callable

import numba

from ...classical.soacs import hist_p, map_p, op_kind, reduce_p, scan_p, scatter_p
from ...ir.core import Eqn
from ..lowering import Scope, empty, rule


def _row(array: str, index: str) -> str:
    return f"{array}[{index}]"


@rule(map_p)
def _map(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    body = eqn.params["body"]
    num_consts = eqn.params["num_consts"]
    n = eqn.inputs[num_consts].type.shape[0]
    outs = [scope.fresh("y") for _ in eqn.outputs]
    for out, var in zip(outs, eqn.outputs):
        scope.allocate(out, var, var.type.shape, var.type.np_dtype)
    i = scope.fresh("i")
    with scope.src.loop(f"for {i} in {scope.options.outer_range}({n})", scope.options.parallel):
        rows = [_row(x, i) for x in args[num_consts:]]
        results = scope.inline(body, [*args[:num_consts], *rows])
        for out, result in zip(outs, results):
            scope.line(f"{out}[{i}] = {result}")
    return outs


def _accumulate(scope: Scope, eqn: Eqn, args: list[str], stacked: bool) -> list[str]:
    op = eqn.params["op"]
    num_consts = eqn.params["num_consts"]
    consts, rest = args[:num_consts], args[num_consts:]
    k = len(rest) // 2
    xs = rest[k:]
    n = eqn.inputs[num_consts + k].type.shape[0]
    acc = [scope.fresh("acc") for _ in range(k)]
    for name, start, var in zip(acc, rest[:k], eqn.inputs[num_consts:num_consts + k]):
        scope.line(f"{name} = {start}.copy()" if var.type.shape else f"{name} = {start}")
    outs = [scope.fresh("y") for _ in eqn.outputs] if stacked else []
    for out, var in zip(outs, eqn.outputs):
        scope.allocate(out, var, var.type.shape, var.type.np_dtype)
    i = scope.fresh("i")
    with scope.src.loop(f"for {i} in range({n})"):
        results = scope.inline(op, [*consts, *acc, *(_row(x, i) for x in xs)])
        # as a loop carry: a row of xs or a const the lambda returns is copied, since the
        # accumulator (and the reduce's result) is updated in place later
        owned = op.inputs[num_consts:num_consts + k]
        for name, result in zip(acc, scope.owned_outputs(op, results, owned)):
            scope.line(f"{name} = {result}")
        for out, name in zip(outs, acc):
            scope.line(f"{out}[{i}] = {name}")
    return outs if stacked else acc


@rule(reduce_p)
def _reduce(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    return _accumulate(scope, eqn, args, stacked=False)


@rule(scan_p)
def _scan(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    return _accumulate(scope, eqn, args, stacked=True)


# Per-thread partial histograms pay for a pass over threads × bins (filling and combining)
# to split the updates; below one update per bin that pass costs more than it splits.
PARTIAL_HISTOGRAMS_MIN_UPDATES_PER_BIN = 1


def partial_histograms(parallel: bool, monoid: str | None, bins: int, updates: int) -> bool:
    """Whether a ``hist`` runs as one partial histogram per thread, combined bin by bin in
    thread order: under ``parallel=True``, for an operator known to be a monoid (`op_kind`:
    regrouping the updates of another operator could change its result), with at least
    `PARTIAL_HISTOGRAMS_MIN_UPDATES_PER_BIN` updates per bin.

    >>> partial_histograms(True, "add", 10, 100000), partial_histograms(True, "add", 1000, 10)
    (True, False)
    >>> partial_histograms(True, None, 10, 100000), partial_histograms(False, "max", 10, 100000)
    (False, False)
    """
    return (parallel and monoid is not None
            and updates >= PARTIAL_HISTOGRAMS_MIN_UPDATES_PER_BIN * bins)


@rule(hist_p)
def _hist(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    num_consts = eqn.params["num_consts"]
    consts = args[:num_consts]
    _, neutral, indices, values = args[num_consts:]
    dest = eqn.inputs[num_consts]
    size = dest.type.shape[0]
    m = eqn.inputs[num_consts + 2].type.shape[0]
    target = scope.writable(dest)

    def update(row: Callable[[str], str], start: str, stop: str) -> None:
        j, t = scope.fresh("j"), scope.fresh("t")
        with scope.src.block(f"for {j} in range({start}, {stop})"):
            scope.line(f"{t} = {indices}[{j}]")
            with scope.src.block(f"if 0 <= {t} < {size}"):
                (result,) = scope.inline(eqn.params["op"],
                                         [*consts, row(t), _row(values, j)])
                scope.line(f"{row(t)} = {result}")

    monoid = op_kind(eqn.params["op"], num_consts)
    if not partial_histograms(scope.options.parallel, monoid, size, m):
        update(lambda t: _row(target, t), "0", str(m))
        return [target]
    # each thread reduces its block of updates into its own histogram (no races), then each
    # bin folds the threads' histograms in order. The count is fixed when the code is
    # generated: numba.get_num_threads() inside compiled code keeps it from being cached.
    threads = min(numba.get_num_threads(), m)
    part, c, z = scope.fresh("part"), scope.fresh("c"), scope.fresh("z")
    start, stop = scope.fresh("start"), scope.fresh("stop")
    scope.line(f"{part} = {empty((threads, *dest.type.shape), dest.type.np_dtype)}")
    with scope.src.block(f"for {c} in prange({threads})"):
        with scope.src.block(f"for {z} in range({size})"):
            scope.line(f"{part}[{c}, {z}] = {neutral}")
        scope.line(f"{start} = {c} * {m} // {threads}")
        scope.line(f"{stop} = ({c} + 1) * {m} // {threads}")
        update(lambda t: f"{part}[{c}, {t}]", start, stop)
    with scope.src.block(f"for {z} in prange({size})"):
        with scope.src.block(f"for {c} in range({threads})"):
            (result,) = scope.inline(eqn.params["op"],
                                     [*consts, _row(target, z), f"{part}[{c}, {z}]"])
            scope.line(f"{target}[{z}] = {result}")
    return [target]


@rule(scatter_p)
def _scatter(scope: Scope, eqn: Eqn, args: list[str]) -> list[str]:
    _, indices, values = args
    size = eqn.inputs[0].type.shape[0]
    m = eqn.inputs[1].type.shape[0]
    target = scope.writable(eqn.inputs[0])
    j, t = scope.fresh("j"), scope.fresh("t")
    with scope.src.block(f"for {j} in range({m})"):
        scope.line(f"{t} = {indices}[{j}]")
        with scope.src.block(f"if 0 <= {t} < {size}"):
            scope.line(f"{target}[{t}] = {values}[{j}]")
    return [target]
