"""The CUDA kernels of the CuPy back end, each beside its NumPy transcription.

A kernel here is a :class:`CudaKernel`: its CUDA C source (compiled by NVRTC on the GPU, via
``cupy.RawKernel`` or ``cupy.ElementwiseKernel``), the C types of its arguments, and a NumPy
function that does what the kernel does with the same arguments, written over the vector of
thread indices so that the index math reads line by line like the CUDA source. Where there is
no GPU, the tests run the CuPy back end on a NumPy-backed stand-in of CuPy that looks every
kernel up here, checks its arguments' types against the signature and runs the transcription
(``tests/quantum/simulator/counting_cupy.py``), so every kernel launch the back end makes is
exercised, counted and compared with the NumPy reference here.

Raw kernels take complex arrays as pointers to their real type (``real`` is ``double`` for
``complex128`` states and ``float`` for ``complex64``; amplitude ``j`` is ``a[2j]``,
``a[2j+1]``), so their sources need no complex header; sums are accumulated in ``double``.
Elementwise kernels use CuPy's type-generic ``T``.

>>> sorted(KERNELS)[:3]
['qdiff_dense', 'qdiff_dense1', 'qdiff_diag']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["CudaKernel", "KERNELS", "THREADS", "REDUCTION_BLOCKS", "raw_source"]

THREADS = 256
"""Threads per block of every raw kernel (the shared-memory arrays are this long; a dense
block of up to 2^6 amplitudes fits a block whole)."""

REDUCTION_BLOCKS = 1024
"""Most blocks a reduction launches (each adds its partial sum with one atomic per slot;
grid-stride loops cover larger states)."""


@dataclass(frozen=True)
class CudaKernel:
    """One kernel: ``kind`` is ``"raw"`` (``cupy.RawKernel``, called as
    ``k(grid, block, args, shared_mem=0)``) or ``"elementwise"`` (``cupy.ElementwiseKernel``
    with ``params``/``outputs``, called with ``size=``). ``signature`` lists a raw kernel's C
    argument types (``"real*"``: a complex array as its real type; ``"double*"``,
    ``"long long*"``: arrays of that type; ``"int"``, ``"long long"``, ``"double"``: scalars,
    passed as ``np.int32``/``np.int64``/``np.float64``). ``numpy`` runs the kernel's work on
    NumPy arrays (writing its outputs in place), given the launch's arguments."""

    name: str
    kind: str
    source: str
    numpy: Callable[..., None]
    signature: tuple[str, ...] = ()
    params: str = ""
    outputs: str = ""


def raw_source(kernel: CudaKernel, real: str) -> str:
    """A raw kernel's source for states of ``real`` (``"double"`` or ``"float"``), its entry
    point named ``<name>_<real>``.

    >>> "qdiff_pauli_inner_float(" in raw_source(KERNELS["qdiff_pauli_inner"], "float")
    True
    """
    if real not in ("double", "float"):
        raise ValueError(f"a raw kernel's real type is 'double' or 'float', got {real!r}")
    return f"typedef {real} real;\n" + kernel.source.replace("@NAME@", f"{kernel.name}_{real}")


def _insert_zero_bits(g: np.ndarray, positions: np.ndarray, count: int) -> np.ndarray:
    # indexing.insert_zero_bits, as the kernels write it: for each position (ascending), shift
    # the bits at and above it up by one
    for p in positions[:count].tolist():
        g = ((g >> p) << (p + 1)) | (g & ((1 << p) - 1))
    return g


def _parity(bits: np.ndarray) -> np.ndarray:
    out = np.zeros(bits.shape, np.int64)
    while np.any(bits):
        out ^= bits & 1
        bits = bits >> 1
    return out


# -- elementwise kernels: one thread per group of amplitudes -----------------------------------
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
_LAYOUT = "raw int64 pos, int32 npos, int64 cmask"


