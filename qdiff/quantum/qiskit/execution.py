"""Programs and their gradients on Qiskit samplers: shots, standard errors, one call per job.

A program is exported (`to_qiskit`) and sampled with any ``SamplerV2``: Qiskit Aer's when
installed (it runs dynamic circuits), else Qiskit's reference ``StatevectorSampler`` (final
measurements only), or one the user passes (``BackendSamplerV2(backend)`` for hardware).
Expectation values are measured term group by term group: the Pauli terms of all
observables are split into qubit-wise commuting groups, and each group's circuit rotates
every qubit into its group's basis and measures all of them; a term's value on a shot is the
parity of its qubits. Probabilities and functions of measured bits are read from the same
shots. Every estimate comes with its standard error.

Loops that end on a measurement need a sampler that runs ``while_loop``. Where the sampler
does not (the reference sampler, most hardware), the host runs the loop itself: the loop is
unrolled k = 0, 1, ... times with each test's bit kept, and from the shots of the k-fold
circuit only those whose tests read "go on" k times and then "stop" count (they are
samples of the runs that stop after exactly k iterations). Rounds of circuits are submitted
until the shots still running fall below ``tol`` or ``max_iterations`` is reached; the mass
of runs cut off there is reported (``unterminated_mass``) with its standard error.

Gradients by parameter shift submit every shifted circuit of the gradient, and the
unshifted one for the value, in ONE sampler call (a batch of PUBs, one per circuit and
shift), or one call per round when a loop runs on the host. An ``EstimatorV2`` serves
circuits without measurements. Parameters are bound on the host: Qiskit Aer's SamplerV2
ignores PUB parameter values of controlled rotations and inside control flow.

>>> import qdiff
>>> from qdiff import quantum as qm
>>> def f(t):
...     q = qm.qubits(2)
...     qm.ry(t, q[0]); qm.cx(q[0], q[1])
...     return qm.expval("0.5*ZZ + XX", q)
>>> result = run_on_sampler(qdiff.trace(f, 0.0), [0.4], shots=4000, seed=1)
>>> bool(abs(result.values[0] - (0.5 + np.sin(0.4))) < 4 * result.stderr[0])
True
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import numpy as qnp
from ...ir.core import Eqn, Literal, Program, Var
from ...ir.errors import QdiffError
from ...ir.interpreter import eval_program
from ...ir.pytree import split_flat
from ...ir.tracer import bind, trace, value_type
from ...ir.types import Bit
from ..execution.options import RunOptions
from ..execution.run import ExternalMode, register_mode
from ..gradients.adjoint import RecordedRun
from ..gradients.shift_gradient import (
    Occurrences,
    ShiftResult,
    _Masses,
    _shifted_outcome,
    occurrence_plan,
)
from ..lang.sites import branches, check_readout_use
from .exporter import QiskitExport, to_qiskit

# (PUB data, row in the PUB's bindings, row of parameter values) -> (shots, outputs)
Contribution = Callable[[Any, int, int], np.ndarray]


# --------------------------------------------------------------------------------- samplers
def default_sampler(seed: Any = None) -> Any:
    """Qiskit Aer's ``SamplerV2`` when installed, else Qiskit's reference sampler."""
    try:
        from qiskit_aer.primitives import SamplerV2

        return SamplerV2(seed=seed)
    except ImportError:
        from qiskit.primitives import StatevectorSampler

        return StatevectorSampler(seed=seed)


def as_primitive(primitive: Any, seed: Any = None) -> Any:
    """A sampler or estimator as given; a Qiskit ``BackendV2`` (a device, or a simulator
    such as ``AerSimulator()``) as a sampler that transpiles every circuit for it first;
    ``None`` as `default_sampler`."""
    if primitive is None:
        return default_sampler(seed)
    from qiskit.providers import BackendV2

    return _BackendSampler(primitive) if isinstance(primitive, BackendV2) else primitive


class _BackendSampler:
    """``BackendSamplerV2`` on a backend, circuits transpiled to its instruction set."""

    def __init__(self, backend: Any):
        from qiskit.primitives import BackendSamplerV2

        self.backend = backend
        self._sampler = BackendSamplerV2(backend=backend)

    def run(self, pubs: list, *, shots: int | None = None) -> Any:
        from qiskit import transpile

        circuits = transpile([pub[0] for pub in pubs], self.backend, optimization_level=1)
        return self._sampler.run([(c, *pub[1:]) for c, pub in zip(circuits, pubs)],
                                 shots=shots)


def _capabilities(sampler: Any) -> tuple[bool, bool]:
    """(runs control flow, runs mid-circuit measurements) for a sampler or estimator; a
    sampler may say itself with ``supports_control_flow`` and ``supports_mid_circuit``."""
    from qiskit.primitives import StatevectorSampler

    declared = getattr(sampler, "supports_control_flow", None)
    if declared is not None:
        return bool(declared), bool(getattr(sampler, "supports_mid_circuit", True))

    if isinstance(sampler, StatevectorSampler) or _is_estimator(sampler):
        return False, False
    if "qiskit_aer" in type(sampler).__module__:
        return True, True
    backend = getattr(sampler, "backend", None) or getattr(sampler, "_backend", None)
    target = getattr(backend, "target", None)
    if target is not None:
        names = set(target.operation_names)
        return "while_loop" in names, True
    return True, True  # unknown: let it try


# ------------------------------------------------------------------------- what to sample
@dataclass
class _Job:
    """One circuit to sample at rows of parameter values, and how each row's shots
    contribute to the program's flat outputs."""

    circuit: Any
    rows: np.ndarray
    contribution: Contribution | None
    group: int  # which estimate (base value, shifted run) its rows add to
    export: QiskitExport | None = None  # for an estimator: what the outputs are
    skip_outputs: int = 0


