"""Program-to-program passes that clean up generated code (derivative programs above all)."""

from .fuse_elementwise import count_primitives, fuse_elementwise
from .fuse_maps import fuse_maps
from .simplify import simplify
from .unpack_scalars import unpack_scalars

__all__ = ["count_primitives", "fuse_elementwise", "fuse_maps", "simplify", "unpack_scalars"]
