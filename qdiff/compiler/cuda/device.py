"""What generated CUDA modules call: launches, the counted transfers between host and
device arrays (`transfers`), device allocations, the final pass of reductions, and what
kernels call (`math`, `libdevice`, NumPy's float ``divmod``). Only generated modules import
this module (it imports ``numba.cuda``, an optional dependency; ``NUMBA_ENABLE_CUDASIM=1``
simulates it on the CPU).
"""

from __future__ import annotations

import math as _math
import threading
import types
import warnings
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from ...gpu.numba_cuda import prepare_numba_cuda
from ..errors import CompiledCodeError
from .transfers import current as counts

prepare_numba_cuda()  # before numba.cuda's registries load
from numba import config, cuda  # noqa: E402


# What kernels call for math routines. On a GPU, Python's `math` (numba-cuda picks the float32
# or float64 routine) and numba-cuda's `libdevice`. The simulator runs kernels as Python on
# NumPy scalars, where `math` raises on overflow or a domain error and its `libdevice`
# functions are stubs returning None: there both are NumPy's ufuncs, which give the IEEE
# results a GPU gives.
def _elementwise(ufunc: np.ufunc) -> Any:
    # through contiguous one-element arrays: NumPy's scalar and strided loops differ from
    # its contiguous loop (and from C, and a GPU) at edges: (-inf) ** 0.5 is NaN there, inf
    # here
    return lambda *args: ufunc(*(np.array([a]) for a in args))[0]


if config.ENABLE_CUDASIM:
    math = types.SimpleNamespace(**{name: _elementwise(getattr(np, name)) for name in
                                    ("exp", "expm1", "log1p", "sqrt", "fmod", "copysign",
                                     "hypot")})
    libdevice = types.SimpleNamespace(**{
        name + suffix: _elementwise(ufunc) for name, ufunc in
        [("floor", np.floor), ("ceil", np.ceil), ("rint", np.rint), ("pow", np.power)]
        for suffix in ("", "f")})
else:  # pragma: no cover - needs a GPU
    from numba.cuda import libdevice  # noqa: F401  (read by generated kernels)

    math = _math


@cuda.jit(device=True)
def _divmod(a: Any, b: Any) -> tuple[Any, Any]:  # pragma: no cover - compiled
    # NumPy's npy_divmod for a nonzero divisor: the quotient floored, the remainder with
    # the divisor's sign
    mod = math.fmod(a, b)
    div = (a - mod) / b
    if mod != 0:
        if (b < 0) != (mod < 0):
            mod += b
            div -= 1.0
    else:
        mod = math.copysign(0.0, b)
    if div != 0:
        floored = libdevice.floor(div)
        if div - floored > 0.5:
            floored += 1.0
    else:
        floored = math.copysign(0.0, a / b)
    return floored, mod


@cuda.jit(device=True)
def floor_divide(a: Any, b: Any) -> Any:  # pragma: no cover - compiled
    """``np.floor_divide`` of two floats (a zero divisor gives a / b, as NumPy)."""
    if b == 0:
        return a / b
    return _divmod(a, b)[0]


@cuda.jit(device=True)
def remainder(a: Any, b: Any) -> Any:  # pragma: no cover - compiled
    """``np.remainder`` of two floats (a zero divisor gives fmod's NaN, as NumPy)."""
    if b == 0:
        return math.fmod(a, b)
    return _divmod(a, b)[1]


@cuda.jit(device=True)
def checked_start(start: Any, dim: Any, size: Any) -> Any:  # pragma: no cover - compiled
    """A slice start as `runtime.start_index` reads it (negative counts from the end), or -1
    where ``size`` elements from it do not fit an axis of ``dim`` (a kernel cannot raise:
    it marks the error for the host, `raise_marked`)."""
    s = start + dim if start < 0 else start
    if s < 0 or s > dim - size:
        return -1
    return s


@cuda.jit(device=True)
def complex_sign(z: Any) -> Any:  # pragma: no cover - compiled
    """``np.sign`` of a complex number as NumPy 2 (and Numba on the CPU) give it: z / |z|,
    0 for 0."""
    size = math.hypot(z.real, z.imag)
    if size == 0:
        return z - z  # zero of z's type
    return z / size


