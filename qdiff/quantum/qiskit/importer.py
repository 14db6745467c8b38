"""Import Qiskit circuits, dynamic circuits included, as qdiff programs.

`from_qiskit(circuit, observables)` traces a program that replays the circuit through the
quantum front end, so the result is an ordinary qdiff Program: every engine runs and
differentiates it. The program takes one float64 array, the values of
``circuit.parameters`` in that (Qiskit's sorted) order, and returns

- the expectation of each observable (``SparsePauliOp``, Qiskit's label order) when
  ``observables`` is given (one, or a list);
- otherwise the distribution of the classical register (the probability of each integer
  value of the clbits, clbit 0 least significant) when the circuit has clbits, else the
  probabilities of the qubits.

What is translated:
- gates of ``qiskit.circuit.library`` with a table twin in qdiff keep their name and
  matrix; any other gate goes through its definition (recursively), or, when it has no
  free parameter, through its matrix as a ``unitary``;
- ``Parameter``, ``ParameterVector`` elements and ``ParameterExpression``s (affine or not:
  sums, products, powers, sin, cos, tan, arcsin, arccos, arctan, exp, log, abs) become IR
  arithmetic, so the chain rule goes through them;
- ``measure`` (into clbits), ``reset``, ``barrier``/``delay``/``id`` (nothing), global phases
  (no effect on any expectation);
- control flow: ``if_else``, ``while_loop`` (a loop on a measured bit has no bound),
  ``for_loop`` (its loop parameter may appear in angles), ``switch_case``, ``box``, nested;
  conditions on a clbit, a register, or a classical expression of them.

Anything else raises a `QdiffError` that names the instruction and where it sits.

>>> from qiskit import QuantumCircuit
>>> from qiskit.circuit import Parameter
>>> from qiskit.quantum_info import SparsePauliOp
>>> t = Parameter("t")
>>> qc = QuantumCircuit(2)
>>> _ = qc.ry(2 * t, 0); _ = qc.cx(0, 1)
>>> program = from_qiskit(qc, SparsePauliOp("ZZ"))
>>> import qdiff
>>> round(float(qdiff.grad(program)(np.array([0.3]))[0]), 6)  # d/dt <ZZ> = 0
0.0
>>> round(float(program(np.array([0.3]))), 6)
1.0
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import numpy as qnp
from ...ir.control_flow import cond as qd_cond
from ...ir.control_flow import fori_loop, switch, while_loop
from ...ir.core import Program
from ...ir.errors import QdiffError
from ...ir.tracer import Cell, trace
from ..lang import frontend as qm
from ..lang.gates import _QISKIT_CLASSES
from .evolution import evolve_hermitian, evolve_paulis
from .observables import as_pauli_sums, as_sparse_pauli_op

# Qiskit class name -> qdiff table name (same matrix and parameter order).
_TABLE_BY_CLASS = {cls: name for name, cls in _QISKIT_CLASSES.items()}
_NOTHING = ("barrier", "delay", "id", "global_phase")


def from_qiskit(circuit: Any, observables: Any = None, name: str | None = None,
                dtype: Any = np.complex128) -> Any:
    """The qdiff Program of a Qiskit ``QuantumCircuit`` (see the module docstring); its
    register holds amplitudes of ``dtype`` (complex128, or complex64: single precision).

    >>> from qiskit import QuantumCircuit
    >>> qc = QuantumCircuit(1); _ = qc.h(0)
    >>> "dtype='complex64'" in str(from_qiskit(qc, dtype=np.complex64))
    True
    """
    from qiskit import QuantumCircuit

    if not isinstance(circuit, QuantumCircuit):
        raise QdiffError(f"from_qiskit needs a qiskit QuantumCircuit, got {type(circuit)}")
    if circuit.num_qubits < 1:
        raise QdiffError("from_qiskit: the circuit has no qubits")
    parameters = list(circuit.parameters)
    ops = None if observables is None else as_pauli_sums(observables, circuit.num_qubits)

    def program(*values: Any) -> Any:
        env = dict(zip(parameters, _entries(values[0], len(parameters)))) if values else {}
        register = qm.qubits(circuit.num_qubits, dtype=dtype)
        scope = _Scope(register, {q: k for k, q in enumerate(circuit.qubits)},
                       {c: Cell(np.int64(0)) for c in circuit.clbits}, env)
        _replay(circuit, scope, "circuit")
        if ops is not None:
            values_out = [qm.expval(op, list(register)) for op in ops]
            return values_out[0] if not isinstance(observables, (list, tuple)) else \
                tuple(values_out)
        if circuit.num_clbits:
            return _one_hot(_register_value([scope.clbits[c] for c in circuit.clbits]),
                            2 ** circuit.num_clbits)
        return qm.probs(list(register))

    examples = (np.zeros(len(parameters)),) if parameters else ()
    traced = trace(program, *examples, name=name or circuit.name or "qiskit_circuit")
    return ImportedCircuit(traced.inputs, traced.eqns, traced.outputs, name=traced.name,
                           in_tree=traced.in_tree, out_tree=traced.out_tree,
                           parameters=tuple(parameters))


@dataclass(eq=False)
class ImportedCircuit(Program):
    """The Program of an imported circuit, which also takes its parameter values as a dict
    ``{Parameter or name: value}`` (any order); ``parameters`` is Qiskit's sorted order of
    the array it takes otherwise."""

    parameters: tuple = ()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args, _ = self.positional_arguments(args)
        if not self.parameters and len(args) == 1 and np.size(args[0]) == 0:
            args = ()  # a circuit without parameters takes its (empty) array of values too
        shapes = [np.shape(a) for a in args]
        if self.parameters and len(args) == 1 and shapes[0] != (len(self.parameters),):
            names = ", ".join(p.name for p in self.parameters)
            raise QdiffError(f"the circuit has {len(self.parameters)} parameter(s) ({names}); "
                             f"pass their values as one array in that order or as a dict "
                             f"{{Parameter: value}}, got arguments of shapes {shapes}")
        return super().__call__(*args, **kwargs)

    def positional_arguments(self, args: tuple) -> tuple[tuple, Callable[[Any], Any] | None]:
        """``args`` with a dict of parameter values as the array the Program takes, and how
        to key a gradient of that array like the dict (None when no dict was given): what
        `qdiff.quantum.run`, `qdiff.quantum.gradient` and `qdiff.grad` call
        (`qdiff.quantum.execution.keyed_arguments`).

        >>> from qiskit import QuantumCircuit
        >>> from qiskit.circuit import Parameter
        >>> a, b = Parameter("a"), Parameter("b")
        >>> qc = QuantumCircuit(1); _ = qc.rx(a, 0); _ = qc.ry(b, 0)
        >>> args, rekey = from_qiskit(qc).positional_arguments(({b: 2.0, a: 1.0},))
        >>> args, rekey(np.array([10.0, 20.0]))
        ((array([1., 2.]),), {Parameter(b): np.float64(20.0), Parameter(a): np.float64(10.0)})
        """
        if len(args) != 1 or not isinstance(args[0], dict):
            return tuple(args), None
        given = args[0]
        values = self.values_of(given)
        by_name = {p.name: k for k, p in enumerate(self.parameters)}
        slots = [(key, by_name[key if isinstance(key, str) else key.name]) for key in given]

        def rekey(grad: Any) -> dict:
            flat = np.asarray(grad)
            return {key: flat[k] for key, k in slots}

        return (values,), rekey

    def values_of(self, values: dict) -> np.ndarray:
        """The array of parameter values of ``{Parameter or name: value}``, checked: every
        parameter once, nothing else.

        >>> from qiskit import QuantumCircuit
        >>> from qiskit.circuit import Parameter
        >>> a, b = Parameter("a"), Parameter("b")
        >>> qc = QuantumCircuit(1); _ = qc.rx(a, 0); _ = qc.ry(b, 0)
        >>> from_qiskit(qc).values_of({b: 2.0, "a": 1.0})
        array([1., 2.])
        """
        by_name = {p.name: k for k, p in enumerate(self.parameters)}
        result: list[Any] = [None] * len(self.parameters)
        for key, value in values.items():
            name = key if isinstance(key, str) else getattr(key, "name", None)
            k = by_name.get(name) if name is not None else None
            if k is None or (not isinstance(key, str) and self.parameters[k] != key):
                raise QdiffError(f"{key!r} is not a parameter of the circuit; its parameters "
                                 f"are {', '.join(by_name) or 'none'}")
            if result[k] is not None:
                raise QdiffError(f"parameter {name!r} is given twice")
            result[k] = value
        missing = [p.name for p, v in zip(self.parameters, result) if v is None]
        if missing:
            raise QdiffError(f"no value for the parameter(s) {', '.join(missing)}")
        return np.array([float(v) for v in result], np.float64)


def _entries(values: Any, count: int) -> list[Any]:
    shape = getattr(values, "shape", None)
    if shape != (count,):
        raise QdiffError(f"the circuit has {count} parameters; pass their values as one "
                         f"array of shape ({count},), got shape {shape}")
    return [values[k] for k in range(count)]


class _Scope:
    """Where a (sub-)circuit's qubits, clbits and parameters live in the program."""

    def __init__(self, register: Any, wires: dict, clbits: dict[Any, Cell], env: dict):
        self.register, self.wires, self.clbits, self.env = register, wires, clbits, env

    def inner(self, body: Any, qubits: Sequence[Any], clbits: Sequence[Any],
              env: dict | None = None) -> _Scope:
        """The scope of a control-flow body or gate definition, bound positionally."""
        return _Scope(self.register,
                      {q: self.wires[outer] for q, outer in zip(body.qubits, qubits)},
                      {c: self.clbits[outer] for c, outer in zip(body.clbits, clbits)},
                      self.env if env is None else env)

    def wire(self, qubit: Any) -> Any:
        return self.register[self.wires[qubit]]


