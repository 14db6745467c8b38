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

__all__ = ["BLOCK_GATES", "BLOCK_ROW", "CudaKernel", "KERNELS", "REDUCTION_BLOCKS", "THREADS",
           "raw_source"]

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


def _spread(source: str) -> str:
    """``source`` with each ``@SPREAD_<n>@`` line replaced by the C lines, indented by n, that
    spread a thread's group counter ``t >> k`` over the non-gate bits (as `insert_zero_bits`:
    for each gate position p, ascending, the bits at and above p move up by one) into ``g``."""
    lines = ["long long g = t >> k;", "for (int q = 0; q < npos; ++q) {",
             "    const long long p = pos[q];",
             "    g = ((g >> p) << (p + 1)) | (g & ((1LL << p) - 1));", "}"]
    for indent in (8, 12):
        text = "\n".join(" " * indent + line for line in lines)
        source = source.replace(f"@SPREAD_{indent}@", text)
    return source


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
_DENSE_SRC = _spread(r"""
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
@SPREAD_8@
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
""")


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


# A block of gates on k <= 6 wires (BLOCK_GATES at most, each on 1 or 2 of them), applied to
# ψ, or in the adjoint method's reverse sweep to the pair (ψ, λ) with derivatives: each block
# of THREADS threads loads a chunk of whole groups into shared memory, then for every gate of
# the table (in table order) adds <λ|G ψ> to the gate's slot where it has one (slot >= 0)
# and applies the gate's matrix M (the gate, or U^† in the sweep) to ψ and λ, and writes the
# chunk back: the states are read and written once per block of gates, not once per gate.
# Table row q (BLOCK_ROW doubles): w (1 or 2 wires), b0, b1 (the wires' bits in a group's
# local index, gate matrix bit j = b_j), slot, then M and G as 4x4 complex (row-major, re/im
# interleaved; a 1-wire gate uses the top-left 2x2). with_lam = 0: ψ only (lam is not read).
# The sums go through warp shuffles and shared atomics, then one global atomic per gate and
# block.
_GATE_BLOCK_SRC = _spread(r"""
extern "C" __global__ void @NAME@(real* psi, real* lam, const long long* pos, const int npos,
                                  const long long* offs, const int k, const long long total,
                                  const double* table, const int ngates, double* out,
                                  const int with_lam) {
    __shared__ double sp[2 * 256];
    __shared__ double sl[2 * 256];
    __shared__ double acc[2 * 64];
    const int tid = threadIdx.x;
    const int dim = 1 << k;
    for (int q = tid; q < 2 * 64; q += blockDim.x) acc[q] = 0.0;
    __syncthreads();
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long start = (long long)blockIdx.x * blockDim.x; start < total; start += step) {
        const long long t = start + tid;
        const bool live = t < total;
        long long j = 0;
        if (live) {
@SPREAD_12@
            j = g | offs[t & (dim - 1)];
            sp[2 * tid] = psi[2 * j];
            sp[2 * tid + 1] = psi[2 * j + 1];
            sl[2 * tid] = with_lam ? (double)lam[2 * j] : 0.0;
            sl[2 * tid + 1] = with_lam ? (double)lam[2 * j + 1] : 0.0;
        } else {
            sp[2 * tid] = 0.0;
            sp[2 * tid + 1] = 0.0;
            sl[2 * tid] = 0.0;
            sl[2 * tid + 1] = 0.0;
        }
        __syncthreads();
        for (int q = 0; q < ngates; ++q) {
            const double* e = table + 68 * q;
            const int w = (int)e[0], b0 = (int)e[1], b1 = (int)e[2], slot = (int)e[3];
            const int d = 1 << w;
            double re = 0.0, im = 0.0;
            if (tid < (int)(blockDim.x >> w)) {
                const int lo = (w == 1 || b0 < b1) ? b0 : b1;
                const int hi = (w == 1 || b0 < b1) ? b1 : b0;
                int r0 = ((tid >> lo) << (lo + 1)) | (tid & ((1 << lo) - 1));
                if (w == 2) r0 = ((r0 >> hi) << (hi + 1)) | (r0 & ((1 << hi) - 1));
                int m[4];
                double ar[4], ai[4], lr[4], li[4];
                for (int x = 0; x < d; ++x) {
                    m[x] = r0 | ((x & 1) << b0) | (((x >> 1) & 1) << b1);
                    ar[x] = sp[2 * m[x]];
                    ai[x] = sp[2 * m[x] + 1];
                    lr[x] = sl[2 * m[x]];
                    li[x] = sl[2 * m[x] + 1];
                }
                if (slot >= 0) {
                    const double* G = e + 36;
                    for (int x = 0; x < d; ++x) {
                        double br = 0.0, bi = 0.0;
                        for (int y = 0; y < d; ++y) {
                            const double gr = G[2 * (4 * x + y)], gi = G[2 * (4 * x + y) + 1];
                            br += gr * ar[y] - gi * ai[y];
                            bi += gr * ai[y] + gi * ar[y];
                        }
                        re += lr[x] * br + li[x] * bi;
                        im += lr[x] * bi - li[x] * br;
                    }
                }
                const double* M = e + 4;
                for (int x = 0; x < d; ++x) {
                    double pr = 0.0, pi = 0.0, qr = 0.0, qi = 0.0;
                    for (int y = 0; y < d; ++y) {
                        const double mr = M[2 * (4 * x + y)], mi = M[2 * (4 * x + y) + 1];
                        pr += mr * ar[y] - mi * ai[y];
                        pi += mr * ai[y] + mi * ar[y];
                        qr += mr * lr[y] - mi * li[y];
                        qi += mr * li[y] + mi * lr[y];
                    }
                    sp[2 * m[x]] = pr;
                    sp[2 * m[x] + 1] = pi;
                    sl[2 * m[x]] = qr;
                    sl[2 * m[x] + 1] = qi;
                }
            }
            if (slot >= 0) {
                for (int off = 16; off > 0; off >>= 1) {
                    re += __shfl_down_sync(0xffffffffu, re, off);
                    im += __shfl_down_sync(0xffffffffu, im, off);
                }
                if ((tid & 31) == 0) {
                    atomicAdd(&acc[2 * q], re);
                    atomicAdd(&acc[2 * q + 1], im);
                }
            }
            __syncthreads();
        }
        if (live) {
            psi[2 * j] = (real)sp[2 * tid];
            psi[2 * j + 1] = (real)sp[2 * tid + 1];
            if (with_lam) {
                lam[2 * j] = (real)sl[2 * tid];
                lam[2 * j + 1] = (real)sl[2 * tid + 1];
            }
        }
        __syncthreads();
    }
    for (int q = tid; q < ngates; q += blockDim.x) {
        const int slot = (int)table[68 * q + 3];
        if (slot >= 0) {
            atomicAdd(&out[2 * slot], acc[2 * q]);
            atomicAdd(&out[2 * slot + 1], acc[2 * q + 1]);
        }
    }
}
""")