def _pauli_groups(observables: Sequence[Any]) -> list[tuple[str, list[tuple[int, str, float]]]]:
    """Qubit-wise commuting groups of all terms: (basis per qubit, Qiskit order; terms as
    (observable, label, coefficient))."""
    groups: list[tuple[list[str], list[tuple[int, str, float]]]] = []
    for k, op in enumerate(observables):
        for label, coefficient in op.to_list():
            if abs(coefficient.imag) > 1e-12:
                raise QdiffError(f"observable {k} has a complex coefficient {coefficient}")
            for basis, terms in groups:
                if all(a == "I" or b in ("I", a) for a, b in zip(label, basis)):
                    for i, a in enumerate(label):
                        if a != "I":
                            basis[i] = a
                    terms.append((k, label, coefficient.real))
                    break
            else:
                groups.append((list(label), [(k, label, coefficient.real)]))
    return [("".join(basis), terms) for basis, terms in groups]


def _bits(data: Any, register: str, row: int) -> np.ndarray:
    """(shots, bits) booleans of a register at a row of parameter values, bit 0 first."""
    array = getattr(data, register).to_bool_array(order="little")
    return array.reshape(-1, *array.shape[-2:])[row]


def _clbit_columns(circuit: Any, clbits: Sequence[Any]) -> list[tuple[str, int]]:
    columns = []
    for clbit in clbits:
        location = circuit.find_bit(clbit)
        register, index = location.registers[0]
        columns.append((register.name, index))
    return columns


def _jobs(export: QiskitExport, rows: np.ndarray, group: int,
          valid: Callable[[Any, int], np.ndarray] | None = None,
          skip_outputs: int = 0) -> list[_Job]:
    """The circuits that estimate every output of ``export`` (the last ``skip_outputs``
    outputs are bookkeeping, not estimated), each shot weighted by ``valid`` (1 by
    default)."""
    from qiskit import ClassicalRegister

    outputs = export.outputs[:len(export.outputs) - skip_outputs]
    sizes = [_size(export, o) for o in outputs]
    offsets = np.cumsum([0, *sizes])
    total = int(offsets[-1])
    for k, out in enumerate(outputs):
        if out.kind == "statevector":
            raise QdiffError(f"output {k} is the statevector: a sampler cannot return it")
    circuit = export.circuit
    n = circuit.num_qubits
    groups = _pauli_groups(export.observables) if export.observables else []
    expval_slots = {out.observable: int(offsets[k]) for k, out in enumerate(outputs)
                    if out.kind == "expval"}

    def others(data: Any, row: int, values: int, shots: int) -> np.ndarray:
        # probabilities, measured values and classical values, from any one circuit
        result = np.zeros((shots, total))
        for k, out in enumerate(outputs):
            start = int(offsets[k])
            if out.kind == "probs":
                bits = _bits(data, out.register.name, row)
                index = bits.astype(np.int64) @ (1 << np.arange(bits.shape[1]))
                result[np.arange(shots), start + index] = 1.0
            elif out.kind == "measured":
                columns = _clbit_columns(circuit, out.clbits)
                picks = tuple(_bits(data, name, row)[:, i].astype(np.int64)
                              for name, i in columns)
                table = np.asarray(out.value, np.float64)
                result[:, start:start + sizes[k]] = table[picks].reshape(shots, -1)
            elif out.kind == "classical":
                result[:, start:start + sizes[k]] = _classical_value(
                    out.value, circuit, rows[values]).reshape(1, -1)
        return result

    def weight(data: Any, row: int, contribution: np.ndarray) -> np.ndarray:
        return contribution if valid is None else contribution * valid(data, row)[:, None]

    jobs: list[_Job] = []
    if not groups:
        jobs.append(_Job(circuit, rows, lambda data, row, values: weight(
            data, row, others(data, row, values, _num_shots(data))), group))
        return jobs
    for g, (basis, terms) in enumerate(groups):
        measured = circuit.copy()
        register = ClassicalRegister(n, "obs")
        measured.add_register(register)
        for q in range(n):
            letter = basis[n - 1 - q]  # Qiskit labels put qubit 0 last
            if letter == "X":
                measured.h(q)
            elif letter == "Y":
                measured.sdg(q)
                measured.h(q)
        measured.measure(range(n), register)

        def contribution(data: Any, row: int, values: int, terms: Any = terms,
                         first: bool = g == 0) -> Any:
            bits = _bits(data, "obs", row)
            shots = bits.shape[0]
            result = others(data, row, values, shots) if first else np.zeros((shots, total))
            for k, label, coefficient in terms:
                support = [q for q in range(n) if label[n - 1 - q] != "I"]
                parity = np.bitwise_xor.reduce(bits[:, support].astype(np.int64), axis=1) \
                    if support else np.zeros(shots, np.int64)
                result[:, expval_slots[k]] += coefficient * (1 - 2 * parity)
            return weight(data, row, result)

        jobs.append(_Job(measured, rows, contribution, group))
    return jobs