def _replay(circuit: Any, scope: _Scope, where: str) -> None:
    for index, instruction in enumerate(circuit.data):
        _instruction(instruction, scope, f"{where}.data[{index}]")


def _instruction(instruction: Any, scope: _Scope, where: str) -> None:
    op = instruction.operation
    name = op.name
    qubits, clbits = instruction.qubits, instruction.clbits
    wires = [scope.wire(q) for q in qubits]
    if name in _NOTHING:
        return
    handler = _CONTROL_FLOW.get(name)
    if handler is not None:
        handler(op, qubits, clbits, scope, where)
        return
    if name == "measure":
        (wire,), (clbit,) = wires, clbits
        scope.clbits[clbit].set(qnp.asarray(qm.measure(wire)).astype("int64"))
        return
    if name == "reset":
        qm.reset(wires[0])
        return
    if getattr(op, "_condition", None) is not None:
        raise _unsupported(name, where, "classically conditioned gates (use if_else)")
    if not hasattr(op, "to_matrix") and op.definition is None:
        raise _unsupported(name, where, "no matrix and no definition")
    _gate(op, wires, qubits, clbits, scope, where)


def _gate(op: Any, wires: list[Any], qubits: Sequence[Any], clbits: Sequence[Any],
          scope: _Scope, where: str) -> None:
    # singleton gates (qc.h, qc.cx, ...) are subclasses: their base class names the gate
    table = _TABLE_BY_CLASS.get(getattr(op, "base_class", type(op)).__name__)
    controls = getattr(op, "num_ctrl_qubits", 0)
    plain_controls = not controls or op.ctrl_state == 2 ** controls - 1
    if table is not None and plain_controls:
        qm.apply(table, [_angle(p, scope.env, where) for p in op.params], wires)
        return
    if op.name in ("mcx", "ccx") and plain_controls:
        qm.mcx(wires[:-1], wires[-1])
        return
    if op.name == "ccz" and plain_controls:
        qm.mcz(wires[:-1], wires[-1])
        return
    free = any(_is_expression(p) for p in op.params)
    evolution = _EVOLUTIONS.get(op.name)
    if evolution is not None and not controls:
        evolution(op, wires, scope, where)
        return
    if free and getattr(getattr(op, "base_gate", op), "name", None) in _EVOLUTIONS:
        raise _unsupported(op.name, where, "a controlled evolution gate with a free "
                           "parameter: its definition is a product formula, not exp(-itH); "
                           "bind the time, or control the gates of an exact decomposition")
    if not free:
        try:
            matrix = np.asarray(op.to_matrix(), complex)
        except Exception:  # noqa: BLE001 (Qiskit raises various errors for "no matrix")
            matrix = None
        if matrix is not None:
            qm.unitary(matrix, wires)
            return
    definition = op.definition
    if definition is None:
        raise _unsupported(op.name, where, "no definition to decompose it with")
    _replay(definition, scope.inner(definition, qubits, clbits),
            f"{where}({op.name}).definition")


