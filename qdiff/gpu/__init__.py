"""GPU support: array-module selection. Importing this package never imports CuPy.

>>> from qdiff.gpu import get_array_module
>>> get_array_module(prefer_gpu=False).__name__
'numpy'
"""

from qdiff.gpu.array_module import array_module_of, cupy_available, get_array_module, import_cupy

__all__ = ["array_module_of", "cupy_available", "get_array_module", "import_cupy"]
