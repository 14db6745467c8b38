"""Classical while loops that may not end, and loop reversals too big for memory.

Regressions: a while_loop without max_iter that never ends hung; max_iter=1e15 cost 2 s and
480 MB of checkpoint buffers before doing anything; a 1000-element carry asked for 236 GiB and
died with a raw MemoryError.
"""

import numpy as np
import pytest

import qdiff
import qdiff.numpy as qnp
from qdiff.ir import control_flow
from qdiff.loops.memory import CheckpointMemoryError, measure_checkpoint_memory


def test_while_loop_without_max_iter_that_never_ends_is_an_error_not_a_hang(monkeypatch):
    monkeypatch.setattr(control_flow, "UNBOUNDED_WHILE_LIMIT", 1000)  # 2**20 by default
    endless = qdiff.trace(lambda x: qdiff.while_loop(lambda v: v > -1.0, lambda v: v + 1.0, x),
                          0.0)
    with pytest.raises(qdiff.LoopLimitError, match="after 1000 iterations with no max_iter"):
        endless(0.0)


def _three_sines(x, **options):
    return qdiff.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, qnp.sin(c[1])), (0, x),
                            **options)[1]


def test_huge_max_iter_stores_few_carries():
    with measure_checkpoint_memory() as memory:
        slope = qdiff.grad(lambda x: _three_sines(x, max_iter=10 ** 15))(1.0)
    assert np.isclose(slope, np.cos(1.0) * np.cos(np.sin(1.0)) * np.cos(np.sin(np.sin(1.0))))
    assert memory.elements <= 10 ** 4   # 5 levels of 1000 slots, two carries (was 6.3e7)


def test_checkpoints_too_big_for_memory_are_an_error_naming_the_size():
    loss = qdiff.grad(lambda x: qnp.sum(_three_sines(x, max_iter=10 ** 15, checkpoint=2)))
    with pytest.raises(CheckpointMemoryError, match=r"GiB\), more than the .* available"):
        loss(np.ones(1000))
