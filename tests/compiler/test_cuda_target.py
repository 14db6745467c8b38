"""The CUDA target (``backend="numba-cuda"``) under Numba's CUDA simulator.

The simulator must be switched on (``NUMBA_ENABLE_CUDASIM=1``) before ``numba.cuda`` is
first imported, so the cases (`cuda_cases.py`: compiled programs and gradients against the
interpreter to 1e-12 relative, and the errors) run in one process of their own; each case
is one test here. Sizes are tiny: the simulator runs a Python thread per GPU thread.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.ir.errors import QdiffError
from tests.compiler.cuda_cases import cases, elementwise_programs

ROOT = Path(__file__).resolve().parents[2]


def _cases_in_a_process(module: str, simulator: bool) -> dict[str, str]:
    """The JSON line of ``python -m <module>``, run with or without the CUDA simulator."""
    environment = {**os.environ,
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    environment.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        environment["NUMBA_ENABLE_CUDASIM"] = "1"
    done = subprocess.run([sys.executable, "-m", module], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def simulated() -> dict[str, str]:
    return _cases_in_a_process("tests.compiler.cuda_cases", simulator=True)


@pytest.mark.parametrize("case", list(cases()))
def test_cuda_target_under_the_simulator(simulated, case):
    assert simulated[case] == "ok", simulated[case]


@pytest.mark.skipif(importlib.util.find_spec("numba_cuda") is None,
                    reason="needs numba-cuda (the 'gpu' extra; no GPU needed)")
def test_every_kernel_of_the_cases_lowers_with_numba_cuda():
    # the simulator accepted kernels that numba-cuda rejects on a GPU (KeyError: <ufunc
    # 'exp'>, "Cannot cast UniTuple(int64 x 1) to int64"); its typing and lowering run
    # without one
    lowered = _cases_in_a_process("tests.compiler.cuda_lowering", simulator=False)
    assert set(cases()) < set(lowered)
    failed = {case: text for case, text in lowered.items() if text != "ok"}
    assert not failed, "\n".join(f"{case}: {text}" for case, text in failed.items())


def test_cuda_backend_without_a_gpu_is_refused_clearly(monkeypatch):
    from numba import cuda  # noqa: PLC0415  (optional; imported only where it is tested)

    monkeypatch.setattr(cuda, "is_available", lambda: False)  # as on a machine without one
    # the hint names the simulator unless it is already on (as in a run of this file with
    # NUMBA_ENABLE_CUDASIM=1, where this test failed on the message)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    f = qdiff.jit(lambda x: qnp.sum(x * x), backend="numba-cuda")
    with pytest.raises(QdiffError, match="needs a CUDA GPU.*NUMBA_ENABLE_CUDASIM=1"):
        f(np.ones(3))


def test_gpu_benchmark_without_a_gpu_is_refused_clearly():
    # numba.cuda is told it has no device in the benchmark's own process, GPU or not
    hide_gpu = ("import runpy, sys; from numba import cuda; cuda.is_available = lambda: False; "
                "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')")
    done = subprocess.run([sys.executable, "-c", hide_gpu,
                           str(ROOT / "benchmarks" / "classical_ad.py"),
                           "--quick", "--backend", "numba-cuda"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--backend numba-cuda needs a CUDA GPU" in done.stderr


def test_cuda_compiles_on_numpy_without_row_stack(monkeypatch):
    # numba-cuda registers a GPU np.row_stack when it first compiles; NumPy 2.5 removed the
    # alias, and every CUDA compilation failed with "module 'numpy' has no attribute
    # 'row_stack'"
    from qdiff.gpu.numba_cuda import prepare_numba_cuda  # noqa: PLC0415

    monkeypatch.delattr(np, "row_stack", raising=False)
    assert "row_stack" not in dir(np)
    prepare_numba_cuda()
    assert np.row_stack is np.vstack
    assert np.row_stack((np.ones(2), np.zeros(2))).shape == (2, 2)


def test_kernels_call_only_the_ufuncs_numba_cuda_lowers():
    # the CUDA simulator runs kernels as Python with NumPy, so it accepted np.exp, np.sign,
    # np.power, ... that numba-cuda cannot lower on a GPU ("KeyError: <ufunc 'exp'>" at the
    # first compilation): kernel text is checked against numba-cuda's ufunc table instead
    from qdiff.compiler.cuda.codegen import generate_cuda  # noqa: PLC0415
    from qdiff.compiler.cuda.elementwise import CUDA_UFUNCS  # noqa: PLC0415
    from qdiff.compiler.lowering import Options  # noqa: PLC0415

    checked = 0
    for label, program, _ in elementwise_programs(("float64", "float32", "int64")):
        source = generate_cuda(program, Options()).source
        kernels = source[:source.index("\ndef host(")]
        assert "@cuda.jit" in kernels, label
        called = {name for name in re.findall(r"\bnp\.(\w+)\(", kernels)
                  if not isinstance(getattr(np, name, None), type)}
        assert called <= CUDA_UFUNCS, f"{label}: np.{', np.'.join(sorted(called - CUDA_UFUNCS))}"
        checked += 1
    assert checked > 80


def test_complex_ufuncs_without_a_cuda_form_are_refused_by_name():
    from qdiff.compiler.cuda.codegen import generate_cuda  # noqa: PLC0415
    from qdiff.compiler.errors import NotCompilableError  # noqa: PLC0415
    from qdiff.compiler.lowering import Options  # noqa: PLC0415

    program = qdiff.trace(lambda z: qnp.exp(z) * 2.0, np.ones(3, complex))
    with pytest.raises(NotCompilableError, match=r"exp of complex128 .*np\.exp.*backend='numba'"):
        generate_cuda(program, Options())


def _host_function(f, *args) -> list[str]:
    """The lines of the generated host function of ``f`` (no GPU or simulator needed)."""
    from qdiff.compiler.cuda.codegen import generate_cuda  # noqa: PLC0415
    from qdiff.compiler.lowering import Options  # noqa: PLC0415

    source = generate_cuda(qdiff.trace(f, *args), Options()).source
    return source[source.index("\ndef host("):source.index("\ndef kernel(")].splitlines()


@pytest.fixture
def per_step_loops(monkeypatch):
    """Loops written as host loops launching their bodies' kernels at each step (as bodies
    too big for a block are), not as one kernel (`cuda.block_loops`): the residency of the
    host loop's arrays is what these tests check."""
    from qdiff.compiler.cuda import block_loops  # noqa: PLC0415

    monkeypatch.setattr(block_loops, "MAX_THREADS", 0)