def _num_shots(data: Any) -> int:
    for name in data:
        return int(getattr(data, name).num_shots)
    raise QdiffError("internal: a sampler result without registers")


def _size(export: QiskitExport, out: Any) -> int:
    if out.kind == "probs":
        return 2 ** len(out.wires)
    if out.kind in ("measured", "classical"):
        value = np.asarray(out.value)
        return int(np.prod(value.shape[len(out.clbits):])) if out.kind == "measured" else \
            int(value.size)
    return 1


def _classical_value(value: Any, circuit: Any, row: np.ndarray) -> np.ndarray:
    bound = dict(zip(circuit.parameters, row))
    flat = [float(v.bind({p: bound[p] for p in v.parameters}).numeric()) if hasattr(v, "bind")
            else float(v) for v in np.ravel(np.asarray(value, dtype=object))]
    return np.asarray(flat)


@dataclass
class Estimate:
    """Sampled means of a program's flat outputs, their variances (of the means), and the
    mean and variance of ``c · outputs`` for a cotangent ``c`` when one was given."""

    mean: np.ndarray
    variance: np.ndarray
    shots: int
    weighted: float = 0.0
    weighted_variance: float = 0.0


def sample_jobs(jobs: list[_Job], num_groups: int, sampler: Any, shots: int,
                cotangent: np.ndarray | None = None) -> list[list[Estimate]]:
    """Run every job in ONE primitive call (a sampler's, or an estimator's); per group, one
    `Estimate` per row."""
    if _is_estimator(sampler):
        return _estimate_jobs(jobs, num_groups, sampler, shots, cotangent)
    # Parameters are bound here, one PUB per row (still one call): Qiskit Aer's SamplerV2
    # ignores PUB parameter values of controlled rotations and inside control flow.
    pubs, where = [], []  # where: (job, row of parameter values) of each PUB
    for job in jobs:
        for row, values in enumerate(job.rows):
            bound = job.circuit.assign_parameters(values) if job.circuit.parameters else \
                job.circuit
            pubs.append((bound,))
            where.append((job, row))
    results = sampler.run(pubs, shots=shots).result()
    found: list[dict[int, list[np.ndarray]]] = [{} for _ in range(num_groups)]
    for (job, row), result in zip(where, results):
        found[job.group].setdefault(row, []).append(job.contribution(result.data, 0, row))
    estimates: list[list[Estimate]] = []
    for group in found:
        row_estimates = []
        for row in sorted(group):
            parts = group[row]
            mean = sum(p.mean(0) for p in parts)
            variance = sum(p.var(0, ddof=1) / len(p) for p in parts)
            estimate = Estimate(mean, variance, len(parts[0]))
            if cotangent is not None and parts[0].shape[1] == len(cotangent):
                estimate.weighted = float(sum((p @ cotangent).mean() for p in parts))
                estimate.weighted_variance = float(
                    sum((p @ cotangent).var(ddof=1) / len(p) for p in parts))
            row_estimates.append(estimate)
        estimates.append(row_estimates)
    return estimates


def _is_estimator(primitive: Any) -> bool:
    from qiskit.primitives import BaseEstimatorV2

    return isinstance(primitive, BaseEstimatorV2)