# kernel -> {(blocks, threads): its configured launch}: a launch site runs many times (in
# loops, at every call), and configuring costs an object and numba-cuda's occupancy check
_CONFIGURED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def configured(kernel: Any, blocks: int, threads: int) -> Any:
    """``kernel[blocks, threads]``, made once per kernel and grid. numba-cuda warns that a
    grid under 128 blocks under-uses the GPU; the generated code launches such grids on
    purpose (scalar code, small arrays), so the warning is left out, once, here (inside a
    ``warnings.catch_warnings`` at every launch it was printed at every launch: leaving the
    block resets the registry that shows a warning once)."""
    by_grid = _CONFIGURED.get(kernel)
    launcher = None if by_grid is None else by_grid.get((blocks, threads))
    if launcher is None:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Grid size")
            launcher = kernel[blocks, threads]
        # the simulator's kernel configures itself and returns itself: not kept
        if launcher is not kernel:
            _CONFIGURED.setdefault(kernel, {})[blocks, threads] = launcher
    return launcher


def launch(kernel: Any, blocks: int, threads: int, args: Sequence[Any]) -> None:
    """Run ``kernel`` on ``blocks`` × ``threads`` threads over ``args`` (device arrays and
    scalars)."""
    launcher = configured(kernel, blocks, threads)
    if not config.ENABLE_CUDASIM:  # pragma: no cover - needs a GPU
        launcher(*args)
        return
    with warnings.catch_warnings():
        # the simulator's threads compute with NumPy scalars outside the host's errstate:
        # floating-point exceptions are values there too, as on a GPU
        warnings.simplefilter("ignore", RuntimeWarning)
        launcher(*args)