def _pauli_evolution(op: Any, wires: list[Any], scope: _Scope, where: str) -> None:
    # a list of operators means their sum (Qiskit's matrix of the gate)
    what = f"PauliEvolutionGate at {where}"
    parts = op.operator if isinstance(op.operator, list) else [op.operator]
    operators = [as_sparse_pauli_op(part, what) for part in parts]
    operator = sum(operators[1:], operators[0])
    evolve_paulis(operator.simplify(atol=0.0).to_list(),
                  _angle(op.params[0], scope.env, where), wires, what)


def _hamiltonian_evolution(op: Any, wires: list[Any], scope: _Scope, where: str) -> None:
    matrix, time = op.params
    evolve_hermitian(matrix, _angle(time, scope.env, where), wires,
                     f"HamiltonianGate at {where}")


# evolution gates: exact exp(-itH) whether the time is a number or a parameter
_EVOLUTIONS: dict[str, Callable[[Any, list[Any], _Scope, str], None]] = {
    "PauliEvolution": _pauli_evolution, "hamiltonian": _hamiltonian_evolution,
}


def _is_expression(value: Any) -> bool:
    from qiskit.circuit import ParameterExpression

    return isinstance(value, ParameterExpression) and bool(value.parameters)


# -------------------------------------------------------------------------- expressions
_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "ADD": lambda a, b: a + b, "SUB": lambda a, b: a - b, "MUL": lambda a, b: a * b,
    "DIV": lambda a, b: a / b, "POW": lambda a, b: a ** b, "RSUB": lambda a, b: b - a,
    "RDIV": lambda a, b: b / a, "RPOW": lambda a, b: b ** a,
}
_UNARY: dict[str, Callable[[Any], Any]] = {
    "SIN": qnp.sin, "COS": qnp.cos, "TAN": qnp.tan, "ASIN": qnp.arcsin, "ACOS": qnp.arccos,
    "ATAN": qnp.arctan, "EXP": qnp.exp, "LOG": qnp.log, "ABS": qnp.abs, "SIGN": qnp.sign,
    "CONJ": lambda a: a,  # real parameters
}