def _estimate_jobs(jobs: list[_Job], num_groups: int, estimator: Any, shots: int,
                   cotangent: np.ndarray | None) -> list[list[Estimate]]:
    # One PUB per row: the observables, and for a cotangent c the one weighted observable
    # Σ_k c_k O_k (its estimate's error is then the estimator's own, correlations included).
    from qiskit.quantum_info import SparsePauliOp

    pubs, where = [], []
    for job in jobs:
        export = job.export
        assert export is not None
        outputs = export.outputs[:len(export.outputs) - job.skip_outputs]
        observables = list(export.observables)
        if cotangent is not None:
            weighted = [c * export.observables[o.observable]
                        for c, o in zip(cotangent, outputs) if o.kind == "expval"]
            observables.append(sum(weighted[1:], weighted[0]) if weighted else
                               SparsePauliOp("I" * export.circuit.num_qubits, 0.0))
        for row, values in enumerate(job.rows):
            bound = job.circuit.assign_parameters(values) if job.circuit.parameters else \
                job.circuit
            pubs.append((bound, observables))
            where.append((job, row, outputs))
    results = estimator.run(pubs, precision=1 / np.sqrt(shots)).result()
    found: list[dict[int, Estimate]] = [{} for _ in range(num_groups)]
    for (job, row, outputs), result in zip(where, results):
        evs = np.atleast_1d(np.asarray(result.data.evs, np.float64))
        stds = np.atleast_1d(np.asarray(result.data.stds, np.float64))
        # the reference estimator adds noise of the asked precision but reports stds of 0
        stds = np.maximum(stds, float(result.metadata.get("target_precision", 0.0)))
        mean, variance = np.zeros(len(outputs)), np.zeros(len(outputs))
        for k, out in enumerate(outputs):
            if out.kind == "expval":
                mean[k], variance[k] = evs[out.observable], stds[out.observable] ** 2
            elif out.kind == "classical":
                mean[k] = _classical_value(out.value, job.circuit, job.rows[row])[0]
            else:
                raise QdiffError(f"output {k} ({out.kind}) needs shots: use a sampler")
        estimate = Estimate(mean, variance, shots)
        if cotangent is not None:
            constant = sum(c * m for c, m, o in zip(cotangent, mean, outputs)
                           if o.kind == "classical")
            estimate.weighted = float(evs[-1] + constant)
            estimate.weighted_variance = float(stds[-1] ** 2)
        found[job.group][row] = estimate
    return [[group[row] for row in sorted(group)] for group in found]


# ------------------------------------------------------------------- host-side while loops
def _top_while(program: Program) -> int | None:
    found = [k for k, e in enumerate(program.eqns) if e.primitive.name == "while"]
    nested = any(e.primitive.name == "while" for eqn in program.eqns
                 for _, sub in eqn.subprograms() for e in sub.all_eqns())
    if nested or len(found) > 1:
        raise QdiffError("running loops on the host supports one while loop at the top level "
                         "of the program; use a sampler that runs while_loop (Qiskit Aer)")
    return found[0] if found else None


def unrolled(program: Program, index: int, times: int) -> Program:
    """``program`` with its top-level while loop (equation ``index``) replaced by its test
    and ``times`` (body; test) rounds, and the ``times + 1`` test predicates appended to the
    outputs (bools): a run is one of the program's exactly when the first ``times`` read
    true and the last false.

    >>> import qdiff
    >>> from qdiff import quantum as qm
    >>> def f(t):
    ...     q = qm.qubits(1)
    ...     qdiff.while_loop(lambda: qm.measure(q[0]) == 0, lambda: qm.ry(t, q[0]))
    ...     return qm.expval("Z", q)
    >>> program = qdiff.trace(f, 0.0)
    >>> p = unrolled(program, _top_while(program), 2)
    >>> [str(t.short()) for t in p.out_types]
    ['f64[]', 'bool[]', 'bool[]', 'bool[]']
    """
    target = program.eqns[index]
    p = target.params
    nc, nb = p["num_cond_consts"], p["num_body_consts"]
    tests: list[Any] = []

    def apply(primitive: Any, values: list[Any], params: dict) -> Any:
        if primitive.name == "while" and params.get("cond") is p["cond"]:
            cc, bc, carry = values[:nc], values[nc:nc + nb], values[nc + nb:]
            for round_ in range(times + 1):
                if round_:
                    carry = eval_program(p["body"], [*bc, *carry], _bind)
                pred, *carry = eval_program(p["cond"], [*cc, *carry], _bind)
                tests.append(pred)
            return carry
        return _bind(primitive, values, params)

    def replay(*args: Any) -> Any:
        outs = eval_program(program, list(args), apply)
        return (*outs, *[_as_bool(t) for t in tests])

    examples = [np.zeros(v.type.shape, v.type.np_dtype) for v in program.inputs]
    return trace(replay, *examples, name=f"{program.name}_unrolled{times}")


def _bind(primitive: Any, values: list[Any], params: dict) -> Any:
    return bind(primitive, *values, **params)


def _as_bool(value: Any) -> Any:
    return qnp.asarray(value) == 1 if isinstance(value_type(value), Bit) else value


