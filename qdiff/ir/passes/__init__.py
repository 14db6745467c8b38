"""Program-to-program passes that clean up generated code (derivative programs above all)."""

from .simplify import simplify

__all__ = ["simplify"]
