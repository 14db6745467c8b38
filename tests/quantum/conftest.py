"""Quantum tests: the programs of `quantum_programs_lib` are shared by every sub-folder."""

import sys
from pathlib import Path

# the test folders mirror the package's layers; their shared library lives here
sys.path.insert(0, str(Path(__file__).parent))