def _bases(size: int, pos: np.ndarray, npos: int, cmask: int) -> np.ndarray:
    return _insert_zero_bits(np.arange(size, dtype=np.int64), pos, npos) | cmask


def _dense1(pos, npos, cmask, bit, m00, m01, m10, m11, psi, *, size):
    base = _bases(size, pos, npos, cmask)
    i1 = base | bit
    a, b = psi[base], psi[i1]
    psi[base] = m00 * a + m01 * b
    psi[i1] = m10 * a + m11 * b


def _diag(pos, npos, cmask, offs, d, nd, psi, *, size):
    base = _bases(size, pos, npos, cmask)
    for r in range(int(nd)):
        j = base | offs[r]
        psi[j] = psi[j] * d[r]


def _diag4(pos, npos, cmask, o0, o1, o2, o3, d0, d1, d2, d3, nd, psi, *, size):
    base = _bases(size, pos, npos, cmask)
    for r, (o, d) in enumerate(((o0, d0), (o1, d1), (o2, d2), (o3, d3))):
        if r < nd:
            j = base | o
            psi[j] = psi[j] * d


def _perm1(pos, npos, cmask, bit, f0, f1, psi, *, size):
    base = _bases(size, pos, npos, cmask)
    i1 = base | bit
    a = psi[base].copy()
    psi[base] = f1 * psi[i1]
    psi[i1] = f0 * a


_ELEMENTWISE = [
    CudaKernel("qdiff_dense1", "elementwise", _INSERT_ZEROS + r"""
    const long long i1 = base | bit;
    const T a = psi[base];
    const T b = psi[i1];
    psi[base] = m00 * a + m01 * b;
    psi[i1] = m10 * a + m11 * b;
""", _dense1, params=f"{_LAYOUT}, int64 bit, T m00, T m01, T m10, T m11", outputs="raw T psi"),
    CudaKernel("qdiff_diag", "elementwise", _INSERT_ZEROS + r"""
    for (int r = 0; r < nd; ++r) {
        const long long j = base | offs[r];
        psi[j] = psi[j] * d[r];
    }
""", _diag, params=f"{_LAYOUT}, raw int64 offs, raw T d, int32 nd", outputs="raw T psi"),
    # a diagonal of at most 4 entries (every 1- and 2-wire diagonal gate: rz, cz, rzz, ...)
    # takes them by value: no table to copy to the device per gate
    CudaKernel("qdiff_diag4", "elementwise", _INSERT_ZEROS + r"""
    const long long o[4] = {o0, o1, o2, o3};
    const T d[4] = {d0, d1, d2, d3};
    for (int r = 0; r < nd; ++r) {
        const long long j = base | o[r];
        psi[j] = psi[j] * d[r];
    }
""", _diag4, params=f"{_LAYOUT}, int64 o0, int64 o1, int64 o2, int64 o3, T d0, T d1, T d2, "
                    "T d3, int32 nd", outputs="raw T psi"),
    CudaKernel("qdiff_perm1", "elementwise", _INSERT_ZEROS + r"""
    const long long i1 = base | bit;
    const T a = psi[base];
    psi[base] = f1 * psi[i1];
    psi[i1] = f0 * a;
""", _perm1, params=f"{_LAYOUT}, int64 bit, T f0, T f1", outputs="raw T psi"),
]


