"""Encoding a gate block for the adjoint block kernel (:mod:`.numba_adjoint_kernels`).

Fusions inside a block: a run of diagonal gates (rz, phase, cz, crz, rzz, ...) is one
diagonal over the block's rows, and since diagonal gates commute with each other and with
their generators, every derivative of the run is a weighted sum of the row sums
``Im<λ_r|ψ_r>`` read in the same pass; a one-target gate takes its derivative in the pass
that applies its inverse; two uncontrolled one-target gates on different wires share a pass
over a quad of rows (in one loop when both are Y rotations, ry: a real 2x2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..lang.gate_forms import gate_form
from ..lang.gates import GateSpec, gate_spec
from ..lang.observables import PauliSum
from .block_encoding import op_table
from .gate_ops import GateOp

__all__ = ["encode_adjoint_block", "MAX_ADJOINT_TARGETS", "A_DENSE1", "A_ROT1", "A_DENSEK",
           "A_DIAGRUN", "A_PERM", "A_ROT2", "G_NONE", "G_DIAG", "G_DENSE1", "G_DENSEK"]

MAX_ADJOINT_TARGETS = 3
"""Widest dense gate (targets) the adjoint block kernel takes; wider ones go gate by gate."""

A_DENSE1, A_ROT1, A_DENSEK, A_DIAGRUN, A_PERM, A_ROT2 = 0, 1, 2, 3, 4, 5
"""Step kinds of the block kernel: an inverse 2x2, the same with its gate's derivative in the
same pass, a 2^m x 2^m inverse, a run of diagonal gates with their derivatives, a
permutation, two uncontrolled one-target gates on different wires with their derivatives in
one pass (see :func:`encode_adjoint_block`)."""

G_NONE, G_DIAG, G_DENSE1, G_DENSEK = 0, 1, 2, 3
"""Generator kinds of a step whose derivative is taken in its own pass: none, diagonal,
2x2, 2^m x 2^m."""


# ---------------------------------------------------------------------------------------------
# encoding and the entry point
# ---------------------------------------------------------------------------------------------

_GENERATORS: dict[int, tuple[GateSpec, tuple[int, np.ndarray, bool]]] = {}


def _generator_parts(spec: GateSpec) -> tuple[int, np.ndarray, bool]:
    """``(number of controls c, G_base data, diagonal?)`` with ``G = |1..1><1..1| ⊗ G_base``
    (controls first): G_base's diagonal or its flattened matrix."""
    hit = _GENERATORS.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    if spec.structure == "controlled" and spec.base is not None \
            and spec.base.generator is not None:
        controls, g = spec.num_controls, spec.base.generator_matrix()
    elif spec.generator is not None:
        controls, g = 0, spec.generator_matrix()
    else:
        raise ValueError(f"adjoint block: gate {spec.name!r} has no generator")
    diagonal = not np.any(g - np.diag(np.diagonal(g)))
    data = np.ascontiguousarray(np.diagonal(g) if diagonal else g.ravel(), np.complex128)
    value = (controls, data, diagonal)
    if len(_GENERATORS) > 1024:
        _GENERATORS.clear()
    _GENERATORS[id(spec)] = (spec, value)
    return value


def _inverse_structure(spec: GateSpec, params: tuple[float, ...], wires: tuple[int, ...]
                       ) -> tuple[str, tuple[int, ...], tuple[int, ...], np.ndarray, Any]:
    """(kind, controls, targets, data, perm) of ``U(params)^†`` on ``wires``."""
    if spec.inverse_name is None:  # no table gate for the inverse: invert the sparse form
        return _inverse_form(spec, params, wires)
    inverse, inverse_params = spec.inverse(*params)
    controls: tuple[int, ...] = ()
    targets = wires
    if inverse.structure == "controlled":
        assert inverse.base is not None
        controls, targets = wires[:inverse.num_controls], wires[inverse.num_controls:]
        inverse = inverse.base
    if inverse.structure == "diagonal":
        return "diag", controls, targets, inverse.diagonal(*inverse_params), None
    if inverse.structure == "permutation":
        perm, phases = inverse.permutation()
        return "perm", controls, targets, np.asarray(phases, np.complex128), perm
    return "dense", controls, targets, inverse.matrix(*inverse_params), None