def test_gmm_gradient_contracts_on_the_device_not_in_a_host_python_loop():
    # the CPU target's direct-loop einsum ran in the CUDA host function, which is plain
    # Python: one interpreted iteration per product of GMM's Σ_n t̄[n,k,i] c[n,k,j]; its
    # transposes and argmax also took their operands back from the device
    from tests.compiler.cuda_cases import EXTRA  # noqa: PLC0415

    f, (alphas, means, icf, _) = EXTRA["ADBench GMM, 12 points"]
    points = np.ones((1000, means.shape[1]))  # generated, not run: any size
    lines = _host_function(qdiff.grad(f, argnums=(0, 1, 2)), alphas, means, icf, points)
    assert not [line for line in lines if line.strip().startswith(("for ", "while "))]
    host = "\n".join(lines)
    for moved in ("rt.arg_extremum(", "np.transpose(", "rt.batched_matmul"):
        assert moved not in host
    assert host.count("rtc.download(") <= 5, host


def test_loop_of_kernels_moves_nothing_per_iteration(per_step_loops):
    # operands went to the device at every launch and results came back after it: a loop of
    # kernels copied its carry and its constant operand both ways at every iteration
    from tests.compiler.cuda_cases import _loop_of_kernels  # noqa: PLC0415

    lines = _host_function(_loop_of_kernels, np.ones(6), np.ones(6))
    loop = next(k for k, line in enumerate(lines) if line.strip().startswith("for "))
    body = [line for line in lines[loop + 1:] if line.startswith(" " * 8)]
    assert sum("rtc.launch(" in line for line in body) == 4  # a nest, a blocked scan
    assert not [line for line in body if "rtc.upload(" in line or "rtc.download(" in line]
    moves = [line.strip() for line in lines if "rtc.upload(" in line or "rtc.download(" in line]
    assert moves == ["c1_d = rtc.upload(c1)", "a1_d = rtc.upload(a1)",
                     "c1 = rtc.download(c1_d)"]