# ------------------------------------------------------------------------------ the runners
@dataclass
class SampledRun:
    """Values of a program from shots, with standard errors and the cut-off mass."""

    values: list[np.ndarray]
    stderr: list[np.ndarray]
    shots: int
    unterminated_mass: float = 0.0
    unterminated_stderr: float = 0.0
    circuits: int = 0
    sampler_calls: int = 0


def plan(program: Program, args: Sequence[Any], sampler: Any, *, group: int = 0,
         rows: Sequence[Sequence[Any]] | None = None, skip_outputs: int = 0) -> list[_Job]:
    """The jobs that estimate ``program``'s outputs at ``args`` (or at each of ``rows`` of
    arguments) with the primitive running the whole circuit, control flow included."""
    export = to_qiskit(program)
    _check_runnable(export, *_capabilities(sampler))
    values = np.atleast_2d(export.parameter_values(*args) if rows is None else
                           np.stack([export.parameter_values(*row) for row in rows]))
    if _is_estimator(sampler):
        return [_Job(export.circuit, values, None, group, export, skip_outputs)]
    return _jobs(export, values, group, skip_outputs=skip_outputs)


def _tests_read(export: QiskitExport, k: int, stopped: bool) -> Callable[[Any, int], Any]:
    """Per shot of the k-fold unrolled circuit (its last k + 1 outputs are the loop's
    tests): whether the tests read "go on" k times and then "stop" (``stopped``) or "go on"
    once more (the run is still going)."""
    tests = export.outputs[-(k + 1):]
    circuit = export.circuit

    def read(data: Any, row: int) -> np.ndarray:
        ok = None
        for j, test in enumerate(tests):
            columns = _clbit_columns(circuit, test.clbits)
            picks = tuple(_bits(data, name, row)[:, i].astype(np.int64) for name, i in columns)
            value = np.asarray(test.value)[picks].astype(bool)
            value = ~value if (stopped and j == k) else value
            ok = value if ok is None else ok & value
        return ok.astype(np.float64)

    return read


def _check_runnable(export: QiskitExport, control_flow: bool, mid_circuit: bool) -> None:
    ops = {i.operation.name for i in export.circuit.data}
    if not control_flow and ops & {"while_loop", "if_else", "for_loop", "switch_case"}:
        raise QdiffError("this sampler cannot run Qiskit control flow (if_else, switch_case) "
                         "the program needs; use Qiskit Aer's SamplerV2 or a backend that "
                         "runs dynamic circuits")
    if not mid_circuit and _measures_mid_circuit(export.circuit):
        raise QdiffError("this sampler (Qiskit's reference StatevectorSampler) cannot run "
                         "mid-circuit measurements; install qiskit-aer (the default sampler "
                         "then) or pass sampler= for a backend that runs dynamic circuits")


def _measures_mid_circuit(circuit: Any) -> bool:
    """Whether an operation other than a measurement follows a measurement on its qubit."""
    measured: set = set()
    for instruction in circuit.data:
        name = instruction.operation.name
        if name == "barrier":
            continue
        if name != "measure" and measured & set(instruction.qubits):
            return True
        if name == "measure":
            measured.update(instruction.qubits)
    return False


def run_on_sampler(program: Program, args: Sequence[Any], *, sampler: Any = None,
                   shots: int = 4000, seed: Any = None, tol: float = 1e-3,
                   max_iterations: int = 64, loops: str = "auto") -> SampledRun:
    """The program's outputs at ``args`` estimated from ``shots`` shots per circuit (see the
    module docstring). With a while loop run on the host (``loops="host"``, or ``"auto"``
    when the sampler cannot run ``while_loop``), rounds of unrolled circuits go until the
    estimated mass still running is below ``tol`` or ``max_iterations`` tests ran."""
    if loops not in ("auto", "native", "host"):
        raise QdiffError(f"loops must be 'auto', 'native' or 'host', got {loops!r}")
    sampler = as_primitive(sampler, seed)
    control_flow, _ = _capabilities(sampler)
    # the arguments become constants: classical code with no Qiskit expression form (tanh,
    # floor, ...) is evaluated on the host, and the circuit holds numbers
    program, args = _with_arguments(program, args), []
    has_loop = _top_while(program) is not None if loops != "native" else False
    host = has_loop and (loops == "host" or not control_flow)
    if host and _is_estimator(sampler):
        raise QdiffError("a loop that ends on a measurement needs a sampler (its shots carry "
                         "the tests' outcomes), not an estimator")
    if not host:
        jobs = plan(program, args, sampler)
        (estimate,), = sample_jobs(jobs, 1, sampler, shots)
        return SampledRun(_split(estimate.mean, program), _split(np.sqrt(estimate.variance),
                                                                 program),
                          shots, circuits=len(jobs), sampler_calls=1)
    return _host_rounds(program, args, sampler, shots, tol, max_iterations)