# -- raw kernels ------------------------------------------------------------------------------
# A dense gate on k <= 6 targets: one thread per amplitude, a group's 2^k amplitudes in
# consecutive threads of one block (THREADS is a multiple of 2^k), gathered into shared memory,
# multiplied by the matrix (given transposed, mt[c*dim + r] = M[r, c], so that a warp reads
# consecutive entries) and written back in place: one pass over the state, one launch.
_DENSE_SRC = r"""
extern "C" __global__ void @NAME@(real* psi, const real* mt, const long long* pos,
                                  const int npos, const long long cmask,
                                  const long long* offs, const int k, const long long total) {
    __shared__ real sh[2 * 256];
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int dim = 1 << k;
    const int r = (int)(t & (dim - 1));
    const bool live = t < total;
    long long j = 0;
    if (live) {
        long long g = t >> k;
        for (int q = 0; q < npos; ++q) {
            const long long p = pos[q];
            g = ((g >> p) << (p + 1)) | (g & ((1LL << p) - 1));
        }
        j = g | cmask | offs[r];
        sh[2 * threadIdx.x] = psi[2 * j];
        sh[2 * threadIdx.x + 1] = psi[2 * j + 1];
    }
    __syncthreads();
    if (!live) return;
    const int first = (int)threadIdx.x - r;
    double re = 0.0, im = 0.0;
    for (int c = 0; c < dim; ++c) {
        const double mr = mt[2 * (c * dim + r)], mi = mt[2 * (c * dim + r) + 1];
        const double ar = sh[2 * (first + c)], ai = sh[2 * (first + c) + 1];
        re += mr * ar - mi * ai;
        im += mr * ai + mi * ar;
    }
    psi[2 * j] = (real)re;
    psi[2 * j + 1] = (real)im;
}
"""


def _threads(grid: tuple[int, ...], block: tuple[int, ...]) -> np.ndarray:
    return np.arange(int(grid[0]) * int(block[0]), dtype=np.int64)


def _dense(grid, block, args):
    psi, mt, pos, npos, cmask, offs, k, total = args
    t = _threads(grid, block)
    dim = 1 << int(k)
    t = t[t < total]
    r = t & (dim - 1)
    j = _insert_zero_bits(t >> int(k), pos, int(npos)) | cmask | offs[r]
    sh = psi[j].reshape(-1, dim)  # a group's amplitudes, as the block's shared memory holds them
    m = mt.reshape(dim, dim)  # m[c, r] = M[r, c]
    psi[j] = (sh.astype(np.complex128) @ m.astype(np.complex128)).ravel()


# <bra| Σ_t f_t P_t |ket> over terms [0, nterms), added to out[slot] (re, im): a grid-stride
# loop per thread, a tree sum per block in shared memory, one atomic add per block. P_t|i> =
# (-1)^parity(i & z_t) |i ^ x_t> up to the factor f_t (which holds the Y phases).
_PAULI_INNER_SRC = r"""
extern "C" __global__ void @NAME@(const real* bra, const real* ket, const long long size,
                                  const int nterms, const long long* xs,
                                  const long long* zs, const double* fs, double* out,
                                  const int slot) {
    __shared__ double sre[256];
    __shared__ double sim[256];
    double re = 0.0, im = 0.0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < size;
         i += stride) {
        const double kr = ket[2 * i], ki = ket[2 * i + 1];
        for (int t = 0; t < nterms; ++t) {
            const long long j = i ^ xs[t];
            const double s = (__popcll((unsigned long long)(i & zs[t])) & 1) ? -1.0 : 1.0;
            const double br = bra[2 * j], bi = -(double)bra[2 * j + 1];
            const double pr = br * kr - bi * ki, pi = br * ki + bi * kr;
            const double fr = s * fs[2 * t], fi = s * fs[2 * t + 1];
            re += fr * pr - fi * pi;
            im += fr * pi + fi * pr;
        }
    }
    sre[threadIdx.x] = re;
    sim[threadIdx.x] = im;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            sre[threadIdx.x] += sre[threadIdx.x + h];
            sim[threadIdx.x] += sim[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(&out[2 * slot], sre[0]);
        atomicAdd(&out[2 * slot + 1], sim[0]);
    }
}
"""


def _pauli_inner(grid, block, args):
    bra, ket, size, nterms, xs, zs, fs, out, slot = args
    assert len(_threads(grid, block)) > 0
    i = np.arange(int(size), dtype=np.int64)  # the grid-stride loop visits every i once
    total = 0j
    f = fs.view(np.complex128)
    for t in range(int(nterms)):
        s = 1 - 2 * _parity(i & zs[t])
        total += np.sum(f[t] * s * np.conj(bra[i ^ xs[t]].astype(np.complex128)) * ket[i])
    out[2 * slot] += total.real
    out[2 * slot + 1] += total.imag


