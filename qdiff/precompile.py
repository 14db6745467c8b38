"""Compile the simulator's kernels before their first use.

The Numba back end's kernels (the fused block kernel, the adjoint sweep, the expectation
passes, vmap's lane kernels) are compiled on first use, for each precision and for serial
and threaded runs: a minute or more of compilation before the first result of a fresh
install. They are compiled with ``cache=True``, so a process that finds them in Numba's
on-disk cache loads them in milliseconds instead. `precompile` fills that cache: it runs
small programs through every kernel family (every gate of the table, a Pauli sum with X, Y
and Z terms, the adjoint gradient, serially and, where Numba has more than one thread, on
threads; vmap's value and gradient), once per precision. Run it once after installing
(``qdiff precompile``), in a container's build step or a batch job's setup; the test suite
runs it in a process of its own on another core while its first tests run.

>>> import qdiff.precompile as pc
>>> program = pc.every_gate_program(4, "complex128")
>>> from qdiff import quantum as qm
>>> x = np.linspace(0.1, 1.0, pc.ANGLES)
>>> bool(abs(qm.run(program, x).values - qm.run(program, x, backend="numpy").values) < 1e-12)
True
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numba
import numpy as np

from . import numpy as qnp
from . import quantum as qm
from .batching import vmap
from .ir.program_function import ProgramFunction, program
from .quantum.lang.gates import GATE_TABLE, GateSpec
from .quantum.simulator.numba_backend import DEFAULT_PARALLEL_THRESHOLD
from .transforms import value_and_grad

ANGLES = 7
"""The length of the angle vector `every_gate_program` takes."""

# the serial kernels run below the threshold, the threaded ones at it
_SERIAL_QUBITS = 10
_THREADED_QUBITS = max(_SERIAL_QUBITS + 1, int(DEFAULT_PARALLEL_THRESHOLD).bit_length() - 1)


def every_gate_program(num_qubits: int, dtype: str) -> ProgramFunction:
    """A program of ``ANGLES`` angles applying every fixed-size gate of the table (on up to
    four wires, spread over the register), returning the expectation of a Pauli sum with X,
    Y and Z terms.

    >>> every_gate_program(4, "complex64").name
    'every_gate_4_complex64'
    """
    rng = np.random.default_rng(num_qubits)
    plan = [(name, [int(w) for w in rng.permutation(num_qubits)[:spec.num_qubits]])
            for name, spec in GATE_TABLE.items()
            if isinstance(spec, GateSpec) and spec.num_qubits <= min(4, num_qubits)]
    n = num_qubits
    observable = [(0.7, "Z" * n), (-0.4, "X" + "Y" * (n - 1)), (0.2, "I" * (n - 1) + "Z")]

    def every_gate(angles: Any) -> Any:
        q = qm.qubits(n, dtype=dtype)
        k = 0
        for name, wires in plan:
            count = GATE_TABLE[name].num_params
            qm.GATES[name](*(angles[(k + j) % ANGLES] for j in range(count)),
                                 *(q[w] for w in wires))
            k += count
        return qm.expval(observable, q)

    return program(every_gate, name=f"every_gate_{n}_{dtype}")


def _layered(angles: Any) -> Any:
    # the shape of program vmap's lane kernels run: rotation layers and a CNOT ladder
    q = qm.qubits(6)
    for k in range(6):
        qm.ry(angles[k], q[k])
        qm.rz(angles[k] * 0.5, q[k])
    for k in range(5):
        qm.cx(q[k], q[k + 1])
    return qm.expval([(1.0, "ZZIIII"), (0.5, "XIIIIY")], q)


def _lane_forms(angles: Any) -> Any:
    # the lane kernels' other paths: a run of three one-wire gates (the sweep then undoes
    # the states inside it instead of reading checkpoints), two-wire and controlled
    # rotations, a swap, and probabilities
    q = qm.qubits(4)
    for k in range(4):
        qm.ry(angles[k], q[k])
        qm.rz(angles[k] * 0.5, q[k])
        qm.rx(angles[k + 1], q[k])
    qm.rzz(angles[4], q[0], q[2])
    qm.crx(angles[5], q[0], q[3])
    qm.cry(angles[1], q[3], q[1])
    qm.swap(q[1], q[3])
    qm.cx(q[0], q[1])
    probabilities = qm.probs([q[3], q[0]])
    return qm.expval("XIYZ + 0.5*ZIZI", q) + qnp.sum(probabilities * np.arange(4.0))


def precompile(dtypes: Sequence[str] = ("complex128", "complex64"),
               threaded: bool | None = None) -> dict[str, float]:
    """Run every kernel family of the Numba back end once per precision in ``dtypes`` (and
    on threads when ``threaded``, by default when Numba has more than one thread), so that
    they are compiled into Numba's on-disk cache. Returns the seconds each part took.

    >>> seconds = precompile(dtypes=("complex128",), threaded=False)
    >>> sorted(seconds)
    ['complex128, 10 qubits', 'vmap']
    """
    if threaded is None:
        threaded = numba.get_num_threads() > 1
    sizes = (_SERIAL_QUBITS, _THREADED_QUBITS) if threaded else (_SERIAL_QUBITS,)
    angles = np.linspace(0.1, 1.0, ANGLES)
    seconds = {}
    for dtype in dtypes:
        for n in sizes:
            start = time.perf_counter()
            every_gate = every_gate_program(n, dtype)
            qm.run(every_gate, angles)
            qm.gradient(every_gate, angles)
            seconds[f"{dtype}, {n} qubits"] = time.perf_counter() - start
    start = time.perf_counter()
    for body in (_layered, _lane_forms):
        vmap(value_and_grad(program(body)))(np.linspace(-1.0, 1.0, 48).reshape(8, 6))
    seconds["vmap"] = time.perf_counter() - start
    return seconds
