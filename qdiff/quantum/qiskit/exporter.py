"""Export qdiff programs as Qiskit circuits, loops and conditions kept as control flow.

`to_qiskit(program)` is the inverse of `from_qiskit`: it reads the program's equations once
and writes a ``QuantumCircuit`` whose free parameters are the elements of the program's float
inputs (input k of shape s gives the ``prod(s)`` parameters ``x{k}[0]``, ``x{k}[1]``, ... in
flat order). The export describes every program output (`ExportedOutput`): an expectation
value (a ``SparsePauliOp`` of `QiskitExport.observables`, on all qubits), the outcome
distribution of wires measured into a final register ``probs{k}``, the statevector, a measured
value, or a classical value.

What is translated:

- classical code between the inputs and the gate angles becomes ``ParameterExpression``
  arithmetic: ``+ - * /``, ``**``, ``sqrt``, ``sin``, ``cos``, ``tan``, their inverses, ``exp``,
  ``log``, ``abs``, ``sign``, float conversions and the operations that move array elements
  (slices, reshapes, indexing by constants, concatenation, sums); constant code is evaluated;
- gates (their Qiskit twins, `GateSpec.to_qiskit`), ``measure`` (one clbit of register ``m``
  per measurement in the program: a measurement run again, in a loop, rewrites its clbit),
  ``reset``;
- ``loop`` with constant bounds becomes ``for_loop`` whose parameter stands for the loop
  index, so angles like ``w[0] * (i + 1)`` stay expressions in it; a body that uses the index
  in a way no parameter expression can (an array indexed by it, say) is unrolled instead,
  which `QiskitExport.notes` reports;
- ``while`` testing measured bits becomes the test's operations, then ``while_loop`` on the
  bit (or a classical expression of several) whose body ends with the test again (repeat
  until success);
- ``cond`` on measured bits becomes ``if_else`` (one bit) or ``switch_case`` (several, on a
  register over them); a constant condition keeps only its branch;
- linear combinations of expectation values stay one observable.

Refused, with a `QdiffError` that names the primitive and where it sits (``eqn 3 body >
eqn 1``): postselection and sampling (no Qiskit instruction), bounded while loops (Qiskit's
loops cannot abort a run), loop bounds and gate angles that depend on measured bits or on
code with no expression form, readouts inside control flow or before later quantum
operations, programs returning both probabilities and expectations or the state (the final
measurements would disturb the others), and classical values a loop changes from one
iteration to the next (Qiskit circuits here hold no classical variables) when they feed
anything exported. Values that feed nothing exported, like an iteration counter, are
dropped.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def f(w):
...     q = qm.qubits(2)
...     qdiff.fori_loop(0, 3, lambda i: (qm.ry(w[0] * (i + 1), q[0]), qm.cx(q[0], q[1])))
...     return qm.expval("ZZ", q)
>>> export = to_qiskit(qdiff.trace(f, np.zeros(1)))
>>> [instruction.operation.name for instruction in export.circuit.data]
['for_loop']
>>> export.observables[0].to_list(), [p.name for p in export.circuit.parameters]
([('ZZ', (1+0j))], ['x0[0]'])
>>> back = qm.from_qiskit(export.circuit, export.observables[0])
>>> w = np.array([0.4])
>>> bool(abs(back(export.parameter_values(w)) - qm.run(qdiff.trace(f, w), w).values) < 1e-12)
True
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...classical.elementwise import ELEMENTWISE_PRIMITIVES
from ...ir import pytree
from ...ir.control_flow import carried_outputs, cond_p, loop_p, sub_programs, while_p
from ...ir.core import Eqn, Literal, Program
from ...ir.errors import QdiffError
from ...ir.primitives import Primitive
from ...ir.types import QState, Tensor
from ..lang.fusion import _plan
from ..lang.gates import gate_spec
from ..lang.observables import PauliSum
from ..lang.primitives import pauli_sum_of

__all__ = ["ExportedOutput", "QiskitExport", "to_qiskit"]

# Loops whose body cannot be written in the loop parameter are unrolled up to this many
# iterations; a longer one is refused rather than written as a huge circuit.
MAX_UNROLL = 4096
_MAX_CLASSICAL_ITERATIONS = 100_000


@dataclass(frozen=True)
class ExportedOutput:
    """What one (flat) program output is in the export.

    ``kind`` is ``"expval"`` (``observable`` indexes `QiskitExport.observables`), ``"probs"``
    (the distribution of ``register``, the final measurement of the readout's wires: bit j is
    ``wires[j]``), ``"statevector"`` (the final state), ``"measured"`` (a function of measured
    clbits: its value for each of their outcomes is ``value[b0, b1, ...]``, bit j being
    ``clbits[j]``; the program returns its mean) or ``"classical"`` (``value`` holds numbers
    and ``ParameterExpression``s).
    """

    kind: str
    observable: int | None = None
    register: Any = None
    wires: tuple[int, ...] = ()
    clbits: tuple[Any, ...] = ()
    value: Any = None


@dataclass
class QiskitExport:
    """The result of `to_qiskit`.

    Attributes:
        circuit: the ``QuantumCircuit``; register ``m`` holds the measurements, ``probs{k}``
            the final measurements of a ``probs`` output k.
        parameters: every input parameter, ``x{k}[i]`` in input and flat order (the circuit
            holds those its angles use).
        observables: one ``SparsePauliOp`` per expectation output, on all qubits.
        outputs: what each flat program output is (`ExportedOutput`).
        program: the exported program (it says how arguments flatten).
        notes: what the export changed, e.g. loops it unrolled.
    """

    circuit: Any
    parameters: list[Any]
    observables: list[Any]
    outputs: list[ExportedOutput]
    program: Program = field(repr=False)
    notes: list[str] = field(default_factory=list)

    def parameter_values(self, *args: Any) -> np.ndarray:
        """The values of ``circuit.parameters`` (in that order) for the program's arguments.

        >>> import qdiff
        >>> from qdiff import quantum as qm
        >>> def f(a, b):
        ...     q = qm.qubits(1); qm.rx(a * b[1], q[0]); return qm.expval("Z", q)
        >>> export = to_qiskit(qdiff.trace(f, 0.0, np.zeros(2)))
        >>> [p.name for p in export.circuit.parameters]
        ['x0[0]', 'x1[1]']
        >>> export.parameter_values(0.5, np.array([2.0, 3.0])).tolist()
        [0.5, 3.0]
        """
        program = self.program
        if program.in_tree is not None:
            leaves, tree = pytree.flatten(tuple(args))
            if tree != program.in_tree:
                raise QdiffError("parameter_values: the arguments are not structured like the "
                                 "program's inputs")
        else:
            leaves = list(args)
        if len(leaves) != len(program.inputs):
            raise QdiffError(f"parameter_values: the program takes {len(program.inputs)} "
                             f"inputs, got {len(leaves)}")
        names = {p.name: p for p in self.parameters}
        values: dict[Any, float] = {}
        for k, (var, leaf) in enumerate(zip(program.inputs, leaves)):
            if not _is_parameter_input(var.type):
                continue
            flat = np.asarray(leaf, np.float64)
            if flat.shape != var.type.shape:
                raise QdiffError(f"parameter_values: argument {k} has shape {flat.shape}, the "
                                 f"program takes {var.type.short()}")
            for i, value in enumerate(flat.reshape(-1)):
                values[names[f"x{k}[{i}]"]] = float(value)
        return np.array([values[p] for p in self.circuit.parameters], np.float64)

    def bind(self, *args: Any) -> Any:
        """The circuit with every parameter bound to the program's arguments.

        >>> import qdiff
        >>> from qdiff import quantum as qm
        >>> def f(t):
        ...     q = qm.qubits(1); qm.ry(2 * t, q[0]); return qm.expval("Z", q)
        >>> from qiskit.quantum_info import Statevector
        >>> export = to_qiskit(qdiff.trace(f, 0.0))
        >>> state = Statevector(export.bind(0.3))
        >>> round(float(state.expectation_value(export.observables[0]).real), 9)  # cos(0.6)
        0.825335615
        """
        values = self.parameter_values(*args)
        return self.circuit.assign_parameters(dict(zip(self.circuit.parameters, values)))


def to_qiskit(program: Program) -> QiskitExport:
    """The Qiskit circuit of a qdiff program, with its observables (see the module docstring).

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def rus(t):
    ...     q = qm.qubits(2)
    ...     qm.h(q[0])
    ...     qdiff.while_loop(lambda: qm.measure(q[1]) == 0,
    ...                      lambda: (qm.reset(q[1]), qm.ry(t, q[1])))
    ...     bit = qm.measure(q[0])
    ...     qdiff.cond(bit == 1, lambda: qm.x(q[1]), lambda: None)
    ...     return qm.expval("ZZ", q)
    >>> export = to_qiskit(qdiff.trace(rus, 0.0))
    >>> [instruction.operation.name for instruction in export.circuit.data]
    ['h', 'measure', 'while_loop', 'measure', 'if_else']
    >>> to_qiskit(qdiff.trace(lambda t: rus(qdiff.numpy.floor(t)), 0.0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    qdiff.ir.errors.QdiffError: to_qiskit: angle 0 of gate 'ry' at eqn 3 ... 'floor' at eqn 0 ...
    """
    if not isinstance(program, Program):
        raise QdiffError(f"to_qiskit needs a qdiff Program, got {type(program).__name__}; "
                         "trace the function first: qdiff.trace(f, *example_args)")
    exporter = _Exporter()
    inputs, parameters = _input_values(program)
    root: list[tuple] = []
    outputs = exporter.run(program, inputs, root, "", top=True)
    if exporter.num_qubits == 0:
        raise QdiffError("to_qiskit: the program allocates no qubits")
    return exporter.finish(program, parameters, root, outputs)


def _is_parameter_input(t: Any) -> bool:
    return isinstance(t, Tensor) and t.np_dtype.kind == "f"


def _input_values(program: Program) -> tuple[list[Any], list[Any]]:
    from qiskit.circuit import ParameterVector

    values, parameters = [], []
    for k, var in enumerate(program.inputs):
        t = var.type
        if _is_parameter_input(t):
            vector = ParameterVector(f"x{k}", int(np.prod(t.shape, dtype=int)))
            parameters.extend(vector)
            values.append(_objects(list(vector), t.shape))
        else:
            values.append(_Opaque(f"input {k} ({t.short()}) is not a float array; only float "
                                  "inputs become circuit parameters"))
    return values, parameters


# ------------------------------------------------------------------------------ the values
class _Qubits:
    """The program's quantum state: one register, so wires are circuit qubits."""


_QUBITS = _Qubits()


@dataclass(frozen=True)
class _Opaque:
    """A value the circuit cannot hold; it is an error only where something exported uses it."""

    reason: str

    def error(self, what: str) -> QdiffError:
        return QdiffError(f"to_qiskit: {what} cannot be exported: {self.reason}")


@dataclass(frozen=True)
class _Measured:
    """A value that depends on measured clbits: ``table[b0, b1, ..., *index]`` is its entry
    ``index`` when clbit ``clbits[j]`` (an index into register ``m``) reads ``b_j`` (a
    scalar has no index axes; a distribution over a register's values has one)."""

    clbits: tuple[int, ...]
    table: np.ndarray

    @property
    def value_shape(self) -> tuple[int, ...]:
        return tuple(self.table.shape[len(self.clbits):])

    def simplified(self) -> _Measured:
        # drop the clbits the value does not depend on, so conditions name only real inputs
        clbits, table = list(self.clbits), self.table
        for axis in reversed(range(len(clbits))):
            low, high = np.take(table, 0, axis), np.take(table, 1, axis)
            if np.array_equal(low, high):
                table = low
                del clbits[axis]
        return _Measured(tuple(clbits), np.asarray(table))

    def over(self, clbits: Sequence[int], value_ndim: int | None = None) -> np.ndarray:
        """The table with one axis per clbit of ``clbits`` (a superset of ``self.clbits``),
        then its value axes, right-aligned to ``value_ndim`` of them (for broadcasting)."""
        k = len(self.clbits)
        order = [self.clbits.index(c) for c in clbits if c in self.clbits]
        table = np.transpose(self.table, order + list(range(k, self.table.ndim)))
        value = self.value_shape
        pad = (1,) * ((value_ndim if value_ndim is not None else len(value)) - len(value))
        shape = [2 if c in self.clbits else 1 for c in clbits]
        return table.reshape((*shape, *pad, *value))


@dataclass(frozen=True)
class _Observable:
    """An expectation value (or a linear combination of some), read at root op ``at``."""

    paulis: PauliSum
    at: int


@dataclass(frozen=True)
class _Readout:
    """A ``probs`` or ``statevector`` readout, read at root op ``at``."""

    kind: str
    wires: tuple[int, ...]
    at: int


def _objects(items: Sequence[Any], shape: tuple[int, ...]) -> np.ndarray:
    array = np.empty(len(items), object)
    array[:] = list(items)
    return array.reshape(shape)


def _is_expression(value: Any) -> bool:
    from qiskit.circuit import ParameterExpression

    return isinstance(value, ParameterExpression)


def _symbolic(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == object


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape:
        try:
            return bool(np.all(a == b)) and (a.dtype == object) == (b.dtype == object)
        except (TypeError, ValueError):
            return False
    return False


# ------------------------------------------------------------- classical code as expressions
@functools.cache
def _expression_ops() -> dict[str, Callable[..., Any]]:
    """Elementwise primitives on numbers and ``ParameterExpression``s alike."""

    def method(name: str, numeric: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lambda a: getattr(a, name)() if _is_expression(a) else numeric(a)

    def identity(a: Any) -> Any:
        return a

    return {
        "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
        "pow": operator.pow, "neg": operator.neg, "abs": abs,
        "sqrt": lambda a: a ** 0.5 if _is_expression(a) else float(np.sqrt(a)),
        "sin": method("sin", np.sin), "cos": method("cos", np.cos), "tan": method("tan", np.tan),
        "asin": method("arcsin", np.arcsin), "acos": method("arccos", np.arccos),
        "atan": method("arctan", np.arctan), "exp": method("exp", np.exp),
        "log": method("log", np.log), "sign": method("sign", np.sign),
        "stop_gradient": identity, "real": identity, "conj": identity,
    }


# Primitives that only move, pick or sum elements: their NumPy code runs on object arrays.
_MOVES = frozenset(("reshape", "transpose", "broadcast_in_dim", "slice", "rev", "concatenate",
                    "dynamic_slice", "dynamic_update_slice", "gather", "select", "reduce_sum",
                    "einsum", "unpack"))


def _impl(eqn: Eqn, args: Sequence[Any]) -> list[Any]:
    out = eqn.primitive.impl("numpy")(*args, **eqn.params)
    return [np.asarray(v) for v in out] if eqn.primitive.multiple_results else [np.asarray(out)]


# --------------------------------------------------------------------------- the interpreter
Block = list[tuple]


class _Exporter:
    """Reads a program into a tree of instructions (`Block`s) and builds the circuit from it.

    The instructions are kept apart from the circuit until the end, so a loop body that
    cannot be written in its loop parameter can be thrown away and unrolled instead.
    """

    def __init__(self) -> None:
        self.num_qubits = 0
        self.clbits: dict[int, int] = {}  # id(measure eqn) -> index into register m
        self.loops = 0
        self.notes: list[str] = []

    # -- programs and equations --------------------------------------------------------------
    def run(self, program: Program, inputs: Sequence[Any], block: Block, where: str,
            top: bool) -> list[Any]:
        env: dict[Any, Any] = dict(zip(program.inputs, inputs))

        def read(atom: Any) -> Any:
            return np.asarray(atom.value) if isinstance(atom, Literal) else env[atom]

        for index, eqn in enumerate(program.eqns):
            outs = self.eqn(eqn, [read(a) for a in eqn.inputs], block, f"{where}eqn {index}",
                            top)
            env.update(zip(eqn.outputs, outs))
        return [read(a) for a in program.outputs]

    def eqn(self, eqn: Eqn, args: list[Any], block: Block, where: str, top: bool) -> list[Any]:
        name = eqn.primitive.name
        quantum = _QUANTUM.get(name)
        if quantum is not None:
            return quantum(self, eqn, args, block, where, top)
        quantum_state = any(isinstance(a.type, QState) for a in (*eqn.inputs, *eqn.outputs))
        if eqn.primitive in _CONTROL and quantum_state:
            return _CONTROL[eqn.primitive](self, eqn, args, block, where, top)
        if quantum_state:
            raise QdiffError(f"to_qiskit: {name!r} at {where} acts on the quantum state and "
                             "has no Qiskit counterpart")
        return self.classical(eqn, args, block, where)

    # -- classical equations -----------------------------------------------------------------
    def classical(self, eqn: Eqn, args: list[Any], block: Block, where: str) -> list[Any]:
        count = len(eqn.outputs)
        for arg in args:
            if isinstance(arg, _Opaque):
                return [arg] * count
        name = eqn.primitive.name
        if any(isinstance(a, (_Observable, _Readout)) for a in args):
            return [_readout_arithmetic(eqn, args, where)]
        if any(isinstance(a, _Measured) for a in args):
            return [_measured_arithmetic(eqn, args, where)]
        unsupported = _Opaque(f"{name!r} at {where} has no Qiskit parameter-expression form")
        if not any(_symbolic(a) for a in args):
            try:
                return _impl(eqn, args)
            except Exception as exc:  # noqa: BLE001 (any failure makes the value unusable)
                return [_Opaque(f"{name!r} at {where} failed on constants: {exc}")] * count
        if eqn.primitive.subprogram_params:
            return self.classical_control(eqn, args, block, where)
        ops = _expression_ops()
        if name in ops:
            return [_elementwise(ops[name], args)]
        if name == "convert":
            # a parameter expression has no integer or bool form
            return [_elementwise(_to_float, args) if np.dtype(eqn.params["dtype"]).kind == "f"
                    else unsupported]
        if name in _MOVES:
            try:
                return _impl(eqn, args)
            except Exception:  # noqa: BLE001 (e.g. an index that is a loop parameter)
                return [unsupported] * count
        return [unsupported] * count

    def classical_control(self, eqn: Eqn, args: list[Any], block: Block,
                          where: str) -> list[Any]:
        """Classical loops and branches over expressions, evaluated step by step."""
        name, p = eqn.primitive.name, eqn.params
        operands = {key: positions for key, _, _, positions in sub_programs(eqn)}
        count = len(eqn.outputs)

        def inputs(key: str, carry: list[Any], index: Any = None) -> list[Any]:
            values = [index if k is None else args[k] for k in operands[key]]
            return [*values[:len(values) - len(carry)], *carry]

        unsupported = _Opaque(f"{name!r} at {where} branches or loops on a value that is "
                              "not a constant")
        if name == "loop" and not any(_symbolic(a) for a in args[:2]):
            carry = list(args[len(args) - count:])
            for i in range(int(args[0]), int(args[1])):
                index = np.asarray(i, np.asarray(args[0]).dtype)
                carry = self.run(p["body"], inputs("body", carry, index), block,
                                 f"{where} body (i={i}) > ", top=False)
            return carry
        if name == "cond" and not _symbolic(args[0]):
            k = int(np.clip(int(args[0]), 0, len(p["branches"]) - 1))
            return self.run(p["branches"][k], args[1:], block, f"{where} branch {k} > ",
                            top=False)
        if name == "while" and p["max_iter"] is None:
            carry = list(args[len(args) - count:])
            for _ in range(_MAX_CLASSICAL_ITERATIONS):
                pred, *carry = self.run(p["cond"], inputs("cond", carry), block,
                                        f"{where} cond > ", top=False)
                if _symbolic(pred) or not isinstance(pred, np.ndarray):
                    return [unsupported] * count
                if not bool(pred):
                    return carry
                carry = self.run(p["body"], inputs("body", carry), block,
                                 f"{where} body > ", top=False)
        return [unsupported] * count

    # -- quantum equations -------------------------------------------------------------------
    def clbit(self, eqn: Eqn) -> int:
        # one clbit per measurement site: a while test measured again in the loop body
        # writes the clbit the loop condition reads
        return self.clbits.setdefault(id(eqn), len(self.clbits))

    def angles(self, eqn: Eqn, args: Sequence[Any], where: str) -> list[Any]:
        name = eqn.params.get("name")
        what = f"gate {name!r}" if name else repr(eqn.primitive.name)
        return [_angle(value, f"angle {k} of {what} at {where}")
                for k, value in enumerate(args)]

    # -- assembling the circuit ---------------------------------------------------------------
    def finish(self, program: Program, parameters: list[Any], root: Block,
               outputs: list[Any]) -> QiskitExport:
        from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister

        circuit = QuantumCircuit(QuantumRegister(self.num_qubits, "q"), name=program.name)
        measured = ClassicalRegister(len(self.clbits), "m")
        if self.clbits:
            circuit.add_register(measured)
        _emit(circuit, root, measured)
        observables: list[Any] = []
        described: list[ExportedOutput] = []
        kinds = set()
        for k, value in enumerate(outputs):
            what = f"program output {k}"
            if isinstance(value, _Opaque):
                raise value.error(what)
            if isinstance(value, (_Observable, _Readout)) and value.at != len(root):
                raise QdiffError(f"to_qiskit: {what} is read before later quantum operations; "
                                 "a Qiskit circuit is read at its end only")
            if isinstance(value, _Observable):
                kinds.add("expval")
                observables.append(_widened(value.paulis, self.num_qubits).to_qiskit())
                described.append(ExportedOutput("expval", observable=len(observables) - 1))
            elif isinstance(value, _Readout) and value.kind == "probs":
                kinds.add("probs")
                register = ClassicalRegister(len(value.wires), f"probs{k}")
                circuit.add_register(register)
                for wire, bit in zip(value.wires, register):
                    circuit.measure(wire, bit)
                described.append(ExportedOutput("probs", register=register, wires=value.wires,
                                                clbits=tuple(register)))
            elif isinstance(value, _Readout):
                kinds.add("expval")
                described.append(ExportedOutput("statevector"))
            elif isinstance(value, _Measured):
                described.append(ExportedOutput(
                    "measured", clbits=tuple(measured[c] for c in value.clbits),
                    value=value.table))
            else:
                described.append(ExportedOutput("classical", value=value))
        if kinds == {"expval", "probs"}:
            raise QdiffError("to_qiskit: the program returns both probabilities and "
                             "expectation values or the state; the final measurements of the "
                             "probabilities would change the others: export them separately")
        return QiskitExport(circuit, parameters, observables, described, program, self.notes)


def _widened(paulis: PauliSum, num_qubits: int) -> PauliSum:
    # qubits allocated after the readout are idle: identity on them
    pad = "I" * (num_qubits - paulis.num_qubits)
    return PauliSum([(c, label + pad) for c, label in paulis.simplify().terms], num_qubits)


def _angle(value: Any, what: str) -> Any:
    if isinstance(value, _Opaque):
        raise value.error(what)
    if isinstance(value, _Measured):
        raise QdiffError(f"to_qiskit: {what} depends on a measured bit; Qiskit gate angles "
                         "cannot read classical bits")
    if isinstance(value, (_Observable, _Readout)):
        raise QdiffError(f"to_qiskit: {what} depends on a readout (expectation or "
                         "probabilities); a circuit cannot feed them back")
    element = np.asarray(value).reshape(()).item() if not _symbolic(value) else value[()]
    return element if _is_expression(element) else float(element)


def _elementwise(function: Callable[..., Any], args: Sequence[Any]) -> np.ndarray:
    out = np.frompyfunc(function, len(args), 1)(*args)
    return out if isinstance(out, np.ndarray) else _objects([out], ())  # 0-d: a bare object


def _to_float(value: Any) -> Any:
    return value if _is_expression(value) else float(value)


def _measured_arithmetic(eqn: Eqn, args: Sequence[Any], where: str) -> Any:
    # elementwise code on functions of clbits and constant arrays: one table per outcome of
    # the clbits (the one-hot distribution of an imported circuit's register, say)
    name = eqn.primitive.name
    if any(_symbolic(a) for a in args):
        return _Opaque(f"{name!r} at {where} mixes a measured bit with parameters; a "
                       "circuit condition is a function of clbits only")
    if name == "stop_gradient":
        return args[0]
    (first,) = [a for a in args if isinstance(a, _Measured)][:1]
    if name == "reshape" and len(args) == 1:
        k = len(first.clbits)
        return _Measured(first.clbits, first.table.reshape(
            first.table.shape[:k] + tuple(eqn.params["shape"])))
    if eqn.primitive not in ELEMENTWISE_PRIMITIVES:
        return _Opaque(f"{name!r} at {where} is applied to a measured bit")
    clbits = tuple(dict.fromkeys(c for a in args if isinstance(a, _Measured) for c in a.clbits))
    shapes = [a.value_shape if isinstance(a, _Measured) else np.shape(a) for a in args]
    value_shape = np.broadcast_shapes(*shapes)
    tables = [a.over(clbits, len(value_shape)) if isinstance(a, _Measured) else
              np.asarray(a).reshape((1,) * len(clbits) + (1,) * (len(value_shape) - np.ndim(a))
                                    + np.shape(a)) for a in args]
    (table,) = _impl(eqn, tables)
    table = np.broadcast_to(table, (2,) * len(clbits) + value_shape)
    return _Measured(clbits, np.array(table)).simplified()


def _readout_arithmetic(eqn: Eqn, args: Sequence[Any], where: str) -> Any:
    """Linear combinations of expectation values stay one observable."""
    name = eqn.primitive.name
    refused = _Opaque(f"{name!r} at {where} post-processes a readout; an export keeps "
                      "expectation values and their linear combinations only")
    if any(isinstance(a, _Readout) for a in args):
        return refused
    if name in ("reshape", "stop_gradient", "convert") and \
            eqn.outputs[0].type == Tensor((), "float64"):
        return args[0]
    numbers = [a for a in args if not isinstance(a, _Observable)]
    if any(not isinstance(a, np.ndarray) or a.ndim or _symbolic(a) for a in numbers):
        return refused
    observables = [a for a in args if isinstance(a, _Observable)]
    paulis = [a.paulis if isinstance(a, _Observable) else float(a) for a in args]
    at = min(a.at for a in observables)
    n = observables[0].paulis.num_qubits
    if name in ("add", "sub"):
        paulis = [PauliSum.identity(n, p) if isinstance(p, float) else p for p in paulis]
        total = paulis[0] + paulis[1] if name == "add" else paulis[0] - paulis[1]
        return _Observable(total, at)
    if name == "neg":
        return _Observable(-paulis[0], at)
    if name == "mul" and len(observables) == 1:
        a, b = paulis
        return _Observable(a * b if isinstance(b, float) else b * a, at)
    if name == "div" and isinstance(paulis[1], float):
        return _Observable(paulis[0] / paulis[1], at)
    return refused


# ---------------------------------------------------------------------------- quantum rules
def _alloc(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
           top: bool) -> list[Any]:
    ex.num_qubits += eqn.params["num_qubits"]
    return [_QUBITS]


def _gate(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
          top: bool) -> list[Any]:
    p = eqn.params
    spec = gate_spec(p["name"], **(p.get("static") or {}))
    block.append(("gate", spec.to_qiskit(*ex.angles(eqn, args[1:], where)), p["wires"]))
    return [_QUBITS]


def _fused_gate(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
                top: bool) -> list[Any]:
    angles = ex.angles(eqn, args[1:], where)
    for spec, wires, lo, hi in _plan(tuple(eqn.params["wires"]), eqn.params["parts"]).specs:
        block.append(("gate", spec.to_qiskit(*angles[lo:hi]), wires))
    return [_QUBITS]


def _measure(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
             top: bool) -> list[Any]:
    wire, clbit = eqn.params["wire"], ex.clbit(eqn)
    block.append(("measure", wire, clbit))
    if eqn.params["reset"]:
        block.append(("reset", wire))
    return [_QUBITS, _Measured((clbit,), np.array([False, True]))]


def _reset(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
           top: bool) -> list[Any]:
    block.append(("reset", eqn.params["wire"]))
    return [_QUBITS]


def _refuse(why: str) -> Callable[..., list[Any]]:
    def rule(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
             top: bool) -> list[Any]:
        raise QdiffError(f"to_qiskit: {eqn.primitive.name!r} at {where}: {why}")
    return rule


def _bit_to_int(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
                top: bool) -> list[Any]:
    (bit,) = args
    return [_Measured(bit.clbits, bit.table.astype(np.int64)) if isinstance(bit, _Measured)
            else bit]


def _readout(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
             top: bool) -> list[Any]:
    name = eqn.primitive.name
    if not top:
        return [_QUBITS, _Opaque(f"{name!r} at {where} is inside control flow; a Qiskit "
                                 "circuit is read at its end only")]
    if name == "expval":
        wires = eqn.params["wires"]
        terms = []
        for coefficient, label in pauli_sum_of(eqn.params["terms"]).terms:
            letters = ["I"] * ex.num_qubits
            for wire, letter in zip(wires, label):
                letters[wire] = letter
            terms.append((coefficient, "".join(letters)))
        return [_QUBITS, _Observable(PauliSum(terms, ex.num_qubits), len(block))]
    wires = tuple(eqn.params.get("wires", range(ex.num_qubits)))
    return [_QUBITS, _Readout(name, wires, len(block))]


_QUANTUM: dict[str, Callable[..., list[Any]]] = {
    "qalloc": _alloc, "qextend": _alloc, "gate": _gate, "fused_gate": _fused_gate,
    "measure": _measure, "reset": _reset, "bit_to_int": _bit_to_int,
    "expval": _readout, "probs": _readout, "statevector": _readout,
    "postselect": _refuse("postselection has no Qiskit instruction (it discards runs)"),
    "sample": _refuse("sampling inside a program has no Qiskit instruction; run the "
                      "exported circuit with shots instead"),
}


# ---------------------------------------------------------------------------- control flow
def _invariant_carries(eqn: Eqn) -> list[bool]:
    """Which carries every sub-program passes through unchanged."""
    first = len(eqn.inputs) - len(eqn.outputs)
    same = [True] * len(eqn.outputs)
    for key, _, program, operands in sub_programs(eqn):
        for out, operand in carried_outputs(eqn, key, program):
            if program.outputs[out] is not program.inputs[operands.index(operand)]:
                same[operand - first] = False
    return same


_LOOP_NAMES = {"loop": "loop", "while": "while loop"}


def _carry_values(eqn: Eqn, carry: Sequence[Any], where: str) -> list[Any]:
    """The carries as a loop body sees them: a classical value that changes across
    iterations has no Qiskit form here (no classical variables)."""
    return [value if same or value is _QUBITS else
            _Opaque(f"carry {m} of the {_LOOP_NAMES[eqn.primitive.name]} at {where} changes "
                    "from one iteration to the next; the export keeps no classical variables")
            for m, (value, same) in enumerate(zip(carry, _invariant_carries(eqn)))]


def _constant_int(value: Any, what: str) -> int:
    if not isinstance(value, np.ndarray) or _symbolic(value):
        reason = value.reason if isinstance(value, _Opaque) else "it is not a constant"
        raise QdiffError(f"to_qiskit: {what} cannot be exported: {reason}")
    return int(value)


def _loop(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
          top: bool) -> list[Any]:
    from qiskit.circuit import Parameter

    start = _constant_int(args[0], f"the start of the loop at {where}")
    stop = _constant_int(args[1], f"the end of the loop at {where}")
    body, num_consts = eqn.params["body"], eqn.params["num_consts"]
    consts, carry = args[2:2 + num_consts], args[2 + num_consts:]
    if stop <= start:
        return list(carry)
    parameter = Parameter(f"i{ex.loops}")
    ex.loops += 1
    inner: Block = []
    try:
        outs = ex.run(body, [_objects([parameter], ()), *consts,
                             *_carry_values(eqn, carry, where)], inner, f"{where} body > ",
                      top=False)
    except QdiffError as exc:
        return _unroll(ex, eqn, args, block, where, start, stop, str(exc))
    block.append(("for", range(start, stop), parameter, inner))
    return [o if o is _QUBITS else v for o, v in zip(outs, _carry_values(eqn, carry, where))]


def _unroll(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str, start: int,
            stop: int, reason: str) -> list[Any]:
    if stop - start > MAX_UNROLL:
        raise QdiffError(f"{reason} (the loop at {where} runs {stop - start} times, too many "
                         f"to unroll; at most {MAX_UNROLL})")
    body, num_consts = eqn.params["body"], eqn.params["num_consts"]
    consts, carry = args[2:2 + num_consts], list(args[2 + num_consts:])
    dtype = np.asarray(args[0]).dtype
    for i in range(start, stop):
        carry = ex.run(body, [np.asarray(i, dtype), *consts, *carry], block,
                       f"{where} body (i={i}) > ", top=False)
        # a clbit read in a later iteration would hold that iteration's measurement
        carry = [_Opaque(f"a measured value is carried across iterations of the loop at "
                         f"{where}") if isinstance(c, _Measured) else c for c in carry]
    ex.notes.append(f"the loop at {where} is unrolled ({stop - start} iterations): "
                    f"{reason.removeprefix('to_qiskit: ')}")
    return carry


def _alias_remeasured(ex: _Exporter, eqn: Eqn, body: Program, inputs: list[Any],
                      num_carry: int, where: str) -> None:
    """Make the body's measurements that produce a measured carry write the clbits the carry
    held on entry (Qiskit's while loop reads the same clbits every iteration).

    The body is read once into a scratch block to find them; the clbits that reading
    allocated are given back."""
    entry = inputs[len(inputs) - num_carry:]
    if not any(isinstance(v, _Measured) for v in entry):
        return
    saved = dict(ex.clbits)
    outs = ex.run(body, inputs, [], f"{where} body > ", False)
    fresh = {index: key for key, index in ex.clbits.items() if key not in saved}
    ex.clbits = saved
    for before, after in zip(entry, outs):
        if not (isinstance(before, _Measured) and isinstance(after, _Measured)
                and len(after.clbits) == len(before.clbits)
                and np.array_equal(after.table, before.table)):
            continue
        for new, old in zip(after.clbits, before.clbits):
            if new in fresh:
                ex.clbits[fresh[new]] = old


def _loop_test(pred: Any, what: str) -> _Measured | bool:
    """A while test: a constant, or a function of measured clbits."""
    if isinstance(pred, np.ndarray) and not _symbolic(pred):
        return bool(pred)
    if isinstance(pred, _Measured):
        test = _Measured(pred.clbits, pred.table.astype(bool)).simplified()
        return test if test.clbits else bool(test.table)
    reason = pred.reason if isinstance(pred, _Opaque) else "it is not a function of clbits"
    raise QdiffError(f"to_qiskit: {what} must test measured bits: {reason}")


def _while(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
           top: bool) -> list[Any]:
    p = eqn.params
    if p["max_iter"] is not None:
        raise QdiffError(f"to_qiskit: the 'while' loop at {where} has max_iter={p['max_iter']}: "
                         "a bounded loop aborts the run at its bound, and Qiskit's while_loop "
                         "has no abort; export the loop without max_iter")
    cc, bc = p["num_cond_consts"], p["num_body_consts"]
    entry = args[cc + bc:]
    # a carry holding measured bits (a clbit the loop test reads, rewritten by a measurement
    # in the body: an imported Qiskit loop) is kept when the body measures it again
    carry = [v if isinstance(v, _Measured) else c
             for v, c in zip(entry, _carry_values(eqn, entry, where))]
    what = f"the test of the while loop at {where}"
    pred, *carry_out = ex.run(p["cond"], [*args[:cc], *carry], block, f"{where} cond > ", False)
    test = _loop_test(pred, what)
    if test is False:
        return carry_out
    if test is True:
        raise QdiffError(f"to_qiskit: {what} is always true: the loop never ends")
    _alias_remeasured(ex, eqn, p["body"], [*args[cc:cc + bc], *carry_out], len(entry), where)
    inner: Block = []
    outs = ex.run(p["body"], [*args[cc:cc + bc], *carry_out], inner, f"{where} body > ", False)
    for m, (before, after) in enumerate(zip(carry_out, outs)):
        if isinstance(before, _Measured) and not (
                isinstance(after, _Measured) and after.clbits == before.clbits
                and np.array_equal(after.table, before.table)):
            raise QdiffError(f"to_qiskit: carry {m} of the while loop at {where} holds measured "
                             "bits that the body changes other than by measuring them again")
    again, *_ = ex.run(p["cond"], [*args[:cc], *outs], inner, f"{where} cond > ", False)
    again = _loop_test(again, what)
    if not (isinstance(again, _Measured) and again.clbits == test.clbits and
            np.array_equal(again.table, test.table)):
        raise QdiffError(f"to_qiskit: {what} reads other bits after the first iteration")
    block.append(("while", test, inner))
    return carry_out


def _cond(ex: _Exporter, eqn: Eqn, args: list[Any], block: Block, where: str,
          top: bool) -> list[Any]:
    branches = eqn.params["branches"]
    index, operands = args[0], args[1:]
    if isinstance(index, np.ndarray) and not _symbolic(index):
        k = int(np.clip(int(index), 0, len(branches) - 1))
        return ex.run(branches[k], operands, block, f"{where} branch {k} > ", top)
    if not isinstance(index, _Measured):
        reason = index.reason if isinstance(index, _Opaque) else "it is no function of clbits"
        raise QdiffError(f"to_qiskit: the condition of 'cond' at {where} cannot be exported: "
                         f"{reason}")
    chosen = _Measured(index.clbits, np.clip(index.table.astype(np.int64), 0,
                                              len(branches) - 1)).simplified()
    if not chosen.clbits:
        return _cond(ex, eqn, [np.asarray(chosen.table), *operands], block, where, top)
    blocks: dict[int, Block] = {}
    results: list[list[Any]] = []
    for k in sorted(set(chosen.table.reshape(-1).tolist())):
        blocks[k] = []
        results.append(ex.run(branches[k], operands, blocks[k], f"{where} branch {k} > ",
                              False))
    if len(chosen.clbits) == 1:
        low, high = (int(b) for b in chosen.table)
        block.append(("if", (chosen.clbits[0], 1), blocks[high], blocks[low]))
    else:
        cases: dict[int, list[int]] = {}
        for value in range(2 ** len(chosen.clbits)):
            bits = tuple((value >> j) & 1 for j in range(len(chosen.clbits)))
            cases.setdefault(int(chosen.table[bits]), []).append(value)
        block.append(("switch", chosen.clbits, [(labels, blocks[k])
                                                for k, labels in cases.items()]))
    outs = []
    for m, values in enumerate(zip(*results)):
        opaque = next((v for v in values if isinstance(v, _Opaque)), None)
        if opaque is not None:  # its own reason says more than "the branches differ"
            outs.append(opaque)
            continue
        first = values[0]
        outs.append(first if all(_same(first, v) for v in values) else _Opaque(
            f"output {m} of 'cond' at {where} differs between branches; the export keeps no "
            "classical variables"))
    return outs


_CONTROL: dict[Primitive, Callable[..., list[Any]]] = {loop_p: _loop, while_p: _while,
                                                       cond_p: _cond}


# ------------------------------------------------------------------------- building circuits
def _emit(circuit: Any, block: Block, measured: Any) -> None:
    """Append ``block`` with Qiskit's control-flow builders (they track the bits each body
    uses)."""
    from qiskit import ClassicalRegister

    qubits = circuit.qubits
    for op in block:
        kind = op[0]
        if kind == "gate":
            circuit.append(op[1], [qubits[w] for w in op[2]])
        elif kind == "measure":
            circuit.measure(qubits[op[1]], measured[op[2]])
        elif kind == "reset":
            circuit.reset(qubits[op[1]])
        elif kind == "for":
            with circuit.for_loop(op[1], op[2]):
                _emit(circuit, op[3], measured)
        elif kind == "while":
            with circuit.while_loop(_condition(op[1], measured)):
                _emit(circuit, op[2], measured)
        elif kind == "if":
            clbit, value = op[1]
            with circuit.if_test((measured[clbit], value)) as otherwise:
                _emit(circuit, op[2], measured)
            if op[3]:
                with otherwise:
                    _emit(circuit, op[3], measured)
        else:  # switch: the register over the tested clbits, clbits[0] least significant
            register = ClassicalRegister(name=f"switch{len(circuit.cregs)}",
                                         bits=[measured[c] for c in op[1]])
            circuit.add_register(register)
            with circuit.switch(register) as case:
                for labels, body in op[2]:
                    with case(*labels):
                        _emit(circuit, body, measured)


def _condition(test: _Measured, measured: Any) -> Any:
    """A function of clbits as a Qiskit condition: ``(clbit, value)`` for one bit, else the
    OR of the outcomes where it holds (each an AND of clbit literals)."""
    from qiskit.circuit.classical import expr

    bits = [measured[c] for c in test.clbits]
    if len(bits) == 1:
        return bits[0], int(np.argmax(test.table))
    outcomes = []
    for values in zip(*np.nonzero(test.table)):
        literals = [expr.lift(b) if v else expr.logic_not(b) for b, v in zip(bits, values)]
        outcomes.append(functools.reduce(expr.logic_and, literals))
    return functools.reduce(expr.logic_or, outcomes)