# out[i] += scale Σ_t f_t (-1)^parity((i ^ x_t) & z_t) state[i ^ x_t]: out += scale O state,
# one thread per amplitude, in one pass (out and state distinct).
_PAULI_ADD_SRC = r"""
extern "C" __global__ void @NAME@(real* out, const real* state, const long long size,
                                  const int nterms, const long long* xs,
                                  const long long* zs, const double* fs, const double sr,
                                  const double si) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= size) return;
    double re = 0.0, im = 0.0;
    for (int t = 0; t < nterms; ++t) {
        const long long j = i ^ xs[t];
        const double s = (__popcll((unsigned long long)(j & zs[t])) & 1) ? -1.0 : 1.0;
        const double ar = state[2 * j], ai = state[2 * j + 1];
        const double fr = s * fs[2 * t], fi = s * fs[2 * t + 1];
        re += fr * ar - fi * ai;
        im += fr * ai + fi * ar;
    }
    out[2 * i] = (real)(out[2 * i] + (sr * re - si * im));
    out[2 * i + 1] = (real)(out[2 * i + 1] + (sr * im + si * re));
}
"""


def _pauli_add(grid, block, args):
    out, state, size, nterms, xs, zs, fs, sr, si = args
    i = _threads(grid, block)
    i = i[i < size]
    f = fs.view(np.complex128)
    acc = np.zeros(i.shape, np.complex128)
    for t in range(int(nterms)):
        j = i ^ xs[t]
        acc += f[t] * (1 - 2 * _parity(j & zs[t])) * state[j]
    out[i] = out[i] + complex(sr, si) * acc


# The adjoint method's step over a 1-wire gate U with generator G (2x2, by value), on the pair
# (ψ, λ): out[slot] += <λ|G ψ> (re, im), then ψ <- M ψ and λ <- M λ with M = U^† (by value):
# a thread per amplitude pair (i0, i0 | bit), grid-stride; the two states read and written
# once, where a reduction and two gate kernels would read them three times.
_ADJOINT1_SRC = r"""
extern "C" __global__ void @NAME@(real* psi, real* lam, const long long groups,
                                  const long long bit,
                                  const double g00r, const double g00i, const double g01r,
                                  const double g01i, const double g10r, const double g10i,
                                  const double g11r, const double g11i,
                                  const double m00r, const double m00i, const double m01r,
                                  const double m01i, const double m10r, const double m10i,
                                  const double m11r, const double m11i,
                                  double* out, const int slot) {
    __shared__ double sre[256];
    __shared__ double sim[256];
    double re = 0.0, im = 0.0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < groups;
         g += stride) {
        const long long i0 = ((g & ~(bit - 1)) << 1) | (g & (bit - 1));
        const long long i1 = i0 | bit;
        const double a0r = psi[2 * i0], a0i = psi[2 * i0 + 1];
        const double a1r = psi[2 * i1], a1i = psi[2 * i1 + 1];
        const double l0r = lam[2 * i0], l0i = lam[2 * i0 + 1];
        const double l1r = lam[2 * i1], l1i = lam[2 * i1 + 1];
        // G a
        const double b0r = g00r * a0r - g00i * a0i + g01r * a1r - g01i * a1i;
        const double b0i = g00r * a0i + g00i * a0r + g01r * a1i + g01i * a1r;
        const double b1r = g10r * a0r - g10i * a0i + g11r * a1r - g11i * a1i;
        const double b1i = g10r * a0i + g10i * a0r + g11r * a1i + g11i * a1r;
        // conj(l) . (G a)
        re += l0r * b0r + l0i * b0i + l1r * b1r + l1i * b1i;
        im += l0r * b0i - l0i * b0r + l1r * b1i - l1i * b1r;
        // M a, M l
        psi[2 * i0] = (real)(m00r * a0r - m00i * a0i + m01r * a1r - m01i * a1i);
        psi[2 * i0 + 1] = (real)(m00r * a0i + m00i * a0r + m01r * a1i + m01i * a1r);
        psi[2 * i1] = (real)(m10r * a0r - m10i * a0i + m11r * a1r - m11i * a1i);
        psi[2 * i1 + 1] = (real)(m10r * a0i + m10i * a0r + m11r * a1i + m11i * a1r);
        lam[2 * i0] = (real)(m00r * l0r - m00i * l0i + m01r * l1r - m01i * l1i);
        lam[2 * i0 + 1] = (real)(m00r * l0i + m00i * l0r + m01r * l1i + m01i * l1r);
        lam[2 * i1] = (real)(m10r * l0r - m10i * l0i + m11r * l1r - m11i * l1i);
        lam[2 * i1 + 1] = (real)(m10r * l0i + m10i * l0r + m11r * l1i + m11i * l1r);
    }
    sre[threadIdx.x] = re;
    sim[threadIdx.x] = im;
    __syncthreads();
    for (int h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h) {
            sre[threadIdx.x] += sre[threadIdx.x + h];
            sim[threadIdx.x] += sim[threadIdx.x + h];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd(&out[2 * slot], sre[0]);
        atomicAdd(&out[2 * slot + 1], sim[0]);
    }
}
"""


