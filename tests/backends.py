"""The compiled back end checked against the interpreter on every program call.

``default_backend("numba-checked")`` runs each classical program call both ways and fails
unless the compiled outputs equal the interpreter's to 1e-12 relative (NaN where it has
NaN; ``"numba-cuda-checked"`` does the same with the CUDA target); the tests of the IR and
of classical AD run under it as well as under the interpreter (`conftest.py`'s ``backend``
fixture). Programs that reverse a loop by its inverse steps (reverse computing) agree to
1e-10: they recompute each carry backwards from the last, so the rounding of the forward
and backward sweeps, which compiled code orders differently, adds up over the steps.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from qdiff.compiler.jit import run_compiled
from qdiff.ir.core import Program
from qdiff.ir.interpreter import evaluate, register_executor

RTOL = 1e-12
RTOL_REVERSE_COMPUTING = 1e-10


def assert_agree(compiled: Any, reference: Any, where: str, rtol: float = RTOL) -> None:
    a, b = np.asarray(compiled), np.asarray(reference)
    assert a.shape == b.shape and a.dtype == b.dtype, (
        f"{where}: compiled {a.dtype}{a.shape}, interpreter {b.dtype}{b.shape}")
    if a.dtype.kind in "fc":
        finite = np.abs(b[np.isfinite(b)])
        scale = max(1.0, float(finite.max())) if finite.size else 1.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * scale, equal_nan=True,
                                   err_msg=where)
    else:
        np.testing.assert_array_equal(a, b, err_msg=where)


def run_checked(program: Program, values: list[Any], backend: str = "numba") -> list[Any]:
    reference = evaluate(program, *values)
    compiled = run_compiled(program, [np.array(v, copy=True) for v in values], backend)
    inverted = any(e.params.get("inverse") is not None for e in program.all_eqns()
                   if e.primitive.name in ("loop", "while"))
    rtol = RTOL_REVERSE_COMPUTING if inverted else RTOL
    for k, (c, r) in enumerate(zip(compiled, reference)):
        assert_agree(c, r, f"output {k} of program {program.name!r}", rtol)
    return compiled


register_executor("numba-checked", run_checked)
# the CUDA target: with NUMBA_ENABLE_CUDASIM=1 set before the run where there is no GPU
register_executor("numba-cuda-checked", functools.partial(run_checked, backend="numba-cuda"))