def _angle(value: Any, env: dict, where: str) -> Any:
    """A gate parameter as a traced value: numbers stay numbers, symbols read ``env``,
    expressions are replayed operation by operation (Qiskit's own postfix record of them)."""
    from qiskit.circuit import Parameter, ParameterExpression

    if isinstance(value, Parameter):
        if value not in env:
            raise QdiffError(f"parameter {value.name!r} at {where} is not a circuit parameter "
                             "(a loop parameter used outside its loop?)")
        return env[value]
    if not isinstance(value, ParameterExpression):
        if isinstance(value, (int, float, np.integer, np.floating)):
            return float(value)
        if isinstance(value, complex) and value.imag == 0:
            return float(value.real)
        raise QdiffError(f"gate parameter {value!r} at {where} is not a real number")
    if not value.parameters:
        return float(np.real(value.numeric()))
    if value.is_symbol():
        (symbol,) = value.parameters
        return _angle(symbol, env, where)
    stack: list[Any] = []

    def operand(x: Any) -> Any:
        return stack.pop() if x is None else _angle(x, env, where)

    replay = getattr(value, "_qpy_replay", None)
    if replay is None:
        raise QdiffError(f"parameter expression {value} at {where}: reading expressions needs "
                         "Qiskit 2.1 or newer")
    for step in replay:
        code = str(step.op).rsplit(".", 1)[-1]
        if code in _BINARY:
            rhs = operand(step.rhs)
            lhs = operand(step.lhs)
            stack.append(_BINARY[code](lhs, rhs))
        elif code in _UNARY:
            stack.append(_UNARY[code](operand(step.lhs)))
        else:
            raise QdiffError(f"parameter expression {value} at {where}: operation {code} is "
                             "not supported")
    if len(stack) != 1:
        raise QdiffError(f"internal: could not replay the parameter expression {value}")
    return stack[0]