def test_checkpointed_loop_of_kernels_copies_nothing_per_iteration(per_step_loops):
    # the forward loop's carry came back at every step for its checkpoint (a host buffer)
    # and went over again, and the reverse loop's cotangents came back at every step:
    # 31 downloads and 31 uploads per call of the ADBench D-LSTM gradient at the quick size
    from tests.compiler.cuda_cases import _checkpointed_loop_of_kernels  # noqa: PLC0415

    f = qdiff.grad(_checkpointed_loop_of_kernels, argnums=(0, 1))
    lines = _host_function(f, np.ones(6), np.ones(6))
    buffers = [line.strip() for line in lines if line.strip().startswith("buf")]
    assert len(buffers) == 1 and re.fullmatch(  # a device array
        r"buf\d+_d = rtc\.full\(\(4, 6,\), 0, np\.float64\)", buffers[0]), buffers
    loops = [k for k, line in enumerate(lines) if line.startswith("    for ")]
    assert len(loops) == 2, lines  # forward and reverse
    for start in loops:
        body = _block_body(lines, start)
        assert sum("rtc.launch(" in line for line in body) == 1, body
        assert not [line for line in body if "rtc.upload(" in line or "rtc.download(" in line]
    # the checkpoint's row is written and read on the device
    host = "\n".join(lines)
    assert re.search(r"c\d+_d\[s\d+:s\d+ \+ 1, s\d+:s\d+ \+ 6\] = v\d+_d", host), host
    assert re.search(r"v\d+_d = c\d+_d\[s\d+\]", host), host


def _block_body(lines: list[str], start: int) -> list[str]:
    """The lines of the body of the block whose header is ``lines[start]``."""
    depth = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) <= depth:
            break
        body.append(line.strip())
    return body


def test_loop_over_rows_of_a_device_array_copies_nothing_per_iteration(per_step_loops):
    # a row of an array on the device (an argument, or a kernel's result) was taken on the
    # host and uploaded at every step of the host loop: 1676 uploads and 374 downloads per
    # call of the ADBench D-LSTM gradient at the quick size (38 and 157 with views)
    from tests.compiler.cuda_cases import _rows_in_a_loop  # noqa: PLC0415

    lines = _host_function(_rows_in_a_loop, np.ones((4, 6)), np.ones(6))
    loop = next(k for k, line in enumerate(lines) if line.strip().startswith("for "))
    body = [line.strip() for line in lines[loop + 1:] if line.startswith(" " * 8)]
    assert sum("rtc.launch(" in line for line in body) >= 1
    assert not [line for line in body if "rtc.upload(" in line or "rtc.download(" in line]
    views = [line for line in body if re.fullmatch(r"\w+_d = \w+_d\[[^]]+\]", line)]
    assert len(views) == 2, body  # e[i] and m[i], on the device
    moves = [line.strip() for line in lines if "rtc.upload(" in line or "rtc.download(" in line]
    # m, w and the carry's first value (a copy of w) over, the result back
    assert len(moves) == 4, moves


def test_element_of_a_device_array_comes_back_alone():
    from qdiff.compiler.cuda.residency import Residency  # noqa: PLC0415

    residency = Residency([])
    residency.allocated("y", rank=2)
    residency.statement("s = rt.start_index(i, 4, 1, 0)")
    assert residency.statement("r = y[s]") == []  # a row: a view, taken where it is read
    assert residency.on_device(["r"])[0] == ["r_d = y_d[s]"]
    assert residency.statement("v = y[s, 0]") == ["v = rtc.element(y_d, s, 0)"]
    assert residency.statement("w = np.sum(r)") == ["r = rtc.download(r_d)", "w = np.sum(r)"]


def test_row_of_a_host_array_goes_over_with_its_array_once():
    from qdiff.compiler.cuda.residency import Residency  # noqa: PLC0415

    lines: list[str] = []
    residency = Residency(lines)
    residency.ranks["x"] = 2
    lines.append("for i in range(3):")
    residency.enter("for i in range(3)", ["i"])
    assert residency.statement("r = x[i]") == []
    assert residency.on_device(["r"])[0] == ["r_d = x_d[i]"]
    assert lines[0] == "x_d = rtc.upload(x)"  # before the loop: x does not change in it
    assert residency.statement("t = r + 1.0") == ["r = x[i]", "t = r + 1.0"]  # no copy back