BLOCK_GATES = 64
"""Most gates one launch of the gate-block kernel takes (its shared sums)."""

BLOCK_ROW = 68
"""Doubles per gate in the gate-block kernel's table."""


def _gate_block(grid, block, args):
    psi, lam, pos, npos, offs, k, total, table, ngates, out, with_lam = args
    assert len(_threads(grid, block)) > 0 and 0 <= ngates <= BLOCK_GATES
    dim = 1 << int(k)
    t = np.arange(int(total), dtype=np.int64)  # the grid-stride loop visits every t once
    j = _insert_zero_bits(t >> int(k), pos, int(npos)) | offs[t & (dim - 1)]
    a = psi[j].astype(np.complex128).reshape(-1, dim)  # a group a row
    lam_rows = (lam[j] if with_lam else np.zeros(j.shape)).astype(np.complex128).reshape(-1, dim)
    for q in range(int(ngates)):
        e = table[BLOCK_ROW * q: BLOCK_ROW * (q + 1)]
        w, b0, b1, slot = (int(v) for v in e[:4])
        d = 1 << w
        m = (e[4:36:2] + 1j * e[5:36:2]).reshape(4, 4)[:d, :d]
        gen = (e[36:68:2] + 1j * e[37:68:2]).reshape(4, 4)[:d, :d]
        r0 = np.arange(dim >> w, dtype=np.int64)
        for bit in sorted((b0, b1) if w == 2 else (b0,)):
            r0 = ((r0 >> bit) << (bit + 1)) | (r0 & ((1 << bit) - 1))
        x = np.arange(d)
        members = r0[:, None] | ((x & 1) << b0) | (((x >> 1) & 1) << b1)  # [tuple, x]
        amps, adj = a[:, members], lam_rows[:, members]  # [group, tuple, x]
        if slot >= 0:
            total_q = np.sum(np.conj(adj) * (amps @ gen.T))
            out[2 * slot] += total_q.real
            out[2 * slot + 1] += total_q.imag
        a[:, members] = amps @ m.T
        lam_rows[:, members] = adj @ m.T
    psi[j] = a.ravel()
    if with_lam:
        lam[j] = lam_rows.ravel()


_PAULI_TABLE = ("long long", "int", "long long*", "long long*", "double*")
_RAW = [
    CudaKernel("qdiff_dense", "raw", _DENSE_SRC, _dense,
               signature=("real*", "real*", "long long*", "int", "long long", "long long*",
                          "int", "long long")),
    CudaKernel("qdiff_pauli_inner", "raw", _PAULI_INNER_SRC, _pauli_inner,
               signature=("real*", "real*", *_PAULI_TABLE, "double*", "int")),
    CudaKernel("qdiff_pauli_add", "raw", _PAULI_ADD_SRC, _pauli_add,
               signature=("real*", "real*", *_PAULI_TABLE, "double", "double")),
    CudaKernel("qdiff_gate_block", "raw", _GATE_BLOCK_SRC, _gate_block,
               signature=("real*", "real*", "long long*", "int", "long long*", "int",
                          "long long", "double*", "int", "double*", "int")),
]

KERNELS: dict[str, CudaKernel] = {k.name: k for k in _ELEMENTWISE + _RAW}
"""Every kernel of the CuPy back end, by name."""

