"""The README's Python examples run, in order, in one namespace, as a reader would run them.

A block may need a package of an optional extra that the test run did not install (dask,
of the ``bench`` extra, for the cluster example): where it is missing, that block alone is
skipped with the package and its extra named. Any other missing import fails, like every
other error: a README that drifted from the code.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
NAMESPACE: dict = {}
# Packages README examples may use that the `test` extra does not install: their extra.
OPTIONAL_EXTRAS = {"dask": "bench"}


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
    if missing in OPTIONAL_EXTRAS:
        extra = OPTIONAL_EXTRAS[missing]
        pytest.skip(f"README block {index} needs {missing}: pip install -e '.[{extra}]'")
    exec(compile(block, f"README.md python block {index}", "exec"), NAMESPACE)
