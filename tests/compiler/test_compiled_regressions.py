"""Compiled programs that once failed to compile, each against the interpreter."""

from __future__ import annotations

import numpy as np

import qdiff
import qdiff.numpy as qnp
from qdiff.compiler import CompiledProgram
from tests.backends import assert_agree


def test_power_with_an_array_constant_exponent_compiles():
    x = np.array([0.5, 1.5, 2.0])
    program = qdiff.trace(lambda v: qnp.power(v, np.array([-0.7, 2.0, 0.2])), x)
    assert_agree(CompiledProgram(program)(x), program(x), "pow with an array exponent")