# -------------------------------------------------------------------------- control flow
def _register_value(cells: Sequence[Cell]) -> Any:
    total = qnp.asarray(np.int64(0))
    for k, cell in enumerate(cells):
        total = total + cell.value * (2 ** k)
    return total


def _one_hot(value: Any, size: int) -> Any:
    return (qnp.arange(size) == value).astype("float64")


def _condition(condition: Any, scope: _Scope, where: str) -> Any:
    """A traced bool for a Qiskit condition: ``(clbit, value)``, ``(register, value)`` or a
    classical expression."""
    from qiskit.circuit import ClassicalRegister, Clbit

    if isinstance(condition, tuple):
        target, value = condition
        if isinstance(target, Clbit):
            return scope.clbits[target].value == int(value)
        if isinstance(target, ClassicalRegister):
            return _register_value([scope.clbits[c] for c in target]) == int(value)
        raise QdiffError(f"condition on {target!r} at {where} is not supported")
    result = _expr(condition, scope, where)
    return result if _is_bool(condition) else result != 0


def _is_bool(node: Any) -> bool:
    from qiskit.circuit.classical import types

    return isinstance(node.type, types.Bool)


def _expr(node: Any, scope: _Scope, where: str) -> Any:
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.classical import expr

    if isinstance(node, expr.Var):
        var = node.var
        if isinstance(var, Clbit):
            return scope.clbits[var].value == 1
        if isinstance(var, ClassicalRegister):
            return _register_value([scope.clbits[c] for c in var])
        raise _unsupported(f"classical variable {node.name}", where,
                           "only clbits and classical registers")
    if isinstance(node, expr.Value):
        return qnp.asarray(node.value)
    if isinstance(node, expr.Cast):
        inner = _expr(node.operand, scope, where)
        if _is_bool(node) and not _is_bool(node.operand):
            return inner != 0
        if _is_bool(node.operand) and not _is_bool(node):
            return inner.astype("int64")
        return inner
    if isinstance(node, expr.Unary):
        value = _expr(node.operand, scope, where)
        if node.op in (expr.Unary.Op.LOGIC_NOT, expr.Unary.Op.BIT_NOT) and _is_bool(node):
            return qnp.logical_not(value)
        raise _unsupported(f"classical operation {node.op.name}", where, "")
    if isinstance(node, expr.Binary):
        left, right = _expr(node.left, scope, where), _expr(node.right, scope, where)
        ops = expr.Binary.Op
        table = {
            ops.EQUAL: lambda a, b: a == b, ops.NOT_EQUAL: lambda a, b: a != b,
            ops.LESS: lambda a, b: a < b, ops.LESS_EQUAL: lambda a, b: a <= b,
            ops.GREATER: lambda a, b: a > b, ops.GREATER_EQUAL: lambda a, b: a >= b,
            ops.LOGIC_AND: qnp.logical_and, ops.LOGIC_OR: qnp.logical_or,
        }
        if node.op in table:
            return table[node.op](left, right)
        if node.op in (ops.BIT_AND, ops.BIT_OR, ops.BIT_XOR) and _is_bool(node):
            return {ops.BIT_AND: qnp.logical_and, ops.BIT_OR: qnp.logical_or,
                    ops.BIT_XOR: qnp.logical_xor}[node.op](left, right)
        raise _unsupported(f"classical operation {node.op.name}", where, "")
    raise _unsupported(f"classical expression {type(node).__name__}", where, "")