def _with_arguments(program: Program, args: Sequence[Any], keep: int = 0) -> Program:
    """``program`` with its first ``len(program.inputs) - keep`` inputs bound to ``args``."""
    count = len(program.inputs) - keep
    if len(args) != count:
        raise QdiffError(f"the program takes {count} argument(s), got {len(args)}")
    return bind_inputs(program, {k: np.asarray(v) for k, v in enumerate(args)})


def _host_rounds(program: Program, args: Sequence[Any], sampler: Any, shots: int, tol: float,
                 max_iterations: int) -> SampledRun:
    ((estimate,),), going, calls, circuits = host_estimates(
        [(program, [list(args)])], sampler, shots, tol, max_iterations)
    return SampledRun(_split(estimate.mean, program), _split(np.sqrt(estimate.variance),
                                                             program),
                      shots, unterminated_mass=going.mean[0],
                      unterminated_stderr=float(np.sqrt(going.variance[0])),
                      circuits=circuits, sampler_calls=calls)


def host_estimates(programs: Sequence[tuple[Program, Sequence[Sequence[Any]]]], sampler: Any,
                   shots: int, tol: float, max_iterations: int,
                   cotangent: np.ndarray | None = None
                   ) -> tuple[list[list[Estimate]], Estimate, int, int]:
    """Estimates of programs with one top-level while loop, each at rows of arguments, the
    loop run on the host: per program one `Estimate` per row; the mass of the first
    program's runs still going after the last test (largest over its rows); sampler calls;
    circuits. Each round submits the next unrolled depths of every program in one call."""
    done, calls, circuits, batch = 0, 0, 0, 4
    sums: dict[tuple[int, int], Estimate] = {}
    going: Estimate | None = None
    while done < max_iterations and (going is None or going.mean[0] > tol):
        upto = min(done + batch, max_iterations)
        jobs: list[_Job] = []
        slots: list[tuple[int, int | None]] = []  # per group: (program, depth or None)
        for i, (program, rows) in enumerate(programs):
            loop = _top_while(program)
            if loop is None:
                raise QdiffError("internal: host rounds need a while loop")
            for k in range(done, upto):
                export = to_qiskit(unrolled(program, loop, k))
                _check_runnable(export, *_capabilities(sampler))
                values = np.stack([export.parameter_values(*row) for row in rows])
                # where the arguments (a shift) do not reach this depth, its runs are the
                # same for every row and cancel from a shift rule's difference: not run
                if not rows[0] or export.circuit.parameters:
                    jobs += _jobs(export, values, len(slots), _tests_read(export, k, True),
                                  k + 1)
                slots.append((i, k))
                if i == 0 and k == upto - 1:
                    # the runs still going after this round's last test: every test of the
                    # last depth read "go on" (one circuit of its term groups is enough)
                    variant = _jobs(export, values, 0, skip_outputs=upto)[0]
                    still = _tests_read(export, k, False)
                    jobs.append(_Job(variant.circuit, values,
                                     lambda data, row, _, still=still: still(data, row)[:, None],
                                     len(slots)))
                    slots.append((0, None))
        estimates = _fill(sample_jobs(jobs, len(slots), sampler, shots, cotangent), slots,
                          programs)
        calls, circuits = calls + 1, circuits + len(jobs)
        for (i, depth), rows in zip(slots, estimates):
            if depth is None:
                going = max(rows, key=lambda e: e.mean[0])
                continue
            for row, estimate in enumerate(rows):
                have = sums.get((i, row))
                sums[(i, row)] = estimate if have is None else Estimate(
                    have.mean + estimate.mean, have.variance + estimate.variance, shots,
                    have.weighted + estimate.weighted,
                    have.weighted_variance + estimate.weighted_variance)
        done, batch = upto, batch * 2
    assert going is not None
    return ([[sums[(i, row)] for row in range(len(rows))] for i, (_, rows) in
             enumerate(programs)], going, calls, circuits)


def _fill(estimates: list[list[Estimate]], slots: list,
          programs: Sequence[tuple]) -> list[list[Estimate]]:
    """Zero estimates for the groups that were not run (no job gave them rows)."""
    filled = []
    for (i, _), rows in zip(slots, estimates):
        count = len(programs[i][1])
        width = len(programs[i][0].outputs)
        filled.append(rows or [Estimate(np.zeros(width), np.zeros(width), 0)
                               for _ in range(count)])
    return filled


def _split(flat: np.ndarray, program: Program) -> list[np.ndarray]:
    return split_flat(flat, [t.shape for t in program.out_types])


