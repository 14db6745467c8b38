"""Test-session rules shared by the whole suite."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from qdiff.ir.interpreter import default_backend

_passed = 0
_precompile: tuple[subprocess.Popen, object] | None = None
ROOT = Path(__file__).resolve().parents[1]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", default="numpy",
                     choices=("numpy", "numba-checked", "numba-cuda-checked"),
                     help="run every classical program call on this back end "
                          "(numba-checked: compiled, and compared with the interpreter; "
                          "numba-cuda-checked: the same for the CUDA target, which needs a "
                          "GPU or NUMBA_ENABLE_CUDASIM=1)")


@pytest.fixture(autouse=True)
def _program_backend(request: pytest.FixtureRequest):
    backend = request.config.getoption("--backend")
    if backend == "numpy":
        yield
        return
    from tests import backends  # noqa: F401  (registers numba-checked)

    with default_backend(backend):
        yield


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    global _passed
    if report.when == "call" and report.passed:
        _passed += 1


def pytest_collection_finish(session: pytest.Session) -> None:
    # The simulator's kernels take minutes to compile on first use; a run of many quantum
    # tests compiles them into Numba's on-disk cache in a process of its own on another
    # core (`qdiff precompile`) while the classical tests, which testpaths puts first, run.
    global _precompile
    quantum = sum("quantum" in item.nodeid or "batching" in item.nodeid
                  for item in session.items)
    if quantum < 100 or (os.cpu_count() or 1) < 2 \
            or os.environ.get("QDIFF_TEST_PRECOMPILE") == "0":
        return
    log = tempfile.TemporaryFile("w+")
    environment = {**os.environ,
                   "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    _precompile = (subprocess.Popen([sys.executable, "-m", "qdiff", "precompile"], cwd=ROOT,
                                    env=environment, stdout=log, stderr=subprocess.STDOUT),
                   log)


def _finish_precompile() -> str | None:
    """Stop the precompiling process if it still runs; its output if it failed."""
    if _precompile is None:
        return None
    process, log = _precompile
    if process.poll() is None:
        process.kill()
        process.wait()
        return None
    log.seek(0)
    return None if process.returncode == 0 else log.read()[-3000:]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    failed = _finish_precompile()
    if failed is not None:
        # a failing precompile is a defect of `qdiff precompile` (tests/test_precompile.py
        # runs it too); say so, since nothing else here would
        print(f"\nqdiff precompile failed in the background:\n{failed}")
    # A run in which no test executed (all deselected or skipped) must not look green.
    if exitstatus == 0 and _passed == 0:
        session.exitstatus = 1
        print("\nno test executed: failing the run")
