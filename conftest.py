"""Doctest namespace: examples in docstrings may use ``np`` without importing it."""

import numpy
import pytest


@pytest.fixture(autouse=True)
def _doctest_numpy(doctest_namespace: dict) -> None:
    doctest_namespace["np"] = numpy
