"""A gate as compiled code: the simulator kernel that applies its sparse form, the layout
constants of its wires, and the data as an expression of its angle.

Every one-parameter gate is ``U(θ) = exp(-iθG)`` exactly (`lang/gates.py`), so with the
spectral projectors ``P_j`` of its generator (eigenvalue ``λ_j``, Sylvester's formula on the
declared spectrum) ``U(θ) = Σ_j e^{-iθλ_j} P_j``, and the data the kernel applies, linear in
``U`` (`GateForm.select`), is ``Σ_j e^{-iθλ_j} select(P_j)``: one rule for every parametric
gate of the table, checked against the gate's own data when it is planned. Its inverse is
the same gate at ``-θ``, and ``dU/dθ`` pairs with ``G``'s Pauli terms in the adjoint sweep.
Gates without parameters apply their fixed data; their inverse is their table inverse.

>>> plan = plan_gate(2, "crx", (1, 0))
>>> plan.kernel, plan.spectrum, plan.parts[0].real.tolist()  # the projector of -0.5
('pair', (-0.5, 0.0, 0.5), [[0.5, -0.5], [-0.5, 0.5]])
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..lang.gate_forms import GateForm, gate_form
from ..lang.gates import GateSpec, gate_spec
from ..simulator.indexing import IndexLayout, index_layout

# a parameter point at which a planned gate's data is checked against the table's
_PROBE = 0.8317


@dataclass(frozen=True, eq=False)
class GatePlan:
    """How compiled code applies one gate on a register of ``num_qubits``.

    ``kernel``: ``"pair"`` (a 2x2, ``swap`` for an anti-diagonal one), ``"dense2"``,
    ``"densek"``, ``"diagonal"`` or ``"permutation"`` (the simulator kernels of that name);
    ``layout`` the index constants of its wires; ``fixed`` the data of a gate without
    parameters (for a diagonal, only its entries other than 1, at ``offsets``), else
    ``spectrum`` and ``parts`` with data(θ) = Σ_j e^{-iθ spectrum[j]} parts[j].
    """

    spec: GateSpec
    wires: tuple[int, ...]
    form: GateForm
    layout: IndexLayout
    kernel: str
    offsets: np.ndarray
    fixed: np.ndarray | None = None
    spectrum: tuple[float, ...] = ()
    parts: tuple[np.ndarray, ...] = ()
    swap: bool = False

    @property
    def parametric(self) -> bool:
        return self.fixed is None

    def inverse(self) -> GatePlan:
        """The plan of ``U^†`` (for a parametric gate: this plan, applied at ``-θ``)."""
        if self.parametric:
            return self
        spec, _ = self.spec.inverse()
        return _plan(self.layout.num_qubits, spec, self.wires)

    def data_at(self, theta: float) -> np.ndarray:
        """The data at ``theta`` from the parts (what compiled code computes)."""
        return sum((np.exp(-1j * theta * lam) * part
                    for lam, part in zip(self.spectrum, self.parts)), np.zeros_like(self.parts[0]))


class NotPlannable(Exception):
    """A gate compiled code cannot apply (the message says why)."""


def plan_gate(num_qubits: int, name: str, wires: tuple[int, ...],
              static: dict | None = None) -> GatePlan:
    """The `GatePlan` of gate ``name`` on ``wires`` (raises `NotPlannable`)."""
    key = tuple(sorted((static or {}).items(), key=lambda kv: kv[0]))
    try:
        return _planned(num_qubits, name, tuple(wires), tuple((k, _hashable(v)) for k, v in key))
    except TypeError:  # unhashable static (a matrix): plan it afresh
        return _plan(num_qubits, gate_spec(name, **(static or {})), tuple(wires))


def _hashable(value: object) -> object:
    hash(value)
    return value


@functools.lru_cache(maxsize=4096)
def _planned(num_qubits: int, name: str, wires: tuple[int, ...], static: tuple) -> GatePlan:
    return _plan(num_qubits, gate_spec(name, **dict(static)), wires)


def _plan(num_qubits: int, spec: GateSpec, wires: tuple[int, ...]) -> GatePlan:
    if spec.num_params > 1:
        raise NotPlannable(f"gate {spec.name!r} takes {spec.num_params} angles (compiled "
                           "code applies gates of at most one)")
    form = gate_form(spec)
    layout = index_layout(num_qubits, tuple(wires[j] for j in form.targets),
                          tuple(wires[j] for j in form.controls))
    offsets = np.array(layout.offsets)
    kernel, swap = _kernel_of(form, len(form.targets))
    if spec.num_params == 0:
        data = form.data()
        if form.kind == "diagonal":  # entries equal to 1 leave their amplitudes alone
            keep = np.flatnonzero(data != 1)
            offsets, data = offsets[keep], data[keep]
        return GatePlan(spec, wires, form, layout, kernel, offsets,
                        fixed=np.ascontiguousarray(data, np.complex128), swap=swap)
    spectrum = tuple(float(v) for v in spec.spectrum)
    generator = spec.generator_matrix()
    parts = tuple(form.select(_projector(generator, spectrum, j)) for j in range(len(spectrum)))
    plan = GatePlan(spec, wires, form, layout, kernel, offsets, spectrum=spectrum, parts=parts,
                    swap=swap)
    if np.abs(plan.data_at(_PROBE) - form.data(_PROBE)).max() > 1e-13:
        raise NotPlannable(f"gate {spec.name!r}: its spectral form does not reproduce its "
                           "matrix")
    return plan


def _kernel_of(form: GateForm, num_targets: int) -> tuple[str, bool]:
    """The kernel applying ``form`` (as the simulator's ``apply_gate`` chooses it)."""
    if form.kind == "diagonal":
        return "diagonal", False
    if form.kind == "permutation":
        if num_targets == 1:
            assert form.perm is not None
            return ("diagonal", False) if form.perm[0] == 0 else ("pair", True)
        return "permutation", False
    return {1: "pair", 2: "dense2"}.get(num_targets, "densek"), False


def _projector(generator: np.ndarray, spectrum: tuple[float, ...], j: int) -> np.ndarray:
    """The projector on the eigenvalue ``spectrum[j]`` of a Hermitian ``generator``:
    Π_{k≠j} (G - λ_k)/(λ_j - λ_k) (exact for the table's generators, whose entries and
    eigenvalues are halves and quarters)."""
    eye = np.eye(generator.shape[0], dtype=np.complex128)
    out = eye
    for k, lam in enumerate(spectrum):
        if k != j:
            out = out @ (generator - lam * eye) / (spectrum[j] - lam)
    return out