def bind_inputs(program: Program, values: dict[int, Any]) -> Program:
    """``program`` with the inputs at the given positions replaced by constants.

    >>> import qdiff
    >>> p = qdiff.trace(lambda a, b: a * b, 2.0, 3.0)
    >>> float(bind_inputs(p, {1: 4.0})(2.0))
    8.0
    """
    literals = {program.inputs[k]: Literal(np.asarray(v, program.inputs[k].type.np_dtype))
                for k, v in values.items()}

    def swap(atom: Any) -> Any:
        return literals.get(atom, atom) if isinstance(atom, Var) else atom

    eqns = tuple(Eqn(e.primitive, tuple(swap(a) for a in e.inputs), e.outputs, e.params)
                 for e in program.eqns)
    outputs = tuple(swap(a) for a in program.outputs)
    inputs = tuple(v for v in program.inputs if v not in literals)
    return Program(inputs, eqns, outputs, name=program.name)


# ---------------------------------------------------------------------------- the gradient
def shift_gradient_on_sampler(program: Program, leaves: Sequence[Any],
                              cotangents: Sequence[Any], positions: Sequence[int], *,
                              sampler: Any = None, shots: int = 4000, seed: Any = None,
                              tol: float = 1e-12, backend: str = "auto",
                              max_iterations: int = 256) -> Any:
    """``Σ_j c_j ∂E_j/∂inputs`` by parameter shift from shots: every shifted circuit (one
    per occurrence of each gate angle, its shifts as rows) and the unshifted one in ONE
    sampler call. The chain rule through the classical code is exact (host side); the
    standard errors propagate the shots' variances through it. A loop that ends on a
    measurement which the sampler cannot run goes to the host (one call per round, up to
    ``max_iterations`` tests: ``RunOptions.max_loop_iterations``, at most 256).

    Occurrences that are not sampled, those that runs reach with probability below
    ``1/shots`` and those beyond ``max_iterations`` tests, are not dropped: for an unbounded
    loop their shares add up to a bias of the order of the gradient's standard error or
    more (each run that gets that far weighs a long history). Their shares are computed
    exactly on the simulator (the ideal device's) and added, so the estimate is unbiased
    on an ideal device; when that part exceeds the standard error a `SamplerTailWarning`
    says how much of the gradient did not come from shots."""
    leaves = [np.asarray(v) for v in leaves]
    sampler = as_primitive(sampler, seed)
    branching = branches(program)
    # a sampler estimates expectations, so the outputs must be affine in them
    check_readout_use(program, branching=True)
    control_flow, _ = _capabilities(sampler)
    options = RunOptions(backend=backend, tol=tol)
    base = RecordedRun(program, leaves, options)
    _, value_seeds = base.output_seeds(cotangents)
    direct, _ = base.classical_vjp(value_seeds)
    flat_ct = np.concatenate([np.ravel(np.asarray(c, np.float64)) for c in cotangents])
    plans = occurrence_plan(program, leaves, positions, base, branching, options)
    loop = _top_while(program)
    # the host runs the loop when the sampler cannot, and when a shifted gate is inside it:
    # its occurrence counter is a classical variable no exported circuit holds
    host = loop is not None and (not control_flow or any(
        o.site.steps and o.site.steps[0][0] == loop for o in plans))
    if host and _is_estimator(sampler):
        raise QdiffError("a loop that ends on a measurement needs a sampler (its shots carry "
                         "the tests' outcomes), not an estimator")
    programs: list[tuple[Program, list[list[Any]]]] = [(_with_arguments(program, leaves), [[]])]
    slots = []
    unsampled: list[tuple[Occurrences, int]] = []
    for occurrences in plans:
        terms = occurrences.site.rule.terms()
        for k in sorted(occurrences.groups):
            reach = sum(r.weight_in for r in occurrences.groups[k])
            if (host and k >= max_iterations) or reach < 1 / shots:
                # beyond the cap, or reached less often than a shot resolves
                unsampled.append((occurrences, k))
                continue
            shifted = _with_arguments(_at_occurrence(occurrences.inst.program, k), leaves,
                                      keep=1)  # the shift stays a circuit parameter
            programs.append((shifted, [[np.float64(s)] for s, _ in terms]))
            slots.append((occurrences, k, [c for _, c in terms]))
    unterminated = 0.0
    if host:
        estimates, going, _, _ = host_estimates(programs, sampler, shots, _HOST_TOL,
                                                max_iterations, flat_ct)
        unterminated = float(going.mean[0])
        if unterminated > _HOST_TOL:
            warnings.warn(SamplerTailWarning(
                f"the loop was cut off after {max_iterations} tests (max_loop_iterations) "
                f"with a mass of {unterminated:.3g} still going: every shifted expectation "
                "misses those runs, so the gradient is biased; raise max_loop_iterations="),
                stacklevel=3)
    else:
        jobs = [job for n, (p, rows) in enumerate(programs)
                for job in plan(p, [], sampler, group=n, rows=rows)]
        estimates = sample_jobs(jobs, len(programs), sampler, shots, cotangent=flat_ct)
    (value,) = estimates[0]
    grads = [np.array(direct[j], np.float64) for j in positions]
    variances = [np.zeros_like(g) for g in grads]
    for (occurrences, k, coefficients), rows in zip(slots, estimates[1:]):
        d = sum(c * row.weighted for c, row in zip(coefficients, rows))
        d_variance = sum(c * c * row.weighted_variance for c, row in zip(coefficients, rows))
        tangent = occurrences.tangent(k)
        for slot, j in enumerate(positions):
            grads[slot] = grads[slot] + d * tangent[j]
            variances[slot] = variances[slot] + d_variance * np.asarray(tangent[j]) ** 2
    tail = _exact_shares(unsampled, leaves, cotangents, positions, options)
    stderr = [np.sqrt(v) for v in variances]
    grads = [g + t for g, t in zip(grads, tail)]
    if any(np.any(np.abs(t) > s) for t, s in zip(tail, stderr)):
        warnings.warn(SamplerTailWarning(
            f"{len(unsampled)} occurrence(s) of shifted gates are reached by fewer than one "
            f"shot in {shots} or lie beyond {max_iterations} loop tests: their share of the "
            f"gradient, {_describe(tail)}, was computed exactly on the simulator (standard "
            f"error of the sampled part {_describe(stderr)}); raise shots= or "
            "max_loop_iterations= to sample more of it"), stacklevel=3)
    derivative_programs = len(slots)
    return ShiftResult(
        _split(value.mean, program), grads, _Masses(0.0, unterminated),
        num_derivative_programs=derivative_programs,
        num_evaluations=sum(len(c) for _, _, c in slots),
        value_stderr=_split(np.sqrt(value.variance), program),
        grad_stderr=stderr, shots=shots)


