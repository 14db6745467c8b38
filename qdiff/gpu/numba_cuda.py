"""Loading ``numba.cuda`` on NumPy versions newer than it knows.

numba-cuda (0.30.4 and earlier; the project is in maintenance mode) registers a GPU overload
of ``np.row_stack`` when its array registry first loads, at the first kernel compilation.
NumPy 2.5 removed ``row_stack`` (an alias of ``vstack`` since NumPy 1.0), so every CUDA
compilation fails there with ``AttributeError: module 'numpy' has no attribute
'row_stack'``. Restoring the alias before the registry loads is enough: it is exactly the
function NumPy used to export under that name.
"""

from __future__ import annotations

import numpy as np

__all__ = ["prepare_numba_cuda"]


def prepare_numba_cuda() -> None:
    """Make ``numba.cuda`` compile on this NumPy (call before the first CUDA kernel).

    >>> prepare_numba_cuda()
    >>> np.row_stack is np.vstack or hasattr(np, "row_stack")
    True
    """
    if "row_stack" not in dir(np):
        np.row_stack = np.vstack
