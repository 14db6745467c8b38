"""Test-session rules shared by the whole suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qdiff.ir.interpreter import default_backend
from qdiff.precompile import precompile
from tests.background import ROOT, Background

_passed = 0
_precompile: Background | None = None
_second: Background | None = None
_second_result: tuple[int | None, str] | None = None


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


# A run of the whole suite (no paths given) on two or more cores hands these folders to a
# second pytest process, started before this one collects anything: the suite is mostly
# compiling kernels, one process at a time, so the other core would otherwise sit idle.
# That process first compiles the simulator's kernels (`qdiff precompile`, into Numba's
# on-disk cache), then runs its quantum tests; this one meanwhile runs the classical tests
# and the compiler's, which `testpaths` puts first, and reaches its own quantum tests
# (batching, case studies) with the kernels compiled.
SECOND_PROCESS_SHARE = ("tests/quantum",)
_SECOND_PROCESS_ENV = "QDIFF_TEST_SECOND_PROCESS"


def _cores() -> int:
    """The cores this process may run on (``taskset`` and container CPU sets count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _whole_suite(config: pytest.Config) -> bool:
    """Whether the run collects `testpaths` (no paths given on the command line)."""
    return getattr(config, "args_source", None) == pytest.Config.ArgsSource.TESTPATHS


def _splits(config: pytest.Config) -> bool:
    return (_whole_suite(config) and _cores() >= 2 and not config.option.collectonly
            and os.environ.get("QDIFF_TEST_SPLIT") != "0"
            and _SECOND_PROCESS_ENV not in os.environ)


def pytest_configure(config: pytest.Config) -> None:
    global _second
    if not _splits(config):
        return
    arguments = ["-m", "pytest", "-q", "-p", "no:cacheprovider",
                 "-m", config.option.markexpr, "--backend", config.getoption("--backend")]
    if config.option.keyword:
        arguments += ["-k", config.option.keyword]
    if config.option.maxfail:  # -x or --maxfail=N: each process stops at its Nth failure
        arguments.append(f"--maxfail={config.option.maxfail}")
    if getattr(config.option, "xmlpath", None):  # --junitxml=F: the second process's in F.second
        arguments.append(f"--junitxml={config.option.xmlpath}.second")
    _second = Background([*arguments, *SECOND_PROCESS_SHARE], {_SECOND_PROCESS_ENV: "1"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if _second is not None and any(collection_path.is_relative_to(ROOT / share)
                                   for share in SECOND_PROCESS_SHARE):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # pytest collects `tests` once, in name order, whatever order `testpaths` lists folders
    # under it in; run them in that order (the classical tests before the quantum ones)
    if not _whole_suite(config):
        return
    paths = [config.rootpath / path for path in config.getini("testpaths")]
    items.sort(key=lambda item: next((k for k, path in enumerate(paths)
                                      if item.path.is_relative_to(path)), len(paths)))


def pytest_collection_finish(session: pytest.Session) -> None:
    # The simulator's kernels take minutes to compile on first use: the second process
    # compiles them before its tests; a run of many quantum tests in one process compiles
    # them in a process of its own on another core while the classical tests run first.
    global _precompile
    if os.environ.get("QDIFF_TEST_PRECOMPILE") == "0":
        return
    if _SECOND_PROCESS_ENV in os.environ:
        precompile()
        return
    quantum = sum("quantum" in item.nodeid or "batching" in item.nodeid
                  for item in session.items)
    if _second is None and quantum >= 100 and _cores() >= 2:
        _precompile = Background(["-m", "qdiff", "precompile"])


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _second_result
    if _precompile is not None:
        status, output = _precompile.finish(wait=False)
        if status:
            # a failing precompile is a defect of `qdiff precompile` (tests/test_precompile.py
            # runs it too); say so, since nothing else here would
            print(f"\nqdiff precompile failed in the background:\n{output[-3000:]}")
    if _second is not None:
        # interrupted, or stopped at its --maxfail: the run is over, stop the second process
        stopped = exitstatus == pytest.ExitCode.INTERRUPTED or bool(session.shouldfail)
        _second_result = _second.finish(wait=not stopped)
        if _second_result[0] not in (None, pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    # A run in which no test executed (all deselected or skipped) must not look green.
    if exitstatus == 0 and _passed == 0:
        session.exitstatus = 1
        print("\nno test executed: failing the run")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if _second_result is None:
        return
    status, output = _second_result
    passed = status in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
    verdict = "stopped" if status is None else "passed" if passed else "FAILED"
    terminalreporter.write_sep("=", f"second process, {' '.join(SECOND_PROCESS_SHARE)}: "
                                    f"{verdict}")
    lines = output.strip().splitlines()
    terminalreporter.write("\n".join(lines[-1:] if passed else lines[-400:]) + "\n")
