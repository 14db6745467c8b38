"""Writing quantum code: registers, wires, gates, measurements and readouts.

Quantum code reads imperatively: a register is a handle, gates act on its wires, and the
tracer threads the program's ``QState`` behind the scenes. The state lives in a `Cell` of the
program being traced, so loops and branches that apply gates carry it automatically.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> @qdiff.program
... def bell():
...     q = qm.qubits(2)
...     qm.h(q[0]); qm.cx(q[0], q[1])
...     return qm.expval("ZZ", q), qm.probs(q)
>>> zz, p = bell()
>>> round(float(zz), 12), p.round(3).tolist()
(1.0, [0.5, 0.0, 0.0, 0.5])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.errors import QdiffError
from ...ir.tracer import Cell, Tracer, as_operand, bind, current_builder
from . import primitives as qp
from .gates import GATE_TABLE, GateSpec

_CONTEXT_KEY = "quantum.state"


class Wire:
    """One qubit of a register: the handle gates act on."""

    __slots__ = ("register", "index")

    def __init__(self, register: Register, index: int):
        self.register = register
        self.index = index

    @property
    def wire(self) -> int:
        """The wire's position in the program's state."""
        return self.register.offset + self.index

    def __repr__(self) -> str:
        return f"{self.register.name}[{self.index}]"


class Register:
    """Qubits allocated together by `qubits`; index it to get wires."""

    def __init__(self, cell: Cell, offset: int, size: int, name: str,
                 dtype: str = "complex128"):
        self.cell = cell
        self.offset = offset
        self.size = size
        self.name = name
        self.dtype = dtype  # of the program's state, shared by all its registers

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [Wire(self, i) for i in range(self.size)[index]]
        if not -self.size <= index < self.size:
            raise QdiffError(f"register {self.name} has {self.size} qubits; no qubit {index}")
        return Wire(self, index % self.size)

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        return (Wire(self, i) for i in range(self.size))

    @property
    def wires(self) -> tuple[int, ...]:
        return tuple(range(self.offset, self.offset + self.size))

    def __repr__(self) -> str:
        return f"<register {self.name}: {self.size} qubits>"


def qubits(num_qubits: int, dtype: Any = None) -> Register:
    """Allocate ``num_qubits`` qubits in |0…0⟩ (call it at the top level of a program).

    ``dtype`` is complex128 (default) or complex64; all registers of a program share one
    state, so later registers take the first one's dtype (a different explicit one is an
    error). A complex64 program runs every gate in single precision and `state` returns
    complex64.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> float(qdiff.trace(lambda: qm.expval("Z", qm.qubits(1)))())
    1.0
    >>> qdiff.trace(lambda: qm.state(qm.qubits(1, dtype="complex64")))().dtype
    dtype('complex64')
    """
    if not isinstance(num_qubits, (int, np.integer)) or num_qubits < 1:
        raise QdiffError(f"qubits needs a positive number of qubits, got {num_qubits!r}")
    builder = current_builder()
    if builder is None:
        raise QdiffError("qubits() is used inside a qdiff program (@qdiff.program or qdiff.trace)")
    if builder.parent is not None:
        raise QdiffError("allocate qubits at the top level of the program, not inside a loop, "
                         "branch or map body")
    registers = builder.context.setdefault(_CONTEXT_KEY, [])
    dtype_name = None if dtype is None else np.dtype(dtype).name
    if not registers:
        dtype_name = dtype_name or "complex128"
        cell = Cell(bind(qp.qalloc_p, num_qubits=int(num_qubits), dtype=dtype_name))
        offset = 0
    else:
        if dtype_name not in (None, registers[0].dtype):
            raise QdiffError(
                f"the program's qubits are {registers[0].dtype}; all registers share one "
                f"state, so a {dtype_name} register cannot be added")
        dtype_name = registers[0].dtype
        cell = registers[0].cell
        last = registers[-1]
        offset = last.offset + last.size
        cell.set(bind(qp.qextend_p, cell.value, num_qubits=int(num_qubits)))
    register = Register(cell, offset, int(num_qubits), f"q{len(registers)}", dtype_name)
    registers.append(register)
    return register


def _wires(wires: Sequence[Any], what: str) -> tuple[Cell, tuple[int, ...]]:
    flat: list[Wire] = []
    for w in wires:
        if isinstance(w, Register):
            flat.extend(w)
        elif isinstance(w, Wire):
            flat.append(w)
        elif isinstance(w, (list, tuple)):
            flat.extend(_flatten_wires(w))
        else:
            raise QdiffError(f"{what}: {w!r} is not a qubit; index a register from qm.qubits(n)")
    if not flat:
        raise QdiffError(f"{what}: no qubits given")
    cells = {id(w.register.cell) for w in flat}
    if len(cells) != 1:
        raise QdiffError(f"{what}: qubits come from different programs")
    numbers = tuple(w.wire for w in flat)
    if len(set(numbers)) != len(numbers):
        raise QdiffError(f"{what}: a qubit appears twice in {flat}")
    return flat[0].register.cell, numbers


def _flatten_wires(items: Sequence[Any]) -> list[Wire]:
    out: list[Wire] = []
    for item in items:
        out.extend(item if isinstance(item, Register) else [item])
    return out


def apply(name: str, angles: Sequence[Any], wires: Sequence[Any], **static: Any) -> None:
    """Apply table gate ``name`` with ``angles`` to ``wires`` (what every gate function does).

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def f():
    ...     q = qm.qubits(1); qm.apply("x", [], [q[0]]); return qm.expval("Z", q)
    >>> float(qdiff.trace(f)())
    -1.0
    """
    cell, numbers = _wires(wires, name)
    operands = [as_operand(a, np.float64) for a in angles]
    params = {"name": name, "wires": numbers}
    if static:
        params["static"] = static
    cell.set(bind(qp.gate_p, cell.value, *operands, **params))


def _gate_function(spec: GateSpec) -> Any:
    """``qm.<name>(*angles, *wires)`` for one gate of the table."""
    name, count = spec.name, spec.num_params

    def gate(*args: Any) -> None:
        apply(name, args[:count], args[count:])

    gate.__name__ = gate.__qualname__ = name
    gate.__doc__ = (f"The {name} gate: ``qm.{name}(" + ", ".join(
        ["angle"] * count + [f"w{i}" for i in range(spec.num_qubits)]) + ")``"
        + ("; angles may be traced values." if count else "."))
    return gate


# one function per gate of the table; the families (mcx, mcz, pauli_rot, unitary) take
# their structure as arguments and have functions of their own below
GATES: dict[str, Any] = {name: _gate_function(spec) for name, spec in GATE_TABLE.items()
                         if isinstance(spec, GateSpec)}


def mcx(controls: Sequence[Wire], target: Wire) -> None:
    """X on ``target`` when every control is 1."""
    apply("mcx", (), [*controls, target], num_controls=len(controls))


def mcz(controls: Sequence[Wire], target: Wire) -> None:
    """Z on ``target`` when every control is 1."""
    apply("mcz", (), [*controls, target], num_controls=len(controls))


def pauli_rot(theta: Any, pauli: str, wires: Sequence[Wire]) -> None:
    """exp(-iθP/2) for the Pauli string ``pauli`` (character k acts on ``wires[k]``)."""
    apply("pauli_rot", (theta,), wires, pauli=pauli)


def unitary(matrix: Any, wires: Sequence[Wire]) -> None:
    """Apply a constant unitary ``matrix``; bit j of its index is ``wires[j]``."""
    apply("unitary", (), wires, matrix=np.asarray(matrix, np.complex128))


def measure(wire: Wire, reset: bool = False) -> Tracer:
    """Measure ``wire`` in the computational basis; returns the bit (optionally resetting)."""
    cell, (number,) = _wires([wire], "measure")
    state, bit = bind(qp.measure_p, cell.value, wire=number, reset=bool(reset))
    cell.set(state)
    return bit


def reset(wire: Wire) -> None:
    """Reset ``wire`` to |0⟩ (measure and flip, discarding the outcome)."""
    cell, (number,) = _wires([wire], "reset")
    cell.set(bind(qp.reset_p, cell.value, wire=number))


def postselect(wire: Wire, value: int = 1) -> None:
    """Keep only the branch where ``wire`` measures ``value``; values become conditional."""
    cell, (number,) = _wires([wire], "postselect")
    cell.set(bind(qp.postselect_p, cell.value, wire=number, value=int(value)))


def expval(observable: Any, wires: Any) -> Tracer:
    """⟨O⟩ for a Pauli sum on ``wires`` (a register or a list of wires; label character k
    acts on wire k): ``qm.expval("0.5*ZZ + XI", q)``."""
    cell, numbers = _wires(wires if isinstance(wires, (list, tuple)) else [wires], "expval")
    terms = qp.observable_terms(observable, len(numbers))
    state, value = bind(qp.expval_p, cell.value, terms=terms, wires=numbers)
    cell.set(state)
    return value


def probs(wires: Any) -> Tracer:
    """Outcome probabilities of ``wires`` (wires[0] is the least significant bit)."""
    cell, numbers = _wires(wires if isinstance(wires, (list, tuple)) else [wires], "probs")
    state, value = bind(qp.probs_p, cell.value, wires=numbers)
    cell.set(state)
    return value


def state(register: Register) -> Tracer:
    """The program's statevector (normalized), for debugging; Qiskit's qubit order.

    Its dtype is the register's (complex128 or complex64).
    """
    cell = register.cell
    params = {} if register.dtype == "complex128" else {"dtype": register.dtype}
    current, vector = bind(qp.statevector_p, cell.value, **params)
    cell.set(current)
    return vector


def sample(wires: Any = None, shots: int = 1000) -> Tracer:
    """``shots`` draws of the computational-basis values of ``wires`` (all qubits of the
    program by default): an int64 array of shape (shots, len(wires)) whose column j is
    ``wires[j]``. The draws read the state without disturbing it.

    Under ``qm.run(..., seed=s)`` the draws are reproducible. In ``exact`` and ``density``
    mode each branch draws from its own distribution and a returned sample array is the
    mixture: shot i comes from a branch picked with the branch's probability, so the rows
    are independent draws from the program's overall output distribution (conditioned on
    postselection and on the branches that did not abort). In ``sample`` mode each
    trajectory draws from its final state and the returned array mixes the trajectories the
    same way (each trajectory's own draws are in ``result.trajectories``). A value computed
    from samples (a mean, say) is averaged over branches like any other value.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def flipped():
    ...     q = qm.qubits(2); qm.x(q[1]); return qm.sample(shots=3)
    >>> qm.run(flipped, seed=1).values.tolist()
    [[0, 1], [0, 1], [0, 1]]
    """
    if wires is None:
        builder = current_builder()
        registers = builder.root.context.get(_CONTEXT_KEY) if builder is not None else None
        if not registers:
            raise QdiffError("sample: the program has no qubits; allocate them with qm.qubits")
        wires = list(registers)
    cell, numbers = _wires(wires if isinstance(wires, (list, tuple)) else [wires], "sample")
    if isinstance(shots, bool) or not isinstance(shots, (int, np.integer)) or shots < 1:
        raise QdiffError(f"sample: shots must be a positive int, got {shots!r}")
    state, value = bind(qp.sample_p, cell.value, wires=numbers, shots=int(shots))
    cell.set(state)
    return value
