"""Whole quantum programs on the CuPy back end (a GPU) against the NumPy reference: values,
adjoint and parameter-shift gradients, measurement branches, loops on measurements and
sampled runs. Skipped where CuPy finds no CUDA device; `benchmarks/gpu.sh` runs them on one.
"""

from __future__ import annotations

import numpy as np
import pytest

from qdiff import quantum as qm
from qdiff.gpu import cupy_available
from qdiff.quantum.lang import examples
from tests.quantum import quantum_programs_lib as lib

GPU = "cupy"  # the back end under test
pytestmark = pytest.mark.skipif(not cupy_available(),
                                reason="CuPy with a CUDA device is not available")

PROGRAMS = {
    "ansatz": (lib.hea_program(5, 3, qm.PauliSum([(1.0, "ZIIII"), (0.5, "XXIII"),
                                                  (0.25, "IIYZY")])),
               lib.hea_angles(5, 3, seed=5)),
    "rotation": (examples.rotation, 0.7),
    "postselection": (lib.entangled_postselected, np.array([0.4, 1.1])),
    "branch on a measurement": (lib.registers_and_a_branch, np.array([0.3, 0.9])),
    "loop on a measurement": (lib.until_one, 1.2),
    "coin loop": (lib.coin_loop, 0.8),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_values_on_the_gpu_equal_numpy(name):
    program, x = PROGRAMS[name]
    gpu = qm.run(program, x, backend=GPU).values
    cpu = qm.run(program, x, backend="numpy").values
    np.testing.assert_allclose(np.asarray(gpu, float), np.asarray(cpu, float),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", ["adjoint", "parameter-shift"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradients_on_the_gpu_equal_numpy(name, method):
    program, x = PROGRAMS[name]
    gpu = qm.gradient(program, x, method=method, backend=GPU).grad
    cpu = qm.gradient(program, x, method=method, backend="numpy").grad
    np.testing.assert_allclose(np.asarray(gpu, float), np.asarray(cpu, float),
                               rtol=1e-10, atol=1e-12)


def test_sampled_loop_on_the_gpu_is_unbiased():
    # iterations until a 1: mean 1/sin²(θ/2)
    theta, shots = 1.2, 4000
    result = qm.run(lib.until_one, theta, mode="sample", shots=shots, seed=3, backend=GPU)
    p = np.sin(theta / 2) ** 2  # the count is geometric: mean 1/p, variance (1 - p)/p²
    mean = float(np.asarray(result.values))
    assert abs(mean - 1 / p) < 4 * np.sqrt(1 - p) / p / np.sqrt(shots)


def test_large_state_gradient_on_the_gpu_equals_numba():
    program = lib.hea_program(20, 2, qm.PauliSum([(1.0, "Z" + "I" * 19), (0.5, "I" * 19 + "X")]))
    x = lib.hea_angles(20, 2, seed=6)
    gpu = qm.gradient(program, x, backend=GPU)
    cpu = qm.gradient(program, x, backend="numba")
    np.testing.assert_allclose(float(gpu.value), float(cpu.value), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gpu.grad), np.asarray(cpu.grad), rtol=1e-10,
                               atol=1e-12)


def test_vmap_on_the_gpu_equals_the_array_simulator_on_numpy():
    # the batched simulation of `qdiff.vmap` (values and per-member gradients of every gate
    # form) on CuPy against the same code on NumPy
    import qdiff  # noqa: PLC0415  (this file otherwise tests `qm` alone)
    from tests.batching.test_vmap_array_batched import every_form  # noqa: PLC0415

    program = qdiff.program(every_form)
    rng = np.random.default_rng(9)
    w, x = rng.uniform(-1, 1, (6, 4)), rng.uniform(-1, 1, 6)
    both = qdiff.vmap(qdiff.value_and_grad(program, argnums=(0, 1)))
    results = {}
    for name in (GPU, "numpy"):
        with qm.batched_backend(name):
            results[name] = (qdiff.vmap(program)(w, x), both(w, x))
    (gpu_values, (gpu_value, gpu_grads)), (cpu_values, (cpu_value, cpu_grads)) = \
        results[GPU], results["numpy"]
    np.testing.assert_allclose(gpu_values, cpu_values, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gpu_value, cpu_value, rtol=1e-12, atol=1e-12)
    for g, c in zip(gpu_grads, cpu_grads, strict=True):
        np.testing.assert_allclose(g, c, rtol=1e-10, atol=1e-12)
