"""What generated CUDA host functions call: launches with their transfers, and the final
pass of reductions. Only generated modules import this module (it imports ``numba.cuda``,
an optional dependency; ``NUMBA_ENABLE_CUDASIM=1`` simulates it on the CPU).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...gpu.numba_cuda import prepare_numba_cuda

prepare_numba_cuda()  # before numba.cuda's registries load
from numba import cuda  # noqa: E402


def launch(kernel: Any, blocks: int, threads: int, args: Sequence[Any],
           written: Sequence[int]) -> None:
    """Run ``kernel`` on ``blocks`` × ``threads`` threads over ``args``: host arrays go to
    device arrays allocated here, and those at positions ``written`` come back into their
    host arrays (device arrays and scalars pass as they are)."""
    device = [cuda.to_device(a) if isinstance(a, np.ndarray) else a for a in args]
    with warnings.catch_warnings():
        # the simulator's threads compute with NumPy scalars outside the host's errstate:
        # floating-point exceptions are values there too, as on a GPU
        warnings.simplefilter("ignore", RuntimeWarning)
        kernel[blocks, threads](*device)
    for k in written:
        device[k].copy_to_host(args[k])


def empty(count: int, dtype: str) -> Any:
    """A device array of ``count`` elements that stays on the device (per-block partials)."""
    return cuda.device_array(count, dtype)


def fold(kernel: Any, threads: int, partials: Any) -> Any:
    """The second level of a reduction: ``kernel`` (one block) folds the per-block
    ``partials`` (a device array) on the device; the result comes back as a host scalar."""
    out = cuda.device_array(1, partials.dtype)
    kernel[1, threads](partials, out)
    return out.copy_to_host()[0]
