"""The test session's own rules (`tests/conftest.py`): the order a whole-suite run takes and
the share it hands to a second process."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import conftest
from tests.background import ROOT

TESTPATHS = ["tests/architecture", "tests/classical", "tests/compiler", "tests", "qdiff"]


def _config(source: pytest.Config.ArgsSource) -> SimpleNamespace:
    return SimpleNamespace(args_source=source, rootpath=ROOT,
                           getini=lambda name: TESTPATHS if name == "testpaths" else None)


def _items(*paths: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(path=ROOT / path, name=path) for path in paths]


def test_whole_suite_runs_in_testpaths_order_not_name_order():
    # pytest collects tests/ once, in name order: tests/batching came before tests/classical,
    # so quantum tests compiled the simulator's kernels before the precompile had
    items = _items("tests/architecture/test_a.py", "tests/batching/test_b.py",
                   "tests/classical/test_c.py", "tests/compiler/test_d.py",
                   "tests/test_e.py", "qdiff/f.py", "tests/classical/test_g.py")
    conftest.pytest_collection_modifyitems(_config(pytest.Config.ArgsSource.TESTPATHS), items)
    assert [item.name for item in items] == [
        "tests/architecture/test_a.py", "tests/classical/test_c.py", "tests/classical/test_g.py",
        "tests/compiler/test_d.py", "tests/batching/test_b.py", "tests/test_e.py", "qdiff/f.py"]


def test_paths_given_on_the_command_line_keep_their_order():
    items = _items("tests/batching/test_b.py", "tests/classical/test_c.py")
    conftest.pytest_collection_modifyitems(_config(pytest.Config.ArgsSource.ARGS), items)
    assert [item.name for item in items] == ["tests/batching/test_b.py",
                                             "tests/classical/test_c.py"]


def test_the_second_process_share_is_left_out_of_the_first_only_when_it_runs(monkeypatch):
    share = ROOT / conftest.SECOND_PROCESS_SHARE[0] / "test_x.py"
    other = ROOT / "tests" / "classical" / "test_y.py"
    monkeypatch.setattr(conftest, "_second", None)
    assert conftest.pytest_ignore_collect(share, None) is None
    monkeypatch.setattr(conftest, "_second", object())
    assert conftest.pytest_ignore_collect(share, None) is True
    assert conftest.pytest_ignore_collect(other, None) is None