def _adjoint1(grid, block, args):
    psi, lam, groups, bit, *rest = args
    assert len(_threads(grid, block)) > 0
    gen = np.array(rest[0:8:2]) + 1j * np.array(rest[1:8:2])
    m = np.array(rest[8:16:2]) + 1j * np.array(rest[9:16:2])
    out, slot = rest[16], int(rest[17])
    g = np.arange(int(groups), dtype=np.int64)  # the grid-stride loop visits every group once
    i0 = ((g & ~(bit - 1)) << 1) | (g & (bit - 1))
    i1 = i0 | bit
    a0, a1 = psi[i0].astype(np.complex128), psi[i1].astype(np.complex128)
    l0, l1 = lam[i0].astype(np.complex128), lam[i1].astype(np.complex128)
    total = np.sum(np.conj(l0) * (gen[0] * a0 + gen[1] * a1)
                   + np.conj(l1) * (gen[2] * a0 + gen[3] * a1))
    out[2 * slot] += total.real
    out[2 * slot + 1] += total.imag
    psi[i0], psi[i1] = m[0] * a0 + m[1] * a1, m[2] * a0 + m[3] * a1
    lam[i0], lam[i1] = m[0] * l0 + m[1] * l1, m[2] * l0 + m[3] * l1


_PAULI_TABLE = ("long long", "int", "long long*", "long long*", "double*")
_RAW = [
    CudaKernel("qdiff_dense", "raw", _DENSE_SRC, _dense,
               signature=("real*", "real*", "long long*", "int", "long long", "long long*",
                          "int", "long long")),
    CudaKernel("qdiff_pauli_inner", "raw", _PAULI_INNER_SRC, _pauli_inner,
               signature=("real*", "real*", *_PAULI_TABLE, "double*", "int")),
    CudaKernel("qdiff_pauli_add", "raw", _PAULI_ADD_SRC, _pauli_add,
               signature=("real*", "real*", *_PAULI_TABLE, "double", "double")),
    CudaKernel("qdiff_adjoint1", "raw", _ADJOINT1_SRC, _adjoint1,
               signature=("real*", "real*", "long long", "long long", *["double"] * 16,
                          "double*", "int")),
]

KERNELS: dict[str, CudaKernel] = {k.name: k for k in _ELEMENTWISE + _RAW}
"""Every kernel of the CuPy back end, by name."""

