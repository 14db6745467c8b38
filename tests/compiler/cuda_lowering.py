"""Every kernel of the CUDA target's cases typed and lowered by the real numba-cuda compiler,
on a machine without a GPU (`test_cuda_target.py` runs this in a process of its own, where
numba-cuda is installed).

The CUDA simulator runs kernel bodies as Python with NumPy, so it accepts code that
numba-cuda cannot lower (``np.exp`` in a kernel: ``KeyError: <ufunc 'exp'>``; a 1-tuple
index into a 1-d array in ``cuda.atomic.add``). numba-cuda's typing and lowering to LLVM IR
need no device, only its compute capability; NVVM, linking and launching do. So each case
runs its host function with the launches replaced: a launch lowers its kernel for the
arguments' types and runs nothing but one-thread kernels of scalar code, as Python (other
kernels' outputs stay zero, the cases' comparisons fail, and only lowering is judged);
so does each elementwise primitive alone in every dtype it accepts (`DTYPES`). Prints one
JSON line: case name -> "ok" or the failures; the entry `UNREACHED` lists kernels of loaded
modules that no launch lowered.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import numba.cuda.dispatcher as cuda_dispatcher
import numpy as np
from numba import cuda, typeof, types
from numba.cuda.compiler import compile_cuda
from numba.cuda.dispatcher import CUDADispatcher

from qdiff.compiler import CompiledProgram, NotCompilableError, cache
from qdiff.compiler.cuda import device as rtc
from tests.compiler.cuda_cases import cases, elementwise_programs

COMPUTE_CAPABILITY = (9, 0)  # an H100's; lowering needs one and no device
UNREACHED = "every kernel of the loaded modules lowered"
# each elementwise primitive is lowered alone too, in every dtype it accepts
DTYPES = ("float64", "float32", "int64", "int32", "bool", "complex128", "complex64")
# NumPy orders complex numbers and Numba does not (nor has NumPy a complex arctan2): the CPU
# target cannot compile these on complex operands either
UNORDERED = {"lt", "le", "gt", "ge", "atan2"}


class _Device:
    compute_capability = COMPUTE_CAPABILITY


class _DeviceArray(np.ndarray):
    """A host array standing in for the device arrays of `rtc.upload`, `rtc.empty`, ..."""

    def copy_to_host(self) -> np.ndarray:
        return np.array(self)


def _on_device(array: np.ndarray) -> _DeviceArray:
    return np.array(array).view(_DeviceArray)


class Lowering:
    """Launch stand-ins that lower each kernel once per signature and record failures."""

    def __init__(self) -> None:
        self.lowered: set[Any] = set()
        self.failures: list[str] = []

    def check(self, kernel: CUDADispatcher, args: tuple) -> None:
        signature = tuple(typeof(np.asarray(a) if isinstance(a, np.ndarray) else a)
                          for a in args)
        key = (kernel, signature)
        if key in self.lowered:
            return
        self.lowered.add(key)
        try:
            compiled = compile_cuda(kernel.py_func, types.void, signature,
                                    cc=COMPUTE_CAPABILITY)
            compiled.library.get_llvm_str()
        except Exception as error:  # noqa: BLE001  (reported by name, with the error)
            self.failures.append(f"{kernel.py_func.__name__}{signature}: "
                                 f"{type(error).__name__}: {error}")

    def launch(self, kernel: CUDADispatcher, blocks: int, threads: int, args: tuple) -> None:
        self.check(kernel, tuple(args))
        if kernel.py_func.__name__.startswith("scalar"):
            # a one-thread kernel of scalar code runs, as Python: the host may branch on its
            # result (a while loop's test), and a test left False would skip the loop's kernels
            try:
                kernel.py_func(*args)
            except Exception:  # noqa: BLE001, S110  (a libdevice stub: the value stays zero)
                pass

    def fold(self, kernel: CUDADispatcher, threads: int, partials: np.ndarray) -> Any:
        out = _on_device(np.zeros(1, partials.dtype))  # the result stays on the device
        self.check(kernel, (partials, out))
        return out

    def unreached(self) -> list[str]:
        lowered = {kernel for kernel, _ in self.lowered}
        # device functions (the kernels a one-block loop calls) are lowered inside the
        # kernels that call them
        return sorted(f"{module.__name__}.{name}" for module in cache._LOADED.values()
                      for name, value in vars(module).items()
                      if isinstance(value, CUDADispatcher) and value not in lowered
                      and not value.targetoptions.get("device"))


def main(selected: list[str]) -> None:
    lowering = Lowering()
    # numba-cuda asks the current device for its compute capability when it types a call
    # of a device function (the kernels call `rtc.floor_divide`, ...); there is none here
    cuda_dispatcher.get_current_device = lambda: _Device()
    cuda.is_available = lambda: True  # CompiledProgram refuses the target without a device
    rtc.launch, rtc.fold = lowering.launch, lowering.fold
    rtc.upload = lambda value: _on_device(value) if isinstance(value, np.ndarray) else value
    rtc.upload_constant = rtc.upload
    rtc.download, rtc.copy = np.array, _on_device
    rtc.empty = lambda shape, dtype: _on_device(np.zeros(shape, dtype))
    rtc.full = lambda shape, value, dtype: _on_device(np.full(shape, value, dtype))
    results = {}
    for key, (run, name) in cases().items():
        if selected and key not in selected:
            continue
        before = len(lowering.failures)
        try:
            run(name)
        except Exception:  # noqa: BLE001, S110  (kernels ran nothing: values are wrong)
            pass
        failed = lowering.failures[before:]
        results[key] = "ok" if not failed else "\n".join(failed)
    for label, program, operands in elementwise_programs(DTYPES):
        if label.split()[0] in UNORDERED and operands[0].dtype.kind == "c":
            continue
        before = len(lowering.failures)
        try:
            CompiledProgram(program, backend="numba-cuda")(*operands)
        except NotCompilableError:
            pass  # refused by name (a complex ufunc numba-cuda has no kernel form of)
        failed = lowering.failures[before:]
        results[f"elementwise: {label}"] = "ok" if not failed else "\n".join(failed)
    missing = lowering.unreached()
    results[UNREACHED] = "ok" if not missing else "not lowered: " + ", ".join(missing)
    print(json.dumps(results))


if __name__ == "__main__":
    main(sys.argv[1:])
