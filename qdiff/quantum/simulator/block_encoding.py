"""Encoding a gate sequence for the Numba block kernel (:mod:`.numba_block_kernels`).

The structure of a block (which gates on which wires) is encoded once and cached: the op
kinds, masks and pool offsets, and which one-qubit gates fold into one 2x2. Each call only
computes the matrices from the parameters: every run of one-qubit gates of the block is
multiplied into its 2x2 in one compiled call (:func:`fill_folds`), and a merged diagonal of
phase gates (rz, phase, crz, cphase, rzz: each entry a constant times ``e^{ikθ}``) is one
``exp`` of a small matrix-vector product of its angles.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..lang.gate_forms import GateForm, gate_form
from ..lang.gates import GateSpec, gate_spec

__all__ = ["encode_block", "in_precision", "op_table", "OP_DENSE1", "OP_DENSE2", "OP_DENSEK",
           "OP_DIAG", "OP_PERM", "OP_REAL1", "OP_REAL2", "OP_XPAIR"]

OP_DENSE1, OP_DENSE2, OP_DENSEK, OP_DIAG, OP_PERM, OP_REAL1, OP_REAL2, OP_XPAIR = range(8)
"""Op kinds of the block kernel (see :func:`encode_block`)."""

MAX_ROWMAP_BITS = 12
"""Widest block whose diagonal gates move past permutations (a row map of 2^k entries per
diagonal gate); wider blocks apply a waiting diagonal before each permutation."""

@dataclass(eq=False)
class _Skeleton:
    keep: tuple[Any, ...]  # gates named by id() in the cache key stay alive with the entry
    kinds: np.ndarray
    cmasks: np.ndarray
    ntg: np.ndarray
    tgts: np.ndarray
    moffs: np.ndarray
    perm: np.ndarray
    poffs: np.ndarray
    pool_fixed: np.ndarray  # the pool with constant data filled in
    # runs of one-qubit gates multiplied into one 2x2 (see _FoldTable)
    folds: _FoldTable
    # multi-qubit ops computed at every call: (entry number, op index, form, kind), kind
    # "dense" | "perm" for parametric table gates (their sparse form's data), "matrix" for
    # raw matrices (no form)
    dynamic: list[tuple[int, int, GateForm | None, str]]
    # merged diagonals: (pool offset, size, [([(form, op index)], control ok, index)],
    # phase-linear form or None): each item's diagonal d (2^targets) enters as d[index]
    # where its controls are 1; see _phase_linear_diagonal for the last field
    diagonals: list[tuple[int, int, list[tuple[list[tuple[GateForm, int]], np.ndarray,
                                               np.ndarray]], _LinearDiagonal | None]]


@dataclass(eq=False)
class _LinearDiagonal:
    """A merged diagonal whose entries are ``constant * exp(i * slopes @ θ)``, ``θ`` the
    angles of the ops ``angle_ops`` (one each)."""
    constant: np.ndarray  # [size] complex
    slopes: np.ndarray  # [size, len(angle_ops)]
    angle_ops: list[int]  # op indices


_PHASE_PROBES = (0.37, -2.9, 7.3)

_PHASE_LINEAR: dict[int, tuple[GateForm, tuple[np.ndarray, np.ndarray] | None]] = {}


def _phase_linear(form: GateForm) -> tuple[np.ndarray, np.ndarray] | None:
    """``(c, k)`` with ``form.data(θ) = c * exp(i k θ)`` for every angle, for a diagonal form
    of one parameter whose entries are such phases (rz, p, crz, rzz, cp, mcphase, ...):
    ``k`` read off ``θ = 1`` and checked at other angles; else None.

    >>> c, k = _phase_linear(gate_form(gate_spec("rz")))
    >>> c.real.tolist(), k.tolist()
    ([1.0, 1.0], [-0.5, 0.5])
    """
    hit = _PHASE_LINEAR.get(id(form))
    if hit is not None and hit[0] is form:
        return hit[1]
    result = None
    if form.kind == "diagonal" and form.spec.num_params == 1:
        c = np.asarray(form.data(0.0), np.complex128)
        k = np.angle(np.asarray(form.data(1.0), np.complex128) / c)
        if all(np.allclose(form.data(t), c * np.exp(1j * k * t), rtol=0, atol=1e-13)
               for t in _PHASE_PROBES):
            result = (c, k)
    if len(_PHASE_LINEAR) > 1024:
        _PHASE_LINEAR.clear()
    _PHASE_LINEAR[id(form)] = (form, result)
    return result


def _phase_linear_diagonal(size: int, items: list[tuple[list[tuple[GateForm, int]],
                                                        np.ndarray, np.ndarray]]
                           ) -> _LinearDiagonal | None:
    """A merged diagonal as one phase per entry, linear in its gates' angles (one ``exp``
    of a small matrix-vector product per call instead of a product per gate), when every
    gate in it is constant or phase-linear (:func:`_phase_linear`)."""
    constant = np.ones(size, np.complex128)
    columns: list[np.ndarray] = []
    angle_ops: list[int] = []
    for parts, ok, idx in items:
        for form, i in parts:
            if form.spec.num_params == 0:
                constant *= np.where(ok, form.data()[idx], 1)
                continue
            linear = _phase_linear(form)
            if linear is None:
                return None
            c, k = linear
            constant *= np.where(ok, c[idx], 1)
            columns.append(np.where(ok, k[idx], 0.0))
            angle_ops.append(i)
    slopes = np.stack(columns, axis=1) if columns else np.zeros((size, 0))
    return _LinearDiagonal(constant, slopes, angle_ops)


FOLD_REAL, FOLD_COMPLEX, FOLD_FIXED, FOLD_XFIXED = range(4)
"""Modes of a run of one-qubit gates multiplied into one 2x2: its op's kind follows the
product (diagonal, anti-diagonal or full; real or complex), or is fixed: one half of a pair
of real runs (``OP_REAL2``, real entries) or of rx-like runs (``OP_XPAIR``)."""

LINK_CONSTANT, LINK_ROTATION, LINK_MATRIX = range(3)
"""How a gate of a run enters the product: a constant 2x2, a Pauli rotation
``cos(θ/2) I - i sin(θ/2) P`` of an angle, or a 2x2 computed at every call (a raw matrix,
or a parametric gate that is no Pauli rotation, such as ``u``)."""

_PAULI_CODES = {"I": 0, "X": 1, "Y": 2, "Z": 3}


@dataclass(eq=False)
class _FoldTable:
    """The runs of one-qubit gates of a block, each multiplied into one 2x2 at every call
    by :func:`fill_folds` (one compiled call for all runs of the block)."""
    entries: np.ndarray  # [runs] op number of each run
    offsets: np.ndarray  # [runs] pool offset of its 2x2
    modes: np.ndarray  # [runs] FOLD_*
    starts: np.ndarray  # [runs + 1] its gates: links[starts[r]:starts[r + 1]], first applied first
    kinds: np.ndarray  # [links] LINK_*
    paulis: np.ndarray  # [links] the rotation's Pauli (_PAULI_CODES)
    args: np.ndarray  # [links] index into the call's angles (rotations) or matrices
    constants: np.ndarray  # [links, 2, 2] the constant gates' matrices
    rotation_ops: list[int]  # op index of each rotation's angle
    matrix_ops: list[tuple[int, Any]]  # (op index, spec or None: a raw matrix) per matrix


def _fold_table(runs: list[tuple[int, int, int, list[int]]], specs: list[GateSpec | None]
                ) -> _FoldTable:
    """The table of ``runs``: (op number, pool offset, FOLD_* mode, op indices in order)."""
    starts, kinds, paulis, args, constants = [0], [], [], [], []
    rotation_ops: list[int] = []
    matrix_ops: list[tuple[int, Any]] = []
    for _, _, _, chain in runs:
        for i in chain:
            spec = specs[i]
            constant = np.eye(2, dtype=np.complex128)
            pauli = 0
            if spec is not None and spec.num_params == 0:
                kind, arg, constant = LINK_CONSTANT, 0, spec.matrix()
            elif spec is not None and spec.num_params == 1 and spec.pauli_word is not None:
                kind, arg, pauli = LINK_ROTATION, len(rotation_ops), _PAULI_CODES[spec.pauli_word]
                rotation_ops.append(i)
            else:
                kind, arg = LINK_MATRIX, len(matrix_ops)
                matrix_ops.append((i, spec))
            kinds.append(kind)
            paulis.append(pauli)
            args.append(arg)
            constants.append(constant)
        starts.append(len(kinds))
    return _FoldTable(np.array([r[0] for r in runs], np.int64),
                      np.array([r[1] for r in runs], np.int64),
                      np.array([r[2] for r in runs], np.int64), np.array(starts, np.int64),
                      np.array(kinds, np.int64), np.array(paulis, np.int64),
                      np.array(args, np.int64),
                      np.array(constants, np.complex128).reshape(len(kinds), 2, 2),
                      rotation_ops, matrix_ops)


@njit(cache=True, nogil=True)
def fill_folds(pool, kinds, table_entries, offsets, modes, starts, link_kinds, paulis, args,
               constants, angles, matrices):
    # each run's product G_last ... G_first, written to the pool as its op reads it:
    # m00, m01, m10, m11 (real parts for FOLD_FIXED); a diagonal product as d0, d1 and an
    # anti-diagonal one as the phases of |0>, |1> (m10, m01), with the op kind set to match
    for r in range(table_entries.shape[0]):
        a, b, c, d = 1.0 + 0j, 0j, 0j, 1.0 + 0j
        for g in range(starts[r], starts[r + 1]):
            if link_kinds[g] == LINK_ROTATION:
                half = 0.5 * angles[args[g]]
                co, si = np.cos(half), np.sin(half)
                p = paulis[g]
                if p == 0:  # I
                    e, f, h, k = complex(co, -si), 0j, 0j, complex(co, -si)
                elif p == 1:  # X
                    e, f, h, k = complex(co, 0.0), complex(0.0, -si), complex(0.0, -si), \
                        complex(co, 0.0)
                elif p == 2:  # Y
                    e, f, h, k = complex(co, 0.0), complex(-si, 0.0), complex(si, 0.0), \
                        complex(co, 0.0)
                else:  # Z
                    e, f, h, k = complex(co, -si), 0j, 0j, complex(co, si)
            elif link_kinds[g] == LINK_CONSTANT:
                e, f, h, k = constants[g, 0, 0], constants[g, 0, 1], constants[g, 1, 0], \
                    constants[g, 1, 1]
            else:  # LINK_MATRIX
                m = matrices[args[g]]
                e, f, h, k = m[0, 0], m[0, 1], m[1, 0], m[1, 1]
            a, b, c, d = e * a + f * c, e * b + f * d, h * a + k * c, h * b + k * d
        o = offsets[r]
        mode = modes[r]
        if mode == FOLD_FIXED:  # the real half of a pair of real runs
            pool[o], pool[o + 1], pool[o + 2], pool[o + 3] = a.real, b.real, c.real, d.real
            continue
        if mode == FOLD_XFIXED:
            pool[o], pool[o + 1], pool[o + 2], pool[o + 3] = a, b, c, d
            continue
        q = table_entries[r]
        if b == 0 and c == 0:
            kinds[q] = OP_DIAG  # d0, d1
            pool[o], pool[o + 1], pool[o + 2], pool[o + 3] = a, d, c, d
        elif a == 0 and d == 0:
            kinds[q] = OP_PERM  # the phases of |0>, |1>
            pool[o], pool[o + 1], pool[o + 2], pool[o + 3] = c, b, c, d
        else:
            kinds[q] = OP_REAL1 if mode == FOLD_REAL else OP_DENSE1
            pool[o], pool[o + 1], pool[o + 2], pool[o + 3] = a, b, c, d


def _split(form: GateForm, wires: tuple[int, ...]) -> tuple[tuple[int, ...],
                                                             tuple[int, ...], str]:
    """(controls, targets, kind) of one table gate on ``wires``, from its sparse form."""
    kind = {"diagonal": "diag", "permutation": "perm"}.get(form.kind, "dense")
    return (tuple(wires[j] for j in form.controls), tuple(wires[j] for j in form.targets),
            kind)


def op_table(count: int, width: int) -> tuple[np.ndarray, ...]:
    """The zeroed op arrays of ``count`` ops of a block kernel (this one's and the adjoint
    one's): kinds, control masks, numbers of targets, target masks ``[count, width]``, pool
    offsets, perm offsets."""
    return (np.zeros(count, np.int64), np.zeros(count, np.int64), np.zeros(count, np.int64),
            np.zeros((count, width), np.int64), np.zeros(count, np.int64),
            np.zeros(count, np.int64))


def _probes(spec: GateSpec) -> list[np.ndarray]:
    return [spec.matrix(*p) for p in ([()] if spec.num_params == 0 else
                                      [(0.37,) * spec.num_params, (-1.9,) * spec.num_params])]


def _always_real(spec: GateSpec) -> bool:
    """Whether a one-qubit table gate's matrix is real for every parameter (ry, h, x, z)."""
    return all(not np.any(m.imag) for m in _probes(spec))


def _always_xtype(spec: GateSpec) -> bool:
    """Whether a one-qubit table gate's matrix has a real diagonal and an imaginary
    off-diagonal for every parameter (rx): products of such matrices keep that form, and
    apply with the arithmetic of a real matrix."""
    return all(not np.any(m[[0, 1], [0, 1]].imag) and not np.any(m[[0, 1], [1, 0]].real)
               for m in _probes(spec))


def _hoisted(ops: Sequence[tuple[Any, tuple[int, ...]]]) -> list[int]:
    """The op indices with every one-qubit gate moved as early as it commutes: just after the
    last earlier multi-qubit gate on its wire (it passes gates on other wires only), so that
    the runs of a layer wait together and pair up (h, rzz, ... gathers the h layer first).

    >>> _hoisted([("rzz", (0, 1)), ("h", (2,)), ("rx", (0,)), ("rzz", (1, 2)), ("h", (0,))])
    [1, 0, 2, 4, 3]
    """
    last: dict[int, int] = {}
    keys: list[float] = []
    for index, (_, wires) in enumerate(ops):
        if len(wires) == 1:
            keys.append(last.get(wires[0], -1) + 0.5)
            continue
        keys.append(index)
        for w in wires:
            last[w] = index
    return sorted(range(len(ops)), key=lambda i: (keys[i], i))


def _skeleton(ws: tuple[int, ...], ops: list[tuple[Any, tuple[int, ...]]]) -> _Skeleton:
    # the ops encoded in their order and with their one-qubit gates hoisted (_hoisted): the
    # encoding with fewer sweeps over the buffer (ops that are not row permutations) is kept
    # (hoisting gathers an h, rzz, rx ladder into pairs, but scatters the runs of a layer
    # between the cx gates of an efficient_su2)
    given = _build_skeleton(ws, ops, range(len(ops)))
    hoisted = _build_skeleton(ws, ops, _hoisted(ops))
    return min((given, hoisted), key=lambda skel: int(np.sum(skel.kinds != OP_PERM)))


def _build_skeleton(ws: tuple[int, ...], ops: list[tuple[Any, tuple[int, ...]]],
                    order: Sequence[int]) -> _Skeleton:
    # Encoding order (the ops in `order`, a reordering that only moves gates past gates
    # they commute with): one-qubit gates wait on their wire (pending) until a multi-qubit
    # gate comes that does not commute with them (see below); then every wire's run is
    # emitted, split into its part up to the last
    # non-diagonal gate (a real or complex 2x2) and its trailing diagonal gates, which join
    # the diagonal gates of all wires, and diagonal multi-qubit gates, in ONE diagonal op.
    local = {w: j for j, w in enumerate(ws)}
    entries: list[list[Any]] = []  # [kind, cmask, tmasks, size, payload]
    pending: dict[int, list[int]] = {}
    # diagonal gates waiting: (ops, cmask, tbits, rowmap), rowmap None or the map from a row
    # to the row the item reads (the permutations it was moved past, see pass_permutation)
    diag_items: list[tuple[list[int], int, tuple[int, ...], np.ndarray | None]] = []
    support: set[int] = set()  # the row bits the waiting diagonal depends on
    specs: list[GateSpec | None] = [None] * len(ops)  # by op index
    forms: list[GateForm | None] = [None] * len(ops)
    info: list[tuple[str, bool, bool]] = [("", False, False)] * len(ops)  # kind, real,
    # rx-like (_always_xtype), by op index

    def add_diagonal(op_indices: list[int], cmask: int, tbits: tuple[int, ...]) -> None:
        diag_items.append((op_indices, cmask, tbits, None))
        support.update(tbits)
        support.update(b for b in range(len(ws)) if cmask >> b & 1)

    def emit_diagonal() -> None:
        if diag_items:
            bits = sorted(support)
            entries.append(["diagonal", 0, tuple(1 << b for b in bits), 1 << len(bits),
                            (bits, list(diag_items))])
            diag_items.clear()
            support.clear()

    def pass_permutation(index: int, cmask: int, tbits: tuple[int, ...]) -> bool:
        # the waiting diagonal D moved past the permutation P (row t to perm[t], its phases
        # commute with D): P D = D' P with D'(r) = D(P^-1 r), so each item reads its row
        # through P^-1; False (nothing moved) on a block too wide for the row maps
        if not support.intersection(tbits):
            return True  # D does not read P's targets: they commute as they are
        if len(ws) > MAX_ROWMAP_BITS:
            return False
        perm = forms[index].perm
        inverse = np.argsort(np.asarray(perm, np.int64))
        rows = np.arange(1 << len(ws), dtype=np.int64)
        pattern = sum(((rows >> b) & 1) << j for j, b in enumerate(tbits))
        moved = rows & ~sum(1 << b for b in tbits)
        for j, b in enumerate(tbits):
            moved |= ((inverse[pattern] >> j) & 1) << b
        back = np.where((rows & cmask) == cmask, moved, rows)
        for k, (op_indices, icmask, itbits, rowmap) in enumerate(diag_items):
            diag_items[k] = (op_indices, icmask, itbits,
                             back if rowmap is None else rowmap[back])
        support.update(tbits)
        support.update(b for b in range(len(ws)) if cmask >> b & 1)
        return True

    def flush_all() -> None:
        if diag_items and any(info[i][0] != "diag" for bit, chain in pending.items()
                              if bit in support for i in chain):
            emit_diagonal()  # diagonals gathered before the pending runs' 2x2s on their
            # wires come first (runs on other wires commute with them)
        real_heads: list[tuple[int, list[int]]] = []
        x_heads: list[tuple[int, list[int]]] = []
        lasts = {bit: max((k for k, i in enumerate(chain) if info[i][0] != "diag"), default=-1)
                 for bit, chain in pending.items()}
        # a lone diagonal tail (no other diagonal waiting, no other run ending in one) would
        # cost a sweep of its own: it folds into its run's 2x2 instead (ry, rz then a cx, as
        # an ansatz's staircase of blocks has them: one complex sweep, not a real one and a
        # diagonal one)
        tails = [bit for bit, chain in pending.items() if lasts[bit] < len(chain) - 1]
        lone = not diag_items and len(tails) == 1
        for bit in sorted(pending):
            chain = pending[bit]
            head, tail = chain[:lasts[bit] + 1], chain[lasts[bit] + 1:]
            if head and (lone and tail or not all(info[i][1] for i in head)):
                head, tail = chain, []  # a complex 2x2 anyway: fold the diagonals into it
            if head and all(info[i][1] for i in head) and not all(
                    info[i][0] in ("perm", "diag") for i in head):
                real_heads.append((bit, head))  # (x, z, ... alone cost nothing: not paired)
            elif head and all(info[i][2] for i in head):
                x_heads.append((bit, head))
            elif head:
                entries.append(["fold", 0, (1 << bit,), 4, head])
            if tail:
                add_diagonal(tail, 0, (bit,))
        # real runs two by two, and runs of rx-like gates two by two: one sweep each
        for pairs, runs in (("fold2", real_heads), ("xpair", x_heads)):
            for k in range(0, len(runs) - 1, 2):
                (a, head_a), (b, head_b) = runs[k], runs[k + 1]
                entries.append([pairs, 0, (1 << a, 1 << b), 8, (head_a, head_b)])
            if len(runs) % 2:
                bit, head = runs[-1]
                entries.append(["fold", 0, (1 << bit,), 4, head])
        pending.clear()

    for index in order:
        gate, wires = ops[index]
        if any(w not in local for w in wires):
            raise ValueError(f"fused gate on wires {ws}: a gate acts on {wires}, outside them")
        if isinstance(gate, np.ndarray):
            m = np.asarray(gate, np.complex128)
            if m.shape != (1 << len(wires),) * 2:
                raise ValueError(f"a matrix of shape {m.shape} cannot act on wires {wires}")
            spec, form, controls, targets, kind = None, None, (), wires, "matrix"
            real = xtype = False
        else:
            spec = gate_spec(gate)
            if len(wires) != spec.num_qubits:
                raise ValueError(f"gate {spec.name!r} acts on {spec.num_qubits} wire(s), "
                                 f"got {wires}")
            form = gate_form(spec)
            controls, targets, kind = _split(form, wires)
            real = not controls and len(targets) == 1 and _always_real(spec)
            xtype = not controls and len(targets) == 1 and _always_xtype(spec)
        specs[index], forms[index], info[index] = spec, form, (kind, real, xtype)
        if not controls and len(targets) == 1:
            pending.setdefault(local[targets[0]], []).append(index)
            continue
        cbits = [local[w] for w in controls]
        tbits = tuple(local[w] for w in targets)
        cmask = sum(1 << b for b in cbits)
        # a diagonal gate commutes with the runs waiting on other wires and with diagonal
        # runs on its own: those keep waiting (an rzz, rx, rzz, rx, ... ladder gathers its
        # rx into pairs); any other gate, or a run on its wires that is not diagonal, first
        # flushes every run
        if kind != "diag" or any(info[i][0] != "diag" for b in (*cbits, *tbits)
                                 for i in pending.get(b, ())):
            flush_all()
        if kind == "diag":
            add_diagonal([index], cmask, tbits)
            continue
        # the waiting diagonal moves past a permutation (a cx ladder leaves one diagonal per
        # layer instead of one per gate) and past a dense gate off its wires
        if kind == "perm":
            if not pass_permutation(index, cmask, tbits):
                emit_diagonal()
        elif support.intersection(tbits):
            emit_diagonal()
        size = (1 << len(tbits)) ** (2 if kind in ("dense", "matrix") else 1)
        entries.append([kind, cmask, tuple(1 << b for b in tbits), size, index])
    flush_all()
    emit_diagonal()

    count = len(entries)
    width = max([len(e[2]) for e in entries] + [1])
    kinds, cmasks, ntg, tgts, moffs, poffs = op_table(count, width)
    perms: list[int] = [1, 0]  # slot 0: the swap of a folded anti-diagonal 2x2
    size = 0
    runs: list[tuple[int, int, int, list[int]]] = []  # see _fold_table
    dynamic: list[tuple[int, int, GateForm | None, str]] = []
    diagonals: list[tuple[int, int, list[tuple[list[tuple[GateForm, int]], np.ndarray,
                                               np.ndarray]], _LinearDiagonal | None]] = []
    fixed: list[tuple[int, np.ndarray]] = []
    for q, (kind, cmask, tmasks, sz, payload) in enumerate(entries):
        m = len(tmasks)
        cmasks[q], ntg[q], moffs[q] = cmask, m, size
        tgts[q, :m] = tmasks
        size += sz
        if kind in ("fold", "fold2", "xpair"):
            halves = [payload] if kind == "fold" else list(payload)
            if kind != "fold":
                kinds[q] = OP_REAL2 if kind == "fold2" else OP_XPAIR
            for half, chain in enumerate(halves):
                mode = (FOLD_FIXED if kind == "fold2" else FOLD_XFIXED if kind == "xpair" else
                        FOLD_REAL if all(info[i][1] for i in chain) else FOLD_COMPLEX)
                runs.append((q, int(moffs[q]) + 4 * half, mode, chain))
            continue
        if kind == "diagonal":
            kinds[q] = OP_DIAG
            bits, items = payload
            t = np.arange(1 << len(bits))
            rows = sum(((t >> j) & 1) << b for j, b in enumerate(bits))  # local row bits
            expanded = []
            for op_indices, icmask, tbits, rowmap in items:
                read = rows if rowmap is None else rowmap[rows]
                ok = (read & icmask) == icmask
                idx = sum(((read >> b) & 1) << j for j, b in enumerate(tbits))
                expanded.append(([(forms[i], i) for i in op_indices], ok, idx))
            linear = _phase_linear_diagonal(sz, expanded)  # then the items are not kept
            diagonals.append((int(moffs[q]), sz, [] if linear else expanded, linear))
            continue
        kinds[q] = {"perm": OP_PERM}.get(
            kind, OP_DENSE1 if m == 1 else OP_DENSE2 if m == 2 else OP_DENSEK)
        form = forms[payload]
        if kind == "perm":
            assert form is not None and form.perm is not None
            poffs[q] = len(perms)
            perms.extend(form.perm)
        if form is None:  # a raw matrix, read at every call: the array may change in place
            dynamic.append((q, payload, None, kind))
        elif form.spec.num_params == 0:
            fixed.append((q, np.ravel(form.data())))
        else:
            dynamic.append((q, payload, form, kind))
    pool = np.zeros(max(size, 1), np.complex128)
    for q, data in fixed:
        pool[moffs[q]:moffs[q] + data.size] = data
    keep = tuple(g for g, _ in ops if not isinstance(g, str))
    return _Skeleton(keep, kinds, cmasks, ntg, tgts, moffs, np.array(perms, np.int64), poffs,
                     pool, _fold_table(runs, specs), dynamic, diagonals)


_SKELETONS: dict[Any, _Skeleton] = {}


def _angles(params: list[Any], op_indices: list[int]) -> np.ndarray:
    """The one angle of each of the ops ``op_indices`` (rotations, phase gates)."""
    return np.array([params[i][0] for i in op_indices], np.float64)


def encode_block(wires: Sequence[int], ops: Sequence[Any]) -> tuple[np.ndarray, ...]:
    """The op arrays of the block kernel for ``ops`` (``GateOp``s or ``(gate, wires, params)``
    with global wires, all inside ``wires``).

    Local row bit ``j`` is ``sorted(wires)[j]``. Runs of one-qubit gates on a wire are
    multiplied into one 2x2 (real when the gates are, like ``ry``: half the arithmetic, and
    real runs on two wires share one sweep; so do runs of ``rx``-like gates, a real diagonal
    and an imaginary off-diagonal, ``OP_XPAIR``, with the arithmetic of real ones); a
    product that is diagonal or anti-diagonal becomes a diagonal or row-permutation op.
    Diagonal gates (``rz`` after a real run, ``cz``, ``rzz``, ...) merge into one diagonal
    op over all their wires, which waits past permutations (conjugated by them) and past
    gates off its wires until a gate on its wires needs it; a lone ``rz`` after a real run,
    which would be a diagonal sweep of its own, folds into its run's 2x2 instead. Returns
    ``(kinds, cmasks, ntargets, targets, matrix offsets, matrix pool, perm pool, perm
    offsets)``; ``targets[q]`` holds row bit masks.

    >>> from qdiff.quantum.simulator.gate_ops import GateOp
    >>> layer = [GateOp(g, (w,), (0.3,)) for w in (0, 1) for g in ("ry", "rz")]
    >>> kinds, *_ = encode_block([0, 1, 2], layer + [GateOp("rx", (2,), (0.1,)),
    ...                                              GateOp("cx", (0, 1))])
    >>> kinds.tolist()  # the ry pair (real), rx (complex), cx a row permutation, then rz, rz
    [6, 0, 4, 3]
    >>> encode_block([0, 1], layer[:2] + [GateOp("cx", (0, 1))])[0].tolist()  # ry rz: one 2x2
    [0, 4]
    """
    ws = tuple(sorted(int(w) for w in wires))
    gates = [(op[0], tuple(op[1])) for op in ops]
    params = [op[2] if len(op) > 2 else () for op in ops]
    key = (ws, tuple([(g if isinstance(g, str) else id(g), w) for g, w in gates]))
    skel = _SKELETONS.get(key)
    if skel is None:
        skel = _skeleton(ws, gates)
        if len(_SKELETONS) > 2048:
            _SKELETONS.clear()
        _SKELETONS[key] = skel
    kinds = skel.kinds.copy()
    pool = skel.pool_fixed.copy()
    for q, index, form, _ in skel.dynamic:
        if form is None:
            data = np.asarray(gates[index][0], np.complex128).ravel()
        else:
            data = np.ravel(form.data(*params[index]))
        pool[skel.moffs[q]:skel.moffs[q] + data.size] = data
    folds = skel.folds
    if folds.entries.size:
        angles = _angles(params, folds.rotation_ops)
        matrices = np.array([np.asarray(gates[i][0] if spec is None else spec.matrix(*params[i]),
                                        np.complex128) for i, spec in folds.matrix_ops],
                            np.complex128).reshape(len(folds.matrix_ops), 2, 2)
        fill_folds(pool, kinds, folds.entries, folds.offsets, folds.modes, folds.starts,
                   folds.kinds, folds.paulis, folds.args, folds.constants, angles, matrices)
    for offset, size, items, linear in skel.diagonals:
        if linear is not None:
            theta = _angles(params, linear.angle_ops)
            pool[offset:offset + size] = linear.constant * np.exp(1j * (linear.slopes @ theta))
            continue
        d = np.ones(size, np.complex128)
        for parts, ok, idx in items:
            part = parts[0][0].data(*params[parts[0][1]])
            for form, i in parts[1:]:
                part = form.data(*params[i]) * part
            d *= np.where(ok, part[idx], 1)
        pool[offset:offset + size] = d
    return (kinds, skel.cmasks, skel.ntg, skel.tgts, skel.moffs, pool, skel.perm, skel.poffs)


def in_precision(arrays: tuple[np.ndarray, ...], dtype: Any) -> tuple[np.ndarray, ...]:
    """The block encoding ``arrays`` (as :func:`encode_block` returns them) with the pool of
    matrix entries in the state's ``dtype``: for complex64 states the block kernel then
    computes in float32 throughout (its buffers take the state's precision), twice the
    amplitudes per SIMD register; complex128 states get the arrays as they are.

    >>> arrays = encode_block((0,), [("h", (0,))])
    >>> in_precision(arrays, np.complex64)[5].dtype, in_precision(arrays, np.complex128)[5].dtype
    (dtype('complex64'), dtype('complex128'))
    """
    pool = arrays[5]
    if pool.dtype == dtype:
        return arrays
    return (*arrays[:5], pool.astype(dtype), *arrays[6:])
