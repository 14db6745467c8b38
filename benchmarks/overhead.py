"""Per-call time of a small hybrid program: qdiff against a JAX-jitted equivalent and
PennyLane lightning, value and gradient.

    taskset -c 0 python benchmarks/overhead.py

The program (4 qubits): angles from a classical pre-processing of the inputs (a tanh layer),
a ring of RY/CNOT, RZ, a second RY layer, then a loss on two expectation values. At this size
everything is per-call overhead: the statevector has 16 amplitudes. The JAX version is the
same computation written with dense 16×16 gate matrices (exact), jitted; it is the floor a
compiled hybrid program can reach. Goals (the classical AD issue): qdiff ≤ 2× JAX jit and
≤ 0.2× lightning, value and gradient.

qdiff runs twice: on the simulator (``loss(x)``, ``qdiff.grad(loss)(x)``, the first calls of
a program), then compiled (``qdiff.jit(loss)``, ``qdiff.grad(loss, jit=True)``: one Numba
function for the classical code, the gates and the readouts, and for the gradient's adjoint
sweep); compile time is printed apart. After compiling, the plain calls take the compiled
path too (the last row).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # common.py, however started
import common  # noqa: E402

N = 4


def best_time(fn: Callable[[], Any]) -> float:
    return common.best_within(fn, budget=1.0, min_runs=5, max_runs=20000)


def qdiff_engines(x: Any) -> dict[str, tuple[float, float, Any]]:
    import time

    import qdiff
    import qdiff.numpy as qnp
    from qdiff import quantum as qm

    @qdiff.program
    def loss(w: Any) -> Any:
        angles = qnp.tanh(w * 1.5) * 2.0
        q = qm.qubits(N)
        for k in range(N):
            qm.ry(angles[k], q[k])
        for k in range(N):
            qm.cx(q[k], q[(k + 1) % N])
        for k in range(N):
            qm.rz(angles[k] * 0.5, q[k])
            qm.ry(angles[(k + 1) % N], q[k])
        z0 = qm.expval("ZIII", q)
        z1 = qm.expval("IZZI", q)
        return (z0 - 0.3) ** 2 + z1

    gradient = qdiff.grad(loss)
    results = {"qdiff simulator": (best_time(lambda: loss(x)), best_time(lambda: gradient(x)),
                                   gradient(x))}
    value_jit, gradient_jit = qdiff.jit(loss), qdiff.grad(loss, jit=True)
    start = time.perf_counter()
    value_jit(x)
    gradient_jit(x)
    print(f"qdiff.jit: value and gradient compiled in {time.perf_counter() - start:.1f} s "
          "(Numba; loaded from the disk cache on later runs)")
    results["qdiff.jit"] = (best_time(lambda: value_jit(x)), best_time(lambda: gradient_jit(x)),
                            gradient_jit(x))
    results["qdiff plain calls, compiled"] = (best_time(lambda: loss(x)),
                                              best_time(lambda: gradient(x)), gradient(x))
    return results


def jax_engine(x: Any) -> tuple[float, float, Any] | None:
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    def single(gate: Any, wire: int) -> Any:
        ops = [jnp.eye(2)] * N
        ops[wire] = gate
        out = ops[0]
        for op in ops[1:]:
            out = jnp.kron(out, op)
        return out

    def ry(t: Any) -> Any:
        c, s = jnp.cos(t / 2), jnp.sin(t / 2)
        return jnp.array([[c, -s], [s, c]], dtype=jnp.complex128)

    def rz(t: Any) -> Any:
        return jnp.diag(jnp.array([jnp.exp(-0.5j * t), jnp.exp(0.5j * t)]))

    def cx(control: int, target: int) -> Any:
        import numpy as np

        dim = 2 ** N
        matrix = np.zeros((dim, dim))
        for index in range(dim):
            bits = [(index >> (N - 1 - k)) & 1 for k in range(N)]
            if bits[control]:
                bits[target] ^= 1
            matrix[sum(b << (N - 1 - k) for k, b in enumerate(bits)), index] = 1
        return jnp.asarray(matrix, dtype=jnp.complex128)

    z = jnp.diag(jnp.array([1.0, -1.0]))

    def loss(w: Any) -> Any:
        angles = jnp.tanh(w * 1.5) * 2.0
        state = jnp.zeros(2 ** N, dtype=jnp.complex128).at[0].set(1.0)
        for k in range(N):
            state = single(ry(angles[k]), k) @ state
        for k in range(N):
            state = cx(k, (k + 1) % N) @ state
        for k in range(N):
            state = single(rz(angles[k] * 0.5), k) @ state
            state = single(ry(angles[(k + 1) % N]), k) @ state
        z0 = jnp.real(jnp.vdot(state, single(z, 0) @ state))
        z1 = jnp.real(jnp.vdot(state, single(z, 1) @ (single(z, 2) @ state)))
        return (z0 - 0.3) ** 2 + z1

    value, gradient = jax.jit(loss), jax.jit(jax.grad(loss))
    jax.block_until_ready(value(x))
    jax.block_until_ready(gradient(x))
    return (best_time(lambda: jax.block_until_ready(value(x))),
            best_time(lambda: jax.block_until_ready(gradient(x))), gradient(x))


def lightning_engine(x: Any) -> tuple[float, float, Any] | None:
    try:
        import pennylane as qml
        from pennylane import numpy as pnp
    except ImportError:
        return None
    device = qml.device("lightning.qubit", wires=N)

    @qml.qnode(device, diff_method="adjoint")
    def circuit(angles: Any) -> Any:
        for k in range(N):
            qml.RY(angles[k], wires=k)
        for k in range(N):
            qml.CNOT(wires=[k, (k + 1) % N])
        for k in range(N):
            qml.RZ(angles[k] * 0.5, wires=k)
            qml.RY(angles[(k + 1) % N], wires=k)
        return qml.expval(qml.PauliZ(0)), qml.expval(qml.PauliZ(1) @ qml.PauliZ(2))

    def loss(w: Any) -> Any:
        z0, z1 = circuit(pnp.tanh(w * 1.5) * 2.0)
        return (z0 - 0.3) ** 2 + z1

    w = pnp.array(x, requires_grad=True)
    gradient = qml.grad(loss)
    return best_time(lambda: loss(w)), best_time(lambda: gradient(w)), gradient(w)


def main() -> None:
    common.pin_threads(1, xla=True)
    import numpy as np

    x = np.array([0.3, -0.7, 1.1, 0.2])
    rows = []
    results = {**qdiff_engines(x), "jax jit": jax_engine(x),
               "pennylane lightning": lightning_engine(x)}
    reference = results["qdiff simulator"][2]
    jax_times = results["jax jit"]
    lightning_times = results["pennylane lightning"]
    def ratio(time: float, peer: Any, k: int) -> str:
        return f"{time / peer[k]:.3g}x" if peer else ""

    for name, measured in results.items():
        if measured is None:
            rows.append([name, "not installed", "", "", "", "", "", ""])
            continue
        value, gradient, grads = measured
        rows.append([name, f"{value * 1e6:.1f}", f"{gradient * 1e6:.1f}",
                     ratio(value, jax_times, 0), ratio(gradient, jax_times, 1),
                     ratio(value, lightning_times, 0), ratio(gradient, lightning_times, 1),
                     "yes" if np.allclose(grads, reference, atol=1e-10) else "NO"])
    print(f"{N}-qubit hybrid program, one thread; per call, µs (best of many)")
    common.print_table(["engine", "value µs", "gradient µs", "value vs jax", "grad vs jax",
                        "value vs lightning", "grad vs lightning", "gradient agrees"], rows)


if __name__ == "__main__":
    main()
