"""CuPy GPU back end: the vectorized reference kernels on device arrays, plus CUDA kernels
for the hot gates.

CuPy is imported lazily, inside the methods, so importing qdiff never needs it. The dense
1-qubit, diagonal and 1-qubit permutation gates (every rotation, every CNOT) run as
``cupy.ElementwiseKernel``s with one GPU thread per amplitude group; their index math is a
line-by-line transcription of :func:`qdiff.quantum.simulator.indexing.insert_zero_bits` and of
the Numba bodies. Everything else (2-qubit and wider dense gates, Pauli strings, expectation
values, probabilities) uses the array-module code of :class:`ArrayModuleBackend`, which is the
same code the NumPy reference runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from qdiff.gpu.array_module import import_cupy

from .indexing import IndexLayout
from .numpy_backend import ArrayModuleBackend
from .registry import register_backend

__all__ = ["CupyBackend"]

# The group counter g is spread over the non-gate bits exactly like insert_zero_bits: for each
# gate position p (ascending), shift the bits at and above p up by one.
_INSERT_ZEROS = r"""
    long long g = (long long)i;
    for (int k = 0; k < npos; ++k) {
        const long long p = pos[k];
        g = ((g >> p) << (p + 1)) | (g & ((1LL << p) - 1));
    }
    const long long base = g | cmask;
"""

_DENSE1_SRC = _INSERT_ZEROS + r"""
    const long long i1 = base | bit;
    const T a = psi[base];
    const T b = psi[i1];
    psi[base] = m00 * a + m01 * b;
    psi[i1] = m10 * a + m11 * b;
"""

_DIAG_SRC = _INSERT_ZEROS + r"""
    for (int r = 0; r < nd; ++r) {
        const long long j = base | offs[r];
        psi[j] = psi[j] * d[r];
    }
"""

_PERM1_SRC = _INSERT_ZEROS + r"""
    const long long i1 = base | bit;
    const T a = psi[base];
    psi[base] = f1 * psi[i1];
    psi[i1] = f0 * a;
"""


class CupyBackend(ArrayModuleBackend):
    """GPU statevector back end on CuPy arrays (needs CuPy and a CUDA device).

    >>> be = CupyBackend()                      # doctest: +SKIP
    >>> psi = be.apply_gate(be.zero_state(20), 20, "h", [3])   # doctest: +SKIP
    """

    name = "cupy"
    is_gpu = True

    def __init__(self, use_kernels: bool = True) -> None:
        cp = import_cupy()
        super().__init__(cp)
        self.use_kernels = use_kernels
        self._int_cache: dict[tuple[int, ...], Any] = {}
        self._kernels: dict[str, Any] = {}

    # -- device helpers ---------------------------------------------------------------------
    def available_bytes(self) -> int | None:
        free, _total = self.xp.cuda.runtime.memGetInfo()
        return int(free)

    def to_numpy(self, array: Any) -> np.ndarray:
        """Host copy of a device array."""
        return self.xp.asnumpy(array)

    def _device_ints(self, values: np.ndarray) -> Any:
        # Positions and offsets are tiny and reused by every application of the same placement;
        # caching them avoids one host-to-device copy per gate.
        key = tuple(int(v) for v in values)
        arr = self._int_cache.get(key)
        if arr is None:
            if len(self._int_cache) > 4096:
                self._int_cache.clear()
            arr = self.xp.asarray(np.asarray(key, dtype=np.int64))
            self._int_cache[key] = arr
        return arr

    def _kernel(self, name: str) -> Any:
        k = self._kernels.get(name)
        if k is None:
            cp = self.xp
            common = "raw int64 pos, int32 npos, int64 cmask"
            if name == "dense1":
                k = cp.ElementwiseKernel(f"{common}, int64 bit, T m00, T m01, T m10, T m11",
                                         "raw T psi", _DENSE1_SRC, "qdiff_dense1")
            elif name == "diag":
                k = cp.ElementwiseKernel(f"{common}, raw int64 offs, raw T d, int32 nd",
                                         "raw T psi", _DIAG_SRC, "qdiff_diag")
            elif name == "perm1":
                k = cp.ElementwiseKernel(f"{common}, int64 bit, T f0, T f1",
                                         "raw T psi", _PERM1_SRC, "qdiff_perm1")
            else:
                raise KeyError(name)
            self._kernels[name] = k
        return k

    def _layout_args(self, layout: IndexLayout) -> tuple[Any, int, int]:
        return (self._device_ints(layout.positions), int(layout.positions.shape[0]),
                int(layout.cmask))

    # -- kernels ------------------------------------------------------------------------------
    def _dense(self, state: Any, layout: IndexLayout, matrix: Any) -> None:
        if not self.use_kernels or len(layout.targets) != 1:
            super()._dense(state, layout, matrix)
            return
        t = state.dtype.type
        m = np.asarray(matrix)
        self._kernel("dense1")(*self._layout_args(layout), 1 << layout.targets[0],
                               t(m[0, 0]), t(m[0, 1]), t(m[1, 0]), t(m[1, 1]), state,
                               size=layout.num_groups)

    def _diagonal(self, state: Any, layout: IndexLayout, offsets: Any, diag: Any) -> None:
        if not self.use_kernels:
            super()._diagonal(state, layout, offsets, diag)
            return
        d = self.xp.asarray(np.asarray(diag, dtype=state.dtype))
        self._kernel("diag")(*self._layout_args(layout), self._device_ints(np.asarray(offsets)),
                             d, len(d), state, size=layout.num_groups)

    def _permutation(self, state: Any, layout: IndexLayout, perm: Any, phases: Any) -> None:
        perm = np.asarray(perm)
        if not self.use_kernels or len(layout.targets) != 1 or perm[0] == 0:
            super()._permutation(state, layout, perm, phases)
            return
        t = state.dtype.type
        ph = np.asarray(phases)
        self._kernel("perm1")(*self._layout_args(layout), 1 << layout.targets[0],
                              t(ph[0]), t(ph[1]), state, size=layout.num_groups)


register_backend("cupy", CupyBackend)