class CallBuffers:
    """The device arrays one call of a compiled function allocates, kept for its next calls:
    the k-th array of a shape and dtype that a call asks for is the k-th such array of the
    previous call, so no two arrays of one call share memory, and a call after the first
    allocates nothing it asked for before. Arrays beyond `KEPT_BYTES` in all are allocated
    afresh and not kept.
    """

    def __init__(self, constants: dict[int, tuple[np.ndarray, Any]] | None = None) -> None:
        self.kept: dict[tuple, list[Any]] = {}
        self.taken: dict[tuple, int] = {}
        self.nbytes = 0
        # the module's constants on the device, shared by its calls (`upload_constant`)
        self.constants = {} if constants is None else constants
        # (id(array), shape) -> (array, its view of that shape), for the next calls (`view`)
        self.views: dict[tuple[int, tuple], tuple[Any, Any]] = {}

    def take(self, shape: int | tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised device array of ``shape`` and ``dtype`` for this call."""
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        key = (shape, np.dtype(dtype).str)
        taken = self.taken.get(key, 0)
        kept = self.kept.setdefault(key, [])
        self.taken[key] = taken + 1
        if taken < len(kept):
            return kept[taken]
        array = cuda.device_array(shape, dtype)
        counts().allocated(array.nbytes)
        if self.nbytes + array.nbytes <= KEPT_BYTES:
            kept.append(array)
            self.nbytes += array.nbytes
        return array

    def done(self) -> None:
        """The call ended: its arrays are free for the next one."""
        self.taken.clear()


# device memory the arrays kept for one compiled function's calls may take, at most
KEPT_BYTES = 1 << 29


class BufferPool:
    """The `CallBuffers` of one compiled function: each call takes one (a fresh one where
    another thread's call, or a call that has not returned, holds them all) and gives it
    back when it returns; the functions of this module allocate from the calling thread's
    current one. The module's constants, once on the device, are kept for all its calls.
    """

    def __init__(self) -> None:
        self.free: list[CallBuffers] = []
        self.constants: dict[int, tuple[np.ndarray, Any]] = {}

    @contextmanager
    def call(self) -> Iterator[CallBuffers]:
        try:
            buffers = self.free.pop()
        except IndexError:
            buffers = CallBuffers(self.constants)
        outer = getattr(_CURRENT, "buffers", None)
        _CURRENT.buffers = buffers
        try:
            yield buffers
        finally:
            _CURRENT.buffers = outer
            buffers.done()
            self.free.append(buffers)


_CURRENT = threading.local()  # .buffers: the CallBuffers of this thread's running call


def empty(shape: int | tuple[int, ...], dtype: Any) -> Any:
    """A device array, uninitialised (kernels fill it): the running call's buffer of this
    shape and dtype (`CallBuffers`), or a new one outside a call."""
    buffers = getattr(_CURRENT, "buffers", None)
    if buffers is not None:
        return buffers.take(shape, dtype)
    array = cuda.device_array(shape, dtype)
    counts().allocated(array.nbytes)
    return array


def upload(value: Any) -> Any:
    """``value`` on the device: a host array is copied over (and counted), into a buffer
    kept from the last call where it is C-contiguous; a scalar passes as it is."""
    if not isinstance(value, np.ndarray):
        return value
    counts().uploaded(value.nbytes)
    if not value.flags.c_contiguous:
        counts().allocated(value.nbytes)
        return cuda.to_device(np.ascontiguousarray(value))
    array = empty(value.shape, value.dtype)
    array.copy_to_device(value)
    return array


# views one call's buffers keep at most (arrays not kept from call to call, beyond
# `KEPT_BYTES`, add new ones at each call)
VIEWS_KEPT = 4096


def view(array: Any, *shape: Any) -> Any:
    """``array.reshape(*shape)``, a device array's view, kept with the call's buffers for the
    next calls, which take the same arrays: numba-cuda makes a view in Python (tens of µs)
    and types each new one again at the launch that takes it."""
    buffers = getattr(_CURRENT, "buffers", None)
    if buffers is None:
        return array.reshape(*shape)
    key = (id(array), shape)
    kept = buffers.views.get(key)
    if kept is None or kept[0] is not array:
        if len(buffers.views) >= VIEWS_KEPT:
            buffers.views.clear()
        kept = buffers.views[key] = (array, array.reshape(*shape))
    return kept[1]


def upload_constant(value: np.ndarray) -> Any:
    """A constant of the generated module (an array the compiled function passes at every
    call, never written) on the device: copied over at the first call and kept for the
    module's later calls (k-means' gradient sent its 100000 × 32 indices at every call)."""
    buffers = getattr(_CURRENT, "buffers", None)
    if buffers is None:
        return upload(value)
    kept = buffers.constants.get(id(value))
    if kept is None or kept[0] is not value:
        counts().uploaded(value.nbytes)
        counts().allocated(value.nbytes)
        kept = buffers.constants[id(value)] = (value, cuda.to_device(value))
    return kept[1]


def download(array: Any) -> np.ndarray:
    """A device array's values in a new host array (counted)."""
    counts().downloaded(array.nbytes)
    return array.copy_to_host()


@cuda.jit
def _fill(flat: Any, value: Any) -> None:  # pragma: no cover - compiled
    t = cuda.grid(1)
    if t < flat.shape[0]:
        flat[t] = value


def _fill_launch(flat: Any, value: Any) -> None:
    count = flat.shape[0]
    if count:
        threads = min(128, count)
        launch(_fill, (count + threads - 1) // threads, threads, (flat, value))


def full(shape: int | tuple[int, ...], value: Any, dtype: Any) -> Any:
    """A device array (`empty`) holding ``value`` everywhere, filled on the device."""
    array = empty(shape, dtype)
    _fill_launch(array.reshape(array.size), array.dtype.type(value))
    return array


def copy(array: Any) -> Any:
    """A device array (`empty`) with ``array``'s values, copied on the device."""
    out = empty(array.shape, array.dtype)
    out.copy_to_device(array)
    return out


def fold(kernel: Any, threads: int, partials: Any) -> Any:
    """The second level of a reduction: ``kernel`` (one block) folds the per-block
    ``partials`` (a device array) on the device, into a device array of one element (the
    result, a scalar kept on the device)."""
    out = empty(1, partials.dtype)
    launch(kernel, 1, threads, (partials, out))
    return out


def download_scalar(array: Any) -> Any:
    """The element of a device array of one element (a scalar kept on the device), read on
    the host (counted as a download)."""
    return download(array)[0]


def raise_marked(mark: Any) -> None:
    """Raise the error a kernel marked in ``mark`` (a device array of one integer: 0 for
    none, else the error's code + 1), as the host's own check would have (one download)."""
    code = int(download(mark)[0])
    if code:
        raise CompiledCodeError(code - 1)


def element(array: Any, *index: int) -> Any:
    """One element of a device array, read on the host (counted as a download)."""
    counts().downloaded(array.dtype.itemsize)
    return array[index]
