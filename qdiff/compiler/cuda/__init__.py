"""The CUDA target of `qdiff.jit` (``backend="numba-cuda"``): the same lowering as the CPU
target, with each parallel loop nest written as a ``numba.cuda.jit`` kernel that a host
function launches. Nothing here imports ``numba.cuda``; the generated modules do (and
`device`, which only they import).
"""