def test_view_not_yet_taken_is_taken_before_its_base_changes():
    from qdiff.compiler.cuda.residency import Residency  # noqa: PLC0415

    residency = Residency([])
    residency.allocated("y", rank=2)
    assert residency.statement("r = y[0]") == []
    # the base gets a new value: the view of the old one is taken first (on the device,
    # where y is), then read on the host from there
    assert residency.statement("y = np.zeros((2, 2))") == ["r_d = y_d[0]",
                                                            "y = np.zeros((2, 2))"]
    assert residency.statement("t = r * 2.0") == ["r = rtc.download(r_d)", "t = r * 2.0"]


def test_host_statement_between_kernels_gets_one_download_and_one_upload():
    from tests.compiler.cuda_cases import _host_solve_between  # noqa: PLC0415

    lines = [line.strip() for line in _host_function(_host_solve_between, np.ones(6),
                                                      np.ones(6))]
    solve = next(k for k, line in enumerate(lines) if "rt.factor_or_solve(" in line)
    moves = [(k, line) for k, line in enumerate(lines)
             if "rtc.upload(" in line or "rtc.download(" in line]
    downloads = [k for k, line in moves if "download" in line]
    uploads = [k for k, line in moves if "upload" in line]
    # the arguments once, the solve's operand back and its result over, the output back
    assert len(uploads) == 3 and len(downloads) == 2, lines
    solved = lines[solve].split(" = ")[0]
    assert downloads[0] == solve - 1
    assert lines[uploads[-1]] == f"{solved}_d = rtc.upload({solved})"


def test_host_write_in_place_sends_the_array_again():
    from qdiff.compiler.cuda.residency import Residency  # noqa: PLC0415

    residency = Residency([])
    assert residency.on_device(["x"])[0] == ["x_d = rtc.upload(x)"]
    assert residency.statement("v = rt.gather(x, i, 0)") == ["v = rt.gather(x, i, 0)"]
    assert residency.on_device(["x"])[0] == []  # a reading helper leaves the copy valid
    residency.statement("x[0] = 1.0")
    assert residency.on_device(["x"])[0] == ["x_d = rtc.upload(x)"]
    residency.statement("rt.fill(x, 2.0)")  # an unknown helper may write what it is given
    assert residency.on_device(["x"])[0] == ["x_d = rtc.upload(x)"]


def test_kernel_writing_a_view_leaves_its_base_on_the_device():
    from qdiff.compiler.cuda.residency import Residency  # noqa: PLC0415

    residency = Residency([])
    residency.on_device(["t"])
    residency.view("m", "t")
    residency.written("m")
    assert residency.statement("s = t.sum()") == ["t = rtc.download(t_d)", "s = t.sum()"]


_COPY_KERNEL = ("@cuda.jit(cache=True)\ndef k1(x, y):\n    t = cuda.grid(1)\n    if t < 4:\n"
                "        y[t] = x[t]")


@pytest.mark.parametrize("update, fused", [
    ("c1_d, c2_d, = o1_d, o1_d,", True),
    ("c1_d, c2_d, = o1_d, c1_d,", False),     # c2 takes c1's old value
    ("c1_d, c2_d, = o1_d, v1_d,", False),     # ... through a view of it
    ("c1_d, c2_d, = v1_d, o1_d,", True),      # c1 takes a view of its own array
])
def test_one_block_loop_refuses_a_carry_taking_anothers_value(update, fused):
    # a one-block loop copies each carry's new value into its own array, one after the
    # other: a carry whose new value is another carry's array would read it overwritten
    from qdiff.compiler.cuda.block_loops import fuse_block_loops  # noqa: PLC0415

    host = ["    c1_d = rtc.upload(c1)", "    c2_d = rtc.upload(c2)",
            "    for i in range(0, 3):",
            "        o1_d = rtc.empty((4,), np.float64)",
            "        v1_d = c1_d[0:4]",
            "        rtc.launch(k1, 1, 4, (c2_d, o1_d, ))",
            f"        {update}",
            "    return (rtc.download(c1_d), rtc.download(c2_d))"]
    kernels, lines = fuse_block_loops([_COPY_KERNEL], host, {"c1": 1, "c2": 1}, [])
    assert any("rtc.launch(loop0, 1, 4," in line for line in lines) == fused, lines
    assert (lines == host) == (not fused), lines
