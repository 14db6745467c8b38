"""A stand-in for CuPy on NumPy that counts what would cost time on a GPU.

``CountingCupy()`` is an array module with the part of CuPy's interface the CuPy back end
uses. Its arrays (:class:`DeviceArray`, NumPy arrays underneath) play device arrays, and it
counts, in ``module.counts``:

- ``h2d``: host-to-device copies (``asarray`` of a host array, a host array assigned into a
  device array);
- ``d2h``: device-to-host copies, each of which waits for the device (``get``, ``asnumpy``,
  ``float``/``complex``/``int``/``bool`` of a device scalar, ``item``, ``tolist``);
- ``launches``: operations that launch a kernel (every ufunc and NumPy function on device
  arrays, fancy indexing, assignments, copies, fills, and every ``ElementwiseKernel`` or
  ``RawKernel`` call).

Kernels come from ``qdiff.quantum.simulator.cupy_kernels``: a kernel built here is looked up
by its name, its arguments are checked against its signature (a raw kernel's scalar arguments
must be NumPy scalars of its C types, its pointers device arrays of its types, and its grid
must cover its work) and its NumPy transcription runs. Mixing a host array into a device
operation raises, as CuPy does. (A NumPy array subclass cannot refuse ``np.asarray``, which
CuPy refuses; code that converts device arrays that way is not caught here.)

>>> cp = CountingCupy(); a = cp.asarray(np.ones(4)); b = (a * 2).sum(); float(b)
8.0
>>> cp.counts
{'h2d': 1, 'd2h': 1, 'launches': 2}
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np

from qdiff.quantum.simulator.cupy_kernels import KERNELS, THREADS, CudaKernel

__all__ = ["CountingCupy", "DeviceArray"]


class DeviceArray(np.ndarray):
    """A NumPy array playing a device array of the module in ``_module``."""

    _module: CountingCupy | None = None

    def __array_finalize__(self, obj: Any) -> None:
        self._module = getattr(obj, "_module", None)

    def _count(self, what: str) -> None:
        if self._module is not None:
            self._module.counts[what] += 1

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        module = self._module
        assert module is not None
        args = [module._unwrap(x) for x in inputs]
        out = kwargs.pop("out", None)
        if out is not None:
            kwargs["out"] = tuple(module._unwrap(o) for o in out)
        module.counts["launches"] += 1
        result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return module._wrap(result)

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        module = self._module
        assert module is not None
        if func in _VIEWS:
            return module._wrap(func(*module._unwrap_all(args), **kwargs))
        module.counts["launches"] += 1
        return module._wrap(func(*module._unwrap_all(args), **module._unwrap_all(kwargs)))

    # -- indexing: basic indexing is a view, fancy indexing a kernel ------------------------
    def __getitem__(self, key: Any) -> Any:
        if _fancy(key):
            self._count("launches")
        result = np.ndarray.__getitem__(self, _plain_key(key))
        if not isinstance(result, np.ndarray):  # CuPy returns a 0-d device array
            assert self._module is not None
            result = self._module._device(np.asarray(result))
        return result

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(value, np.ndarray) and not isinstance(value, DeviceArray):
            self._count("h2d")
        self._count("launches")
        np.ndarray.__setitem__(self, _plain_key(key), np.asarray(value))

    # -- kernels that methods launch ---------------------------------------------------------
    def copy(self, order: str = "C") -> Any:
        self._count("launches")
        return np.ndarray.copy(self, order)

    def astype(self, dtype: Any, copy: bool = True, **kwargs: Any) -> Any:
        if np.dtype(dtype) == self.dtype and not copy:
            return self
        self._count("launches")
        return np.ndarray.astype(self, dtype, **kwargs)

    def fill(self, value: Any) -> None:
        self._count("launches")
        np.ndarray.fill(self, value)

    # -- device to host ----------------------------------------------------------------------
    def get(self) -> np.ndarray:
        """A host copy (waits for the device)."""
        self._count("d2h")
        return np.array(self.view(np.ndarray))

    def __float__(self) -> float:
        self._count("d2h")
        return float(self.view(np.ndarray))

    def __complex__(self) -> complex:
        self._count("d2h")
        return complex(self.view(np.ndarray))

    def __int__(self) -> int:
        self._count("d2h")
        return int(self.view(np.ndarray))

    def __index__(self) -> int:
        self._count("d2h")
        return int(self.view(np.ndarray))

    def __bool__(self) -> bool:
        self._count("d2h")
        return bool(self.view(np.ndarray))

    def item(self, *args: Any) -> Any:
        self._count("d2h")
        return self.view(np.ndarray).item(*args)

    def tolist(self) -> Any:
        self._count("d2h")
        return self.view(np.ndarray).tolist()


_VIEWS = {np.reshape, np.ravel, np.shape, np.ndim, np.result_type, np.transpose,
          np.may_share_memory, np.shares_memory, np.iscomplexobj, np.real, np.imag}


def _fancy(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (np.ndarray, list)) for k in keys)


def _plain_key(key: Any) -> Any:
    if isinstance(key, tuple):
        return tuple(k.view(np.ndarray) if isinstance(k, DeviceArray) else k for k in key)
    return key.view(np.ndarray) if isinstance(key, DeviceArray) else key


class _Kernel:
    """A compiled kernel: checks its launch, counts it and runs its NumPy transcription."""

    def __init__(self, module: CountingCupy, kernel: CudaKernel, real: str | None) -> None:
        self.module, self.kernel, self.real = module, kernel, real

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        m = self.module
        m.counts["launches"] += 1
        if not m.run_kernels:
            return
        if self.kernel.kind == "elementwise":
            size = kwargs.pop("size")
            assert not kwargs, kwargs
            for a in args:
                if isinstance(a, np.ndarray) and not isinstance(a, DeviceArray):
                    raise TypeError(f"{self.kernel.name}: a host array as a kernel argument")
            self.kernel.numpy(*m._unwrap_all(args), size=int(size))
            return
        grid, block, params = args
        shared = kwargs.pop("shared_mem", 0)
        assert not kwargs and shared == 0, kwargs
        if tuple(block) != (THREADS,) or len(tuple(grid)) != 1 or int(grid[0]) < 1:
            raise ValueError(f"{self.kernel.name}: launch grid {grid} block {block}")
        self._check(params)
        flat = [a.reshape(-1) if isinstance(a, np.ndarray) else a  # a pointer is flat
                for a in m._unwrap_all(tuple(params))]
        self.kernel.numpy(tuple(grid), tuple(block), flat)

    def _check(self, params: tuple[Any, ...]) -> None:
        name, sig = self.kernel.name, self.kernel.signature
        if len(params) != len(sig):
            raise TypeError(f"{name}: {len(params)} arguments for {len(sig)} parameters")
        real = {"double": np.float64, "float": np.float32}[self.real or "double"]
        pointers = {"real*": real, "double*": np.float64, "long long*": np.int64}
        scalars = {"int": np.int32, "long long": np.int64, "double": np.float64}
        for k, (a, c) in enumerate(zip(params, sig)):
            if c in pointers:
                if not isinstance(a, DeviceArray) or not a.flags.c_contiguous:
                    raise TypeError(f"{name}: argument {k} ({c}) must be a contiguous device "
                                    f"array, got {type(a).__name__}")
                have = a.real.dtype if a.dtype.kind == "c" and c == "real*" else a.dtype
                if have != np.dtype(pointers[c]):
                    raise TypeError(f"{name}: argument {k} ({c}) has dtype {a.dtype}")
            elif type(a) is not scalars[c]:
                raise TypeError(f"{name}: argument {k} ({c}) must be {scalars[c].__name__}, "
                                f"got {type(a).__name__}")


class CountingCupy(types.SimpleNamespace):
    """The stand-in module (see the module docstring); ``reset()`` zeroes the counts.
    ``run_kernels=False`` only counts kernel launches (their results are then wrong): what
    is left is the host's work, which ``benchmarks/cupy_counts.py --host-time`` times."""

    ndarray = DeviceArray

    def __init__(self, run_kernels: bool = True) -> None:
        super().__init__()
        self.counts = {"h2d": 0, "d2h": 0, "launches": 0}
        self.run_kernels = run_kernels  # False: kernels are counted, not run (host timing)
        self.cuda = types.SimpleNamespace(
            runtime=types.SimpleNamespace(memGetInfo=lambda: (1 << 34, 1 << 34)))

    def reset(self) -> dict[str, int]:
        """The counts so far; zeroes them."""
        counts, self.counts = self.counts, {"h2d": 0, "d2h": 0, "launches": 0}
        return counts

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)  # dtypes, ufuncs and functions: they count on device arrays

    # -- wrapping ----------------------------------------------------------------------------
    def _wrap(self, value: Any) -> Any:
        if isinstance(value, tuple):
            return tuple(self._wrap(v) for v in value)
        if isinstance(value, np.generic) or (isinstance(value, np.ndarray)
                                              and not isinstance(value, DeviceArray)):
            return self._device(np.asarray(value))
        return value

    def _unwrap(self, value: Any) -> Any:
        if isinstance(value, DeviceArray):
            return value.view(np.ndarray)
        if isinstance(value, np.ndarray) and value.ndim > 0:
            raise TypeError("a host (NumPy) array in a device operation; CuPy refuses it")
        return value

    def _unwrap_all(self, values: Any) -> Any:
        if isinstance(values, dict):
            return {k: self._unwrap_all(v) for k, v in values.items()}
        if isinstance(values, (list, tuple)):
            return type(values)(self._unwrap_all(v) for v in values)
        return self._unwrap(values)

    def _device(self, host: np.ndarray) -> DeviceArray:
        # an array that owns its memory, as a device allocation does (views' bases are
        # device arrays, as CuPy's are)
        out = np.ndarray.__new__(DeviceArray, host.shape, host.dtype)
        out._module = self
        np.copyto(out.view(np.ndarray), host)
        return out

    # -- array creation and transfers ---------------------------------------------------------
    def asarray(self, a: Any, dtype: Any = None) -> Any:
        if isinstance(a, DeviceArray):
            return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
        self.counts["h2d"] += 1
        return self._device(np.asarray(a, dtype=dtype))

    array = asarray

    def ascontiguousarray(self, a: Any, dtype: Any = None) -> Any:
        a = self.asarray(a, dtype)
        return a if a.flags.c_contiguous else a.copy()

    def asnumpy(self, a: Any) -> np.ndarray:
        return a.get() if isinstance(a, DeviceArray) else np.asarray(a)

    def empty(self, shape: Any, dtype: Any = float) -> DeviceArray:
        return self._device(np.empty(shape, dtype))

    def _filled(self, host: np.ndarray) -> DeviceArray:
        self.counts["launches"] += 1
        return self._device(host)

    def zeros(self, shape: Any, dtype: Any = float) -> DeviceArray:
        return self._filled(np.zeros(shape, dtype))

    def ones(self, shape: Any, dtype: Any = float) -> DeviceArray:
        return self._filled(np.ones(shape, dtype))

    def zeros_like(self, a: Any, dtype: Any = None) -> DeviceArray:
        return self._filled(np.zeros(a.shape, a.dtype if dtype is None else dtype))

    def empty_like(self, a: Any, dtype: Any = None) -> DeviceArray:
        return self._device(np.empty(a.shape, a.dtype if dtype is None else dtype))

    def arange(self, *args: Any, **kwargs: Any) -> DeviceArray:
        return self._filled(np.arange(*args, **kwargs))

    # -- kernels -------------------------------------------------------------------------------
    def ElementwiseKernel(self, params: str, outputs: str, source: str,  # noqa: N802
                          name: str, **_: Any) -> _Kernel:
        kernel = KERNELS[name]
        assert (params, outputs, source) == (kernel.params, kernel.outputs, kernel.source), name
        return _Kernel(self, kernel, None)

    def RawKernel(self, source: str, name: str, **_: Any) -> _Kernel:  # noqa: N802
        base, real = name.rsplit("_", 1)
        kernel = KERNELS[base]
        assert "__global__" in source and f"{name}(" in source, name
        return _Kernel(self, kernel, real)
