"""The block kernel flushes subnormal floats to zero while it runs (a complex64 QFT's noise
amplitudes reached them, and its blocks ran 2-2.5x slower than on a random state), and
gives the float mode back: subnormal inputs to a block's arithmetic come out as exact zeros
(on x86-64), every other amplitude as the dense matrices give it, and NumPy's float32
arithmetic after the call still keeps subnormals."""

import numpy as np
import pytest

from qdiff.quantum.simulator import get_backend
from qdiff.quantum.simulator.gate_ops import GateOp
from qdiff.quantum.simulator.subnormals import X86
from tests.quantum.simulator.test_blocks_on_zero_wires import run_oracle

N = 10


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_blocks_on_noise_amplitudes_flush_subnormals_and_restore_the_float_mode(dtype):
    rng = np.random.default_rng(3)
    psi = (rng.normal(size=1 << N) + 1j * rng.normal(size=1 << N)) / 40
    tiny = np.finfo(np.float32 if dtype == np.complex64 else np.float64).tiny
    noise = rng.random(1 << N) < 0.25  # a quarter of the amplitudes subnormal
    psi[noise] = tiny / 4 * (1 + 1j)
    psi = psi.astype(dtype)
    assert np.all(np.abs(psi[noise].real) < tiny) and np.all(psi[noise].real > 0)
    wires = (2, 5, 6)
    ops = [GateOp("rz", (w,), (0.3 * (k + 1),)) for k, w in enumerate(wires)]
    ops += [GateOp("cx", (2, 5)), GateOp("rz", (6,), (0.9,))]
    got = get_backend("numba").apply_fused(psi.copy(), N, wires, ops)
    expected = run_oracle(psi.astype(np.complex128), N, ops)
    if X86:  # diagonal gates only: an amplitude moves to one place, times a phase
        moved = np.abs(expected) < tiny
        assert np.all(got[moved] == 0)
        assert np.allclose(got[~moved], expected[~moved], rtol=1e-6 if dtype == np.complex64
                           else 1e-12, atol=0)
    x = np.array([tiny], dtype=np.float32 if dtype == np.complex64 else np.float64)
    assert (x * x.dtype.type(0.5))[0] > 0  # the caller's float mode keeps subnormals