def _inverse_form(spec: GateSpec, params: tuple[float, ...], wires: tuple[int, ...]
                  ) -> tuple[str, tuple[int, ...], tuple[int, ...], np.ndarray, Any]:
    # U = phases[t] |perm[t]><t| on the targets: U^† = conj(phases[t]) |t><perm[t]|
    form = gate_form(spec)
    data = form.data(*params)
    controls = tuple(wires[j] for j in form.controls)
    targets = tuple(wires[j] for j in form.targets)
    if form.kind == "diagonal":
        return "diag", controls, targets, data.conj(), None
    if form.kind == "permutation":
        assert form.perm is not None
        perm = [0] * len(form.perm)
        phases = np.empty(len(form.perm), np.complex128)
        for t, r in enumerate(form.perm):
            perm[r] = t
            phases[r] = np.conj(data[t])
        return "perm", controls, targets, phases, tuple(perm)
    return "dense", controls, targets, np.ascontiguousarray(data.conj().T), None


_ROTATIONS: dict[int, tuple[GateSpec, np.ndarray | None, np.ndarray | None]] = {}


def _rotation_word(spec: GateSpec) -> tuple[np.ndarray | None, np.ndarray | None] | None:
    """For a Pauli rotation ``exp(-iθP/2)`` (also controlled; its inverse is itself at -θ):
    ``(diagonal of P, None)`` when P is diagonal, else ``(None, P)``, on the targets;
    ``None`` for other gates."""
    base = spec.base if spec.structure == "controlled" else spec
    if base is None or base.pauli_word is None or spec.inverse_name != spec.name:
        return None
    hit = _ROTATIONS.get(id(base))
    if hit is None or hit[0] is not base:
        word = PauliSum([(1.0, base.pauli_word)]).to_matrix()
        diagonal = base.structure == "diagonal"
        hit = (base, np.diagonal(word).real.copy() if diagonal else None,
               None if diagonal else word)
        _ROTATIONS[id(base)] = hit
    return hit[1], hit[2]


def _inverse_data(spec: GateSpec, params: tuple[float, ...],
                  wires: tuple[int, ...]) -> np.ndarray:
    """The data of ``U(params)^†`` that :func:`_inverse_structure` gives (matrix, diagonal or
    phases), for Pauli rotations (also controlled) straight from cos and sin."""
    word = _rotation_word(spec)
    if word is not None:
        theta = float(params[0])  # exp(-iθP/2)^† = cos(θ/2) + i sin(θ/2) P
        if word[0] is not None:
            return np.exp(0.5j * theta * word[0])
        assert word[1] is not None
        return math.cos(theta / 2) * np.eye(word[1].shape[0]) + 1j * math.sin(theta / 2) * word[1]
    return _inverse_structure(spec, params, wires)[3]


