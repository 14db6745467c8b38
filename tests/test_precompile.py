"""`qdiff precompile`: after it, a new process loads the simulator's kernels from Numba's
on-disk cache instead of compiling them."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from qdiff.cli import main
from qdiff.precompile import ANGLES, every_gate_program
from tests.background import ROOT, child_environment

# a new process: runs the every-gate program and its gradient, counting the Numba compiles
# of simulator kernels (a cache hit is no compile event)
_COUNT_COMPILES = """
import json, numpy as np, numba.core.event as event
from qdiff import quantum as qm
from qdiff.precompile import ANGLES, every_gate_program
compiled = []
class Listener(event.Listener):
    def on_start(self, ev):
        fn = getattr(ev.data.get("dispatcher"), "py_func", None)
        if fn is not None and fn.__module__.startswith("qdiff.quantum.simulator"):
            compiled.append(fn.__qualname__)
    def on_end(self, ev):
        pass
event.register("numba:compile", Listener())
program = every_gate_program(10, "complex128")
qm.gradient(program, np.linspace(0.1, 1.0, ANGLES))
print(json.dumps(compiled))
"""


def test_a_new_process_compiles_no_simulator_kernel_after_precompile(capsys):
    assert main(["precompile", "--dtype", "complex128"]) == 0
    printed = capsys.readouterr().out
    assert "complex128, 10 qubits" in printed and "vmap" in printed
    done = subprocess.run([sys.executable, "-c", _COUNT_COMPILES], cwd=ROOT,
                          env=child_environment({"NUMBA_NUM_THREADS": "1"}),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_every_gate_program_agrees_with_the_numpy_simulator():
    from qdiff import quantum as qm

    program = every_gate_program(5, "complex128")
    x = np.linspace(-1.0, 2.0, ANGLES)
    numba_run = qm.run(program, x)
    numpy_run = qm.run(program, x, backend="numpy")
    assert abs(numba_run.values - numpy_run.values) < 1e-12
    gradient = qm.gradient(program, x).grad
    assert gradient.shape == (ANGLES,) and np.all(np.isfinite(gradient))
    assert np.abs(gradient).max() > 1e-3   # the angles reach the observable
