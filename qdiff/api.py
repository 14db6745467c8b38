"""`@qdiff.program`: a Python function traced on first call, per argument signature.

The public home of `program` and `ProgramFunction`; they are defined in the IR layer
(`qdiff.ir.program_function`) so that lower layers can use them.
"""

from .ir.program_function import ProgramFunction, program

__all__ = ["ProgramFunction", "program"]
