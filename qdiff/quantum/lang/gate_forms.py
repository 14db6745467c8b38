"""The sparse form of a gate, read off its matrix: diagonal, a permutation with phases, or a
controlled sub-block (dense or a permutation) on fewer wires.

A simulator pays for a gate by the entries it multiplies. The gate table declares the
structure of its named gates, but gates that arrive as matrices (Qiskit's ``cswap``, ``ccx``,
``rccx``, ``c3sx``, ``csdg``, ``cu``, ``dcx``, ... are imported as ``unitary`` gates) are
``"dense"`` there. :func:`gate_form` looks at the matrix once per gate and finds:

- ``"diagonal"``: only diagonal entries; applied as phase multiplications, and diagonals
  merge into one diagonal.
- controls: gate wires ``j`` such that the matrix is the identity wherever bit ``j`` is 0;
  only the sub-block where every control is 1 is applied (a smaller block, on fewer
  amplitudes).
- ``"permutation"``: the sub-block has one nonzero entry per row and column,
  ``U|t> = phases[t] |perm[t]>``; applied as an index permutation with phases.
- ``"dense"``: anything else, on the targets only.

A parametric gate is read at two generic parameter points; its form is kept only when it
holds at both (its data is computed from its matrix at each call). Entries below
``SPARSE_ATOL`` in magnitude count as zero (rounding left by Qiskit's matrix products), so a
gate applied in its sparse form differs from its matrix by at most that much per entry.

>>> form = gate_form(gate_spec("unitary", matrix=_cswap()))
>>> form.kind, form.controls, form.targets, form.perm
('permutation', (0,), (1, 2), (0, 2, 1, 3))
>>> gate_form(gate_spec("cx")).kind, gate_form(gate_spec("rzz")).kind
('permutation', 'diagonal')
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import numpy as np

from .gates import GateSpec, gate_spec

__all__ = ["GateForm", "gate_form", "SPARSE_ATOL"]

SPARSE_ATOL = 1e-15
"""Magnitude below which a matrix entry counts as zero (and an identity entry as one)."""

FormKind = Literal["diagonal", "permutation", "dense"]

# two parameter points no table gate is special at (no multiple of pi/2 between them)
_PROBES = (0.7318, -2.0417, 1.3829)


@dataclass(frozen=True, eq=False)
class GateForm:
    """How to apply a gate sparsely: ``kind`` on the gate-local wires ``targets`` where every
    gate-local wire in ``controls`` is 1 (a diagonal has no controls: its entries equal to
    1 already say where it acts).

    ``perm`` (permutations): ``U|t> = phases[t] |perm[t]>`` on the targets' patterns (bit
    ``j`` of ``t`` is ``targets[j]``).
    """

    spec: GateSpec
    kind: FormKind
    controls: tuple[int, ...]
    targets: tuple[int, ...]
    perm: tuple[int, ...] | None = None
    via: GateForm | None = None  # a controlled gate's data: its base's form's

    @property
    def num_qubits(self) -> int:
        """The gate's wires (controls and targets).

        >>> gate_form(gate_spec("mcx", num_controls=2)).num_qubits
        3
        """
        return len(self.controls) + len(self.targets)

    def data(self, *params: float) -> np.ndarray:
        """The numbers to apply: the diagonal (``2^k``, all wires), the phases of the
        permutation, or the dense sub-block on the targets.

        >>> gate_form(gate_spec("ch")).data().round(4).tolist()
        [[(0.7071+0j), (0.7071+0j)], [(0.7071+0j), (-0.7071+0j)]]
        """
        if not params and self.spec.num_params == 0:
            return _fixed_data(self).copy()
        return _data(self, params)

    def select(self, matrix: np.ndarray) -> np.ndarray:
        """What `data` applies, read off a full matrix on the gate's wires (linear in it):
        its diagonal, the phases of the permutation, or the sub-block on the targets where
        every control is 1.

        >>> gate_form(gate_spec("crx")).select(np.arange(16.0).reshape(4, 4)).tolist()
        [[5.0, 7.0], [13.0, 15.0]]
        """
        if self.kind == "diagonal":
            return np.ascontiguousarray(np.diagonal(matrix))
        idx = _block_rows(self)
        sub = matrix[np.ix_(idx, idx)]
        if self.kind == "permutation":
            assert self.perm is not None
            return np.ascontiguousarray(sub[list(self.perm), range(len(self.perm))])
        return np.ascontiguousarray(sub)

    @functools.cached_property
    def cost(self) -> float:
        """Complex multiply-adds per amplitude of the register when applied in this form
        (a dense sub-block ``2^t`` per amplitude it acts on, a diagonal or the phases of a
        permutation at most one, a plain permutation none: it only moves amplitudes).

        >>> [gate_form(gate_spec(g)).cost for g in ("h", "cx", "ch", "cz", "rzz")]
        [2.0, 0.0, 1.0, 0.25, 1.0]
        """
        share = 0.5 ** len(self.controls)
        if self.kind == "dense":
            return float(1 << len(self.targets)) * share
        if self.spec.num_params:
            return share
        # fixed gates: only the entries other than 1 multiply
        return share * float(np.mean(self.data() != 1))


@functools.lru_cache(maxsize=4096)
def _fixed_data(form: GateForm) -> np.ndarray:
    return _data(form, ())


def _data(form: GateForm, params: tuple[float, ...]) -> np.ndarray:
    if form.via is not None:
        return _data(form.via, params)
    spec = form.spec
    if form.kind == "diagonal" and spec.structure == "diagonal":
        return spec.diagonal(*params)
    if form.kind == "diagonal" and spec.structure == "controlled":
        assert spec.base is not None  # ones, and the base's diagonal where the controls are 1
        d = np.ones(1 << spec.num_qubits, np.complex128)
        c = spec.num_controls
        d[(1 << c) - 1 | (np.arange(1 << spec.base.num_qubits) << c)] = _data(
            _form_of(spec.base), params)
        return d
    if form.kind == "permutation" and spec.structure == "permutation":
        return np.asarray(spec.permutation()[1], np.complex128)
    return form.select(spec.matrix(*params))


def _block_rows(form: GateForm) -> np.ndarray:
    # gate-local basis indices of the sub-block: every control 1, target pattern t
    cmask = sum(1 << c for c in form.controls)
    t = np.arange(1 << len(form.targets))
    return cmask | sum(((t >> j) & 1) << w for j, w in enumerate(form.targets))


def _cswap() -> np.ndarray:
    m = np.eye(8)
    m[[3, 5]] = m[[5, 3]]
    return m


@functools.lru_cache(maxsize=4096)
def _form_of(spec: GateSpec) -> GateForm:
    k = spec.num_qubits
    if spec.structure == "controlled":
        assert spec.base is not None
        base = _form_of(spec.base)
        c = spec.num_controls
        if base.kind == "diagonal":
            return GateForm(spec, "diagonal", (), tuple(range(k)))
        return GateForm(spec, base.kind, tuple(range(c)) + tuple(c + w for w in base.controls),
                        tuple(c + w for w in base.targets), base.perm, via=base)
    if spec.structure == "diagonal":
        return GateForm(spec, "diagonal", (), tuple(range(k)))
    if spec.structure == "permutation":
        return GateForm(spec, "permutation", (), tuple(range(k)), spec.permutation()[0])
    probes = [()] if spec.num_params == 0 else [
        tuple(_PROBES[(i + s) % len(_PROBES)] for i in range(spec.num_params)) for s in (0, 1)]
    forms = [_read(spec, spec.matrix(*p)) for p in probes]
    if any(f != forms[0] for f in forms[1:]):
        return GateForm(spec, "dense", (), tuple(range(k)))
    kind, controls, targets, perm = forms[0]
    return GateForm(spec, kind, controls, targets, perm)


def _read(spec: GateSpec, m: np.ndarray) -> tuple:
    """(kind, controls, targets, perm) of one matrix."""
    k = spec.num_qubits
    nonzero = np.abs(m) > SPARSE_ATOL
    if not np.any(nonzero & ~np.eye(m.shape[0], dtype=bool)):
        return ("diagonal", (), tuple(range(k)), None)
    rows = np.arange(m.shape[0])
    eye = np.eye(m.shape[0])
    controls = []
    for j in range(k):
        off = ((rows >> j) & 1) == 0  # the matrix is the identity on these rows and columns
        if (np.abs(m[:, off] - eye[:, off]).max() <= SPARSE_ATOL
                and np.abs(m[off, :] - eye[off, :]).max() <= SPARSE_ATOL):
            controls.append(j)
    targets = tuple(j for j in range(k) if j not in controls)
    form = GateForm(spec, "dense", tuple(controls), targets)
    idx = _block_rows(form)
    sub = nonzero[np.ix_(idx, idx)]
    if np.all(sub.sum(axis=0) == 1) and np.all(sub.sum(axis=1) == 1):
        return ("permutation", tuple(controls), targets, tuple(int(r) for r in
                                                              np.argmax(sub, axis=0)))
    return ("dense", tuple(controls), targets, None)


def gate_form(gate: str | GateSpec) -> GateForm:
    """The sparse form of a table gate (name or spec), computed once per spec.

    >>> f = gate_form(gate_spec("mcx", num_controls=3)); f.kind, f.controls, f.targets
    ('permutation', (0, 1, 2), (3,))
    >>> import numpy as np
    >>> c3sx = np.eye(16, dtype=complex)
    >>> c3sx[np.ix_([7, 15], [7, 15])] = gate_spec("sx").matrix()
    >>> f = gate_form(gate_spec("unitary", matrix=c3sx)); f.kind, f.controls, f.targets
    ('dense', (0, 1, 2), (3,))
    """
    return _form_of(gate_spec(gate))