def _spread_index(tmasks: Sequence[int], cmask: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """For a diagonal on target row bits: the target pattern of every row of the block, and
    the rows where a control is 0 (the diagonal is 1 there)."""
    r = np.arange(size, dtype=np.int64)
    pattern = np.zeros(size, np.int64)
    for j, t in enumerate(tmasks):
        pattern |= ((r & t) != 0).astype(np.int64) << j
    return pattern, (r & cmask) != cmask


def _spread(data: np.ndarray, index: tuple[np.ndarray, np.ndarray], fill: complex) -> np.ndarray:
    out = np.asarray(data, np.complex128)[index[0]]
    out[index[1]] = fill
    return out


class _Skeleton:
    """What :func:`encode_adjoint_block` computes once per block structure: every array,
    and where the data of the parametric gates goes, filled at every call (`fill`).

    The inverse of a Pauli rotation, ``cos(θ/2) + i sin(θ/2) P``, is filled for all the
    block's rotations at once: ``pool[pos] = a cos(θ/2) + b sin(θ/2)``; a run of diagonal
    rotations is ``exp(i/2 Σ_k θ_k e_k)`` over the rows (e_k: the eigenvalues of gate k's
    word on each row, 0 where a control is off). Other parametric gates are filled one by
    one."""

    def __init__(self, specs: list[GateSpec], arrays: tuple[Any, ...], pool_at: int,
                 matrices: list[tuple[int, int, int]],
                 runs: list[tuple[int, np.ndarray, list[tuple[int, Any]]]]):
        self.specs = specs  # kept: the cache key holds their ids
        self.arrays = arrays
        self.pool_at = pool_at  # position of the matrix pool in arrays
        self.dynamic = bool(matrices or runs)
        rot_ops, positions, which, cos_part, sin_part = [], [], [], [], []
        self.matrices = []  # (op, pool offset, size) of the other parametric gates
        for k, offset, size in matrices:
            word = _rotation_word(specs[k])
            if word is None:
                self.matrices.append((k, offset, size))
                continue
            unit, pauli = ((np.ones(size), word[0]) if word[0] is not None
                           else (np.eye(word[1].shape[0]).ravel(), word[1].ravel()))
            positions.append(np.arange(offset, offset + size))
            which.append(np.full(size, len(rot_ops)))
            cos_part.append(unit.astype(np.complex128))
            sin_part.append(1j * pauli)
            rot_ops.append(k)
        self.rotations = None if not rot_ops else (
            rot_ops, np.concatenate(positions), np.concatenate(which),
            np.concatenate(cos_part), np.concatenate(sin_part))
        # (pool offset, product of the fixed gates' diagonals, rotations, their exponents
        #  e_k per row, other parametric gates with their spread index)
        self.runs = []
        for offset, fixed, parts in runs:
            rotations, exponents, others = [], [], []
            for k, index in parts:
                word = _rotation_word(specs[k])
                if word is not None and word[0] is not None:
                    rotations.append(k)
                    exponents.append(_spread(word[0], index, 0.0).real)
                else:
                    others.append((k, index))
            self.runs.append((offset, fixed, rotations,
                              np.array(exponents).reshape(len(rotations), fixed.size), others))

    def fill(self, ops: Sequence[GateOp]) -> tuple[Any, ...]:
        """The block's arrays with the angles of ``ops``."""
        arrays = list(self.arrays)
        pool = arrays[self.pool_at].copy()
        if self.rotations is not None:
            rot_ops, positions, which, cos_part, sin_part = self.rotations
            half = 0.5 * np.array([ops[k].params[0] for k in rot_ops], np.float64)
            pool[positions] = cos_part * np.cos(half)[which] + sin_part * np.sin(half)[which]
        for k, offset, size in self.matrices:
            op = ops[k]
            pool[offset:offset + size] = np.ravel(
                _inverse_data(self.specs[k], tuple(op.params), tuple(op.wires)))
        for offset, fixed, rotations, exponents, others in self.runs:
            diag = fixed.copy()
            if rotations:
                half = 0.5 * np.array([ops[k].params[0] for k in rotations], np.float64)
                diag *= np.exp(1j * (half @ exponents))
            for k, index in others:
                op = ops[k]
                diag *= _spread(_inverse_data(self.specs[k], tuple(op.params), tuple(op.wires)),
                                index, 1.0)
            pool[offset:offset + diag.size] = diag
        arrays[self.pool_at] = pool
        return tuple(arrays)


_SKELETONS: dict[tuple[Any, ...], _Skeleton | None] = {}


def encode_adjoint_block(wires: Sequence[int], ops: Sequence[GateOp], want: Sequence[bool],
                         filled: dict | None = None) -> tuple[Any, ...] | None:
    """The arrays of the block kernel for the forward gates ``ops`` (table gates by name or
    :class:`GateSpec`, all inside ``wires``), last gate first: each gate's inverse and, for
    ``want[k]``, its generator. ``None`` when a gate is too wide for the kernel (more dense
    targets than ``MAX_ADJOINT_TARGETS``).

    Steps: a run of diagonal gates becomes one diagonal over the block's rows whose
    derivatives are row sums (``A_DIAGRUN``); a one-target gate whose derivative is wanted
    takes it in the pass that applies its inverse (``A_ROT1``), and two of them on different
    wires share a pass (``A_ROT2``). Returns ``(number of derivative slots, kinds, cmasks,
    ntargets, targets, matrix offsets, matrix pool, perm pool, perm offsets, generator kinds,
    generator cmasks, generator ntargets, generator targets, generator offsets, generator
    pool, diagonal-run generator pool, slot counts, slot offsets, slots)``; targets hold row
    bit masks (row bit ``j`` is ``sorted(wires)[j]``); slot ``s`` is op ``len(ops) - 1 - s``.
    The structure is computed once per block shape and cached; a call fills in the angles,
    and keeps the filled block in ``filled`` when given (the sweeps of a Jacobian's rows go
    over the same blocks at the same angles).

    >>> arrays = encode_adjoint_block([0, 1], [GateOp("ry", (0,), (0.3,)),
    ...                                        GateOp("rz", (1,), (0.2,)),
    ...                                        GateOp("cx", (0, 1))], [True, True, False])
    >>> arrays[1].tolist()  # cx^† (a permutation), rz^† (a diagonal run), ry^† (with ry')
    [4, 3, 1]
    """
    ws = tuple(sorted(int(w) for w in wires))
    ops = [op if type(op) is GateOp else GateOp(*op) for op in ops]
    specs = [gate_spec(op.gate) for op in ops]
    key = (ws, tuple(map(id, specs)), tuple(tuple(op.wires) for op in ops),
           tuple(bool(wk) for wk in want))
    if key in _SKELETONS:
        skel = _SKELETONS[key]
        if skel is not None and any(a is not b for a, b in zip(skel.specs, specs)):
            skel = _build_skeleton(ws, ops, specs, want)
    else:
        skel = _build_skeleton(ws, ops, specs, want)
        if len(_SKELETONS) > 4096:
            _SKELETONS.clear()
        _SKELETONS[key] = skel
    if skel is None:
        return None
    if not skel.dynamic:
        return skel.arrays
    filled_key = (id(skel), tuple(tuple(op.params) for op in ops))
    if filled is not None:
        found = filled.get(filled_key)
        if found is not None and found[0] is skel:
            return found[1]
    arrays = skel.fill(ops)
    if filled is not None:
        filled[filled_key] = (skel, arrays)
    return arrays


def _build_skeleton(ws: tuple[int, ...], ops: list[GateOp], specs: list[GateSpec],
                    want: Sequence[bool]) -> _Skeleton | None:
    local = {w: j for j, w in enumerate(ws)}
    size = 1 << len(ws)
    raw = []
    for slot, k in enumerate(range(len(ops) - 1, -1, -1)):
        op, spec = ops[k], specs[k]
        wires = tuple(int(w) for w in op.wires)
        if not set(wires) <= set(local):
            raise ValueError(f"adjoint block on wires {ws}: a gate acts on {wires}, outside "
                             "them")
        kind, controls, targets, data, perm = _inverse_structure(spec, tuple(op.params), wires)
        if kind == "dense" and len(targets) > MAX_ADJOINT_TARGETS:
            return None
        gen = None
        if want[k]:
            nc, gdata, diagonal = _generator_parts(spec)
            if not diagonal and len(wires) - nc > MAX_ADJOINT_TARGETS:
                return None
            gen = (sum(1 << local[c] for c in wires[:nc]), [1 << local[t] for t in wires[nc:]],
                   gdata, diagonal)
        raw.append((kind, sum(1 << local[c] for c in controls),
                    [1 << local[t] for t in targets], data, perm, gen, slot, k))

    def diagonal_step(entry: tuple[Any, ...]) -> bool:
        return entry[0] == "diag" and (entry[5] is None or entry[5][3])

    # steps: (kind, cmask, target masks, data, perm, generator, slots, diagonal-run rows,
    #         parametric ops: [(op, offset in data, size)] or, for a run, (product of the
    #         fixed gates' diagonals, [(op, spread index)]))
    steps: list[tuple[Any, ...]] = []
    q = 0
    while q < len(raw):
        kind, cmask, tmasks, data, perm, gen, slot, k = raw[q]
        if diagonal_step(raw[q]):
            fixed = np.ones(size, np.complex128)
            rows, slots, parts = [], [], []
            while q < len(raw) and diagonal_step(raw[q]):
                _, cmask, tmasks, data, _, gen, slot, k = raw[q]
                index = _spread_index(tmasks, cmask, size)
                if specs[k].num_params:
                    parts.append((k, index))
                else:
                    fixed *= _spread(data, index, 1.0)
                if gen is not None:
                    rows.append(_spread(gen[2], _spread_index(gen[1], gen[0], size), 0.0).real)
                    slots.append(slot)
                q += 1
            diag = fixed.copy()
            for k, index in parts:
                op = ops[k]
                diag *= _spread(_inverse_data(specs[k], tuple(op.params), tuple(op.wires)),
                                index, 1.0)
            steps.append((A_DIAGRUN, 0, [], diag, None, None, slots, rows,
                          (fixed, parts) if parts else None))
            continue
        q += 1
        slots = [] if gen is None else [slot]
        dynamic = [(k, 0, np.size(data))] if specs[k].num_params else []
        if kind == "dense" and len(tmasks) == 1 and gen is not None and not gen[3] \
                and gen[1] == tmasks and gen[0] == cmask:
            steps.append((A_ROT1, cmask, tmasks, data, None, gen, slots, [], dynamic))
        elif kind == "dense":
            steps.append((A_DENSE1 if len(tmasks) == 1 else A_DENSEK, cmask, tmasks, data,
                          None, gen, slots, [], dynamic))
        elif kind == "perm":
            steps.append((A_PERM, cmask, tmasks, data, perm, gen, slots, [], dynamic))
        else:  # a diagonal gate whose generator is not diagonal: not a table gate
            return None
    # pairs of uncontrolled A_ROT1 steps on different wires: one step
    paired: list[tuple[Any, ...]] = []
    for step in steps:
        last = paired[-1] if paired else None
        if step[0] == A_ROT1 and step[1] == 0 and last is not None and last[0] == A_ROT1 \
                and last[1] == 0 and last[2] != step[2]:
            gen = (0, last[2] + step[2], np.concatenate([last[5][2], step[5][2]]), False)
            data = np.concatenate([np.ravel(last[3]), np.ravel(step[3])])
            dynamic = last[8] + [(k, offset + np.size(last[3]), n)
                                 for k, offset, n in step[8]]
            paired[-1] = (A_ROT2, 0, last[2] + step[2], data, None, gen, last[6] + step[6], [],
                          dynamic)
        else:
            paired.append(step)
    steps = paired
    count = len(steps)
    width = max([len(st[2]) for st in steps] + [1])
    gwidth = max([len(st[5][1]) for st in steps if st[5] is not None] + [1])
    kinds, cmasks, ntg, tgts, moffs, poffs = op_table(count, width)
    gkinds, gcmasks, gntg, gtgts, goffs, _ = op_table(count, gwidth)  # generators alike
    scount = np.zeros(count, np.int64)
    soffs = np.zeros(count, np.int64)
    pool: list[np.ndarray] = []
    gpool: list[np.ndarray] = []
    dpool: list[np.ndarray] = []
    perms: list[int] = []
    slot_list: list[int] = []
    matrices: list[tuple[int, int, int]] = []
    runs: list[tuple[int, np.ndarray, list[tuple[int, Any]]]] = []
    size_m = size_g = size_d = 0
    for q, (kind, cmask, tmasks, data, perm, gen, slots, rows, dynamic) in enumerate(steps):
        kinds[q] = kind
        cmasks[q] = cmask
        ntg[q] = len(tmasks)
        tgts[q, :len(tmasks)] = tmasks
        if kind == A_PERM:
            poffs[q] = len(perms)
            perms.extend(int(p) for p in perm)
        flat = np.ascontiguousarray(data, np.complex128).ravel()
        moffs[q] = size_m
        if kind == A_DIAGRUN:
            if dynamic is not None:
                runs.append((size_m, dynamic[0], dynamic[1]))
        else:
            for k, offset, n in dynamic:
                matrices.append((k, size_m + offset, n))
        pool.append(flat)
        size_m += flat.size
        scount[q] = len(slots)
        soffs[q] = len(slot_list)
        slot_list.extend(slots)
        if kind == A_DIAGRUN:
            goffs[q] = size_d
            for row in rows:
                dpool.append(row)
                size_d += row.size
        elif gen is not None:
            gcmask, gtmasks, gdata, diagonal = gen
            gm = len(gtmasks)
            gkinds[q] = G_DIAG if diagonal else G_DENSE1 if gm == 1 else G_DENSEK
            gcmasks[q] = gcmask
            gntg[q] = gm
            gtgts[q, :gm] = gtmasks
            goffs[q] = size_g
            gpool.append(gdata)
            size_g += gdata.size
    arrays = (len(ops), kinds, cmasks, ntg, tgts, moffs,
              np.concatenate(pool) if pool else np.zeros(1, np.complex128),
              np.array(perms or [0], np.int64), poffs, gkinds, gcmasks, gntg, gtgts, goffs,
              np.concatenate(gpool) if gpool else np.zeros(1, np.complex128),
              np.concatenate(dpool) if dpool else np.zeros(1),
              scount, soffs, np.array(slot_list or [0], np.int64))
    return _Skeleton(specs, arrays, 6, matrices, runs)
