"""The README's Python examples run, in order, in one namespace, as a reader would run them.

A block may need a package that no extra of the project installs (dask, for the cluster
example): where it is missing, that block alone is skipped with the package named. Any
other missing import fails, like every other error: a README that drifted from the code.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
NAMESPACE: dict = {}
# Packages README examples may use that no extra installs, and why.
OUTSIDE_THE_EXTRAS = {"dask": "the Dask-cluster example; a user with a cluster has it"}


def _missing_import(block: str) -> str | None:
    for match in re.finditer(r"^\s*(?:from|import)\s+([A-Za-z_][\w]*)", block, re.M):
        if importlib.util.find_spec(match.group(1)) is None:
            return match.group(1)
    return None


def test_the_readme_has_examples():
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, capsys):
    block = BLOCKS[index]
    missing = _missing_import(block)
    if missing in OUTSIDE_THE_EXTRAS:
        pytest.skip(f"README block {index} needs {missing} ({OUTSIDE_THE_EXTRAS[missing]})")
    exec(compile(block, f"README.md python block {index}", "exec"), NAMESPACE)
