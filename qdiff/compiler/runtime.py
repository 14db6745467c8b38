"""Compiled helpers that generated code calls: index checks, gathers, arg-extrema and
batched matrix products. Each works on a fixed rank (the generator reshapes operands to
it), so one compiled version serves every program.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .errors import CompiledCodeError

_JIT = {"cache": True, "error_model": "numpy"}


@njit(**_JIT)
def start_index(start: int, dim: int, size: int, code: int) -> int:
    """A slice start as NumPy-style dynamic slicing reads it (negative counts from the end),
    checked to fit ``size`` elements in an axis of ``dim``."""
    s = start + dim if start < 0 else start
    if s < 0 or s > dim - size:
        raise CompiledCodeError(code)
    return s


@njit(**_JIT)
def gather(x: np.ndarray, indices: np.ndarray, code: int) -> np.ndarray:
    """``take(x, indices, axis=1)`` for ``x`` of shape (A, size, B) and flat ``indices``."""
    outer, size, inner = x.shape
    out = np.empty((outer, indices.size, inner), x.dtype)
    for j in range(indices.size):
        t = indices[j]
        if t < -size or t >= size:
            raise CompiledCodeError(code)
        if t < 0:
            t += size
        for a in range(outer):
            for b in range(inner):
                out[a, j, b] = x[a, t, b]
    return out


@njit(**_JIT)
def arg_extremum(x: np.ndarray, largest: bool) -> np.ndarray:
    """argmax (``largest``) or argmin along axis 1 of ``x`` (A, size, B): the first index
    of the extremum, the first NaN when there is one (as NumPy)."""
    outer, size, inner = x.shape
    out = np.zeros((outer, inner), np.int64)
    for a in range(outer):
        for b in range(inner):
            best = x[a, 0, b]
            at = 0
            for j in range(1, size):
                v = x[a, j, b]
                if best != best:
                    break
                if (v > best if largest else v < best) or v != v:
                    best = v
                    at = j
            out[a, b] = at
    return out


@njit(**_JIT)
def batched_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``out[p] = a[p] @ b[p]`` for ``a`` (P, M, K) and ``b`` (P, K, N), through BLAS."""
    batch, m, _ = a.shape
    n = b.shape[2]
    out = np.empty((batch, m, n), a.dtype)
    for p in range(batch):
        np.dot(a[p], b[p], out[p])
    return out


@njit(**_JIT)
def batched_matmul_transposed(a: np.ndarray, b: np.ndarray, transpose_a: bool,
                              transpose_b: bool) -> np.ndarray:
    """`batched_matmul` with ``a[p]`` (K, M) read as its transpose when ``transpose_a``,
    and ``b[p]`` (N, K) when ``transpose_b``: BLAS reads a transposed operand in place,
    so its caller may lay it out by the cheaper copy."""
    batch = a.shape[0]
    m = a.shape[2] if transpose_a else a.shape[1]
    n = b.shape[1] if transpose_b else b.shape[2]
    out = np.empty((batch, m, n), a.dtype)
    for p in range(batch):
        if transpose_a and transpose_b:
            np.dot(a[p].T, b[p].T, out[p])
        elif transpose_a:
            np.dot(a[p].T, b[p], out[p])
        elif transpose_b:
            np.dot(a[p], b[p].T, out[p])
        else:
            np.dot(a[p], b[p], out[p])
    return out


@njit(**_JIT)
def batched_matmul_views(a: np.ndarray, b: np.ndarray, transpose_a: bool,
                         transpose_b: bool) -> np.ndarray:
    """`batched_matmul_transposed` for operands that may be strided views (a batch axis
    transposed to the front without a copy): each batch member is copied into one
    contiguous scratch matrix, which stays in cache, instead of the whole operand into a
    new array first.

    >>> a, b = np.arange(24.0).reshape(4, 2, 3), np.arange(12.0).reshape(4, 3)
    >>> va = np.transpose(a, (1, 0, 2))          # (2, 4, 3): batch of 2, read as (3, 4)
    >>> vb = np.broadcast_to(b, (2, 4, 3))
    >>> bool(np.allclose(batched_matmul_views(va, vb, True, False),
    ...                  np.einsum("nki,nj->kij", a, b)))
    True
    """
    batch = a.shape[0]
    m = a.shape[2] if transpose_a else a.shape[1]
    n = b.shape[1] if transpose_b else b.shape[2]
    out = np.empty((batch, m, n), a.dtype)
    left = np.empty(a.shape[1:], a.dtype)
    right = np.empty(b.shape[1:], b.dtype)
    for p in range(batch):
        left[:, :] = a[p]
        right[:, :] = b[p]
        if transpose_a and transpose_b:
            np.dot(left.T, right.T, out[p])
        elif transpose_a:
            np.dot(left.T, right, out[p])
        elif transpose_b:
            np.dot(left, right.T, out[p])
        else:
            np.dot(left, right, out[p])
    return out


@njit(**_JIT)
def batched_matmul_loops(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`batched_matmul` for dtypes BLAS does not take (integers)."""
    batch, m, depth = a.shape
    n = b.shape[2]
    out = np.zeros((batch, m, n), a.dtype)
    for p in range(batch):
        for i in range(m):
            for t in range(depth):
                v = a[p, i, t]
                for j in range(n):
                    out[p, i, j] += v * b[p, t, j]
    return out


@njit(**_JIT)
def factor_or_solve(a: np.ndarray, b: np.ndarray, solve: bool, code: int) -> np.ndarray:
    """Per matrix ``a[p]`` of (P, n, n): ``solve(a[p], b[p])`` for ``b`` (P, n, k), or with
    ``solve`` False the lower Cholesky factor (``b`` is then ``a``). A singular or not
    positive definite matrix raises ``code``."""
    out = np.zeros_like(b)
    if a.shape[1] == 0 or b.shape[2] == 0:
        return out
    for p in range(a.shape[0]):
        failed = False
        # Numba raises LinAlgError, catches only Exception, and cannot raise in `except`
        try:
            x = np.linalg.solve(a[p], b[p]) if solve else np.linalg.cholesky(a[p])
        except Exception:  # noqa: BLE001
            failed = True
        if failed:
            raise CompiledCodeError(code)
        out[p] = x
    return out


@njit(**_JIT)
def slogdet(a: np.ndarray, want_sign: bool) -> np.ndarray:
    """The sign (``want_sign``) or log |det| of each ``a[p]`` (P, n, n)."""
    out = np.empty(a.shape[0], a.dtype)
    for p in range(a.shape[0]):
        sign, logdet = np.linalg.slogdet(a[p])
        out[p] = sign if want_sign else logdet
    return out
