"""Test-session rules shared by the whole suite."""

from __future__ import annotations

import pytest

from qdiff.ir.interpreter import default_backend

_passed = 0


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # A run in which no test executed (all deselected or skipped) must not look green.
    if exitstatus == 0 and _passed == 0:
        session.exitstatus = 1
        print("\nno test executed: failing the run")