# a host-run loop stops once the mass still going is below this (or at the cap)
_HOST_TOL = 1e-3


class SamplerTailWarning(UserWarning):
    """A sampler gradient is not all from shots: occurrences the shots do not reach were
    computed exactly on the simulator (more than the standard error), or a host-run loop
    was cut off at ``max_loop_iterations`` (a bias)."""


def _exact_shares(unsampled: Sequence[tuple[Occurrences, int]], leaves: Sequence[Any],
                  cotangents: Sequence[Any], positions: Sequence[int],
                  options: RunOptions) -> list[np.ndarray]:
    """``Σ_k D_k ∂θ_k/∂inputs`` over the occurrences not sampled, exactly (the shifted
    programs run on the simulator, as exact-mode parameter shift does)."""
    cts = [np.asarray(c, np.float64) for c in cotangents]
    total = [np.zeros(np.shape(leaves[j])) for j in positions]
    for occurrences, k in unsampled:
        d = 0.0
        for shift, coefficient in occurrences.site.rule.terms():
            raw, _, _ = _shifted_outcome(occurrences.inst.program,
                                         [*leaves, np.int64(k), np.float64(shift)],
                                         options=options, readouts=False)
            d += coefficient * sum(float(np.vdot(c, v)) for c, v in zip(cts, raw))
        tangent = occurrences.tangent(k)
        for slot, j in enumerate(positions):
            total[slot] = total[slot] + d * np.asarray(tangent[j], np.float64)
    return total


def _describe(values: Sequence[np.ndarray]) -> str:
    return np.array2string(np.concatenate([np.ravel(v) for v in values]), precision=4)


def _at_occurrence(instrumented: Program, k: int) -> Program:
    """A site's shifted program at occurrence ``k``: the occurrence input bound, the
    counter output dropped; the shift stays an input (a circuit parameter)."""
    bound = bind_inputs(instrumented, {len(instrumented.inputs) - 2: np.int64(k)})
    return Program(bound.inputs, bound.eqns, bound.outputs[:-1], name=bound.name)


def _run(program: Program, values: Sequence[Any], options: RunOptions) -> SampledRun:
    return run_on_sampler(program, values, sampler=options.estimator or options.sampler,
                          shots=options.shots, seed=options.seed, tol=options.tol,
                          max_iterations=_host_rounds_cap(options))


def _shift_gradient(program: Program, leaves: Sequence[Any], cotangents: Sequence[Any],
                    positions: Sequence[int], options: RunOptions) -> ShiftResult:
    return shift_gradient_on_sampler(program, leaves, cotangents, positions,
                                     sampler=options.estimator or options.sampler,
                                     shots=options.shots, seed=options.seed,
                                     backend=options.backend,
                                     max_iterations=_host_rounds_cap(options))


def _host_rounds_cap(options: RunOptions) -> int:
    """Loop tests a host-run loop may unroll: ``max_loop_iterations``, at most 256 (a
    sampler call per round, circuits as deep as the tests)."""
    return min(options.max_loop_iterations, 256)


register_mode("qiskit", ExternalMode(run=_run, shift_gradient=_shift_gradient))