def _if_else(op: Any, qubits: Any, clbits: Any, scope: _Scope, where: str) -> None:
    true_body, false_body = op.params
    pred = _condition(op.condition, scope, where)

    def branch(body: Any, label: str) -> Callable[[], None]:
        def run() -> None:
            if body is not None:
                _replay(body, scope.inner(body, qubits, clbits), f"{where}.{label}")
        return run

    qd_cond(pred, branch(true_body, "true_body"), branch(false_body, "false_body"))


def _while(op: Any, qubits: Any, clbits: Any, scope: _Scope, where: str) -> None:
    (body,) = op.params
    inner = scope.inner(body, qubits, clbits)
    while_loop(lambda: _condition(op.condition, scope, where),
               lambda: _replay(body, inner, f"{where}.body"))


def _for(op: Any, qubits: Any, clbits: Any, scope: _Scope, where: str) -> None:
    indexset, parameter, body = op.params
    values = list(indexset)
    if not values:
        return
    steps = np.diff(values)
    regular = len(values) == 1 or bool(np.all(steps == steps[0]))
    start, step = values[0], (int(steps[0]) if len(values) > 1 else 1)
    table = qnp.asarray(np.asarray(values, np.float64))

    def run(i: Any) -> None:
        env = scope.env
        if parameter is not None:
            value = (start + step * i) * 1.0 if regular else table[i]
            env = {**scope.env, parameter: value}
        _replay(body, scope.inner(body, qubits, clbits, env), f"{where}.body")

    fori_loop(0, len(values), run)


def _switch(op: Any, qubits: Any, clbits: Any, scope: _Scope, where: str) -> None:
    from qiskit.circuit import ClassicalRegister, Clbit
    from qiskit.circuit.controlflow import CASE_DEFAULT

    target = op.target
    if isinstance(target, Clbit):
        value = scope.clbits[target].value
    elif isinstance(target, ClassicalRegister):
        value = _register_value([scope.clbits[c] for c in target])
    else:
        value = _expr(target, scope, where)
        value = value.astype("int64") if _is_bool(target) else value
    cases = list(op.cases_specifier())
    bodies = [body for _, body in cases]
    default = next((k for k, (labels, _) in enumerate(cases) if CASE_DEFAULT in labels),
                   len(cases))
    index = qnp.asarray(np.int64(default))
    for k in reversed(range(len(cases))):
        for label in cases[k][0]:
            if label is not CASE_DEFAULT:
                index = qnp.where(value == int(label), np.int64(k), index)
    funcs = [_body_runner(body, qubits, clbits, scope, f"{where}.case[{k}]")
             for k, body in enumerate(bodies)]
    if default == len(cases):
        funcs.append(lambda: None)  # no case matched: nothing happens
    switch(index, funcs)


def _body_runner(body: Any, qubits: Any, clbits: Any, scope: _Scope,
                 where: str) -> Callable[[], None]:
    return lambda: _replay(body, scope.inner(body, qubits, clbits), where)


def _box(op: Any, qubits: Any, clbits: Any, scope: _Scope, where: str) -> None:
    (body,) = op.params[:1]
    _replay(body, scope.inner(body, qubits, clbits), f"{where}.body")


def _loop_exit(op: Any, qubits: Any, clbits: Any, scope: _Scope, where: str) -> None:
    raise _unsupported(op.name, where, "qdiff loops have no break or continue; put the rest "
                                       "of the body under an if_else")


_CONTROL_FLOW: dict[str, Callable[..., None]] = {
    "if_else": _if_else, "while_loop": _while, "for_loop": _for, "switch_case": _switch,
    "box": _box, "break_loop": _loop_exit, "continue_loop": _loop_exit,
}


def _unsupported(name: str, where: str, why: str) -> QdiffError:
    return QdiffError(f"from_qiskit: unsupported instruction {name!r} at {where}"
                      + (f": {why}" if why else ""))

